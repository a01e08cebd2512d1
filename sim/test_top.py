"""Top-level bench: the whole compressor against the model, byte for byte, on real data.

The bench plays the host: it writes the prequantizer constants, box shapes and codebooks
through AXI4-Lite, streams chunks through AXI4-Stream with random stalls on both sides, and
compares every output chunk (payload, sync offsets, trailer) with ``ceaz.cardstream``'s model
of it. Codebooks follow the model's adaptation schedule, written while the previous chunk is
still streaming and committed before the next one starts (codebook swaps under traffic).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import cocotb
import numpy as np
import pytest
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout
from cocotbext.axi import (
    AxiLiteBus,
    AxiLiteMaster,
    AxiStreamBus,
    AxiStreamFrame,
)
from runner import bench_params, run_bench
from streams import StreamBench

from ceaz import codec, datasets, huffman, regmap, tiling
from ceaz.cardstream import card_output, read_trailer
from ceaz.chunk import Coding, EncodedChunk, code_chunk
from ceaz.codec import CodebookSchedule, Settings
from ceaz.regmap import CTRL, ERROR, STATUS, by_name
from ceaz_hw.top import Compressor, word_bits

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "golden"
MANIFEST = json.loads((GOLDEN / "manifest.json").read_text())
SEED = int(os.environ.get("CEAZ_SIM_SEED", "1"))
#: The longest a chunk's output may take after its input (only a hang exceeds it).
CHUNK_TIMEOUT_US = 20_000


def f32_bits(value: float) -> int:
    return int(np.array(value, dtype=np.float32).view(np.uint32))


class TB(StreamBench):
    """Clock, reset, the AXI models and the host's side of the register map."""

    sink_busy = 0.3
    reset_clocks = 4

    def __init__(self, dut):
        p = bench_params()
        self.lanes, self.radius = p["lanes"], p["radius"]
        self.settings = Settings(
            radius=self.radius, max_line=p["max_line"], max_plane=p["max_plane"],
            chunk_values=p["chunk_values"],
        )  # fmt: skip
        self.word_bits = word_bits(self.lanes)
        super().__init__(
            dut, None, None, with_sink=True,
            source_bus=AxiStreamBus.from_prefix(dut, "s_axis", bus_separator="__"),
            sink_bus=AxiStreamBus.from_prefix(dut, "m_axis", bus_separator="__"))
        self.axil = AxiLiteMaster(
            AxiLiteBus.from_prefix(dut, "s_axil", bus_separator="__"), dut.clk, dut.rst)
        self.book = None
        self.values_compared = 0

    async def reset(self) -> None:
        await super().reset()
        await RisingEdge(self.dut.clk)
        self.book = None
        await self.wait_status(STATUS.HIST_CLEARING, 0)

    async def write(self, name: str, value: int) -> None:
        await self.axil.write_dword(by_name(name).address, int(value) & 0xFFFFFFFF)

    async def read(self, name: str) -> int:
        return await self.axil.read_dword(by_name(name).address)

    async def wait_status(self, bit: STATUS, want: int, timeout_cycles: int = 200_000) -> None:
        for _ in range(timeout_cycles // 8):
            if bool(await self.read("STATUS") & bit) == bool(want):
                return
            await ClockCycles(self.dut.clk, 4)
        raise AssertionError(f"STATUS.{bit.name} did not become {want}")

    async def configure(self, header) -> None:
        qp = header.qparams
        await self.write("RECIP_MANT", qp.recip_mant)
        await self.write("RECIP_EXP", qp.recip_exp)
        await self.write("STEP", f32_bits(qp.step))
        await self.write("EB", f32_bits(qp.eb_f))
        await self.write("FILL_BITS", qp.fill_bits or 0)
        await self.write("FILL_ENABLE", qp.fill_bits is not None)
        await self.write("SYNC_INTERVAL", header.sync_interval)

    async def load_book(self, lengths: np.ndarray) -> None:
        """Write a codebook to the next bank and commit it (after the last commit took)."""
        await self.wait_status(STATUS.CB_PENDING, 0)
        await self.write("CB_ADDR", 0)
        for word in huffman.entry_words(lengths).tolist():
            await self.write("CB_DATA", word)
        await self.write("CB_COMMIT", 1)
        self.book = np.asarray(lengths).copy()

    async def set_box(self, shape) -> None:
        """Change the box once every chunk sent so far is in and out: BUSY alone would race
        with a chunk still queued in the source model, which the card has not seen yet."""
        await self.source.wait()
        await self.wait_status(STATUS.BUSY, 0)
        for name, n in zip(("BOX_Z", "BOX_Y", "BOX_X"), shape, strict=True):
            await self.write(name, n)

    async def compress(self, array, eb, mode="rel", settings=None, label="",
                       on_chip=False) -> int:
        """Stream ``array`` through the card chunk by chunk; compare every chunk's output.

        ``on_chip``: the card adapts its codebooks itself (ADAPT, lag 2); the host writes the
        schedule's first book (picked from chunk 0) once, after a soft reset that restarts
        the card's chunk numbering."""
        settings = settings or self.settings
        header = codec.make_header(array, eb, mode, settings)
        coding = Coding(header.qparams, header.radius, header.sync_interval)
        src3 = np.asarray(array, dtype=np.float32).reshape(header.shape3)
        schedule = CodebookSchedule(header.radius, header.adapt_lag)
        await self.wait_status(STATUS.BUSY, 0)
        if on_chip:
            assert header.adapt_lag == 2, "the on-chip builder adapts with lag 2"
            await self.write("CTRL", CTRL.SOFT_RESET)
            self.book = None
            await self.wait_status(STATUS.HIST_CLEARING, 0)
            await self.write("ADAPT", 1)
            first = next(iter(tiling.boxes(header.shape3, header.chunk)))
            values = np.ascontiguousarray(src3[first.slices])
            await self.load_book(schedule.next_lengths(values, first, coding))
        await self.configure(header)
        expected = []
        receiver = cocotb.start_soon(self._receive(expected, label))
        shape = None
        for box in tiling.boxes(header.shape3, header.chunk):
            values = np.ascontiguousarray(src3[box.slices])
            lengths = schedule.next_lengths(values, box, coding)
            enc = code_chunk(values, box, coding, lengths)
            schedule.observe(enc.hist)
            if box.shape != shape:
                await self.set_box(box.shape)
                shape = box.shape
            if on_chip:
                pass  # the card makes chunk k's book from chunk k-2's histogram itself
            elif self.book is None or not np.array_equal(self.book, lengths):
                await self.load_book(lengths)
            expected.append((box.index, card_output(enc, self.word_bits), box.size))
            await self.source.send(AxiStreamFrame(values.tobytes()))
        expected.append(None)
        await receiver
        if on_chip:  # every histogram but the last's waits for nothing more to be read
            for _ in range(20_000):
                if await self.read("ADAPT_READS") >= header.n_chunks:
                    break
                await ClockCycles(self.dut.clk, 8)
            assert await self.read("ADAPT_READS") == header.n_chunks
            await self.write("ADAPT", 0)
        return header.n_chunks

    async def _receive(self, expected: list, label: str) -> None:
        i = 0
        while True:
            while len(expected) <= i:
                await RisingEdge(self.dut.clk)
            item = expected[i]
            if item is None:
                return
            index, want, n = item
            frame = await with_timeout(self.sink.recv(), CHUNK_TIMEOUT_US, "us")
            got = bytes(frame.tdata)
            if got != want:
                diff = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]), None)
                raise AssertionError(
                    f"{label} chunk {index}: card output differs from the model "
                    f"({len(got)} vs {len(want)} bytes, first difference at byte {diff})"
                )
            self.values_compared += n
            i += 1

    async def check_histogram(self, array, eb, mode="rel") -> None:
        """Compress one chunk and read its histogram back through the registers."""
        header = codec.make_header(array, eb, mode, self.settings)
        coding = Coding(header.qparams, header.radius, header.sync_interval)
        box = next(iter(tiling.boxes(header.shape3, header.chunk)))
        src3 = np.asarray(array, np.float32).reshape(header.shape3)
        values = np.ascontiguousarray(src3[box.slices])
        enc = code_chunk(values, box, coding, huffman.offline_lengths(header.radius))
        assert header.n_chunks == 1, "keep the histogram check to one chunk"
        await self.compress(array, eb, mode, label="histogram")
        # One address write, then each HIST_DATA read walks to the next symbol; a second
        # address write restarts the walk in the middle.
        await self.write("HIST_ADDR", 0)
        counts = [await self.read("HIST_DATA") for _ in range(len(enc.hist))]
        assert np.array_equal(np.array(counts), enc.hist.astype(np.int64)), "histogram differs"
        middle = len(enc.hist) // 2
        await self.write("HIST_ADDR", middle)
        again = [await self.read("HIST_DATA") for _ in range(3)]
        assert again == counts[middle: middle + 3], "HIST_ADDR did not restart the walk"


    async def compress_golden(self, name: str) -> None:
        """Send a golden vector through the card with the codebooks its file records, and
        compare every chunk with the file's record (coded chunks) or the model (stored ones)."""
        data = (GOLDEN / f"{name}.ceaz").read_bytes()
        reader = codec.StreamReader.from_bytes(data)
        header = reader.header
        src3 = np.load(GOLDEN / f"{name}.in.npy").reshape(header.shape3)
        await self.wait_status(STATUS.BUSY, 0)
        await self.configure(header)
        expected = []
        receiver = cocotb.start_soon(self._receive(expected, f"golden {name}"))
        shape = None
        for box, info in zip(reader.boxes, reader.chunks(), strict=True):
            values = np.ascontiguousarray(src3[box.slices])
            c = info.payload
            if c.stored:
                enc = code_chunk(values, box, reader.coding, c.lengths)
            else:
                enc = EncodedChunk(box, c.lengths, c.payload, c.payload_bits, c.sync, None,
                                   info.n_outlier, info.n_verbatim, info.n_fill)
            if box.shape != shape:
                await self.set_box(box.shape)
                shape = box.shape
            if self.book is None or not np.array_equal(self.book, c.lengths):
                await self.load_book(c.lengths)
            expected.append((box.index, card_output(enc, self.word_bits), box.size))
            await self.source.send(AxiStreamFrame(values.tobytes()))
        expected.append(None)
        await receiver


