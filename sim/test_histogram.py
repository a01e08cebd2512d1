"""cocotb bench: the RTL histogram (ceaz_hw.histogram.Histogram) against ``np.bincount``.

Chunks of many lengths (1 value, fewer than N, partial last beats, a few thousand values) with
constant (the forwarding stress: one symbol in every beat), uniform and skewed symbols go in
with random gaps in ``valid``; don't-care lanes of partial beats carry garbage. After each
chunk completes, a reader sweeps every symbol through ``rd_addr``/``rd_data`` while the next
chunk streams, and compares with ``np.bincount(sym, minlength=n_symbols)`` as in
``ceaz.chunk._encode_reference``. The sender holds back the next chunk's last beat until that
sweep is done, as the host would (the read side shows the last completed chunk only).

Also: a full-rate run in which the input must never wait, chunks shorter than the clear (the
input must wait, and still count right), one-beat chunks right behind a chunk's end (the bank
the next chunk needs has not started clearing yet), reads before any chunk completes (zeros),
and a reset in the middle of a chunk followed by clean operation.
"""

from __future__ import annotations

import os

import cocotb
import numpy as np
import pytest
from amaranth.hdl import unsigned
from amaranth.lib import data
from beats import beats_from_values
from cocotb.triggers import ClockCycles, Event, FallingEdge, RisingEdge
from cocotbext.axi import AxiStreamFrame
from runner import bench_params, run_bench
from streams import StreamBench

from ceaz_hw.beats import beat
from ceaz_hw.histogram import Histogram

SEED = int(os.environ.get("CEAZ_SIM_SEED", "1"))
#: The widest counter the top level asks for (format.MAX_CHUNK_VALUES).
MAX_COUNT = 1 << 24


def _design(lanes: int, n_symbols: int, max_count: int = MAX_COUNT) -> Histogram:
    return Histogram(lanes, n_symbols, max_count)


