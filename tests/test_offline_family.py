"""The family of offline books and the pick of the first chunks' book: deterministic complete
codes, book 0 the trained book, the pick the cheapest book, and the codec and the driver's
schedule coding the first chunks with the book picked from chunk 0."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ceaz import codec, huffman, tiling
from ceaz import format as fmt
from ceaz.chunk import Coding
from ceaz.codec import Settings, StreamReader

RADII = (2, 3, 16, 512)


@pytest.mark.parametrize("radius", RADII)
def test_every_book_is_a_complete_code_and_book_0_is_the_trained_book(radius):
    assert np.array_equal(huffman.offline_book(radius, 0), huffman.offline_lengths(radius))
    for i in range(huffman.n_offline_books()):
        book = huffman.offline_book(radius, i)
        assert book.shape == (fmt.n_symbols(radius),) and not book.flags.writeable
        assert huffman.is_complete(book), i


@pytest.mark.parametrize("radius", RADII)
def test_the_family_is_deterministic_and_built_by_the_normal_construction(radius):
    """The cached books (compiled build) equal this module's reference build, afresh."""
    huffman._family.cache_clear()
    for i in range(huffman.n_offline_books()):
        hist = huffman.offline_book_histogram(radius, i)
        rebuilt = huffman.code_lengths(huffman.weights_from_histogram(hist))
        assert np.array_equal(rebuilt, huffman.offline_book(radius, i))


def test_the_family_spans_narrow_to_wide_fields():
    """Mean code length of each book under its own histogram: from about 2 to 9 bits/value at
    the default radius, so a chunk of any spread finds a book near its entropy."""
    means = []
    for i in range(huffman.n_offline_books()):
        hist = huffman.offline_book_histogram(512, i).astype(np.float64)
        means.append(float(hist @ huffman.offline_book(512, i) / hist.sum()))
    assert min(means) < 2.5 and max(means) > 9


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(RADII), st.integers(0, 2**32 - 1), st.floats(0.05, 400.0))
def test_pick_is_the_cheapest_book_lowest_index_on_ties(radius, seed, width):
    rng = np.random.default_rng(seed)
    n = fmt.n_symbols(radius)
    p = np.exp(-np.abs(np.arange(n) - radius) / width)
    hist = rng.multinomial(int(rng.integers(0, 100_000)), p / p.sum())
    costs = [int(hist @ huffman.offline_book(radius, i).astype(np.int64))
             for i in range(huffman.n_offline_books())]
    k = huffman.pick_offline_book(hist, radius)
    assert costs[k] == min(costs) and k == costs.index(min(costs))


def test_an_empty_histogram_picks_book_0():
    assert huffman.pick_offline_book(np.zeros(fmt.n_symbols(16), np.int64), 16) == 0


def test_bad_index_and_histogram_are_refused():
    with pytest.raises(ValueError, match="index"):
        huffman.offline_book(16, huffman.n_offline_books())
    with pytest.raises(ValueError, match="counts"):
        huffman.pick_offline_book(np.zeros(5, np.int64), 16)


