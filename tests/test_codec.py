"""The codec's promises, as properties: the bound holds for every finite value, and NaN, Inf
and the fill value come back bit-exact, on adversarial arrays as much as on smooth ones."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ceaz import codec
from ceaz.codec import Settings, StreamReader
from ceaz.errors import CorruptStreamError

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint32 if a.dtype.itemsize == 4 else np.uint64)


def assert_promise(x: np.ndarray, data: bytes, eb_abs: float | None = None) -> np.ndarray:
    """Decode and check every promise the format makes about x."""
    y = codec.decompress(data)
    header = StreamReader.from_bytes(data).header
    assert y.shape == x.shape and y.dtype == x.dtype
    if eb_abs is not None:
        assert header.eb_f <= eb_abs
    special = ~np.isfinite(x)
    if header.fill_bits is not None:
        special |= bits(x) == header.fill_bits
    np.testing.assert_array_equal(bits(y)[special], bits(x)[special])
    finite = ~special
    a, b = x[finite], y[finite]
    err = np.abs(a.astype(np.float64) - b.astype(np.float64))
    # The float64 difference may round; decide the values near the bound exactly.
    for u, v in zip(a[err >= header.eb_f], b[err >= header.eb_f], strict=True):
        assert abs(Fraction(float(u)) - Fraction(float(v))) <= Fraction(header.eb_f)
    assert np.isfinite(b).all()
    return y


dtypes = st.sampled_from([np.float32, np.float64])
shapes = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=9)
fills = st.sampled_from([math.nan, None, -1e34])
radii = st.sampled_from([2, 3, 16, 512])


@st.composite
def arrays(draw):
    dtype = draw(dtypes)
    width = 32 if dtype == np.float32 else 64
    elements = st.floats(width=width, allow_nan=True, allow_infinity=True, allow_subnormal=True)
    smooth = draw(st.booleans())
    if smooth:
        shape = draw(shapes)
        base = np.cumsum(np.ones(shape), axis=-1) * draw(st.floats(-1e3, 1e3))
        noise = draw(hnp.arrays(dtype, shape, elements=st.floats(-1, 1, width=width)))
        x = (base + noise).astype(dtype)
        mask = draw(hnp.arrays(np.bool_, shape))
        x[mask] = draw(elements)
        return x
    return draw(hnp.arrays(dtype, shapes, elements=elements))


@SETTINGS
@given(x=arrays(), eb=st.floats(1e-40, 1e30), fill=fills, radius=radii, chunk=st.integers(1, 40),
       sync=st.integers(1, 9))
def test_absolute_bound_holds(x, eb, fill, radius, chunk, sync):
    s = Settings(radius=radius, chunk_values=chunk, sync_interval=sync, fill_value=fill)
    data = codec.compress(x, eb, "abs", s)
    assert_promise(x, data, eb)


@SETTINGS
@given(x=arrays(), eb=st.sampled_from([1e-1, 1e-3, 1e-6, 1e-9]), fill=fills)
def test_relative_bound_holds(x, eb, fill):
    data = codec.compress(x, eb, "rel", Settings(fill_value=fill, chunk_values=64))
    header = StreamReader.from_bytes(data).header
    assert header.eb_f <= eb * (header.finite_max - header.finite_min)
    assert_promise(x, data)


@SETTINGS
@given(x=arrays())
def test_deterministic(x):
    assert codec.compress(x, 1e-3, "rel") == codec.compress(x.copy(), 1e-3, "rel")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "name",
    ["subnormal", "signed_zero", "huge_range", "constant", "one_element", "alternating", "ulp"],
)
def test_adversarial(name, dtype):
    rng = np.random.default_rng(7)
    info = np.finfo(dtype)
    if name == "subnormal":
        x = (rng.integers(-50, 50, (17, 13)) * info.smallest_subnormal).astype(dtype)
        eb = float(info.smallest_subnormal) * 3
    elif name == "signed_zero":
        x = np.where(rng.random(300) < 0.5, -0.0, 0.0).astype(dtype)
        eb = 1e-3
    elif name == "huge_range":
        x = (10.0 ** rng.uniform(-30, 30, (5, 7, 11)) * rng.choice([-1, 1], (5, 7, 11)))
        x = x.astype(dtype)
        eb = 1e-3
    elif name == "constant":
        x = np.full((9, 10), 3.14159, dtype=dtype)
        eb = 1e-4
    elif name == "one_element":
        x = np.array([2.5e-7], dtype=dtype)
        eb = 1e-2
    elif name == "alternating":
        x = np.where(np.arange(999) % 2, 1e30, 1e-30).astype(dtype)
        eb = 1e-6
    else:  # a bound of about one ulp of the data
        x = (1000 + np.cumsum(rng.standard_normal(5000)) * 1e-3).astype(dtype)
        eb = float(np.spacing(dtype(1000)))
    for mode in ("abs", "rel"):
        assert_promise(x, codec.compress(x, eb, mode, Settings(chunk_values=100)))


def test_relative_bound_on_a_constant_field_is_lossless():
    x = np.full((100, 1000), -7.25, dtype=np.float32)
    data = codec.compress(x, 1e-2, "rel")
    assert StreamReader.from_bytes(data).header.eb_f == 0
    np.testing.assert_array_equal(codec.decompress(data), x)
    assert len(data) < x.nbytes / 10


@pytest.mark.parametrize("land", [0.5, 0.3])
def test_fill_values_cost_about_a_bit_once_the_codebook_adapted(land):
    """Chunk 0 is coded with the offline book picked for it; from chunk 1 on the fill
    symbol's code is as short as its frequency allows: 1 bit when land covers half the
    field."""
    yy, xx = np.mgrid[0:200, 0:300]
    x = (np.sin(xx / 17.0) * np.cos(yy / 23.0)).astype(np.float32)
    x[:, : int(300 * land)] = -1e34
    s = Settings(fill_value=-1e34, chunk_values=6000)
    data = codec.compress(x, 1e-3, "abs", s)
    reader = StreamReader.from_bytes(data)
    fill = 2 * reader.header.radius + 1
    for i in range(1, reader.header.n_chunks):
        assert reader.chunk(i).payload.lengths[fill] <= math.ceil(-math.log2(land))
    assert_promise(x, data)


@pytest.mark.parametrize("eb", [0.0, -1.0, math.nan, math.inf])
def test_bad_bounds_are_rejected(eb):
    with pytest.raises(ValueError, match="positive"):
        codec.compress(np.ones(10, np.float32), eb)


def test_bad_inputs_are_rejected():
    with pytest.raises(TypeError, match="float32 or float64"):
        codec.compress(np.arange(10), 1.0)
    with pytest.raises(ValueError, match="empty"):
        codec.compress(np.ones((0, 3), np.float32), 1.0)
    with pytest.raises(ValueError, match="mode"):
        codec.compress(np.ones(3, np.float32), 1.0, "relative")
    with pytest.raises(ValueError, match="radius"):
        Settings(radius=1)


def test_foreign_and_truncated_input():
    data = codec.compress(np.linspace(0, 1, 1000, dtype=np.float32), 1e-3)
    with pytest.raises(CorruptStreamError, match="not a ceaz stream"):
        codec.decompress(b"PK\x03\x04" + data[4:])
    with pytest.raises(CorruptStreamError, match="truncated|end marker"):
        codec.decompress(data[:-1])
    with pytest.raises(CorruptStreamError):
        codec.decompress(b"")


def test_multi_chunk_adaptation_reads_the_table_in_each_chunk():
    rng = np.random.default_rng(5)
    x = np.cumsum(rng.standard_normal((64, 256)), axis=1).astype(np.float32)
    data = codec.compress(x, 1e-2, "abs", Settings(chunk_values=1024, sync_interval=100))
    reader = StreamReader.from_bytes(data)
    assert reader.header.n_chunks == 16
    tables = {reader.chunk(i).payload.lengths.tobytes() for i in range(16)}
    assert len(tables) > 1  # the codebook adapted
    assert_promise(x, data)


@pytest.mark.parametrize("use_jit", [True, False])
def test_chunks_never_expand_beyond_raw(use_jit):
    """A bound below float32 precision sends most values verbatim; such chunks are stored."""
    rng = np.random.default_rng(11)
    x = (1000 + rng.standard_normal((4, 50, 60))).astype(np.float32)
    data = codec.compress(x, 1e-9, "rel", Settings(chunk_values=3000), use_jit=use_jit)
    reader = StreamReader.from_bytes(data)
    assert any(reader.chunk(i).payload.stored for i in range(reader.header.n_chunks))
    assert len(data) < x.nbytes + 1000 * reader.header.n_chunks
    y = assert_promise(x, data)
    np.testing.assert_array_equal(codec.decompress(data, use_jit=not use_jit), y)
