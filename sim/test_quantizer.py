"""cocotb bench: the RTL prequantizer against ``ceaz.quantizer.prequantize``, bit for bit.

Every test runs under random input and output stalls, except the throughput test, which
checks one beat per clock without them. Beats are ``ceaz_hw.beats.beat`` layouts: each output
beat must carry its input beat's ``last`` and ``count``, which the framing test stresses with
back-to-back chunks of lengths that are not a multiple of the lane count (unused lanes of a
partial beat carry garbage). Each test logs how many values it compared.
"""

from __future__ import annotations

import os
from fractions import Fraction

import cocotb
import numpy as np
import pytest
from amaranth.hdl import unsigned
from amaranth.lib import data
from beats import beats_from_values, fields, values_from_beats
from cocotb.triggers import ClockCycles, with_timeout
from cocotbext.axi import AxiStreamFrame
from runner import bench_params, run_bench
from streams import PERIOD_NS, StreamBench

from ceaz import format as fmt
from ceaz.quantizer import prequantize, quant_params
from ceaz_hw.beats import Prequantized, beat
from ceaz_hw.quantizer import CONFIG_LATENCY, Quantizer

#: Longest wait for one output beat (latency plus stalls); only a hang exceeds it.
RECV_TIMEOUT_NS = 20_000
F32 = np.float32
SEED = int(os.environ.get("CEAZ_SIM_SEED", "1"))
#: Lane counts benched. 16 lanes take about 2 minutes to build with Verilator on 2 busy cores.
LANES = [1, 4, 16]


def f32_bits(value: float) -> int:
    return int(np.array(value, dtype=F32).view(np.uint32))


class TB(StreamBench):
    """Clock, reset, stream models and the configuration ports of one Quantizer."""

    def __init__(self, dut):
        self.lanes = int(bench_params()["lanes"])
        self.in_layout = beat(unsigned(32), self.lanes)
        self.out_layout = beat(Prequantized, self.lanes)
        assert len(dut.i__payload) == self.in_layout.size, "input beat layout differs"
        assert len(dut.o__payload) == self.out_layout.size, "output beat layout differs"
        self.in_lane_base = data.Layout.cast(self.in_layout)["lanes"].offset
        self.in_top = fields(self.in_layout)
        self.out_top = fields(self.out_layout)
        self.rng = np.random.default_rng(SEED + 99)  # garbage for unused lanes
        super().__init__(dut, self.in_layout.size, self.out_layout.size)
        cocotb.start_soon(self.checker.run())

    async def configure(self, qp) -> None:
        """Drive ``quant_params`` output onto the ports, with the stream idle."""
        cfg = self.dut
        cfg.cfg__recip_mant.value = qp.recip_mant
        cfg.cfg__recip_exp.value = qp.recip_exp
        cfg.cfg__step.value = f32_bits(qp.step)
        cfg.cfg__eb.value = f32_bits(qp.eb_f)
        cfg.cfg__fill_bits.value = qp.fill_bits or 0
        cfg.cfg__fill_enable.value = qp.fill_bits is not None
        await ClockCycles(self.dut.clk, CONFIG_LATENCY + 1)

    def chunk_beats(self, bits: np.ndarray) -> list[int]:
        """One chunk's input beats; the unused lanes of a partial last beat get random bits,
        which must not matter."""
        words = beats_from_values(self.in_layout, {"": bits})
        unused = -len(bits) % self.lanes
        if unused:
            garbage = int.from_bytes(self.rng.bytes(4 * unused), "little")
            words[-1] |= garbage << (self.in_lane_base + 32 * (self.lanes - unused))
        return words

    async def quantize_chunks(self, chunks: list[np.ndarray]):
        """Stream chunks of float32 bit patterns back to back. Checks that every output beat
        carries its input beat's ``last`` and ``count``; returns per chunk (q, kind, raw) and
        the times of all output beats."""
        sent = [self.chunk_beats(bits) for bits in chunks]
        for words in sent:
            await self.source.send(AxiStreamFrame(words))
        received, times = [], []
        for words in sent:
            if not words:  # an empty chunk has no beats (the framing stage never sends one)
                empty = np.zeros(0, np.int64)
                received.append((empty, empty, empty))
                continue
            frames = [
                await with_timeout(self.sink.recv(), RECV_TIMEOUT_NS, "ns")
                for _ in range(len(words))
            ]
            out = [word for frame in frames for word in frame.tdata]
            assert len(out) == len(words), f"{len(out)} output beats for {len(words)} sent"
            want = [(self.in_top["last"].get(w), self.in_top["count"].get(w)) for w in words]
            got = [(self.out_top["last"].get(w), self.out_top["count"].get(w)) for w in out]
            assert got == want, f"(last, count) per beat: got {got}, sent {want}"
            values, lasts = values_from_beats(self.out_layout, out)
            assert lasts == [len(out) - 1], f"last on beats {lasts} of {len(out)}"
            received.append((values["q"], values["kind"], values["raw"]))
            times += [frame.sim_time_start for frame in frames]
        return received, times

    async def quantize(self, bits: np.ndarray):
        """One chunk through; return q, kind, raw and the output beat times."""
        (result,), times = await self.quantize_chunks([bits])
        return (*result, times)

    async def check(self, bits: np.ndarray, qp, label: str) -> int:
        """Quantize ``bits`` with ``qp`` in the RTL and the model; assert equality."""
        await self.configure(qp)
        q, kind, raw, _ = await self.quantize(bits)
        compare(bits, qp, q, kind, raw, label)
        return len(bits)


