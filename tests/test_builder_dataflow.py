"""The on-chip codebook builder's dataflow (hw/ceaz_hw/builder.py, docs/hardware.md "Codebook
builder"), stepped in Python and checked against ceaz.huffman in milliseconds.

The RTL cannot run numpy's lexsorts: it makes one stable radix sort on complemented digits,
which gives the hand-out order (weight desc, symbol asc) and, read backwards, leaves ascending
by weight for the merge; it hands lengths out by cumulative counts and makes canonical codes
with per-length counters. Each function here is one RTL phase as the hardware steps it, so the
claims the RTL rests on (one sort serves both orders, no (length, symbol) sort, the Fibonacci
bound on the depth counters) are tested on many more histograms than the cocotb bench
(sim/test_builder.py, which checks the RTL itself) can afford. Returns clock estimates.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ceaz import format as fmt
from ceaz import huffman

pytest.importorskip("amaranth")
from ceaz_hw.builder import DIGIT_BITS, max_huffman_depth  # noqa: E402

#: Depth counters of the RTL: the deepest leaf of any histogram of a chunk (2**24 values).
DEPTH_COUNTERS = max_huffman_depth(fmt.MAX_CHUNK_VALUES + fmt.n_symbols(fmt.MAX_RADIUS),
                                   fmt.n_symbols(fmt.MAX_RADIUS)) + 1


def radix_sort(weights: np.ndarray) -> tuple[list[int], int]:
    """Symbols in (weight desc, symbol asc) order by stable LSD passes on complemented
    digits; and the clocks."""
    order = list(range(len(weights)))
    bits = max(int(weights.max()).bit_length(), 1)
    # One load counts every digit's buckets, one walk makes them all offsets.
    cycles = len(order) + (1 << DIGIT_BITS)
    mask = (1 << DIGIT_BITS) - 1
    for shift in range(0, bits, DIGIT_BITS):
        digit = [~(int(weights[s]) >> shift) & mask for s in order]
        start = np.concatenate(([0], np.cumsum(np.bincount(digit, minlength=1 << DIGIT_BITS))))
        out = [0] * len(order)
        for s, d in zip(order, digit, strict=True):  # scatter: stable within a bucket
            out[start[d]] = s
            start[d] += 1
        order = out
        cycles += len(order)  # scatter
    return order, cycles


def leaves_per_depth(ascending_weights: np.ndarray, counters: int) -> list[int]:
    """The merge and the depth pass as the RTL steps them: parents of internal nodes only,
    internal nodes counted per depth, then bl[d] = 2 inner[d - 1] - inner[d]."""
    leaf_w = [int(w) for w in ascending_weights]
    n = len(leaf_w)
    node_w: list[int] = []
    parent = [0] * (n - 1)  # of internal node j; the root (n - 2) has none
    leaf = node = 0
    for made in range(n - 1):
        pair = 0
        for _ in range(2):
            if leaf < n and (node == made or leaf_w[leaf] <= node_w[node]):
                pair += leaf_w[leaf]
                leaf += 1
            else:
                pair += node_w[node]
                parent[node] = made
                node += 1
        node_w.append(pair)
    depth = [0] * (n - 1)
    inner = [0] * counters
    inner[0] = 1
    for j in range(n - 3, -1, -1):
        depth[j] = depth[parent[j]] + 1
        inner[depth[j]] += 1
    return [0] + [2 * inner[d - 1] - (inner[d] if d < counters else 0)
                  for d in range(1, counters)]


def hand_out(order: list[int], bl_count: list[int], max_len: int) -> np.ndarray:
    """Lengths by symbol: the r-th symbol of the sorted order gets the length whose
    cumulative count first exceeds r (one compare per length, no walk)."""
    cum = np.cumsum(bl_count[: max_len + 1])
    lengths = np.zeros(len(order), dtype=np.uint8)
    for rank, sym in enumerate(order):
        lengths[sym] = 1 + sum(rank >= cum[k] for k in range(1, max_len))
    return lengths


def k3_limit(bl_count: list[int], max_len: int) -> tuple[list[int], int]:
    """JPEG K.3 as the RTL steps it: one move per clock at (level, shorter); the nearest
    non-empty level two or more above is searched (two clocks) only when it is not simply one
    above the last, and two clocks reload the count at ``level`` whenever ``level`` changes.
    Returns the limited counts and the clocks."""
    bl, level, clocks, shorter = list(bl_count), len(bl_count) - 1, 2, None
    while True:
        clocks += 1
        if shorter is None:
            if level <= max_len:
                return bl[: max_len + 1], clocks
            if bl[level] == 0:
                level -= 1
                clocks += 2
            else:  # the candidates, then the nearest of them
                shorter = max(k for k in range(level - 1) if bl[k] > 0)
                clocks += 1
            continue
        bl[level] -= 2
        bl[level - 1] += 1
        bl[shorter + 1] += 2
        bl[shorter] -= 1
        if bl[level] > 0 and shorter + 3 <= level:
            shorter += 1
        else:
            if bl[level] == 0:
                level -= 1
                clocks += 2
            shorter = None


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
    descending, cycles = radix_sort(weights)
    # Leaves ascending by weight = the sorted order backwards (ties in the other symbol order:
    # the depths' multiset depends on the weights only).
    depths = huffman._huffman_depths(weights[descending[::-1]])
    assert leaves_per_depth(weights[descending[::-1]], DEPTH_COUNTERS) == np.bincount(
        depths, minlength=DEPTH_COUNTERS).tolist()
    cycles += 4 * (n - 1) + (n - 2) + 5  # merge (two clocks per take, one fill), depths, leaves
    bl_count = np.bincount(depths, minlength=DEPTH_COUNTERS)
    assert len(bl_count) == DEPTH_COUNTERS, "more depth counters needed"
    limited, limit_clocks = k3_limit(bl_count.tolist(), max_len)
    assert limited == huffman._limit_counts(bl_count.tolist(), max_len)
    cycles += limit_clocks
    lengths = hand_out(descending, limited, max_len)
    cycles += max_len + n + n  # cumulate, hand-out, code + bank write
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
def test_dataflow_matches_model(radius, seed):
    for name, hist in _cases(radius, seed).items():
        cycles = _check(hist)
        if radius == 512 and name != "offline":  # the offline counts exceed a chunk
            assert cycles < CHUNK // 16, f"{name}: {cycles} cycles over the N=16 budget"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=18, max_size=18))
def test_dataflow_matches_model_small_alphabet(counts):
    _check(np.array(counts, dtype=np.uint64))