class _Handshakes:
    """Clocks (counted from its start) at which ``s_axis`` took a beat, and the first clock of
    ``BVALID``: the clock in which a register write strobes (``ceaz_hw.regfile``)."""

    def __init__(self, dut):
        self.beats: list[int] = []
        self.strobe: int | None = None
        self._task = cocotb.start_soon(self._watch(dut))

    async def _watch(self, dut) -> None:
        clock = 0
        while True:
            await RisingEdge(dut.clk)
            clock += 1
            if dut.s_axis__tvalid.value and dut.s_axis__tready.value:
                self.beats.append(clock)
            if self.strobe is None and dut.s_axil__bvalid.value:
                self.strobe = clock

    def stop(self) -> None:
        self._task.cancel()


def golden_vectors(tb: TB) -> list[str]:
    """The golden float32 vectors this build can code (radius, K a multiple of N)."""
    names = []
    for name in MANIFEST:
        header = codec.StreamReader.from_bytes((GOLDEN / f"{name}.ceaz").read_bytes()).header
        if (header.dtype == np.float32 and header.radius == tb.radius
                and header.sync_interval % tb.lanes == 0):
            names.append(name)
    return names


def real_sample(name: str, planes: int) -> np.ndarray:
    field = datasets.load(name)
    return np.ascontiguousarray(field.reshape(-1, *field.shape[-2:])[:planes])