class TB(StreamBench):
    """Clock, reset, a beat source with random valid gaps, a histogram reader and a monitor
    that counts the clocks in which a beat was offered and not taken."""

    def __init__(self, dut, seed: int):
        params = bench_params()
        self.hist = _design(**params)  # for its widths and READ_LATENCY only
        self.hist._MustUse__silence = True  # never elaborated here: no UnusedElaboratable warning
        self.lanes, self.n_symbols = self.hist.lanes, self.hist.n_symbols
        self.layout = beat(unsigned(self.hist.symbol_width), self.lanes)
        lanes_field = data.Layout.cast(self.layout)["lanes"]
        self.lane_base = lanes_field.offset
        self.count_field = data.Layout.cast(self.layout)["count"]
        self.rng = np.random.default_rng(seed)
        super().__init__(dut, self.layout.size, None)
        dut.rd_addr.value = 0
        self.waits = 0  # clocks with i.valid high and i.ready low
        self.values_compared = 0
        self.entries_compared = 0
        self.chunks_compared = 0
        cocotb.start_soon(self._monitor())

    async def reset(self, wait_for_clear: bool = True) -> None:
        self.source.clear()
        await super().reset()
        if wait_for_clear:
            while int(self.dut.clearing.value):
                await RisingEdge(self.dut.clk)
        self.waits = 0

    async def _monitor(self) -> None:
        dut = self.dut
        while True:
            await FallingEdge(dut.clk)
            if not int(dut.rst.value) and int(dut.i__valid.value) and not int(dut.i__ready.value):
                self.waits += 1

    # -- data -------------------------------------------------------------------------------

    def symbols(self, n: int, kind: str) -> np.ndarray:
        s = self.n_symbols
        if kind == "constant":
            return np.full(n, self.rng.choice([0, s - 1, s // 2, int(self.rng.integers(s))]))
        if kind == "uniform":
            return self.rng.integers(0, s, n)
        if kind == "skewed":  # mostly the centre, as real residuals; a few escapes
            offset = self.rng.geometric(0.6, n) - 1
            sym = s // 2 + offset * self.rng.choice([-1, 1], n)
            escapes = self.rng.random(n) < 0.02
            sym[escapes] = self.rng.choice([0, s - 2, s - 1], int(escapes.sum()))
            return np.clip(sym, 0, s - 1)
        raise ValueError(kind)

    def beats(self, sym: np.ndarray) -> list[int]:
        """The chunk's beats, with garbage in the lanes above ``count`` of a partial beat."""
        words = beats_from_values(self.layout, {"": sym})
        count = self.count_field
        width = self.hist.symbol_width
        last_count = (words[-1] >> count.offset) & ((1 << count.width) - 1)
        for j in range(last_count, self.lanes):
            garbage = int(self.rng.integers(1 << width))
            words[-1] |= garbage << (self.lane_base + j * width)
        return words

    # -- reading ----------------------------------------------------------------------------

    async def read_all(self) -> np.ndarray:
        """Every symbol's count: each address held READ_LATENCY clocks, then sampled."""
        out = np.zeros(self.n_symbols, dtype=np.int64)
        await FallingEdge(self.dut.clk)
        for addr in range(self.n_symbols):
            self.dut.rd_addr.value = addr
            await ClockCycles(self.dut.clk, self.hist.READ_LATENCY)
            await FallingEdge(self.dut.clk)
            out[addr] = int(self.dut.rd_data.value)
        return out

    def compare(self, got: np.ndarray, sym: np.ndarray, label: str) -> None:
        expected = np.bincount(sym, minlength=self.n_symbols)
        bad = np.flatnonzero(got != expected)
        assert not len(bad), (
            f"{label}: {len(bad)} of {self.n_symbols} counts differ, e.g. "
            + ", ".join(f"sym {k}: rtl {got[k]} model {expected[k]}" for k in bad[:8]))
        self.values_compared += len(sym)
        self.entries_compared += self.n_symbols
        self.chunks_compared += 1

    async def run_chunks(self, chunks: list[np.ndarray], label: str) -> None:
        """Send ``chunks`` back to back; read and check each one while the next streams."""
        first = int(self.dut.chunks.value)
        read_done = [Event() for _ in chunks]

        async def reader():
            for k, sym in enumerate(chunks):
                while int(self.dut.chunks.value) < first + k + 1:
                    await RisingEdge(self.dut.clk)
                got = await self.read_all()
                now = int(self.dut.chunks.value)
                assert now == first + k + 1, f"{label}: chunk {k + 1} completed during the read"
                self.compare(got, sym, f"{label} chunk {k} ({len(sym)} values)")
                read_done[k].set()

        task = cocotb.start_soon(reader())
        for k, sym in enumerate(chunks):
            words = self.beats(sym)
            if len(words) > 1:
                await self.source.send(AxiStreamFrame(words[:-1]))
            if k > 0:
                await read_done[k - 1].wait()
            await self.source.send(AxiStreamFrame(words[-1:]))
        await task
        assert int(self.dut.chunks.value) == first + len(chunks)

    def report(self, test: str) -> None:
        message = (f"{test}: lanes {self.lanes}, {self.n_symbols} symbols: "
                   f"{self.chunks_compared} chunks, {self.values_compared} values, "
                   f"{self.entries_compared} counts compared with np.bincount; "
                   f"input waited {self.waits} clocks")
        self.dut._log.info(message)
        print(message)


def _lengths(tb: TB, rng: np.random.Generator) -> list[int]:
    """Corner lengths first, then random ones up to a few thousand."""
    n = tb.lanes
    corners = [1, max(n - 1, 1), n, n + 1, 2 * n + n // 2 + 1, 3 * n - 1]
    return corners + [int(x) for x in rng.integers(1, 3000, 6)] + [3000]


@cocotb.test()
async def random_chunks_with_stalls(dut):
    """Corner and random lengths, constant/uniform/skewed symbols, random valid gaps."""
    tb = TB(dut, SEED)
    tb.set_stalls(SEED)
    await tb.reset()
    kinds = ["constant", "uniform", "skewed"]
    lengths = _lengths(tb, tb.rng)
    chunks = [tb.symbols(n, kinds[k % 3]) for k, n in enumerate(lengths)]
    chunks += [tb.symbols(int(tb.rng.integers(1, 2000)), "constant") for _ in range(3)]
    await tb.run_chunks(chunks, "random_chunks_with_stalls")
    tb.report("random_chunks_with_stalls")


@cocotb.test()
async def full_rate(dut):
    """No gaps: chunks longer than the clear never make the input wait (one beat per clock),
    and back-to-back beats of one symbol exercise the forwarding on every clock."""
    tb = TB(dut, SEED + 1)
    tb.set_stalls(None)
    await tb.reset()
    n_min = (tb.n_symbols + 8) * tb.lanes  # beats enough to cover the clear and the pipeline
    chunks = [tb.symbols(n_min + int(tb.rng.integers(0, 1500)), kind)
              for kind in ["constant", "skewed", "constant", "uniform", "skewed", "constant"]]
    await tb.run_chunks(chunks, "full_rate")
    assert tb.waits == 0, f"the input waited {tb.waits} clocks, although no clear was due"
    tb.report("full_rate")


@cocotb.test()
async def short_chunks_wait_for_clear(dut):
    """Chunks shorter than the clear (n_symbols clocks): the input must wait for the bank."""
    tb = TB(dut, SEED + 2)
    tb.set_stalls(None)
    await tb.reset()
    chunks = []
    for k in range(12):
        beats = int(tb.rng.integers(1, max(2, tb.n_symbols // 2)))
        n = max(1, beats * tb.lanes - int(tb.rng.integers(0, tb.lanes)))
        chunks.append(tb.symbols(n, ["constant", "skewed", "uniform"][k % 3]))
    # Without reads in between, too: send them all at once and check only the last one.
    await tb.run_chunks(chunks, "short_chunks_wait_for_clear")
    waits_with_reads = tb.waits
    tb.waits = 0
    burst = [tb.symbols(int(tb.rng.integers(1, 3 * tb.lanes)), "skewed") for _ in range(10)]
    first = int(dut.chunks.value)
    await tb.source.send(AxiStreamFrame([w for sym in burst for w in tb.beats(sym)]))
    while int(dut.chunks.value) < first + len(burst):
        await RisingEdge(dut.clk)
    tb.compare(await tb.read_all(), burst[-1], "short_chunks_wait_for_clear burst")
    assert tb.waits > 0, "back-to-back short chunks never waited for a clear"
    dut._log.info("waited %d clocks with reads, %d in the burst", waits_with_reads, tb.waits)
    tb.report("short_chunks_wait_for_clear")


@cocotb.test()
async def bank_handover(dut):
    """Chunks of one beat right behind a chunk's end, with no gaps: the chunk after them needs
    a bank whose clear has not even started (the chunk before has not finished its last
    write), or, right after reset, a bank that must not be cleared again. The last chunk of
    each burst is checked."""
    tb = TB(dut, SEED + 5)
    tb.set_stalls(None)
    long = (tb.n_symbols + 8) * tb.lanes
    patterns = [
        ["beat", "beat", "checked"],
        ["long", "long", "beat", "checked"],
        ["long", "beat", "beat", "beat", "checked"],
        ["beat", "long", "beat", "beat", "checked"],
    ]
    waits = 0
    for p, pattern in enumerate(patterns):
        await tb.reset()
        sizes = {"beat": lambda: int(tb.rng.integers(1, tb.lanes + 1)), "long": lambda: long,
                 "checked": lambda: 2 * long}
        # The checked chunk is uniform: a run of one symbol could hide lost writes, since
        # its count lives on in the forwarding registers.
        chunks = [tb.symbols(sizes[kind](), "uniform" if kind == "checked"
                             else ["constant", "skewed"][(p + k) % 2])
                  for k, kind in enumerate(pattern)]
        await tb.source.send(AxiStreamFrame([w for sym in chunks for w in tb.beats(sym)]))
        while int(dut.chunks.value) < len(chunks):
            await RisingEdge(dut.clk)
        tb.compare(await tb.read_all(), chunks[-1], f"bank_handover {pattern}")
        waits += tb.waits
    tb.waits = waits
    tb.report("bank_handover")


@cocotb.test()
async def zeros_before_first_chunk(dut):
    """Reads return 0 until a chunk completes: during the reset clear and mid first chunk."""
    tb = TB(dut, SEED + 3)
    tb.set_stalls(SEED + 3)
    await tb.reset(wait_for_clear=False)
    assert int(dut.clearing.value) == 1 and int(dut.i__ready.value) == 0, (
        "after reset the banks must clear with i.ready low")
    empty = np.zeros(0, dtype=np.int64)
    tb.compare(await tb.read_all(), empty, "read during the reset clear")
    sym = tb.symbols(1000, "skewed")
    words = tb.beats(sym)
    await tb.source.send(AxiStreamFrame(words[:-1]))
    await tb.source.wait()
    assert int(dut.chunks.value) == 0
    tb.compare(await tb.read_all(), empty, "read mid first chunk")
    await tb.source.send(AxiStreamFrame(words[-1:]))
    while int(dut.chunks.value) < 1:
        await RisingEdge(dut.clk)
    tb.compare(await tb.read_all(), sym, "first chunk")
    tb.report("zeros_before_first_chunk")


@cocotb.test()
async def reset_mid_chunk(dut):
    """A reset in the middle of a chunk (with chunks done before) forgets everything: zeros,
    chunks = 0, and the following chunks count from clean banks."""
    tb = TB(dut, SEED + 4)
    tb.set_stalls(SEED + 4)
    await tb.reset()
    await tb.run_chunks([tb.symbols(300, "constant"), tb.symbols(200, "uniform")], "before")
    words = tb.beats(tb.symbols(3000, "skewed"))
    await tb.source.send(AxiStreamFrame(words))
    await ClockCycles(dut.clk, int(tb.rng.integers(20, 200)))
    await tb.reset(wait_for_clear=False)
    assert int(dut.chunks.value) == 0
    tb.compare(await tb.read_all(), np.zeros(0, dtype=np.int64), "read after the reset")
    chunks = [tb.symbols(n, kind) for n, kind in
              [(500, "constant"), (1, "uniform"), (1000, "skewed"), (2 * tb.lanes + 1, "uniform")]]
    await tb.run_chunks(chunks, "after the reset")
    tb.report("reset_mid_chunk")


@cocotb.test()
async def full_lane_counters(dut):
    """Chunks of max_count values of one symbol (with a bench built for a small max_count):
    every lane's counter reaches its share, ceil(max_count / lanes), which its width must
    hold; then a chunk one beat short of it, whose last beat is partial."""
    tb = TB(dut, SEED + 5)
    tb.set_stalls(SEED + 5)
    await tb.reset()
    if tb.hist.max_count > 1 << 14:
        tb.report("full_lane_counters (not run: max_count too large for a bench)")
        return
    full = tb.hist.max_count
    chunks = [np.full(full, 3, dtype=np.int64), np.full(full, 0, dtype=np.int64),
              np.full(full - tb.lanes + 1, tb.n_symbols - 1, dtype=np.int64)]
    await tb.run_chunks(chunks, "full_lane_counters")
    tb.report("full_lane_counters")


#: (lanes, symbols, max_count): the last is a small chunk limit whose lane counters the
#: benches fill (the others never come near 2**24).
CASES = [(1, 18, MAX_COUNT), (4, 18, MAX_COUNT), (4, 1026, MAX_COUNT), (16, 18, MAX_COUNT),
         (4, 18, 4096)]


@pytest.mark.parametrize(("lanes", "n_symbols", "max_count"), CASES)
def test_histogram(lanes, n_symbols, max_count):
    run_bench(_design, name="histogram",
              params={"lanes": lanes, "n_symbols": n_symbols, "max_count": max_count},
              test_module=__name__)
