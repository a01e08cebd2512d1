"""The compressor's AXI4-Lite register map: the one source for the RTL, the driver and tests.

All registers are 32 bits wide at word-aligned byte addresses. ``RO`` registers ignore
writes, ``RW`` registers read back what was written, ``WO`` registers read as 0, and 64-bit
counters are split into ``_LO`` and ``_HI`` words: reading ``_LO`` latches the matching
``_HI`` so that a pair read low-then-high is consistent. docs/hardware.md describes the
behaviour behind each register.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntFlag

__all__ = [
    "ADAPT_LAG",
    "ADDRESS_BITS",
    "CTRL",
    "ERROR",
    "ID_MAGIC",
    "REGISTERS",
    "STATUS",
    "TRAILER_MAGIC",
    "Register",
    "by_name",
]

#: Value of the ID register: "CEAZ" as a little-endian u32.
ID_MAGIC = int.from_bytes(b"CEAZ", "little")
#: First word of every chunk trailer on the output stream: "CZTR".
TRAILER_MAGIC = int.from_bytes(b"CZTR", "little")
#: Byte address width of the AXI4-Lite port (4 KiB window).
ADDRESS_BITS = 12
#: With ADAPT set, chunk k >= ADAPT_LAG is coded with the book of chunk k - ADAPT_LAG's
#: histogram, built on chip; the RTL and the driver both follow it.
ADAPT_LAG = 2


@dataclass(frozen=True)
class Register:
    name: str
    address: int
    access: str  # "RO", "RW" or "WO"
    doc: str
    #: A configuration register: writing it while a chunk is in flight is an error.
    config: bool = False


class CTRL(IntFlag):
    """Bits of the CTRL register (write-only pulses)."""

    #: Return every stage to idle, drop data in flight and clear ERROR (not the codebooks).
    SOFT_RESET = 1 << 0
    #: Clear ERROR without touching data in flight.
    CLEAR_ERROR = 1 << 1


class STATUS(IntFlag):
    """Bits of the STATUS register."""

    #: A chunk has been accepted at the input and its trailer is not yet out, or its last
    #: symbols are not yet in the histogram.
    BUSY = 1 << 0
    #: A codebook commit waits for the next chunk's first beat.
    CB_PENDING = 1 << 1
    #: Some bit of ERROR is set.
    ERROR = 1 << 2
    #: The histogram is clearing a bank; input waits if it needs that bank.
    HIST_CLEARING = 1 << 3
    #: The on-chip codebook builder is reading a histogram or building a book (ADAPT).
    BUILDING = 1 << 4


class ERROR(IntFlag):
    """Sticky bits of the ERROR register, cleared by CTRL.CLEAR_ERROR or SOFT_RESET."""

    #: TLAST came before the chunk's last value; the chunk ended there.
    TLAST_EARLY = 1 << 0
    #: No TLAST on the chunk's last value; the chunk ended there anyway.
    TLAST_MISSING = 1 << 1
    #: A configuration register was written while BUSY; the write was ignored.
    CONFIG_WHILE_BUSY = 1 << 2
    #: The configuration cannot run (box larger than the buffers, K not a multiple of N,
    #: too many sync points, a zero dimension); input is refused until it is fixed.
    BAD_CONFIG = 1 << 3
    #: A codebook entry was written while a commit was pending; the write was ignored.
    CODEBOOK_BUSY = 1 << 4
    #: A read or write outside the register map (answered with SLVERR).
    BAD_ADDRESS = 1 << 5


REGISTERS: tuple[Register, ...] = (
    # Identity and build parameters.
    Register("ID", 0x000, "RO", "ID_MAGIC"),
    Register("LANES", 0x004, "RO", "values per beat N"),
    Register("RADIUS", 0x008, "RO", "radius R of the built alphabet (2R+2 symbols)"),
    Register("MAX_CODE_LEN", 0x00C, "RO", "longest code length"),
    Register("MAX_LINE", 0x010, "RO", "line buffer depth in values"),
    Register("MAX_PLANE", 0x014, "RO", "plane buffer depth in values"),
    Register("MAX_SYNC", 0x018, "RO", "sync offsets one chunk may hold"),
    Register("WORD_BITS", 0x01C, "RO", "output stream word width W in bits"),
    # Control and status.
    Register("CTRL", 0x020, "WO", "CTRL bits"),
    Register("STATUS", 0x024, "RO", "STATUS bits"),
    Register("ERROR", 0x028, "RO", "ERROR bits"),
    # Prequantizer constants (ceaz.quantizer.quant_params; docs/format.md section 3).
    Register("RECIP_MANT", 0x040, "RW", "Cm, the 32-bit significand of 1/S", config=True),
    Register("RECIP_EXP", 0x044, "RW", "Ce, two's complement, low 9 bits", config=True),
    Register("STEP", 0x048, "RW", "float32 bits of the step S", config=True),
    Register("EB", 0x04C, "RW", "float32 bits of the enforced bound eb_f", config=True),
    Register("FILL_BITS", 0x050, "RW", "float32 bits of the fill value", config=True),
    Register("FILL_ENABLE", 0x054, "RW", "bit 0: the fill value is set", config=True),
    # Chunk configuration.
    Register("BOX_X", 0x060, "RW", "box shape cx (fastest axis)", config=True),
    Register("BOX_Y", 0x064, "RW", "box shape cy", config=True),
    Register("BOX_Z", 0x068, "RW", "box shape cz", config=True),
    Register("SYNC_INTERVAL", 0x06C, "RW", "K, a multiple of N", config=True),
    Register("ADAPT", 0x070, "RW", "bit 0: codebooks adapt on chip, chunk k >= 2 coded with "
             "the book of chunk k-2's histogram (adapt lag 2)", config=True),
    # Codebook: entries go to the next bank; COMMIT swaps at the next chunk's first beat.
    Register("CB_ADDR", 0x080, "RW", "symbol written by the next CB_DATA write"),
    Register("CB_DATA", 0x084, "WO", "code in bits 15:0, length in bits 20:16; CB_ADDR += 1"),
    Register("CB_COMMIT", 0x088, "WO", "write 1: the next bank becomes active"),
    # Histogram of the last completed chunk, merged over the lanes.
    Register("HIST_ADDR", 0x0A0, "RW", "symbol read by the next HIST_DATA read"),
    Register("HIST_DATA", 0x0A4, "RO", "that symbol's count in the last chunk; address += 1"),
    Register("HIST_CHUNKS", 0x0A8, "RO", "chunks completed since reset"),
    Register("ADAPT_READS", 0x0AC, "RO", "histograms the on-chip builder has read since reset"),
    # Counters since reset, 64 bits each.
    Register("CYCLES_LO", 0x0C0, "RO", "clocks since reset"),
    Register("CYCLES_HI", 0x0C4, "RO", ""),
    Register("BEATS_LO", 0x0C8, "RO", "input beats accepted"),
    Register("BEATS_HI", 0x0CC, "RO", ""),
    Register("VALUES_LO", 0x0D0, "RO", "values accepted"),
    Register("VALUES_HI", 0x0D4, "RO", ""),
    Register("STALLS_LO", 0x0D8, "RO", "clocks with valid input that was not accepted"),
    Register("STALLS_HI", 0x0DC, "RO", ""),
    Register("ESCAPES_LO", 0x0E0, "RO", "outlier, verbatim and fill values coded"),
    Register("ESCAPES_HI", 0x0E4, "RO", ""),
    Register("ACTIVE_LO", 0x0E8, "RO", "clocks with STATUS.BUSY set"),
    Register("ACTIVE_HI", 0x0EC, "RO", ""),
)

_BY_NAME = {r.name: r for r in REGISTERS}


def by_name(name: str) -> Register:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no register named {name!r}") from None


def _check() -> None:
    addresses = [r.address for r in REGISTERS]
    assert len(set(addresses)) == len(addresses), "duplicate register address"
    assert all(a % 4 == 0 and a < (1 << ADDRESS_BITS) for a in addresses)


_check()