def compare(bits, qp, q, kind, raw, label, log=True):
    q_ref, kind_ref = prequantize(bits.view(F32), qp)
    assert len(q) == len(bits), f"{label}: {len(q)} values out for {len(bits)} in"
    # A lane holds q for a normal value and the input bits for the others (beats.Prequantized).
    normal = kind == 0
    assert np.array_equal(raw[~normal], bits[~normal]), f"{label}: raw bits differ"
    bad = np.flatnonzero((np.where(normal, q, 0) != q_ref) | (kind != kind_ref))
    if len(bad):
        lines = [
            f"x={bits[i]:#010x} ({bits.view(F32)[i]!r}): rtl q={q[i]} kind={kind[i]}, "
            f"model q={q_ref[i]} kind={kind_ref[i]}"
            for i in bad[:8]
        ]
        raise AssertionError(f"{label}: {len(bad)} of {len(bits)} values differ ({qp}):\n"
                             + "\n".join(lines))
    if not log:
        return
    counts = np.bincount(kind_ref, minlength=3)
    cocotb.log.info("%s: %d values equal (normal %d, verbatim %d, fill %d)", label, len(bits),
                    *counts)


# -- test data --------------------------------------------------------------------------------

SPECIALS = np.array([
    0x00000000, 0x80000000,  # +-0
    0x7F800000, 0xFF800000,  # +-Inf
    0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0xFFFFFFFF,  # NaNs (quiet, signalling)
    0x00000001, 0x80000001, 0x007FFFFF, 0x00400000,  # subnormals
    0x00800000, 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF,  # smallest and largest normals
    0x3F800000, 0xBF800000, 0x4B000000, 0x4CFFFFFF,  # 1, -1, 2**23, ~2**27
], dtype=np.uint32)


def adversarial_bits(rng, n):
    """Uniform bit patterns (all exponents, NaN payloads, subnormals) plus the specials."""
    return np.concatenate([SPECIALS, rng.integers(0, 1 << 32, n, dtype=np.uint64)
                          .astype(np.uint32)])


def smooth_bits(rng, n, scale=1.0):
    """A random walk (np.cumsum of normals), normalised to +-scale: field-like data."""
    walk = np.cumsum(rng.standard_normal(n))
    walk = walk / max(np.abs(walk).max(), 1e-30)
    wave = np.sin(np.linspace(0, 20, n))
    return ((0.8 * walk + 0.2 * wave) * scale).astype(F32).view(np.uint32)


def near_bits(values, spread=2):
    """Float32 neighbours (+-spread ulps) of float64 values: every rounding boundary nearby."""
    with np.errstate(all="ignore"):
        base = np.asarray(values, dtype=np.float64).astype(F32)
    base = base[np.isfinite(base)].view(np.int32).astype(np.int64)
    mag, sign = np.abs(base), base < 0
    out = []
    for k in range(-spread, spread + 1):
        m = np.clip(mag + k, 0, 0x7F7FFFFF)
        out.append(np.where(sign, -m, m))
    return np.concatenate(out).astype(np.int32).view(np.uint32)


