"""The code construction of ``ceaz.huffman`` (docs/format.md, "Codebook construction"), checked
against properties any canonical length-limited Huffman code has and against the independent
heap-built Huffman cost (``unrestricted_bits``), on arbitrary histograms; and the CB_DATA
layout of a book's entries."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ceaz import format as fmt
from ceaz import huffman, regmap

histograms = st.lists(st.integers(0, 10**9), min_size=2, max_size=300).map(np.array)


@settings(max_examples=200, deadline=None)
@given(histograms)
def test_lengths_are_complete_optimal_when_the_limit_does_not_bind_and_deterministic(hist):
    weights = huffman.weights_from_histogram(hist)
    lengths = huffman.code_lengths(weights)
    assert lengths.dtype == np.uint8 and huffman.is_complete(lengths)
    assert np.array_equal(lengths, huffman.code_lengths(weights.copy()))
    # A heavier symbol never gets a longer code; equal weights go shortest to the lower index.
    order = np.lexsort((np.arange(len(weights)), -weights.astype(np.int64)))
    assert (np.diff(lengths[order].astype(int)) >= 0).all()
    unconstrained = huffman.code_lengths(weights, max_len=64) if len(weights) < 64 else None
    if unconstrained is not None and unconstrained.max() <= fmt.MAX_CODE_LEN:
        cost = int(weights.astype(object) @ lengths.astype(object))
        assert cost == huffman.unrestricted_bits(weights)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 2**40), min_size=2, max_size=16), st.integers(4, 8))
def test_a_binding_limit_still_gives_a_complete_code(weights, max_len):
    lengths = huffman.code_lengths(np.array(weights, dtype=np.uint64), max_len=max_len)
    assert lengths.max() <= max_len and huffman.is_complete(lengths, max_len)


@settings(max_examples=100, deadline=None)
@given(histograms, st.integers(0, 2**32 - 1))
def test_canonical_codes_are_prefix_free_and_the_table_decodes_them(hist, seed):
    lengths = huffman.code_lengths(huffman.weights_from_histogram(hist))
    codes = huffman.canonical_codes(lengths)
    # Left-aligned to 16 bits, the codes sort in (length, symbol) order and never nest.
    aligned = codes.astype(np.int64) << (fmt.MAX_CODE_LEN - lengths.astype(np.int64))
    order = np.lexsort((np.arange(len(lengths)), lengths))
    assert (np.diff(aligned[order]) > 0).all()
    ends = aligned[order] + (1 << (fmt.MAX_CODE_LEN - lengths[order].astype(np.int64)))
    assert (ends[:-1] <= aligned[order][1:]).all()
    table = huffman.decode_table(lengths)
    symbols = np.random.default_rng(seed).integers(0, len(lengths), 50)
    for s in symbols:
        entry = int(table[int(aligned[s])])
        assert (entry >> 8, entry & 0xFF) == (s, lengths[s])


def test_incomplete_lengths_are_rejected():
    assert not huffman.is_complete(np.array([1, 2]))
    with pytest.raises(ValueError, match="complete prefix code"):
        huffman.decode_table(np.array([1, 2]))
    with pytest.raises(ValueError, match="weights"):
        huffman.code_lengths(np.array([0, 1]))
    with pytest.raises(ValueError, match="cannot code"):
        huffman.code_lengths(np.ones(17), max_len=4)


@pytest.mark.parametrize("radius", (2, 3, 16, 512))
def test_entry_words_are_the_cb_data_layout(radius):
    """The words the driver, the benches and the self-test write to CB_DATA: the canonical
    code in bits 15:0 and its length above, as the register map documents."""
    assert "bits 15:0" in regmap.by_name("CB_DATA").doc and fmt.MAX_CODE_LEN == 16
    assert "bits 20:16" in regmap.by_name("CB_DATA").doc and fmt.CODE_LENGTH_BITS == 5
    for i in (0, huffman.n_offline_books() - 1):
        book = huffman.offline_book(radius, i)
        words = huffman.entry_words(book)
        assert np.array_equal(words & 0xFFFF, huffman.canonical_codes(book))
        assert np.array_equal(words >> 16, book)
    with pytest.raises(ValueError, match="code lengths"):
        huffman.entry_words(np.array([1, 17]))
