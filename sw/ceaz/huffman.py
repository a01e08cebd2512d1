"""Canonical, length-limited Huffman codebooks: construction, codes and decoding tables.

The construction is specified step by step in docs/format.md ("Codebook construction")
because the RTL builds the same books on chip: every tie is broken by symbol index, so a
histogram determines its code lengths exactly. Hand-written (no library) for that reason.
"""

from __future__ import annotations

import heapq
import math
from functools import cache, lru_cache
from importlib import resources

import numpy as np

from . import format as fmt


def weights_from_histogram(hist: np.ndarray) -> np.ndarray:
    """Add-one smoothing: every symbol keeps a code, so any chunk can be coded with any book."""
    return np.asarray(hist, dtype=np.uint64) + np.uint64(1)


def _huffman_depths(weights: np.ndarray) -> np.ndarray:
    """Leaf depths of the two-queue Huffman tree, leaves in (weight, symbol) ascending order."""
    n = len(weights)
    order = np.lexsort((np.arange(n), weights))
    leaf_w = [int(v) for v in weights[order]]
    node_w: list[int] = []
    parent = [0] * (2 * n - 1)  # leaves 0..n-1 (sorted order), internal nodes n..2n-2
    i = j = 0

    def take() -> tuple[int, int]:
        nonlocal i, j
        if i < n and (j >= len(node_w) or leaf_w[i] <= node_w[j]):
            i += 1
            return i - 1, leaf_w[i - 1]
        j += 1
        return n + j - 1, node_w[j - 1]

    for _ in range(n - 1):
        a, wa = take()
        b, wb = take()
        parent[a] = parent[b] = n + len(node_w)
        node_w.append(wa + wb)
    depth = [0] * (2 * n - 1)
    for k in range(2 * n - 3, -1, -1):  # parents are created after their children
        depth[k] = depth[parent[k]] + 1
    return np.array(depth[:n], dtype=np.int64)


def _limit_counts(bl_count: list[int], max_len: int) -> list[int]:
    """Move leaves above max_len up the tree (JPEG Annex K.3); keeps the code complete."""
    for i in range(len(bl_count) - 1, max_len, -1):
        while bl_count[i] > 0:
            j = i - 2
            while bl_count[j] == 0:
                j -= 1
            bl_count[i] -= 2
            bl_count[i - 1] += 1
            bl_count[j + 1] += 2
            bl_count[j] -= 1
    return bl_count[: max_len + 1]


def code_lengths(weights: np.ndarray, max_len: int = fmt.MAX_CODE_LEN) -> np.ndarray:
    """Code length per symbol (uint8) for positive integer weights.

    1. Huffman depths by the two-queue method on (weight, symbol) ascending order, a leaf
       winning ties against an internal node.
    2. Count leaves per depth and limit the depth to max_len (JPEG Annex K.3).
    3. Hand the lengths out shortest first in (weight descending, symbol ascending) order.
    """
    weights = np.asarray(weights, dtype=np.uint64)
    n = len(weights)
    if n < 2 or (1 << max_len) < n:
        raise ValueError(f"cannot code {n!r} symbols with codes of at most {max_len!r} bits")
    if (weights == 0).any() or int(weights.max()) >= 1 << 62:
        raise ValueError("weights must be in [1, 2**62) (apply weights_from_histogram)")
    depths = _huffman_depths(weights)
    bl_count = np.bincount(depths, minlength=max_len + 1).tolist()
    bl_count = _limit_counts(bl_count, max_len)
    ranked = np.lexsort((np.arange(n), -weights.astype(np.int64)))
    lengths = np.zeros(n, dtype=np.uint8)
    lengths[ranked] = np.repeat(np.arange(max_len + 1, dtype=np.uint8), bl_count)
    return lengths


def entropy_bits(hist: np.ndarray) -> float:
    """Empirical entropy of the counted symbols, in bits for all of them: sum n log2(N / n),
    the ideal any code for them is measured against (the benchmarks)."""
    hist = np.asarray(hist)
    nz = hist[hist > 0].astype(np.float64)
    return float((nz * np.log2(nz.sum() / nz)).sum())


def unrestricted_bits(hist: np.ndarray) -> int:
    """Total bits of an optimal Huffman code for the counted symbols with no length limit (the
    sum of every merge's weight): the floor any prefix code for them is measured against (the
    benchmarks), and an independent check of `code_lengths` (tests)."""
    heap = [int(c) for c in np.asarray(hist).ravel() if c > 0]
    if len(heap) < 2:
        return sum(heap)
    heapq.heapify(heap)
    total = 0
    while len(heap) > 1:
        merged = heapq.heappop(heap) + heapq.heappop(heap)
        total += merged
        heapq.heappush(heap, merged)
    return total


