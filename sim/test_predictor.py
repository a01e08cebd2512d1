"""cocotb bench: the RTL Lorenzo predictor against ``ceaz.predictor.residuals``, bit for bit.

Chunks of random integers (uniform in +-2**27, extreme checkerboards and smooth random walks)
go through on boxes of every dimensionality: 1-D boxes shorter than a beat, not a multiple of
it and longer than the plane buffer; 2-D boxes with rows shorter than a beat, of one value and
as long as the line buffer; 3-D boxes with odd shapes, planes of one value and planes as large
as the plane buffer. The box shape changes only between chunks, with the stream idle; chunks
of one shape also follow each other with no gap. ``delta`` must equal the model for normal
values, the bits of the others (``raw``) must pass through, as must ``kind``, ``last`` and
``count``. Each test logs how many values it compared.
"""

from __future__ import annotations

import os

import cocotb
import numpy as np
import pytest
from amaranth.lib import data
from beats import fields, values_from_beats
from cocotb.triggers import RisingEdge, with_timeout
from cocotbext.axi import AxiStreamFrame
from runner import bench_params, run_bench
from streams import StreamBench

from ceaz.predictor import residuals
from ceaz_hw.beats import Q_BITS, Prequantized, Residual, beat
from ceaz_hw.predictor import INIT_CLOCKS, Predictor, latency

SEED = int(os.environ.get("CEAZ_SIM_SEED", "1"))
#: Buffer sizes of the benched design: small memories build and simulate quickly, and the
#: plane buffer still spans several 1024-beat banks for 1 and 4 lanes.
MAX_LINE = 64
MAX_PLANE = 8192
Q_MAX = (1 << Q_BITS) - 1
#: Longest wait for one output beat (latency plus stalls); only a hang exceeds it.
RECV_TIMEOUT_NS = 50_000