# -- cocotb tests ---------------------------------------------------------------------------

@cocotb.test()
async def top_real_fields(dut):
    """Real fields, several bounds, random stalls on both streams, codebooks adapting."""
    tb = TB(dut)
    tb.set_stalls(SEED)
    await tb.reset()
    cases = [
        ("sea_ice_velocity", 1, 1e-3), ("u_wind", 2, 1e-2), ("colpex_theta", 6, 1e-4),
        ("surface_temperature_ensemble", 2, 1e-3), ("colpex_pressure", 4, 1e-3),
    ]  # fmt: skip
    for name, planes, eb in cases:
        await tb.compress(real_sample(name, planes), eb, label=f"{name} {eb:g}")
    cocotb.log.info("bit-exact on %d real values", tb.values_compared)
    _record(tb)


@cocotb.test()
async def top_adapt_on_chip(dut):
    """On-chip adaptation (ADAPT): the card builds every book after the offline one itself,
    and its bytes equal the model's with adapt lag 2, under random stalls, for chunks long
    and short (the short ones make the card wait for its builder)."""
    tb = TB(dut)
    tb.set_stalls(SEED + 7)
    await tb.reset()
    lag2 = dataclasses.replace(tb.settings, adapt_lag=2)
    await tb.compress(real_sample("u_wind", 2), 1e-3, settings=lag2, label="u_wind on chip",
                      on_chip=True)
    small = dataclasses.replace(lag2, chunk_values=max(tb.lanes, 64))
    field = real_sample("colpex_pressure", 1)[:, :8, :100]
    await tb.compress(field, 1e-2, settings=small, label="short chunks on chip", on_chip=True)
    cocotb.log.info("on-chip adaptation bit-exact on %d values", tb.values_compared)
    _record(tb)


