"""cocotb bench: the on-chip codebook builder (ceaz_hw.builder.CodebookBuilder) against the
model's construction, ``huffman.code_lengths(huffman.weights_from_histogram(hist))`` and
``huffman.canonical_codes``.

Each case streams one histogram in (with random gaps in ``valid``, or none), collects the
codebook writes the builder makes and checks them: exactly one write per symbol, in symbol
order, each entry equal to the model's code and length, then one commit after the last
write. ``cb_pending`` plays ``HuffmanLanes``: it rises with each commit and falls a random
number of clocks later, and the next build must not write while it is high.

Histograms: random counts with many ties, a single symbol holding the whole chunk, all
symbols equal, all counts distinct, geometric counts (deep trees: many K.3 moves), skewed
multinomial draws like real residuals, counts large enough for every radix digit, and the
offline training histogram scaled to a chunk. At R = 512 with chunks of 2**18 values the
bench also checks the clock budget of the issue: a build (first count to commit) finishes
within one chunk's time at 16 lanes, 2**18 / 16 clocks.
"""

from __future__ import annotations

import os

import cocotb
import numpy as np
import pytest
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge
from cocotbext.axi import AxiStreamFrame
from runner import bench_params, run_bench
from streams import StreamBench

from ceaz import format as fmt
from ceaz import huffman
from ceaz_hw.builder import CodebookBuilder

SEED = int(os.environ.get("CEAZ_SIM_SEED", "1"))
#: The default chunk (2**18 values) and its time at 16 lanes: the build's budget.
CHUNK = 1 << 18
BUDGET = CHUNK // 16


def _design(n_symbols: int) -> CodebookBuilder:
    return CodebookBuilder(n_symbols, fmt.MAX_CHUNK_VALUES, fmt.MAX_CODE_LEN)


