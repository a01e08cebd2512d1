"""The on-chip codebook builder's dataflow (docs/hardware.md, "Codebook builder"), checked
against ceaz.huffman before any RTL exists.

The RTL cannot run numpy's lexsorts; it uses stable radix passes, derives the hand-out order
from the one sorted order, and makes canonical codes with per-length counters. Each function
here is one RTL phase written the way the hardware will step it, so the claims the plan rests
on (no second sort needed, no (length, symbol) sort needed, 32 depth counters suffice) are
tested on the same histograms the bench will use. Returns cycle estimates of each phase.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ceaz import format as fmt
from ceaz import huffman

DIGIT_BITS = 10  # radix digit: 1024 buckets = one BRAM of counters
DEPTH_COUNTERS = 32  # bl_count entries before the K.3 limit


def radix_sort(weights: np.ndarray) -> tuple[list[int], int]:
    """Symbols in (weight, symbol) ascending order by stable LSD passes; and the cycles."""
    order = list(range(len(weights)))
    bits = max(int(weights.max()).bit_length(), 1)
    cycles = len(order)  # one counting pass fills every digit's bucket counters at once
    for shift in range(0, bits, DIGIT_BITS):
        digit = [(int(weights[s]) >> shift) & ((1 << DIGIT_BITS) - 1) for s in order]
        start = np.concatenate(([0], np.cumsum(np.bincount(digit, minlength=1 << DIGIT_BITS))))
        out = [0] * len(order)
        for s, d in zip(order, digit, strict=True):  # scatter: stable within a bucket
            out[start[d]] = s
            start[d] += 1
        order = out
        cycles += (1 << DIGIT_BITS) + len(order)  # prefix sums, scatter
    return order, cycles


def hand_out_order(ascending: list[int], weights: np.ndarray) -> list[int]:
    """(weight desc, symbol asc) from the (weight, symbol) ascending order: walk it backwards
    group by group of equal weight, each group read forwards (one pass, no second sort)."""
    out: list[int] = []
    end = len(ascending)
    while end > 0:
        begin = end - 1
        while begin > 0 and weights[ascending[begin - 1]] == weights[ascending[end - 1]]:
            begin -= 1
        out.extend(ascending[begin:end])
        end = begin
    return out


def k3_moves(bl_count: list[int], max_len: int) -> int:
    """Moves of the K.3 limit: one cycle each, as bl_count is 32 registers and the nearest
    non-empty shorter level is a priority encoder, not a walk."""
    moves = 0
    for i in range(len(bl_count) - 1, max_len, -1):
        while bl_count[i] > 0:
            j = max(k for k in range(i - 1) if bl_count[k] > 0)
            bl_count[i] -= 2
            bl_count[i - 1] += 1
            bl_count[j + 1] += 2
            bl_count[j] -= 1
            moves += 1
    return moves


def codes_by_counters(lengths: np.ndarray, max_len: int) -> np.ndarray:
    """Canonical codes in symbol order with one next-code counter per length (no sort)."""
    bl_count = np.bincount(lengths, minlength=max_len + 1)
    bl_count[0] = 0
    next_code, code = [0] * (max_len + 1), 0
    for length in range(1, max_len + 1):
        code = (code + int(bl_count[length - 1])) << 1
        next_code[length] = code
    codes = np.zeros(len(lengths), dtype=np.uint32)
    for s, length in enumerate(lengths):
        codes[s] = next_code[length]
        next_code[length] += 1
    return codes


def build(hist: np.ndarray, max_len: int = fmt.MAX_CODE_LEN) -> tuple[np.ndarray, np.ndarray,
                                                                        int]:
    """Lengths, codes and an estimate of the RTL's cycles, phase by phase."""
    weights = huffman.weights_from_histogram(hist)
    n = len(weights)
    ascending, cycles = radix_sort(weights)
    sorted_weights = weights[ascending]
    depths = huffman._huffman_depths(sorted_weights)  # leaves already in sorted order
    cycles += (n - 1) + (2 * n - 2)  # merge (both heads prefetched), backward depth pass
    bl_count = np.bincount(depths, minlength=DEPTH_COUNTERS)
    assert len(bl_count) == DEPTH_COUNTERS, "more depth counters needed"
    limited = huffman._limit_counts(bl_count.tolist(), max_len)
    cycles += k3_moves(bl_count.tolist(), max_len) + DEPTH_COUNTERS
    lengths = np.zeros(n, dtype=np.uint8)
    lengths[hand_out_order(ascending, weights)] = np.repeat(
        np.arange(max_len + 1, dtype=np.uint8), limited)
    cycles += n + max_len + n  # hand-out, next-code counters, code + bank write
    return lengths, codes_by_counters(lengths, max_len), cycles


def _check(hist: np.ndarray) -> int:
    want = huffman.code_lengths(huffman.weights_from_histogram(hist))
    lengths, codes, cycles = build(hist)
    np.testing.assert_array_equal(lengths, want)
    np.testing.assert_array_equal(codes, huffman.canonical_codes(want))
    return cycles


CHUNK = 1 << 18


def _cases(radius: int, seed: int) -> dict[str, np.ndarray]:
    n = fmt.n_symbols(radius)
    rng = np.random.default_rng(seed)
    geometric = np.minimum(CHUNK >> np.minimum(np.arange(n), 62), CHUNK).astype(np.uint64)
    one = np.zeros(n, dtype=np.uint64)
    one[rng.integers(n)] = CHUNK
    return {
        "ties": rng.integers(0, 4, n).astype(np.uint64),
        "single": one,
        "equal": np.full(n, CHUNK // n, dtype=np.uint64),
        "distinct": rng.permutation(n).astype(np.uint64),
        "geometric": geometric,
        "multinomial": rng.multinomial(CHUNK, rng.dirichlet(np.full(n, 0.05))).astype(
            np.uint64),
        "offline": huffman.offline_histogram(radius),
    }


@pytest.mark.parametrize("radius", [8, 512])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_plan_matches_model(radius, seed):
    for name, hist in _cases(radius, seed).items():
        cycles = _check(hist)
        if radius == 512 and name != "offline":  # the offline counts exceed a chunk
            assert cycles < CHUNK // 16, f"{name}: {cycles} cycles over the N=16 budget"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=18, max_size=18))
def test_plan_matches_model_small_alphabet(counts):
    _check(np.array(counts, dtype=np.uint64))