@cocotb.test()
async def top_shapes_and_escapes(dut):
    """1-D, 2-D and 3-D boxes with partial beats, and every kind of escape."""
    tb = TB(dut)
    tb.set_stalls(SEED + 2)
    await tb.reset()
    rng = np.random.default_rng(SEED)
    walk = np.cumsum(rng.standard_normal(3001)).astype(np.float32)
    await tb.compress(walk, 1e-2, "abs", label="1-D")
    await tb.compress(walk[:3], 1e-2, "abs", label="1-D, 3 values")
    await tb.compress(walk[:2001].reshape(23, 87), 1e-3, label="2-D odd")
    await tb.compress(np.resize(walk, (5, 7, 13)), 1e-3, label="3-D odd")
    esc = np.resize(walk, (3, 9, 37)).copy()
    esc[0, 0, 3] = np.nan
    esc[1, 2, 3:6] = [np.inf, -np.inf, 3e38]
    esc[2, :, 5] = -1e34
    esc[0, 5, 9] = 5e3  # outlier
    esc[1, 1, 1] = 1e-41
    esc.reshape(-1)[::97] = datasets.FILL_VALUE
    fill = Settings(radius=tb.radius, max_line=tb.settings.max_line,
                    max_plane=tb.settings.max_plane, chunk_values=512, fill_value=-1e34)
    await tb.compress(esc, 0.05, "abs", settings=fill, label="escapes")
    await tb.compress(esc, 1e-30, "abs", settings=fill, label="all verbatim")
    for kind in ("nan_inf", "subnormal", "alternating", "constant", "one_element"):
        field = datasets.adversarial(kind, (4, 31, 29), seed=SEED)
        await tb.compress(field, 1e-3, label=kind)
    cocotb.log.info("bit-exact on %d values", tb.values_compared)
    _record(tb)


@cocotb.test()
async def top_golden_vectors(dut):
    """The codec's golden files, reproduced chunk for chunk by the RTL."""
    tb = TB(dut)
    tb.set_stalls(SEED + 3)
    await tb.reset()
    names = golden_vectors(tb)
    for name in names:
        await tb.compress_golden(name)
    cocotb.log.info("golden vectors through the RTL: %s (%d values)", names, tb.values_compared)
    _record(tb)


@cocotb.test()
async def top_histogram_and_recovery(dut):
    """The histogram reads back; TLAST in the wrong place is flagged and soft reset recovers;
    a hard reset mid-stream leaves the card working."""
    tb = TB(dut)
    tb.set_stalls(None)
    await tb.reset()
    field = real_sample("u_wind", 1)[0, :40]
    await tb.check_histogram(field, 1e-3)
    assert await tb.read("ID") == regmap.ID_MAGIC
    # TLAST early: a chunk of 1000 values announced, 100 sent with TLAST.
    await tb.set_box((1, 1, 1000))
    await tb.source.send(AxiStreamFrame(np.zeros(100, np.float32).tobytes()))
    await tb.sink.recv()
    assert await tb.read("ERROR") & ERROR.TLAST_EARLY
    # A configuration write while busy is refused (the output is held, so the chunk stays in).
    tb.sink.pause = True
    await tb.set_box((1, 1, 4096))
    await tb.source.send(AxiStreamFrame(np.ones(4096, np.float32).tobytes()))
    await ClockCycles(dut.clk, 50)
    await tb.write("BOX_X", 7)
    tb.sink.pause = False
    await tb.source.wait()
    await tb.sink.recv()
    assert await tb.read("ERROR") & ERROR.CONFIG_WHILE_BUSY
    await tb.write("CTRL", regmap.CTRL.SOFT_RESET)
    await ClockCycles(dut.clk, 10)
    assert await tb.read("ERROR") == 0 and not await tb.read("STATUS") & STATUS.BUSY
    tb.book = None
    await tb.wait_status(STATUS.HIST_CLEARING, 0)
    await tb.compress(field, 1e-3, label="after soft reset")
    # Soft reset in the middle of a chunk while the input streams. The rest of the frame
    # comes in as a chunk cut short, and it must hold every value taken after the reset: the
    # card takes no beat in the two clocks of the reset (the write's strobe, the first clock
    # of BVALID, then `resetting`), so none can vanish with the chunk that was in flight.
    await tb.set_box((1, 40, 192))
    clocks = _Handshakes(dut)
    tb.source.send_nowait(AxiStreamFrame(field[:40].tobytes()))
    await ClockCycles(dut.clk, 300)
    assert dut.s_axis__tready.value and not tb.source.idle()
    await tb.write("CTRL", regmap.CTRL.SOFT_RESET)
    await tb.source.wait()
    await tb.wait_status(STATUS.BUSY, 0)
    assert await tb.read("ERROR") == ERROR.TLAST_EARLY
    clocks.stop()
    strobe, beats = clocks.strobe, clocks.beats
    assert strobe is not None and not {strobe, strobe + 1} & set(beats), (strobe, beats)
    assert len(beats) * tb.lanes == field[:40].size
    after = sum(clock > strobe + 1 for clock in beats) * tb.lanes
    magic, n, *_ = read_trailer(bytes((await tb.sink.recv()).tdata), tb.word_bits)
    assert magic == regmap.TRAILER_MAGIC and n == after > 0, (n, after)
    tb.sink.clear()
    tb.book = None
    await tb.compress(field, 1e-3, label="after soft reset mid-chunk")
    # Hard reset in the middle of a chunk.
    await tb.set_box((1, 40, 192))
    tb.source.send_nowait(AxiStreamFrame(field[:40].tobytes()))
    await ClockCycles(dut.clk, 300)
    tb.source.clear()
    await tb.reset()
    tb.sink.clear()
    await tb.compress(field, 1e-3, label="after reset")
    _record(tb)