def canonical_codes(lengths: np.ndarray) -> np.ndarray:
    """Canonical code words (uint32, MSB-first) for (length, symbol) ascending order."""
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.lexsort((np.arange(len(lengths)), lengths))
    codes = np.zeros(len(lengths), dtype=np.uint32)
    code, prev = 0, int(lengths[order[0]])
    for s in order:
        ln = int(lengths[s])
        code <<= ln - prev
        codes[s] = code
        code += 1
        prev = ln
    return codes


def entry_words(lengths: np.ndarray) -> np.ndarray:
    """A book's entries as the hardware takes them, one CB_DATA write per symbol: the canonical
    code in the low ``MAX_CODE_LEN`` bits and its length in the ``CODE_LENGTH_BITS`` above."""
    lengths = np.asarray(lengths)
    if len(lengths) and (lengths.min() < 0 or lengths.max() > fmt.MAX_CODE_LEN):
        raise ValueError(f"code lengths must be 0..{fmt.MAX_CODE_LEN}")
    return canonical_codes(lengths) | lengths.astype(np.uint32) << np.uint32(fmt.MAX_CODE_LEN)


def is_complete(lengths: np.ndarray, max_len: int = fmt.MAX_CODE_LEN) -> bool:
    """True for a prefix code that fills the code space exactly (Kraft sum 1)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if len(lengths) < 2 or lengths.min() < 1 or lengths.max() > max_len:
        return False
    return int(np.sum(np.left_shift(1, max_len - lengths))) == 1 << max_len


def decode_table(lengths: np.ndarray, max_len: int = fmt.MAX_CODE_LEN) -> np.ndarray:
    """Lookup table over the next max_len bits: entry = symbol << 8 | length (uint32)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    codes = canonical_codes(lengths).astype(np.int64)
    span = np.left_shift(1, max_len - lengths)
    order = np.argsort(codes << (max_len - lengths), kind="stable")
    entries = (np.arange(len(lengths), dtype=np.uint32) << 8) | lengths.astype(np.uint32)
    table = np.repeat(entries[order], span[order])
    if len(table) != 1 << max_len:
        raise ValueError("code lengths do not form a complete prefix code")
    return table


# --- offline codebooks ---------------------------------------------------------------------

OFFLINE_RESOURCE = "offline_histogram.npz"


@cache
def _offline_data() -> tuple[np.ndarray, int, int, int]:
    with resources.files("ceaz.data").joinpath(OFFLINE_RESOURCE).open("rb") as f:
        z = np.load(f)
        return z["delta_hist"], int(z["beyond"]), int(z["verbatim"]), int(z["fill"])


def offline_histogram(radius: int) -> np.ndarray:
    """The shipped training histogram folded onto the alphabet of the given radius.

    delta_hist counts residuals -H..H (H = MAX_RADIUS); residuals outside +-(radius-1) fold
    into the outlier symbol. Reproduce the file with `python -m ceaz.train`.
    """
    delta_hist, beyond, verbatim, fill = _offline_data()
    h = (len(delta_hist) - 1) // 2
    hist = np.zeros(fmt.n_symbols(radius), dtype=np.uint64)
    inner = delta_hist[h - radius + 1 : h + radius]
    hist[1 : 2 * radius] = inner
    hist[fmt.SYM_OUTLIER] = np.uint64(int(delta_hist.sum()) - int(inner.sum()) + beyond)
    hist[fmt.sym_verbatim(radius)] = verbatim
    hist[fmt.sym_fill(radius)] = fill
    return hist


@lru_cache(maxsize=64)
def offline_lengths(radius: int) -> np.ndarray:
    """Code lengths of the trained offline book: book 0 of the family (`offline_book`)."""
    lengths = code_lengths(weights_from_histogram(offline_histogram(radius)))
    lengths.flags.writeable = False
    return lengths


# --- the family of offline books -----------------------------------------------------------
#
# One trained book cannot fit fields whose residual entropy ranges from 1 to 9 bits/value, so
# the encoder picks, from chunk 0's own histogram, one of a fixed family of books for the
# chunks before adaptation. docs/format.md ("The offline books") specifies the construction;
# every step is integer arithmetic, so any encoder rebuilds the same books.

#: Books 1..WIDENED: the trained shape widened by 2**(k/2), k = 1..WIDENED.
WIDENED = 6
#: Then GEOMETRIC two-sided geometric books, decay 1 - 2**(-j/2) per step, j = 1..GEOMETRIC.
GEOMETRIC = 18
#: Fixed-point unit of the geometric decay and of the widening factor.
_ONE = 1 << 16
#: Weight of residual 0 in a geometric book; the escape floor is this >> _ESCAPE_SHIFT.
_GEO_PEAK = 1 << 40
_ESCAPE_SHIFT = 14