def _field(shape, scale, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (np.cumsum(rng.standard_normal(shape), axis=-1) * scale).astype(np.float32)


@pytest.mark.parametrize("lag", [0, 1, 2])
@pytest.mark.parametrize("eb", [1e-1, 1e-3, 1e-5])
def test_the_first_chunks_use_the_book_picked_from_chunk_0(lag, eb):
    x = _field((6, 64, 64), 1.0)
    s = Settings(chunk_values=4096, adapt_lag=lag)
    data = codec.compress(x, eb, "rel", s)
    reader = StreamReader.from_bytes(data)
    h = reader.header
    coding = Coding(h.qparams, h.radius, h.sync_interval)
    box = reader.boxes[0]
    values = np.ascontiguousarray(x.reshape(h.shape3)[box.slices])
    pick = codec.first_book(values, box, coding)
    hist = codec.code_chunk(values, box, coding, huffman.offline_lengths(h.radius)).hist
    assert pick == huffman.pick_offline_book(hist, h.radius)
    first = huffman.offline_book(h.radius, pick)
    n_first = h.n_chunks if lag == 0 else lag
    for i in range(n_first):
        assert np.array_equal(reader.chunk(i).payload.lengths, first), i
    np.testing.assert_allclose(codec.decompress(data), x, atol=eb * np.ptp(x) * 1.0001)


def test_the_pick_follows_the_field_spread():
    """A tight bound makes wide residuals, a loose one narrow residuals: different books."""
    x = _field((4, 64, 64), 1.0)
    s = Settings(chunk_values=4096)
    picks = set()
    for eb in (1e-1, 1e-4):
        h = codec.make_header(x, eb, "rel", s)
        coding = Coding(h.qparams, h.radius, h.sync_interval)
        box = next(iter(tiling.boxes(h.shape3, h.chunk)))
        picks.add(codec.first_book(np.ascontiguousarray(x.reshape(h.shape3)[box.slices]),
                                   box, coding))
    assert len(picks) == 2


def test_the_picked_book_codes_a_wide_field_in_fewer_bits_than_the_trained_book():
    x = _field((8, 64, 64), 1.0)
    h = codec.make_header(x, 1e-5, "rel", Settings(chunk_values=1 << 16))
    coding = Coding(h.qparams, h.radius, h.sync_interval)
    box = next(iter(tiling.boxes(h.shape3, h.chunk)))
    values = np.ascontiguousarray(x.reshape(h.shape3)[box.slices])
    pick = codec.first_book(values, box, coding)
    bits = [codec.code_chunk(values, box, coding, huffman.offline_book(h.radius, i)).payload_bits
            for i in (0, pick)]
    assert pick != 0 and bits[1] < 0.9 * bits[0]


def _spec_histogram(radius: int, index: int) -> list[int]:
    """docs/format.md section 7 ("The offline books"), transcribed with plain ints."""
    from math import isqrt

    t_hist, beyond, verbatim, fill = (np.asarray(v).tolist() for v in huffman._offline_data())
    big = (len(t_hist) - 1) // 2

    def T(t: int) -> int:
        return t_hist[big + t]

    h = [0] * (2 * radius + 2)
    if index == 0:
        for d in range(-radius + 1, radius):
            h[radius + d] = T(d)
        h[0] = sum(t_hist) - sum(h) + beyond
        h[2 * radius], h[2 * radius + 1] = verbatim, fill
    elif index <= 6:
        f = isqrt(2 ** (32 + index))
        for d in range(radius):
            h[radius + d] = T(d * 2**16 // f)
            h[radius - d] = T(-(d * 2**16 // f))
        e = (radius - 1) * 2**16 // f + 1
        tail = sum(T(t) for t in range(-big, big + 1) if abs(t) >= e)
        h[0] = f * tail // 2**16 + beyond
        h[2 * radius], h[2 * radius + 1] = verbatim, fill
    else:
        a = 2**16 - isqrt(2 ** (32 - (index - 6)))
        w = [2**40]
        for _ in range(radius):
            w.append(w[-1] * a >> 16)
        for d in range(radius):
            h[radius + d] = h[radius - d] = w[d]
        floor = 2**40 >> 14
        h[0] = 2 * (w[radius] * 2**16 // (2**16 - a)) + floor
        h[2 * radius] = h[2 * radius + 1] = floor
    return h


@pytest.mark.parametrize("radius", [2, 16, 512])
def test_the_spec_in_format_md_rebuilds_every_book(radius):
    for i in range(huffman.n_offline_books()):
        spec = np.array(_spec_histogram(radius, i), dtype=np.uint64)
        assert np.array_equal(spec, huffman.offline_book_histogram(radius, i)), i
        lengths = huffman.code_lengths(huffman.weights_from_histogram(spec))
        assert np.array_equal(lengths, huffman.offline_book(radius, i)), i