def tie_bits(qp, rng, n):
    """Values whose |x| * Cm * 2**Ce lies exactly halfway between integers (RNE ties).

    With Cm = c * 2**t (c odd) and a shift sh, a tie needs Mx * Cm = 2**(sh-1) mod 2**sh,
    i.e. Mx = 2**(sh-1-t) / c mod 2**(sh-t); solved for each shift that has a solution.
    """
    cm, ce = qp.recip_mant, qp.recip_exp
    t = (cm & -cm).bit_length() - 1
    odd = cm >> t
    out = []
    for e in range(1, 255):
        sh = -((e - 150) + ce)
        if not t + 1 <= sh <= 24 + t:
            continue
        mod = 1 << (sh - t)
        base = (pow(odd, -1, mod) << (sh - 1 - t)) % mod
        first = base + ((1 << 23) - base + mod - 1) // mod * mod  # smallest >= 2**23
        for mx in range(first, 1 << 24, mod)[:8]:
            bits = (e << 23) | (mx & 0x7FFFFF)
            out += [bits, bits | 1 << 31]
    out = np.array(out, dtype=np.uint32)
    return out[rng.permutation(len(out))[:n]]


def bound_bits(qp, rng, n):
    """Values placed on the decoder's bound: x = x' +- eb_f and neighbours, x' = fl32(q*S),
    for q across the whole range (large q give x' with an ulp comparable to eb_f)."""
    large = rng.integers(1 << 14, 1 << 27, n - n // 2 - n // 4)
    q = np.concatenate([
        rng.integers(-(1 << 27) + 1, 1 << 27, n // 2),
        rng.integers(-(1 << 16), 1 << 16, n // 4),
        large * rng.choice([-1, 1], len(large)),
    ])
    with np.errstate(all="ignore"):
        xr = (q.astype(np.float64) * qp.step).astype(F32).astype(np.float64)
        sign = np.sign(xr)
        centres = np.concatenate([xr + qp.eb_f, xr - qp.eb_f, xr + sign * qp.step / 2])
    return near_bits(centres, spread=1)


def limit_bits(qp):
    """Values around the largest magnitudes that still quantize, (2**27 - 1/2) * S, and either
    sign: where q stops fitting Q_BITS bits and the value goes verbatim."""
    limit = float(fmt.Q_LIMIT)
    centres = np.array([limit - 2, limit - 1, limit - 0.5, limit, limit + 0.5, limit + 1])
    with np.errstate(all="ignore"):
        values = centres * qp.step
    return near_bits(np.concatenate([values, -values]), spread=4)


def on_bound_count(bits, qp):
    """How many values reconstruct exactly at distance eb_f (the exact-check edge case)."""
    q, kind = prequantize(bits.view(F32), qp)
    x = bits.view(F32).astype(np.float64)
    with np.errstate(all="ignore"):
        xr = (q.astype(np.float64) * qp.step).astype(F32).astype(np.float64)
    hits = 0
    for xi, xri in zip(x[np.isfinite(x)], xr[np.isfinite(x)], strict=True):
        if Fraction(abs(xi - xri)) == Fraction(qp.eb_f):  # x - x' is exact in float64
            hits += 1
    return hits


def pow2_step_bound(k):
    """The smallest float32 bound whose step is exactly 2**k (exact ties at (q + 1/2) * S)."""
    eb = np.float32(2.0 ** (k - 1) * 256 / 255)
    while 2 * Fraction(float(eb)) * Fraction(255, 256) < Fraction(2) ** k:
        eb = np.nextafter(eb, F32(np.inf))
    return float(eb)


def params(eb_abs, max_abs=1.0, fill=np.nan):
    return quant_params(eb_abs, F32, max_abs, fill)


#: Bounds for unit-range fields (relative-ish), tiny and subnormal bounds, and huge ones.
BOUNDS = [2e-2, 1e-3, 1e-4, 1e-6, 2.0**-10, 0.375, 1e-30, 1e-40, 3e-45, 1e30, 3e38]


# -- cocotb tests -----------------------------------------------------------------------------

@cocotb.test()
async def quantizer_throughput(dut):
    """No stalls: a long smooth field leaves at one beat per clock, after a fixed latency."""
    tb = TB(dut)
    tb.set_stalls(None)
    await tb.reset()
    rng = np.random.default_rng(SEED)
    bits = smooth_bits(rng, 512 * tb.lanes)
    qp = params(1e-3)
    await tb.configure(qp)
    q, kind, raw, times = await tb.quantize(bits)
    compare(bits, qp, q, kind, raw, "throughput")
    cycles = (times[-1] - times[0]) / (PERIOD_NS * 1000) + 1  # sim_time is in ps
    assert cycles == len(times), f"{len(times)} beats took {cycles} clocks"
    cocotb.log.info("compared %d values; %d beats in %d clocks", len(bits), len(times), cycles)


@cocotb.test()
async def quantizer_adversarial(dut):
    """Random bit patterns and the special values, under every kind of bound."""
    tb = TB(dut)
    tb.set_stalls(SEED)
    await tb.reset()
    rng = np.random.default_rng(SEED + 10)
    total = 0
    for eb in BOUNDS:
        total += await tb.check(adversarial_bits(rng, 1024), params(eb), f"random eb={eb}")
    for max_abs in (1.0, 3e38, 1e-42, 0.0):
        qp = params(0.0, max_abs)
        total += await tb.check(adversarial_bits(rng, 1024), qp, f"random lossless {max_abs}")
    cocotb.log.info("compared %d values", total)


@cocotb.test()
async def quantizer_smooth(dut):
    """Field-like data: random walks at several scales and bounds, fill values mixed in."""
    tb = TB(dut)
    tb.set_stalls(SEED + 2)
    await tb.reset()
    rng = np.random.default_rng(SEED + 20)
    total = 0
    for eb, scale in [(2e-2, 1.0), (1e-4, 1.0), (1e-6, 1.0), (1e-3, 1e-38), (1e-2, 3e37)]:
        bits = smooth_bits(rng, 2048, scale)
        bits[rng.integers(0, len(bits), 64)] = f32_bits(-1e34)
        qp = params(eb * scale, scale, fill=-1e34)
        total += await tb.check(bits, qp, f"smooth eb={eb * scale:g}")
    bits = smooth_bits(rng, 2048, 1000.0)
    total += await tb.check(bits, params(0.0, 1000.0), "smooth lossless")
    cocotb.log.info("compared %d values", total)


@cocotb.test()
async def quantizer_boundaries(dut):
    """RNE ties of q and reconstructions exactly on the bound, and their neighbours."""
    tb = TB(dut)
    tb.set_stalls(SEED + 4)
    await tb.reset()
    rng = np.random.default_rng(SEED + 30)
    total = ties = on_bound = 0
    for eb in [pow2_step_bound(-8), pow2_step_bound(0), pow2_step_bound(-140), *BOUNDS]:
        qp = params(eb)
        tie = tie_bits(qp, rng, 512)
        edge = bound_bits(qp, rng, 400)
        hits = on_bound_count(edge, qp)
        ties += len(tie)
        on_bound += hits
        total += await tb.check(np.concatenate([tie, edge, limit_bits(qp)]), qp,
                                f"edges eb={eb:g} ({hits} on)")
    for max_abs in (1.0, 5e-39):
        qp = params(0.0, max_abs)
        tie = tie_bits(qp, rng, 512)
        ties += len(tie)
        total += await tb.check(tie, qp, f"ties lossless {max_abs}")
    assert ties > 1000 and on_bound > 100, (ties, on_bound)
    cocotb.log.info("compared %d values (%d exact RNE ties, %d exactly on the bound)",
                    total, ties, on_bound)


@cocotb.test()
async def quantizer_framing(dut):
    """Back-to-back chunks of lengths that are not a multiple of the lane count: every output
    beat keeps its ``last`` and ``count``, and only ``count`` lanes hold values."""
    tb = TB(dut)
    tb.set_stalls(SEED + 6)
    await tb.reset()
    rng = np.random.default_rng(SEED + 40)
    n = tb.lanes
    lengths = [1, n + 1, 2 * n + 3, max(n - 1, 1), 5 * n + n // 2 + 1]
    lengths += rng.integers(1, 8 * n + 8, 40).tolist()
    qp = params(1e-3, 2.0, fill=-1e34)
    await tb.configure(qp)
    chunks = [np.concatenate([smooth_bits(rng, length - length // 2, 2.0),
                              adversarial_bits(rng, length)[: length // 2]])
              for length in lengths]
    results, _ = await tb.quantize_chunks(chunks)
    total = partial = 0
    for k, (bits, (q, kind, raw)) in enumerate(zip(chunks, results, strict=True)):
        compare(bits, qp, q, kind, raw, f"chunk {k} of {len(bits)} values", log=False)
        total += len(bits)
        partial += len(bits) % n != 0
    cocotb.log.info("compared %d values in %d back-to-back chunks (%d with a partial last beat)",
                    total, len(chunks), partial)


# -- pytest wrapper ---------------------------------------------------------------------------

@pytest.mark.parametrize("lanes", LANES)
def test_quantizer(lanes):
    run_bench(Quantizer, name="quantizer", params={"lanes": lanes}, test_module=__name__)


@pytest.mark.parametrize("lanes", LANES)
def test_quantizer_raw_in_ram(lanes):
    """The input bits through block-RAM delay lines (the 16-lane build's choice) under the
    same stalls: the delay must hold with the pipeline's enable, or values come out wrong."""
    run_bench(Quantizer, name="quantizer", params={"lanes": lanes, "raw_in_ram": True},
              test_module=__name__)