def n_offline_books() -> int:
    """Size of the family: the trained book, its widened copies, the geometric books."""
    return 1 + WIDENED + GEOMETRIC


def _widened_histogram(radius: int, k: int) -> np.ndarray:
    """The trained residual counts stretched 2**(k/2) times wider: residual d takes the count
    of trained residual sign(d) * floor(|d| / f), f = isqrt(2**(32 + k)) / 2**16."""
    delta_hist, beyond, verbatim, fill = _offline_data()
    h = (len(delta_hist) - 1) // 2
    f = math.isqrt(1 << (32 + k))
    t = np.arange(radius, dtype=np.int64) * _ONE // f  # trained residual of |d| = 0..R-1
    hist = np.zeros(fmt.n_symbols(radius), dtype=np.uint64)
    hist[radius : 2 * radius] = delta_hist[h + t]
    hist[1 : radius + 1] = delta_hist[h - t[::-1]]
    edge = int(t[-1]) + 1  # trained residuals beyond the stretched band fold into the outlier
    tail = int(delta_hist[: h - edge + 1].sum()) + int(delta_hist[h + edge :].sum())
    hist[fmt.SYM_OUTLIER] = np.uint64(tail * f // _ONE + beyond)
    hist[fmt.sym_verbatim(radius)] = verbatim
    hist[fmt.sym_fill(radius)] = fill
    return hist


def _geometric_histogram(radius: int, j: int) -> np.ndarray:
    """Two-sided geometric weights: w(0) = 2**40, w(|d|) = w(|d| - 1) * a >> 16 with
    a = 2**16 - isqrt(2**(32 - j)); the outlier takes the tail beyond the radius, and every
    escape a floor of w(0) >> 14 so that no escape costs the maximum length."""
    a = _ONE - math.isqrt(1 << (32 - j))
    w = np.zeros(radius + 1, dtype=object)
    w[0] = _GEO_PEAK
    for d in range(1, radius + 1):
        w[d] = w[d - 1] * a >> 16
    floor = _GEO_PEAK >> _ESCAPE_SHIFT
    hist = np.zeros(fmt.n_symbols(radius), dtype=np.uint64)
    inner = w[:radius].astype(np.uint64)
    hist[radius : 2 * radius] = inner
    hist[1 : radius + 1] = inner[::-1]
    hist[fmt.SYM_OUTLIER] = 2 * (int(w[radius]) * _ONE // (_ONE - a)) + floor
    hist[fmt.sym_verbatim(radius)] = floor
    hist[fmt.sym_fill(radius)] = floor
    return hist


def _check_book_index(index: int) -> None:
    if not 0 <= index < n_offline_books():
        raise ValueError(f"offline book index must be in [0, {n_offline_books()}), got {index!r}")


def offline_book_histogram(radius: int, index: int) -> np.ndarray:
    """The histogram that builds book ``index`` of the family (0 = the trained histogram)."""
    _check_book_index(index)
    if index == 0:
        return offline_histogram(radius)
    if index <= WIDENED:
        return _widened_histogram(radius, index)
    return _geometric_histogram(radius, index - WIDENED)


@lru_cache(maxsize=64)
def _family(radius: int) -> np.ndarray:
    """Every book of the family as rows of one read-only (books, symbols) uint8 array.

    Built with the compiled `code_lengths` (the same lengths; tests check it), because this
    module's pure-Python build takes seconds for 24 books at the largest radius."""
    from . import _jit  # imports this module, so not at the top

    books = [offline_lengths(radius)] + [
        _jit.code_lengths(weights_from_histogram(offline_book_histogram(radius, i)))
        for i in range(1, n_offline_books())
    ]
    family = np.stack(books)
    family.flags.writeable = False
    return family


def offline_book(radius: int, index: int) -> np.ndarray:
    """Code lengths of book ``index`` of the family (read-only; book 0 is `offline_lengths`)."""
    _check_book_index(index)
    return _family(radius)[index]


def pick_offline_book(hist: np.ndarray, radius: int) -> int:
    """The family book that codes ``hist`` in the fewest bits (ties: the lowest index)."""
    hist = np.asarray(hist, dtype=np.int64)
    if hist.shape != (fmt.n_symbols(radius),) or (hist < 0).any():
        raise ValueError(f"need {fmt.n_symbols(radius)} non-negative symbol counts for radius "
                         f"{radius}, got shape {hist.shape!r}")
    return int(np.argmin(_family(radius).astype(np.int64) @ hist))