class TB(StreamBench):
    """Clock, reset, a count source and a monitor of the codebook port that also plays the
    commit handshake of HuffmanLanes."""

    def __init__(self, dut, seed: int):
        self.builder = _design(**bench_params())
        self.builder._MustUse__silence = True  # for its widths only, never elaborated here
        self.n = self.builder.n_symbols
        self.rng = np.random.default_rng(seed)
        super().__init__(dut, self.builder.count_width, None)
        dut.cb_pending.value = 0
        self.writes: list[tuple[int, int]] = []
        self.commits = 0
        self.first_take: int | None = None  # clock of a build's first count
        self.clock = 0
        self.build_clocks: list[int] = []
        self.pending_hold = (1, 2)  # clocks cb_pending stays high: [low, high)
        cocotb.start_soon(self._monitor())

    async def _monitor(self) -> None:
        dut, pending_left = self.dut, 0
        while True:
            await FallingEdge(dut.clk)
            self.clock += 1
            if int(dut.rst.value):
                pending_left = 0
                dut.cb_pending.value = 0
                continue
            if (self.first_take is None and int(dut.i__valid.value)
                    and int(dut.i__ready.value)):
                self.first_take = self.clock
            if int(dut.cb_we.value):
                assert pending_left == 0, "a codebook write while a commit was pending"
                self.writes.append((int(dut.cb_addr.value), int(dut.cb_data.value)))
            if int(dut.cb_commit.value):
                assert pending_left == 0, "a commit while a commit was pending"
                self.commits += 1
                self.build_clocks.append(self.clock - self.first_take)
                self.first_take = None
                pending_left = int(self.rng.integers(*self.pending_hold))
            elif pending_left:
                pending_left -= 1
            dut.cb_pending.value = int(pending_left > 0)

    async def build(self, hist: np.ndarray, label: str, *, last_after: int = 0) -> int:
        """Stream ``hist`` in (the last count ``last_after`` idle clocks after the others,
        if given), wait for the commit, check every entry; returns the clocks from the first
        count taken to the commit."""
        hist = np.asarray(hist, dtype=np.uint64)
        assert len(hist) == self.n and int(hist.sum()) <= fmt.MAX_CHUNK_VALUES
        commits = self.commits
        self.writes = []
        counts = [int(c) for c in hist]
        if last_after:
            await self.source.send(AxiStreamFrame(counts[:-1]))
            await self.source.wait()
            await ClockCycles(self.dut.clk, last_after)
            counts = counts[-1:]
        await self.source.send(AxiStreamFrame(counts))
        while self.commits == commits:
            await RisingEdge(self.dut.clk)
        self.check(hist, label)
        return self.build_clocks[-1]

    def check(self, hist: np.ndarray, label: str) -> None:
        lengths = huffman.code_lengths(huffman.weights_from_histogram(hist))
        codes = huffman.canonical_codes(lengths)
        max_len = self.builder.max_code_len
        want = [(s, int(codes[s]) | int(lengths[s]) << max_len) for s in range(self.n)]
        assert len(self.writes) == self.n, (
            f"{label}: {len(self.writes)} codebook writes for {self.n} symbols")
        bad = [(w, g) for w, g in zip(want, self.writes, strict=True) if w != g]
        assert not bad, f"{label}: {len(bad)} entries differ, e.g. " + ", ".join(
            f"sym {w[0]}: rtl (addr {g[0]}, len {g[1] >> max_len}, code {g[1] & 0xFFFF:#x}) "
            f"model (len {w[1] >> max_len}, code {w[1] & 0xFFFF:#x})" for w, g in bad[:4])

    # -- histograms --------------------------------------------------------------------------

    def cases(self, total: int) -> dict[str, np.ndarray]:
        n, rng = self.n, self.rng
        one = np.zeros(n, dtype=np.uint64)
        one[rng.integers(n)] = total
        geometric = (total >> np.minimum(np.arange(n), 62)).astype(np.uint64)
        cases = {}
        if n >= 4 and n % 2 == 0:  # an alphabet of radius R = (n - 2) / 2
            offline = huffman.offline_histogram((n - 2) // 2).astype(np.float64)
            cases["offline"] = (offline * (total / offline.sum())).astype(np.uint64)
        # Sums to the chunk limit, so weights go above 2**20: every radix digit is sorted on.
        cases["three digits"] = rng.multinomial(
            fmt.MAX_CHUNK_VALUES, rng.dirichlet(np.full(n, 0.3))).astype(np.uint64)
        return {
            "ties": rng.integers(0, 4, n).astype(np.uint64),
            "single": one,
            "equal": np.full(n, total // n, dtype=np.uint64),
            "zeros": np.zeros(n, dtype=np.uint64),
            "distinct": rng.permutation(n).astype(np.uint64),
            "geometric": geometric,
            "multinomial": rng.multinomial(total, rng.dirichlet(np.full(n, 0.05))).astype(
                np.uint64),
            **cases,
        }


@cocotb.test()
async def model_books(dut):
    """Every kind of histogram, back to back, with random input gaps and commit delays."""
    tb = TB(dut, SEED)
    tb.set_stalls(SEED)
    tb.pending_hold = (1, 40)
    await tb.reset()
    for name, hist in tb.cases(CHUNK).items():
        await tb.build(hist, name)
    for k in range(4):  # and a few more random ones with ties
        await tb.build(tb.rng.integers(0, 1 + 10 ** k, tb.n).astype(np.uint64), f"random{k}")
    dut._log.info("%d books built and checked", tb.commits)


@cocotb.test()
async def clock_budget(dut):
    """At full input rate, every build of a 2**18-value chunk's histogram finishes (first
    count to commit) within that chunk's time at 16 lanes."""
    tb = TB(dut, SEED + 1)
    tb.set_stalls(None)
    await tb.reset()
    clocks = {}
    for name, hist in tb.cases(CHUNK).items():
        if name == "three digits":
            continue  # not a 2**18-value chunk
        clocks[name] = await tb.build(hist, name)
    message = f"{tb.n} symbols: build clocks " + ", ".join(f"{k} {v}" for k, v in clocks.items())
    dut._log.info(message)
    print(message)
    if tb.n == fmt.n_symbols(fmt.DEFAULT_RADIUS):
        worst = max(clocks, key=clocks.get)
        assert clocks[worst] <= BUDGET, (
            f"{worst}: {clocks[worst]} clocks, over the budget of {BUDGET}")


@cocotb.test()
async def late_last_count(dut):
    """The last count arrives alone, clocks after the others, into the bucket the prefix
    pass reads first (weight 1023: bucket 0 of digit 0): its update is still in the
    counters' pipeline when the load ends, and the sort must wait for it."""
    tb = TB(dut, SEED + 3)
    tb.set_stalls(None)
    await tb.reset()
    for gap in (1, 2, 3, 8):
        hist = tb.rng.integers(0, 7, tb.n).astype(np.uint64)
        hist[-1] = 1022
        await tb.build(hist, f"last count {gap} clocks late", last_after=gap)


@cocotb.test()
async def reset_mid_build(dut):
    """A reset during a build (mid load, mid sort) loses that build and nothing else: the
    next one is right, and the bucket counters were cleared again."""
    tb = TB(dut, SEED + 2)
    tb.set_stalls(None)
    for wait in (tb.n // 2, 2 * tb.n + 100, 5 * tb.n):
        await tb.reset()
        hist = tb.rng.integers(0, 50, tb.n).astype(np.uint64)
        await tb.source.send(AxiStreamFrame([int(c) for c in hist]))
        await ClockCycles(dut.clk, wait)
        tb.source.clear()
        await tb.reset()
        tb.first_take = None
        await tb.build(tb.rng.integers(0, 7, tb.n).astype(np.uint64), f"after reset at {wait}")


@pytest.mark.parametrize("n_symbols", [2, 3, 18, fmt.n_symbols(fmt.DEFAULT_RADIUS)])
def test_builder(n_symbols):
    run_bench(_design, name="builder", params={"n_symbols": n_symbols}, test_module=__name__)