@cocotb.test()
async def top_throughput(dut):
    """No back-pressure: beats per clock from the card's own counters, on real data."""
    tb = TB(dut)
    tb.set_stalls(None)
    await tb.reset()
    # The same number of clocks for every lane count, in chunks of the default size.
    field = real_sample("sea_ice_velocity", 4 * tb.lanes)
    before = {k: await tb.read(f"{k}_LO") for k in ("BEATS", "ACTIVE", "STALLS")}
    settings = Settings(radius=tb.radius, max_line=tb.settings.max_line,
                        max_plane=tb.settings.max_plane, adapt_lag=0)
    await tb.compress(field, 1e-3, settings=settings, label="throughput")
    after = {k: await tb.read(f"{k}_LO") for k in ("BEATS", "ACTIVE", "STALLS")}
    beats = after["BEATS"] - before["BEATS"]
    active = after["ACTIVE"] - before["ACTIVE"]
    cocotb.log.info("throughput: %d beats in %d active clocks = %.4f beats/clock (lanes %d)",
                    beats, active, beats / active, tb.lanes)
    _record(tb)


def _record(tb: TB) -> None:
    """Leave the count for the pytest wrapper, which sums it over the benches."""
    path = os.environ.get("CEAZ_COUNT_FILE")
    if path:
        with open(path, "a") as f:
            f.write(f"{tb.values_compared}\n")


# -- pytest wrapper -------------------------------------------------------------------------

CONFIGS = [
    {"lanes": 1, "radius": 512, "max_line": 512, "max_plane": 16384, "chunk_values": 1 << 14},
    # The escapes golden vector uses radius 16 and sync interval 50. Its escapes take the
    # quantizer's input bits out of the block-RAM delay lines that 16 lanes build with, and
    # its stages share one reset register, as at 16 lanes.
    {"lanes": 2, "radius": 16, "max_line": 512, "max_plane": 16384, "chunk_values": 1 << 14,
     "raw_in_ram": True, "shared_reset": True},
    {"lanes": 4, "radius": 512, "max_line": 512, "max_plane": 16384, "chunk_values": 1 << 15},
    # As the 8- and 16-lane builds (bitstreams/configs.py): the packer takes pieces of 16 bits.
    {"lanes": 8, "radius": 512, "max_line": 512, "max_plane": 16384, "chunk_values": 1 << 15,
     "piece_bits": 16},
    {"lanes": 16, "radius": 512, "max_line": 512, "max_plane": 16384, "chunk_values": 1 << 16,
     "piece_bits": 16, "raw_in_ram": True, "shared_reset": True},
]


@pytest.mark.parametrize("params", CONFIGS, ids=lambda p: f"lanes{p['lanes']}")
def test_top(params, tmp_path):
    counts = tmp_path / "count"
    run_bench(
        lambda **p: Compressor(
            p["lanes"], p["radius"], max_line=p["max_line"], max_plane=p["max_plane"],
            piece_bits=p.get("piece_bits"), raw_in_ram=p.get("raw_in_ram", False),
            shared_reset=p.get("shared_reset", False)),
        name="top", params=params, test_module=__name__,
        extra_env={"CEAZ_COUNT_FILE": str(counts)},
    )
    from conftest import record_bit_exact

    total = sum(int(x) for x in counts.read_text().split())
    record_bit_exact(f"top lanes={params['lanes']} radius={params['radius']}", total)
