"""The compiled path (ceaz._jit) against the numpy reference, byte for byte: the same encoded
chunk, the same values back and the same errors on damaged payloads, over adversarial values,
shapes, bounds and settings."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ceaz import _jit, chunk, codec, huffman, packer, quantizer
from ceaz import format as fmt
from ceaz.chunk import ChunkPayload, Coding, EncodedChunk
from ceaz.errors import CorruptStreamError
from ceaz.tiling import Box

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint32 if a.dtype.itemsize == 4 else np.uint64)


def make_coding(
    x: np.ndarray, eb: float, fill: float | None = None, radius: int = 512, k: int = 4096
) -> Coding:
    finite = x[np.isfinite(x)]
    max_abs = float(np.abs(finite).max()) if finite.size else 0.0
    return Coding(quantizer.quant_params(eb, x.dtype, max_abs, fill), radius, k)


def random_lengths(rng: np.random.Generator, radius: int) -> np.ndarray:
    """A codebook from a random, peaked histogram: short and long codes, every symbol coded."""
    n = fmt.n_symbols(radius)
    hist = (rng.pareto(0.7, n) * rng.integers(0, 1000, n)).astype(np.uint64)
    return huffman.code_lengths(huffman.weights_from_histogram(hist))


def assert_same_chunk(a: EncodedChunk, b: EncodedChunk) -> None:
    assert a.box == b.box
    assert a.payload == b.payload and type(b.payload) is bytes
    assert a.payload_bits == b.payload_bits
    assert b.sync.dtype == np.uint32 and np.array_equal(a.sync, b.sync)
    assert b.hist.dtype == np.uint64 and np.array_equal(a.hist, b.hist)
    assert b.lengths.dtype == np.uint8 and np.array_equal(a.lengths, b.lengths)
    assert (a.n_outlier, a.n_verbatim, a.n_fill) == (b.n_outlier, b.n_verbatim, b.n_fill)


def payload_of(e: EncodedChunk) -> ChunkPayload:
    return ChunkPayload(e.box, e.lengths, e.payload, e.payload_bits, e.sync, e.stored)


def decode_both(p: ChunkPayload, coding: Coding) -> np.ndarray | None:
    """Decode with both paths: the same array, or CorruptStreamError from both (None)."""
    try:
        ref = chunk.decode_chunks([p], coding, use_jit=False)[0]
    except CorruptStreamError:
        ref = None
    try:
        fast = _jit.decode_chunk(p, coding)
    except CorruptStreamError:
        fast = None
    assert (ref is None) == (fast is None), "only one path rejected the payload"
    if ref is not None:
        assert fast.dtype == ref.dtype and fast.shape == ref.shape == p.box.shape
        np.testing.assert_array_equal(bits(fast), bits(ref))
    return ref


def check(
    x: np.ndarray, coding: Coding, lengths: np.ndarray | None = None, index: int = 0
) -> EncodedChunk:
    """Encode x (a box) with both paths, decode with both, and compare everything."""
    x3 = x.reshape((1,) * (3 - x.ndim) + x.shape)
    box = Box(index, (0, 0, 0), x3.shape)
    if lengths is None:
        lengths = huffman.offline_lengths(coding.radius)
    # The kernels themselves, before the stored-chunk fallback, so that wild data still
    # exercises the coded path.
    ref = chunk._encode_reference(x3, box, coding, lengths)
    fast = _jit.encode_chunk(x3, box, coding, lengths)
    assert_same_chunk(ref, fast)
    assert_same_chunk(
        chunk.encode_chunk(x3, box, coding, lengths, use_jit=False),
        chunk.encode_chunk(x3, box, coding, lengths, use_jit=True),
    )
    y = decode_both(payload_of(ref), coding)
    assert y is not None
    return ref


# --- random arrays -------------------------------------------------------------------------

SPECIALS = {
    np.float32: [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -3e-39, 3.4e38, -1e34],
    np.float64: [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, -1e-310, 1.7e308, -1e34],
}


@st.composite
def boxes(draw) -> np.ndarray:
    """A box of values: smooth, noisy or wild, sprinkled with special values."""
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 13), min_size=ndim, max_size=ndim)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["smooth", "noise", "wild", "integers"]))
    scale = 10.0 ** draw(st.integers(-40, 30))
    if kind == "smooth":
        x = rng.standard_normal(shape)
        for axis in range(ndim):
            x = np.cumsum(x, axis=axis)
        x *= scale
    elif kind == "noise":
        x = rng.standard_normal(shape) * scale + draw(st.floats(-1e6, 1e6))
    elif kind == "wild":
        x = rng.choice([-1, 1], shape) * 10.0 ** rng.uniform(-45, 38, shape)
    else:
        x = rng.integers(-(2**30), 2**30, shape) * scale
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    if draw(st.booleans()):
        special = np.array(SPECIALS[dtype], dtype=dtype)
        mask = rng.random(shape) < draw(st.floats(0, 0.5))
        x[mask] = rng.choice(special, int(mask.sum()))
    return x


@st.composite
def bounds(draw, x: np.ndarray) -> float:
    """From lossless (0) and about one ulp of the data up to more than its whole range."""
    finite = np.abs(x[np.isfinite(x)]).astype(np.float64)
    top = float(finite.max()) if finite.size else 1.0
    choice = draw(st.sampled_from(["zero", "ulp", "relative", "huge", "max"]))
    if choice == "zero":
        return 0.0
    if choice == "ulp":
        return float(np.spacing(x.dtype.type(top))) * draw(st.sampled_from([0.5, 1, 3]))
    if choice == "relative":
        return top * 2.0 ** -draw(st.integers(1, 40))
    if choice == "huge":
        return top * 2.0 ** draw(st.integers(0, 60))
    return float(np.finfo(x.dtype).max)


@SETTINGS
@given(
    data=st.data(),
    x=boxes(),
    fill=st.sampled_from([None, math.nan, -1e34]),
    radius=st.sampled_from([2, 512, 16384]),
    k=st.sampled_from([1, 7, 4096]),
    book=st.sampled_from(["offline", "random"]),
)
def test_random_boxes_encode_and_decode_identically(data, x, fill, radius, k, book):
    eb = data.draw(bounds(x))
    if not math.isfinite(eb):
        eb = 0.0
    coding = make_coding(x, eb, fill, radius, k)
    lengths = None
    if book == "random":
        lengths = random_lengths(np.random.default_rng(data.draw(st.integers(0, 99))), radius)
    check(x, coding, lengths)


# --- adversarial boxes ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1,), (1, 1), (1, 1, 1), (7,), (3, 1), (2, 1, 9), (5, 3, 4)])
@pytest.mark.parametrize("k", [1, 2, 7, 4096])
def test_odd_shapes_and_sync_intervals(dtype, shape, k):
    rng = np.random.default_rng(sum(shape) + k)
    x = np.cumsum(rng.standard_normal(shape), axis=-1).astype(dtype)
    for eb in (0.0, 1e-6, 0.1, 100.0):
        check(x, make_coding(x, eb, math.nan, 512, k))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_special_value(dtype):
    special = np.array(SPECIALS[dtype] * 7, dtype=dtype)
    nan_payloads = np.array([0x7FC00001, 0xFFFFFFFF, 0x7F800001], dtype=np.uint32)
    if dtype == np.float64:
        nan_payloads = nan_payloads.astype(np.uint64) << np.uint64(32) | np.uint64(5)
    x = np.concatenate([special, nan_payloads.view(dtype), np.linspace(-1, 1, 23, dtype=dtype)])
    for fill in (None, math.nan, -1e34):
        for eb in (0.0, 1e-30, 1e-3, 1e30, float(np.finfo(dtype).max)):
            for radius in (2, 16384):
                check(x, make_coding(x, eb, fill, radius, 7))
                check(x.reshape(2, 3, -1), make_coding(x, eb, fill, radius, 5))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_subnormals_and_signed_zeros(dtype):
    info = np.finfo(dtype)
    rng = np.random.default_rng(3)
    x = (rng.integers(-60, 60, (4, 5, 6)) * info.smallest_subnormal).astype(dtype)
    x[0, 0, ::2] = -0.0
    for eb in (0.0, float(info.smallest_subnormal), float(info.smallest_subnormal) * 7, 1e-3):
        check(x, make_coding(x, eb, None, 2, 7))


def test_float32_ties_at_the_bound():
    """With eb = 1 and values of ulp 1, |x - x'| == eb happens; the tie is accepted."""
    rng = np.random.default_rng(5)
    x = rng.integers(2**23, 2**24, 3000).astype(np.float32)
    coding = make_coding(x, 1.0, None, 512, 64)
    q, kind = quantizer.prequantize(x, coding.qp)
    err = np.abs(x.astype(np.float64) - quantizer.reconstruct(q, coding.qp).astype(np.float64))
    assert (err[kind == quantizer.KIND_NORMAL] == 1.0).any()  # the case is exercised
    check(x, coding)
    for eb in (0.5, 0.75, 2.0, 3.0):
        check(x, make_coding(x, eb, None, 512, 64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_prequantizer_limit_and_largest_residuals(dtype):
    """|q| just below and at 2**27, and a checkerboard whose residuals are near 2**30.

    The bound gives a step of exactly 1, so that large integers are reconstructed exactly.
    """
    coding = make_coding(np.ones(1, dtype), 0.50196082, None, 16384, 7)
    assert coding.qp.step == 1.0
    edge = np.array([2**27 - 16, 2**27 - 8, 2**27, 2**27 + 16, 2**26 + 0.5], dtype=dtype)
    x = np.concatenate([edge, -edge])
    enc = check(x, coding)
    assert enc.n_verbatim == 4 and enc.n_outlier > 0
    sign = (-1.0) ** np.indices((4, 4, 4)).sum(axis=0)
    board = (sign * (2**27 - 16)).astype(dtype)
    enc = check(board, coding)
    assert enc.n_outlier == board.size and enc.n_verbatim == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_prequantizer_rounds_half_to_even(dtype):
    """x / S exactly half-way between integers: q is the even neighbour."""
    coding = make_coding(np.ones(1, dtype), 0.50196082, None, 512, 7)
    assert coding.qp.step == 1.0
    x = (np.arange(-40, 40) + 0.5).astype(dtype)
    x = np.concatenate([x, x * 2.0**-20, x * 2.0**20])
    q, kind = quantizer.prequantize(x, coding.qp)
    assert (q[:80] % 2 == 0).all() and (kind[:80] == quantizer.KIND_NORMAL).all()
    check(x, coding)
    check(x[::-1].copy(), make_coding(x, 0.25, None, 512, 7))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_longer_than_a_block(dtype):
    """Rows spanning several kernel blocks, or blocks of several rows (with a remainder),
    and sync points at odd offsets."""
    rng = np.random.default_rng(11)
    x = np.cumsum(rng.standard_normal(2 * _jit._BLOCK + 905)).astype(dtype)
    x[rng.random(x.size) < 0.01] = np.nan
    x[rng.random(x.size) < 0.01] = 1e30
    for k in (7, 333, 4096):
        check(x, make_coding(x, 1e-2, None, 16, k), random_lengths(rng, 16))
        check(x[:4002].reshape(2, 2001), make_coding(x, 1e-2, math.nan, 512, k))
        check(x[:4200].reshape(2, 1, 2100), make_coding(x, 1e-2, math.nan, 512, k))
        check(x[:4200].reshape(2, 3, 700), make_coding(x, 1e-2, math.nan, 512, k))


def test_large_chunk_many_segments():
    """Enough sync segments to fill several groups of four lanes in the decoder."""
    rng = np.random.default_rng(2)
    x = np.cumsum(np.cumsum(rng.standard_normal((6, 50, 70)), axis=1), axis=2)
    x = x.astype(np.float32)
    x[2, 10:20, 30:33] = -1e34
    coding = make_coding(x, 1e-3 * float(x.max() - x.min()), -1e34, 512, 97)
    enc = check(x, coding)
    check(x, coding, huffman.code_lengths(huffman.weights_from_histogram(enc.hist)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_whole_streams_are_identical(dtype):
    """Through codec and chunk.decode_chunks: many chunks, adapted codebooks, both paths."""
    rng = np.random.default_rng(4)
    x = np.cumsum(rng.standard_normal((9, 17, 23)), axis=0).astype(dtype)
    x[3, 4, 5:9] = [np.nan, np.inf, -1e34, 1e30]
    s = codec.Settings(radius=64, chunk_values=500, sync_interval=37, fill_value=-1e34)
    data = codec.compress(x, 1e-2, "rel", s, use_jit=True)
    assert data == codec.compress(x, 1e-2, "rel", s, use_jit=False)
    reader = codec.StreamReader.from_bytes(data)
    payloads = [info.payload for info in reader.chunks()]
    assert len(payloads) > 3
    fast = chunk.decode_chunks(payloads, reader.coding, use_jit=True)
    ref = chunk.decode_chunks(payloads, reader.coding, use_jit=False)
    for a, b in zip(fast, ref, strict=True):
        np.testing.assert_array_equal(bits(a), bits(b))
    np.testing.assert_array_equal(bits(codec.decompress(data)), bits(codec.decompress(data, False)))


# --- codebook tables -----------------------------------------------------------------------


@pytest.mark.parametrize("radius", [2, 5, 512, 16384])
def test_tables_match_huffman(radius):
    rng = np.random.default_rng(radius)
    for lengths in (huffman.offline_lengths(radius), random_lengths(rng, radius)):
        assert np.array_equal(_jit._canonical_codes(lengths), huffman.canonical_codes(lengths))
        reference = huffman.decode_table(lengths).astype(np.int64)
        tabs = _jit._decode_tables(lengths, radius).astype(np.int64)
        small, big = tabs[: 1 << _jit._SMALL_BITS], tabs[1 << _jit._SMALL_BITS :]
        cls = (big >> 5) & 3
        sym = np.select(
            [cls == 0, cls == 1, cls == 2], [(big >> 8) + radius, 0, 2 * radius], 2 * radius + 1
        )
        assert np.array_equal(sym, reference >> 8)
        assert np.array_equal(big & 31, reference & 0xFF)
        first = big[:: 1 << (fmt.MAX_CODE_LEN - _jit._SMALL_BITS)]
        short = (first & 31) <= _jit._SMALL_BITS
        assert np.array_equal(small[short], first[short]) and not small[~short].any()


# --- damaged payloads ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def encoded():
    rng = np.random.default_rng(8)
    x = np.cumsum(np.cumsum(rng.standard_normal((3, 20, 30)), axis=1), axis=2)
    x = x.astype(np.float32)
    x[1, 5, :4] = [np.nan, np.inf, 1e30, -1e34]
    x[2, 7, 9] = 5e3  # an outlier
    coding = make_coding(x, 1e-2, -1e34, 512, 64)
    box = Box(4, (0, 0, 0), x.shape)
    enc = chunk.encode_chunk(x, box, coding, random_lengths(rng, 512), use_jit=False)
    assert enc.n_outlier and enc.n_verbatim and enc.n_fill and len(enc.sync) > 8
    return enc, coding


@settings(max_examples=300, deadline=None)
@given(flips=st.lists(st.integers(0, 10**6), min_size=1, max_size=4))
def test_flipped_bits_are_rejected_or_decoded_alike(encoded, flips):
    enc, coding = encoded
    data = bytearray(enc.payload)
    for f in flips:
        data[f % len(data)] ^= 1 << (f // len(data) % 8)
    decode_both(dataclasses.replace(payload_of(enc), payload=bytes(data)), coding)


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(1, 10**6), keep_bytes=st.booleans())
def test_truncated_payloads_are_rejected(encoded, cut, keep_bytes):
    enc, coding = encoded
    nbits = cut % enc.payload_bits
    payload = enc.payload if keep_bytes else enc.payload[: (nbits + 7) // 8]
    p = dataclasses.replace(payload_of(enc), payload=payload, payload_bits=nbits)
    if np.any(enc.sync.astype(np.int64) >= nbits):
        p = dataclasses.replace(p, sync=np.minimum(enc.sync, max(nbits - 1, 0)))
    assert decode_both(p, coding) is None


@pytest.mark.parametrize("cut", [1, 10, 100, 1000])
def test_truncated_long_segment_is_rejected(cut):
    """A long last segment decoding zeros runs far past the payload; the numpy reference used
    to raise IndexError there (packer.peek read past its words), now both paths say corrupt."""
    rng = np.random.default_rng(0)
    x = np.cumsum(rng.standard_normal((1, 1, 5000))).astype(np.float32).reshape(1, 1, -1)
    enc = check(x, make_coding(x, 1e-2))
    p = dataclasses.replace(payload_of(enc), payload=enc.payload[:cut], payload_bits=8 * cut)
    p = dataclasses.replace(p, sync=np.minimum(enc.sync, 8 * cut - 1))
    assert decode_both(p, make_coding(x, 1e-2)) is None


def test_damaged_sync_offsets_and_sizes_are_rejected(encoded):
    enc, coding = encoded
    p = payload_of(enc)
    for j in (0, 3, len(enc.sync) - 1):
        for delta in (-1, 1):
            sync = enc.sync.astype(np.int64)
            sync[j] += delta
            assert decode_both(dataclasses.replace(p, sync=sync.astype(np.uint32)), coding) is None
    assert decode_both(dataclasses.replace(p, payload_bits=enc.payload_bits + 1), coding) is None
    with pytest.raises(CorruptStreamError):
        _jit.decode_chunk(dataclasses.replace(p, sync=enc.sync[:-1]), coding)
    with pytest.raises(CorruptStreamError):
        _jit.decode_chunk(dataclasses.replace(p, payload_bits=10**12), coding)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [1 << 20, 1 << 18])
def test_runaway_segments_stop_at_the_end_of_the_payload(dtype, k):
    """All-zero bits decode as verbatim values (80 bits each) in one lane or four: the decoder
    must stop at the end of a tiny payload instead of reading megabytes past it."""
    radius = 2
    hist = np.ones(fmt.n_symbols(radius), dtype=np.uint64)
    hist[fmt.sym_verbatim(radius)] = 1000
    lengths = huffman.code_lengths(huffman.weights_from_histogram(hist))
    assert huffman.canonical_codes(lengths)[fmt.sym_verbatim(radius)] == 0
    coding = Coding(quantizer.quant_params(0.1, dtype), radius, k)
    n = 1 << 20
    sync = np.arange(1, n // k, dtype=np.uint32)
    p = ChunkPayload(Box(0, (0, 0, 0), (1, 1, n)), lengths, b"", 8, sync)
    with pytest.raises(CorruptStreamError, match="reads past the end"):
        _jit.decode_chunk(p, coding)


def test_other_codebook_is_rejected_or_decoded_alike(encoded):
    enc, coding = encoded
    rng = np.random.default_rng(0)
    for _ in range(5):
        p = dataclasses.replace(payload_of(enc), lengths=random_lengths(rng, 512))
        decode_both(p, coding)


def test_incomplete_codebook_is_rejected(encoded):
    enc, coding = encoded
    lengths = enc.lengths.copy()
    lengths[0] += 1
    with pytest.raises(CorruptStreamError, match="complete"):
        _jit.decode_chunk(dataclasses.replace(payload_of(enc), lengths=lengths), coding)


def test_fill_symbol_without_fill_value_is_rejected(encoded):
    enc, coding = encoded
    no_fill = dataclasses.replace(coding, qp=dataclasses.replace(coding.qp, fill_bits=None))
    assert decode_both(payload_of(enc), no_fill) is None
    with pytest.raises(CorruptStreamError, match="chunk 4: fill symbol"):
        _jit.decode_chunk(payload_of(enc), no_fill)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_prequantized_value_out_of_range_is_rejected(dtype):
    """Outliers whose residuals add up beyond 2**27, packed by hand."""
    radius, n = 4, 40
    coding = Coding(quantizer.quant_params(0.1, dtype), radius, 16)
    lengths = huffman.offline_lengths(radius)
    codes = huffman.canonical_codes(lengths)
    sym = np.zeros(n, dtype=np.uint16)
    raw = np.full(n, (1 << 26) & ((1 << fmt.OUTLIER_BITS) - 1), dtype=np.uint64)
    raw_lens = np.full(n, fmt.OUTLIER_BITS)
    data, nbits, starts = packer.pack(codes[sym], lengths[sym], raw, raw_lens)
    box = Box(9, (0, 0, 0), (1, 1, n))
    p = ChunkPayload(box, lengths, data, nbits, starts[16::16].astype(np.uint32))
    assert decode_both(p, coding) is None
    with pytest.raises(CorruptStreamError, match="chunk 9: a prequantized value is out of range"):
        _jit.decode_chunk(p, coding)


def test_wrong_dtype_and_bad_lengths_are_refused():
    x = np.zeros((1, 1, 4), np.float64)
    coding = make_coding(x.astype(np.float32), 0.1)
    box = Box(0, (0, 0, 0), x.shape)
    with pytest.raises(TypeError):
        _jit.encode_chunk(x, box, coding, huffman.offline_lengths(512))
    with pytest.raises(ValueError):
        _jit.encode_chunk(x.astype(np.float32), box, coding, huffman.offline_lengths(16))


@settings(max_examples=200, deadline=None)
@given(
    hist=hnp.arrays(
        np.uint64,
        st.integers(2, 1100),
        elements=st.one_of(st.just(0), st.integers(0, 5), st.integers(0, 1 << 40)),
    )
)
def test_compiled_codebook_construction_matches_the_reference(hist):
    w = huffman.weights_from_histogram(hist)
    max_len = max(16, int(np.ceil(np.log2(len(w)))))
    np.testing.assert_array_equal(
        _jit.code_lengths(w, max_len), huffman.code_lengths(w, max_len)
    )
