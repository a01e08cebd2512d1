"""The strategy functions of bench/construction.py, which docs/adaptation.md's decision rests on:
the reference really is the best book for a chunk, rank reassignment really is a complete code,
and the bench's lagged schedule and escape bits are the codec's own."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from ceaz import codec, datasets, huffman
from ceaz import format as fmt

_PATH = Path(__file__).resolve().parent.parent / "bench" / "construction.py"
_spec = importlib.util.spec_from_file_location("bench_construction", _PATH)
construction = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(construction)

RADIUS = 8  # 18 symbols: small enough that the 16-bit limit never binds below


def _histograms(n: int, seed: int) -> list[np.ndarray]:
    """Peaked, flat, sparse and shifted histograms over the alphabet of RADIUS."""
    rng = np.random.default_rng(seed)
    nsym = fmt.n_symbols(RADIUS)
    out = []
    for _ in range(n):
        centre = RADIUS + int(rng.integers(-3, 4))
        width = float(rng.uniform(0.3, 6.0))
        p = np.exp(-np.abs(np.arange(nsym) - centre) / width)
        hist = rng.multinomial(int(rng.integers(1, 5000)), p / p.sum())
        hist[rng.random(nsym) < 0.2] = 0
        out.append(hist.astype(np.int64))
    return out


def _cost(weights: np.ndarray, lengths: np.ndarray) -> int:
    return int(weights.astype(np.int64) @ lengths.astype(np.int64))


def test_optimal_is_never_worse_on_the_chunks_own_weights():
    hists = _histograms(40, seed=1)
    books = {s: f(hists, RADIUS) for s, f in construction.STRATEGIES.items()}
    for k, hist in enumerate(hists):
        w = huffman.weights_from_histogram(hist)  # what the construction minimises
        best = books["optimal"][k]
        assert best.max() < fmt.MAX_CODE_LEN  # unlimited Huffman, so optimal over all codes
        for name, chunk_books in books.items():
            assert huffman.is_complete(chunk_books[k]), name
            assert _cost(w, best) <= _cost(w, chunk_books[k]), (name, k)


def test_rank_reassignment_permutes_the_offline_profile_into_a_complete_code():
    profile = np.sort(huffman.offline_lengths(RADIUS))
    for hist in _histograms(40, seed=2):
        lengths = construction.rank_reassign(hist, RADIUS)
        assert np.array_equal(np.sort(lengths), profile)
        assert huffman.is_complete(lengths)
        # shortest first by (count descending, symbol ascending): deterministic, ties by index
        order = np.lexsort((np.arange(len(hist)), -hist))
        assert np.all(np.diff(lengths[order].astype(int)) >= 0)


def test_rank_reassignment_breaks_ties_by_symbol_index():
    hist = np.zeros(fmt.n_symbols(RADIUS), dtype=np.int64)
    lengths = construction.rank_reassign(hist, RADIUS)
    assert np.array_equal(lengths, np.sort(huffman.offline_lengths(RADIUS)))


@pytest.mark.parametrize("lag", [0, 1, 2])
def test_full_lagged_books_are_the_codecs_schedule(lag):
    hists = _histograms(6, seed=3)
    books = construction.lagged_books(hists, RADIUS, lag, construction.full_build)
    schedule = codec.CodebookSchedule(RADIUS, lag)
    schedule.first = huffman.pick_offline_book(hists[0], RADIUS)  # what first_book picks
    for k, hist in enumerate(hists):
        if lag == 0:  # the schedule's lag 0 is the first book; the bench's is the reference
            assert np.array_equal(books[k], huffman.code_lengths(hist.astype(np.uint64) + 1))
        else:
            assert np.array_equal(books[k], schedule.next_lengths(None, None, None))
        schedule.observe(hist.astype(np.uint64))


def test_histograms_and_escape_bits_match_the_stream():
    x = datasets.gaussian_random_field((32, 32, 32), slope=-2.0, seed=4)
    x[0, 0, :5] = np.inf  # verbatim values: escape bits the bench must count
    settings = codec.Settings(chunk_values=4096)
    radius, hists, raw = construction.chunk_histograms(x, 1e-4, settings)
    reader = codec.StreamReader.from_bytes(codec.compress(x, 1e-4, "rel", settings))
    assert radius == reader.header.radius and len(hists) == len(reader.boxes) > 2
    code = 0
    for k, hist in enumerate(hists):
        info = reader.chunk(k)
        assert not info.payload.stored
        code += _cost(hist, info.payload.lengths)
        assert hist.sum() == reader.boxes[k].size
    assert raw > 0
    assert code + raw == sum(reader.chunk(k).payload.payload_bits for k in range(len(hists)))
    bits = {s: sum(construction.code_bits(hists, f(hists, radius)))
            for s, f in construction.STRATEGIES.items()}
    assert bits["full lag1"] == code  # the default stream is the `full lag1` strategy
    assert min(bits.values()) == bits["optimal"]
