"""Named build configurations of the compressor, for the synthesis and bitstream flows.

A configuration fixes the build-time parameters of docs/hardware.md ("Parameters"). The flows
name configurations (``lanes4``) instead of repeating parameters, so reports from different
runs and machines describe the same hardware.

Block RAM budget (ECP5-85F: 208 DP16KD of 18 Kbit). The plane buffer holds ``max_plane``
prequantized values (28-bit ``q``): 34 DP16KD at 16384, 136 at 65536. Everything else grows
with N: each lane has its own codebook RAM (``2 x 2R`` entries) and histogram banks, some 10 to
15 DP16KD per lane at R = 512.

The named configurations use a 16384-value plane buffer (4096 at 16 lanes, for the lanes'
RAMs). At 65536 the buffer took 136 of the 208 block RAMs, and with 170 in use the placement of
the rest, across the whole die, set Fmax more than the logic did (76.9 to 98.2 MHz for one lane
over RTL changes that did not touch the worst paths). What the smaller buffer costs is that 3-D
chunks have fewer rows per plane (``cy = max_plane // cx``, docs/format.md): on the benchmark's
fields the ratio moves by -6.4 % to +3.4 % at 16384 and by -5.6 % to +6.5 % at 4096
(``bench/plane_buffer.py``, bench/plane_buffer.md); chunks of one plane, as a card without a
plane buffer would need, lose up to 66 %.
A card built with a larger ``max_plane`` (``Compressor(max_plane=...)``) works with the same
driver, which reads the card's limits from its registers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

__all__ = ["CONFIGS", "DESIGNS", "Config", "build", "get"]


@dataclasses.dataclass(frozen=True)
class Config:
    """Build-time parameters of one compressor, passed to ``ceaz_hw.top.Compressor``."""

    name: str
    lanes: int
    radius: int = 512
    max_code_len: int = 16
    max_line: int = 4096
    max_plane: int = 1 << 16
    max_sync: int = 1024
    #: The packer's front: None (whole fields) or pieces of this many bits (ceaz_hw.pieces).
    piece_bits: int | None = None
    #: The quantizer's input bits wait in block RAM, not registers (ceaz_hw.delay).
    raw_in_ram: bool = False
    #: One reset register for every stage, so all their FFs share one reset class.
    shared_reset: bool = False

    def __post_init__(self):
        if self.lanes not in (1, 2, 4, 8, 16):
            raise ValueError(f"{self.name}: lanes must be one of 1, 2, 4, 8, 16, not "
                             f"{self.lanes!r}")
        for field in ("max_line", "max_plane"):
            value = getattr(self, field)
            if value < self.lanes or value & (value - 1):
                raise ValueError(f"{self.name}: {field} must be a power of two >= lanes, "
                                 f"not {value!r}")
        if self.max_plane < self.max_line:
            raise ValueError(f"{self.name}: max_plane ({self.max_plane}) must be at least "
                             f"max_line ({self.max_line})")

    @property
    def bytes_per_clock(self) -> int:
        """Input bytes taken per clock: N float32 values."""
        return 4 * self.lanes


#: Plane buffer depth per lane count; see the block RAM budget in the module docstring.
_MAX_PLANE = {1: 1 << 14, 2: 1 << 14, 4: 1 << 14, 8: 1 << 14, 16: 1 << 12}

#: Symbol radius per lane count. At R = 512 the alphabet has 2R + 2 = 1026 symbols, two past
#: a 1024-entry block RAM, so each lane's histogram RAMs double in depth; 16 lanes do not have
#: the block RAM for that, and use R = 511 (1024 symbols). A stream for that card must use
#: the same radius (``--radius 511``): the driver refuses any other.
_RADIUS = {1: 512, 2: 512, 4: 512, 8: 512, 16: 511}

#: The packer's pieces per lane count (None: whole fields). At 16 lanes a front as wide as the
#: widest beat (16 x 48 bits) was the largest unit of the core; pieces of 16 bits make it a
#: third as wide, and a beat with escapes takes a clock more per 16 extra pieces. At 8 lanes
#: they take the packed core from 60.4 k to 46.0 k LUT4 (72 % to 55 %; at 72 % nextpnr did not
#: finish routing here), and a beat with escapes a clock more per 8 extra pieces: on real data
#: the 8-lane card still takes 0.997 beats per clock (README, ``top_throughput``).
_PIECE_BITS = {8: 16, 16: 16}

#: Lane counts whose quantizer holds its input bits in block RAM. At 16 lanes, with 90 % of
#: the FFs in use (23.6 k of them the quantizer's, most only passing a bit on), the placer
#: found no legal placement; the delay lines take 7.6 k FFs off (81 %) for 16 of the 21 block
#: RAMs left. It still found none, until the stages shared one reset (below).
_RAW_IN_RAM = {16}

#: Lane counts whose stages share one reset register. At 16 lanes (96 % of the logic cells)
#: nextpnr places the core only if the stages' FFs share one reset (LSR) class, which an ECP5
#: tile's eight FFs must have in common (docs/timing.md, "Sixteen lanes"). Smaller cores keep
#: a register each: one net to every stage's FFs was the eight-lane worst path (top.py).
_SHARED_RESET = {16}

#: All named configurations, by name. ``smoke`` is the whole core with small line and plane
#: buffers: it synthesises in minutes, so CI can afford it on every run.
CONFIGS: dict[str, Config] = {
    **{f"lanes{n}": Config(f"lanes{n}", lanes=n, radius=_RADIUS[n], max_plane=_MAX_PLANE[n],
                           piece_bits=_PIECE_BITS.get(n), raw_in_ram=n in _RAW_IN_RAM,
                           shared_reset=n in _SHARED_RESET)
       for n in _MAX_PLANE},
    "smoke": Config("smoke", lanes=1, max_line=256, max_plane=1024),
}


def _compressor(config: Config):
    # Imported here: the flow must work (for other designs) before the top level exists.
    from ceaz_hw.top import Compressor

    return Compressor(lanes=config.lanes, radius=config.radius,
                      max_code_len=config.max_code_len, max_line=config.max_line,
                      max_plane=config.max_plane, max_sync=config.max_sync,
                      piece_bits=config.piece_bits, raw_in_ram=config.raw_in_ram,
                      shared_reset=config.shared_reset)


def _quantizer(config: Config):
    # A complete deep-pipelined stage that exists early; it develops and tests the flow.
    from ceaz_hw.quantizer import Quantizer

    return Quantizer(config.lanes, config.raw_in_ram)


#: Designs the flows can build from a configuration: name -> factory(config) -> Component.
def _builder(config: Config):
    # The on-chip codebook builder alone: its cost and clock do not depend on the lanes.
    from ceaz import format as fmt
    from ceaz_hw.builder import CodebookBuilder

    return CodebookBuilder(fmt.n_symbols(config.radius), fmt.MAX_CHUNK_VALUES,
                           config.max_code_len)


def _packer(config: Config):
    # The packer alone: at 16 lanes it is the largest unit of the core (synth.md).
    from ceaz_hw.packer import Packer

    return Packer(config.lanes, config.max_code_len, config.max_sync, config.piece_bits)


DESIGNS: dict[str, Callable[[Config], object]] = {
    "top": _compressor,
    "quantizer": _quantizer,
    "builder": _builder,
    "packer": _packer,
}


def get(name: str) -> Config:
    """The configuration called ``name``, with the valid names in the error."""
    try:
        return CONFIGS[name]
    except KeyError:
        raise ValueError(f"unknown configuration {name!r}; choose from "
                         f"{', '.join(CONFIGS)}") from None


def build(config: Config, design: str = "top"):
    """Elaboratable Amaranth component ``design`` built for ``config``."""
    if design not in DESIGNS:
        raise ValueError(f"unknown design {design!r}; choose from {', '.join(DESIGNS)}")
    return DESIGNS[design](config)