class TB(StreamBench):
    """Clock, reset, stream models, the box ports and a transfer monitor of one Predictor."""

    def __init__(self, dut):
        self.lanes = int(bench_params()["lanes"])
        self.in_layout = beat(Prequantized, self.lanes)
        self.out_layout = beat(Residual, self.lanes)
        self.lane_base = data.Layout.cast(self.in_layout)["lanes"].offset
        self.beat_fields = fields(self.in_layout)
        self.lane_fields = fields(Prequantized)
        super().__init__(dut, self.in_layout.size, self.out_layout.size)
        cocotb.start_soon(self.checker.run())
        self.compared = 0
        self.clock = 0
        self.offer_times: list[int] = []  # clocks with input valid
        self.in_times: list[int] = []  # clocks of input transfers
        self.out_times: list[int] = []  # clocks of output transfers
        cocotb.start_soon(self._monitor())

    async def _monitor(self) -> None:
        dut = self.dut
        while True:
            await RisingEdge(dut.clk)
            self.clock += 1
            if dut.i__valid.value:
                self.offer_times.append(self.clock)
            if dut.i__valid.value and dut.i__ready.value:
                self.in_times.append(self.clock)
            if dut.o__valid.value and dut.o__ready.value:
                self.out_times.append(self.clock)

    async def reset(self) -> None:
        self.set_box((1, 1, 1))
        await super().reset()

    def set_box(self, shape) -> None:
        cz, cy, cx = shape
        self.dut.cx.value, self.dut.cy.value, self.dut.cz.value = cx, cy, cz

    def beats(self, q: np.ndarray, rng) -> tuple[list[int], np.ndarray, np.ndarray]:
        """The chunk's input beats: q, random kinds (q = 0 unless normal, as the quantizer
        sends them) and random raw bits; lanes beyond ``count`` hold random garbage."""
        n = q.size
        kind = rng.choice([0, 0, 0, 1, 2], n)
        raw = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.int64)
        flat = np.where(kind == 0, q.ravel(), 0)
        lane_bits = Prequantized.size
        top, lane_field = self.beat_fields, self.lane_fields
        words = []
        for start in range(0, n, self.lanes):
            count = min(self.lanes, n - start)
            word = top["count"].put(count) | top["last"].put(start + count == n)
            for j in range(self.lanes):
                if j < count:
                    k = start + j
                    # q for a normal value, the bits otherwise (beats.Prequantized).
                    value = lane_field["q"].put(flat[k]) if kind[k] == 0 else \
                        lane_field["raw"].put(raw[k])
                    lane = value | lane_field["kind"].put(kind[k])
                else:
                    lane = int.from_bytes(rng.bytes(lane_bits // 8 + 1), "little")
                    lane &= (1 << lane_bits) - 1
                word |= lane << (self.lane_base + j * lane_bits)
            words.append(word)
        return words, flat.reshape(q.shape), np.stack([kind, raw])

    async def send(self, q: np.ndarray, rng) -> tuple[int, np.ndarray, np.ndarray]:
        """Queue one chunk; return its beat count and the values the model must see."""
        words, q_sent, side = self.beats(q, rng)
        await self.source.send(AxiStreamFrame(words))
        return len(words), q_sent, side

    async def receive(self, n_beats: int, q_sent: np.ndarray, side: np.ndarray,
                      label: str) -> None:
        """Take one chunk's output beats and compare them with the model."""
        frames = [await with_timeout(self.sink.recv(), RECV_TIMEOUT_NS, "ns")
                  for _ in range(n_beats)]
        words = [word for frame in frames for word in frame.tdata]
        got, lasts = values_from_beats(self.out_layout, words)
        n = q_sent.size
        assert lasts == [n_beats - 1], f"{label}: last on beats {lasts}, expected {n_beats - 1}"
        assert len(got["delta"]) == n, f"{label}: {len(got['delta'])} values, expected {n}"
        assert np.array_equal(got["kind"], side[0]), f"{label}: kind differs"
        other = side[0] != 0  # verbatim and fill: their bits, not their delta, come back
        assert np.array_equal(got["raw"][other], side[1][other]), f"{label}: raw differs"
        ref = residuals(q_sent).ravel()
        bad = np.flatnonzero((got["delta"] != ref) & ~other)
        if len(bad):
            where = [np.unravel_index(i, q_sent.shape) for i in bad[:8]]
            lines = [f"  (z, y, x) = {tuple(int(c) for c in w)}: rtl {got['delta'][i]}, "
                     f"model {ref[i]}" for w, i in zip(where, bad[:8], strict=True)]
            raise AssertionError(f"{label} {q_sent.shape}: {len(bad)} of {n} deltas differ:\n"
                                 + "\n".join(lines))
        self.compared += n

    async def check(self, q: np.ndarray, rng, label: str) -> None:
        """One chunk with the stream idle before and after: set the box, send, compare."""
        self.set_box(q.shape)
        n_beats, q_sent, side = await self.send(q, rng)
        await self.receive(n_beats, q_sent, side, label)


# -- test data --------------------------------------------------------------------------------

def uniform(rng, shape):
    return rng.integers(-Q_MAX, Q_MAX + 1, shape)


def checkerboard(rng, shape):
    """+-Q_MAX alternating along every axis: every difference at its largest magnitude."""
    z, y, x = np.indices(shape)
    sign = 1 - 2 * ((z + y + x) % 2)
    return sign * Q_MAX * rng.choice([1, -1])


def smooth(rng, shape):
    """A random walk along each axis (cumsums of small steps): field-like residuals."""
    walk = rng.integers(-50, 51, shape)
    for axis in range(3):
        walk = np.cumsum(walk, axis=axis)
    return np.clip(walk + rng.integers(-Q_MAX // 2, Q_MAX // 2), -Q_MAX, Q_MAX)


def shapes(lanes: int) -> list[tuple[int, int, int]]:
    """Boxes of every kind for ``lanes`` lanes, within MAX_LINE and MAX_PLANE."""
    n = lanes
    one_d = [(1, 1, k) for k in (1, 2, 3, 5, max(n - 1, 1), n, n + 1, 100, 1500)]
    two_d = [(1, 7, 1), (1, 3, 2), (1, 5, 3), (1, 4, 13), (1, 9, 17), (1, 6, MAX_LINE),
             (1, 3, max(n - 1, 1)), (1, 40, 5), (1, 3, n + 3), (1, 5, n)]
    three_d = [(2, 2, 2), (3, 4, 5), (5, 3, 7), (7, 1, 1), (4, 1, 1), (3, 2, 1), (5, 1, 7),
               (3, 1, MAX_PLANE), (2, 16, MAX_LINE), (2, 33, 31), (6, 5, 9), (3, 7, n + 1),
               # a plane of exactly one beat, one value more, one less, and a line less
               # than a beat in a plane of more
               (3, 2, max(n // 2, 1)), (3, 1, n + 1), (4, 1, max(n - 1, 1)), (3, 5, max(n - 3, 1))]
    return one_d + two_d + three_d


def random_shape(rng) -> tuple[int, int, int]:
    """A random 1-D, 2-D or 3-D box within the buffers."""
    dims = rng.integers(1, 4)
    if dims == 1:
        return (1, 1, int(rng.integers(1, 3000)))
    cx = int(rng.integers(1, MAX_LINE + 1))
    cy = int(rng.integers(2, min(MAX_PLANE // cx, 40) + 1)) if MAX_PLANE // cx >= 2 else 1
    return (1 if dims == 2 else int(rng.integers(2, 5)), cy, cx)


# -- cocotb tests -----------------------------------------------------------------------------

@cocotb.test()
async def predictor_shapes(dut):
    """Every box kind with uniform, extreme and smooth values, under random stalls."""
    tb = TB(dut)
    tb.set_stalls(SEED)
    await tb.reset()
    rng = np.random.default_rng(SEED)
    for shape in shapes(tb.lanes):
        for make in (uniform, smooth):
            await tb.check(make(rng, shape), rng, f"{make.__name__}")
        if np.prod(shape) <= 200:
            await tb.check(checkerboard(rng, shape), rng, "checkerboard")
    cocotb.log.info("lanes %d: compared %d values", tb.lanes, tb.compared)


@cocotb.test()
async def predictor_random_boxes(dut):
    """Random boxes one after another, the shape changing between chunks, random stalls."""
    tb = TB(dut)
    tb.set_stalls(SEED + 2)
    await tb.reset()
    rng = np.random.default_rng(SEED + 10)
    for _ in range(25):
        shape = random_shape(rng)
        make = (uniform, smooth)[int(rng.integers(0, 2))]
        await tb.check(make(rng, shape), rng, f"random {make.__name__}")
    cocotb.log.info("lanes %d: compared %d values", tb.lanes, tb.compared)


@cocotb.test()
async def predictor_back_to_back(dut):
    """Chunks of one shape with no gap between them, with and without stalls: the position
    counters and delay pointers restart at every chunk while the pipeline is full."""
    tb = TB(dut)
    await tb.reset()
    rng = np.random.default_rng(SEED + 20)
    for stalls, shape in ((None, (3, 5, 7)), (SEED + 4, (2, 6, tb.lanes + 3)),
                          (None, (1, 1, 2 * tb.lanes + 1)), (SEED + 6, (1, 1, 1)),
                          (None, (1, 3, 1))):
        tb.set_stalls(stalls)
        tb.set_box(shape)
        sent = [await tb.send(smooth(rng, shape), rng) for _ in range(6)]
        for n_beats, q_sent, side in sent:
            await tb.receive(n_beats, q_sent, side, f"back to back {shape}")
    cocotb.log.info("lanes %d: compared %d values", tb.lanes, tb.compared)


@cocotb.test()
async def predictor_timing(dut):
    """No stalls: a chunk after idle enters after INIT_CLOCKS clocks, then one beat per
    clock, and leaves after Predictor.LATENCY clocks at one beat per clock (``latency``)."""
    tb = TB(dut)
    tb.set_stalls(None)
    await tb.reset()
    rng = np.random.default_rng(SEED + 30)
    shape = (3, 4, 2 * tb.lanes + 1)
    tb.set_box(shape)
    n_beats, q_sent, side = await tb.send(uniform(rng, shape), rng)
    await tb.receive(n_beats, q_sent, side, "timing")
    ins, outs = tb.in_times[-n_beats:], tb.out_times[-n_beats:]
    assert ins[-1] - ins[0] == n_beats - 1, "input not at one beat per clock"
    assert outs[-1] - outs[0] == n_beats - 1, "output not at one beat per clock"
    clocks = outs[0] - ins[0]
    # Clocks offered but not taken: only the first beat waits (idle before, no stalls).
    stall = len(tb.offer_times) - len(tb.in_times)
    cocotb.log.info("lanes %d: %d beats, latency %d clocks, chunk-start stall %d clocks; "
                    "compared %d values", tb.lanes, n_beats, clocks, stall, tb.compared)
    expected = latency(tb.lanes, MAX_LINE, MAX_PLANE)
    assert clocks == expected, (clocks, expected)
    assert stall <= INIT_CLOCKS, stall


# -- pytest wrapper ---------------------------------------------------------------------------

@pytest.mark.parametrize("lanes", [1, 4, 16])
def test_predictor(lanes):
    run_bench(Predictor, name="predictor",
              params={"lanes": lanes, "max_line": MAX_LINE, "max_plane": MAX_PLANE},
              test_module=__name__)
