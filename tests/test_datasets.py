"""The PP reader, the named real fields and the seeded synthetic fields: shapes, values,
determinism, and clear errors on damaged files."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from ceaz import datasets

SMALLEST_NORMAL = np.finfo(np.float32).smallest_normal


def sample(name: str) -> Path:
    iris_sample_data = pytest.importorskip("iris_sample_data")
    return Path(iris_sample_data.path) / name


# --- PP reader -------------------------------------------------------------------------------


def test_read_pp_colpex_headers_and_data():
    fields = datasets.read_pp(sample("colpex.pp"))
    assert len(fields) == 120
    assert [f.stash for f in fields].count(4) == 60
    assert [f.stash for f in fields].count(408) == 60
    f = fields[0]
    assert f.ints.shape == (45,) and f.ints.dtype == np.int32
    assert f.reals.shape == (19,) and f.reals.dtype == np.float32
    assert f.data.shape == (83, 83) and f.data.dtype == np.dtype("=f4")
    assert f.data.flags.c_contiguous
    assert f.bmdi == pytest.approx(-1073741824.0)
    assert f.lblev == 1
    # Potential temperature near the ground, in kelvin.
    assert 270 < f.data.mean() < 300


@pytest.mark.parametrize(
    "name", ["air_temp.pp", "A1B.2098.pp", "uk_hires.pp", "wind_speed_lake_victoria.pp"]
)
def test_read_pp_other_sample_files(name):
    fields = datasets.read_pp(sample(name))
    assert fields
    for f in fields:
        assert f.data.shape == (f.ints[datasets.LBROW], f.ints[datasets.LBNPT])
        assert np.isfinite(f.data).all()
        assert f.bmdi in (float(np.float32(-1e30)), -1073741824.0)


@pytest.fixture
def colpex_bytes() -> bytes:
    return sample("colpex.pp").read_bytes()


def write(tmp_path: Path, data: bytes | bytearray) -> Path:
    path = tmp_path / "damaged.pp"
    path.write_bytes(bytes(data))
    return path


def expect_error(path: Path, words: str) -> None:
    with pytest.raises(ValueError, match=words) as info:
        datasets.read_pp(path)
    assert path.name in str(info.value)


def test_truncated_file(tmp_path, colpex_bytes):
    expect_error(write(tmp_path, colpex_bytes[:-10]), "truncated")


def test_stray_bytes_at_end(tmp_path, colpex_bytes):
    expect_error(write(tmp_path, colpex_bytes + b"\0\0"), "truncated: 2 stray")


def test_bad_trailing_marker(tmp_path, colpex_bytes):
    buf = bytearray(colpex_bytes)
    buf[4 + 256 + 3] ^= 1  # trailing length of the first header record
    expect_error(write(tmp_path, buf), "bad framing.*leading length 256 but trailing length 257")


def test_negative_record_length(tmp_path, colpex_bytes):
    buf = bytearray(colpex_bytes)
    buf[0:4] = np.array([-5], ">i4").tobytes()
    expect_error(write(tmp_path, buf), "negative record length")


def test_empty_file(tmp_path):
    expect_error(write(tmp_path, b""), "empty")


def test_header_without_data(tmp_path, colpex_bytes):
    expect_error(write(tmp_path, colpex_bytes[: 256 + 8]), "no data record")


def test_wrong_header_length(tmp_path):
    record = np.zeros(32, ">i4").tobytes()
    marker = np.array([len(record)], ">i4").tobytes()
    framed = marker + record + marker
    expect_error(write(tmp_path, framed + framed), "header record is 128 bytes, expected 256")


def patch_header_word(buf: bytes, word: int, value: int) -> bytearray:
    out = bytearray(buf)
    start = 4 + 4 * word
    out[start : start + 4] = np.array([value], ">i4").tobytes()
    return out


def test_packed_field(tmp_path, colpex_bytes):
    buf = patch_header_word(colpex_bytes, datasets.LBPACK, 1)
    expect_error(write(tmp_path, buf), "field 0 .STASH 4.: LBPACK=1: packed data")


def test_header_disagrees_with_data_record(tmp_path, colpex_bytes):
    buf = patch_header_word(colpex_bytes, datasets.LBROW, 200)
    expect_error(write(tmp_path, buf), r"holds 7393 words but LBROW\*LBNPT\+LBEXT")


def test_irregular_grid(tmp_path, colpex_bytes):
    buf = patch_header_word(colpex_bytes, datasets.LBNPT, 0)
    expect_error(write(tmp_path, buf), "LBNPT=0")


# --- Named real fields -----------------------------------------------------------------------

EXPECTED = {
    "sea_ice_velocity": ((120, 215, 360), (-2.0, 2.0)),
    "surface_temperature_ensemble": ((13, 6, 145, 192), (180.0, 340.0)),
    "u_wind": ((75, 144, 192), (-100.0, 100.0)),
    "colpex_theta": ((60, 83, 83), (250.0, 320.0)),
    "colpex_pressure": ((60, 83, 83), (50_000.0, 110_000.0)),
}


def test_every_real_field_is_checked():
    assert set(EXPECTED) == set(datasets.REAL_FIELDS)
    assert set(datasets.TRAINING_FIELDS) <= set(datasets.REAL_FIELDS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_field(name):
    pytest.importorskip("iris_sample_data")
    shape, (lo, hi) = EXPECTED[name]
    x = datasets.load(name)
    assert x.shape == shape
    assert x.dtype == np.dtype("=f4")
    assert x.flags.c_contiguous
    assert np.isfinite(x).all()
    assert lo <= x.min() and x.max() <= hi
    assert x.std() > 0
    # The loader is cached and read-only, so a caller cannot corrupt the next caller's data.
    assert datasets.load(name) is x
    with pytest.raises(ValueError, match="read-only"):
        x[(0,) * x.ndim] = 0


def test_sea_ice_is_mostly_exact_zeros():
    pytest.importorskip("iris_sample_data")
    x = datasets.sea_ice_velocity()
    assert 0.85 < (x == 0).mean() < 0.88
    # Ice moves both ways.
    assert x.min() < -0.5 and x.max() > 0.5


def test_colpex_fields_differ_and_pressure_falls_with_height():
    pytest.importorskip("iris_sample_data")
    p = datasets.colpex_pressure().reshape(6, 10, 83, 83)
    assert (np.diff(p.mean(axis=(2, 3)), axis=1) < 0).all()
    theta = datasets.colpex_theta().reshape(6, 10, 83, 83)
    assert theta.mean(axis=(0, 2, 3))[-1] > theta.mean(axis=(0, 2, 3))[0]


def test_glosea_members_differ_but_agree_on_climate():
    pytest.importorskip("iris_sample_data")
    x = datasets.surface_temperature_ensemble()
    assert not np.array_equal(x[0], x[1])
    assert abs(float(x[0].mean()) - float(x[1].mean())) < 1.0


def test_no_real_field_holds_the_missing_value():
    pytest.importorskip("iris_sample_data")
    for name in datasets.REAL_FIELDS:
        assert not (datasets.load(name) == np.float32(-1073741824.0)).any(), name


def test_unknown_field():
    with pytest.raises(ValueError, match="unknown field 'nope'"):
        datasets.load("nope")


def test_available_and_missing_package(monkeypatch):
    pytest.importorskip("iris_sample_data")
    assert datasets.available()
    monkeypatch.setitem(sys.modules, "iris_sample_data", None)
    assert not datasets.available()
    with pytest.raises(ModuleNotFoundError, match="pip install"):
        datasets.data_dir()


# --- Synthetic fields ------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(4096,), (64, 96), (16, 24, 32), 100])
def test_gaussian_random_field_shape_and_determinism(shape):
    x = datasets.gaussian_random_field(shape, seed=3)
    expect = (shape,) if isinstance(shape, int) else shape
    assert x.shape == expect and x.dtype == np.float32 and x.flags.c_contiguous
    assert abs(float(x.mean())) < 1e-4 and float(x.std()) == pytest.approx(1.0, rel=1e-4)
    assert x.tobytes() == datasets.gaussian_random_field(shape, seed=3).tobytes()
    assert x.tobytes() != datasets.gaussian_random_field(shape, seed=4).tobytes()


@pytest.mark.parametrize("slope", [-2.0, -3.0, -4.0])
def test_gaussian_random_field_spectrum(slope):
    x = datasets.gaussian_random_field(1 << 16, slope, seed=1).astype(np.float64)
    power = np.abs(np.fft.rfft(x)) ** 2
    k = np.fft.rfftfreq(x.size)
    band = (k > 1e-3) & (k < 0.3)
    fitted = np.polyfit(np.log(k[band]), np.log(power[band]), 1)[0]
    assert fitted == pytest.approx(slope, abs=0.1)


def test_gaussian_random_field_one_element():
    assert datasets.gaussian_random_field((1, 1)).tolist() == [[0.0]]


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"shape": (0, 4)}, "positive ints, not \\(0, 4\\)"),
        ({"shape": ()}, "positive ints"),
        ({"shape": (2.5,)}, "positive ints"),
        ({"shape": (4,), "slope": float("nan")}, "slope must be a finite number, not nan"),
        ({"shape": (4,), "seed": -1}, "seed must be a non-negative int, not -1"),
    ],
)
def test_gaussian_random_field_bad_arguments(kwargs, words):
    with pytest.raises(ValueError, match=words):
        datasets.gaussian_random_field(**kwargs)


def test_gaussian_random_field_shape_not_a_sequence():
    with pytest.raises(TypeError, match="shape must be"):
        datasets.gaussian_random_field(None)  # type: ignore[arg-type]


def test_gray_scott_deterministic_with_sharp_fronts():
    v = datasets.gray_scott(32, steps=300, seed=5)
    assert v.shape == (32, 32, 32) and v.dtype == np.float32 and v.flags.c_contiguous
    assert np.isfinite(v).all() and 0.0 <= v.min() and v.max() < 1.0
    assert v.tobytes() == datasets.gray_scott(32, steps=300, seed=5).tobytes()
    assert v.tobytes() != datasets.gray_scott(32, steps=300, seed=6).tobytes()
    # Fronts: the steepest 1 % of steps between neighbours are far steeper than the typical one.
    step = np.abs(np.diff(v, axis=0))
    assert np.quantile(step, 0.99) > 5 * np.median(step)


def test_gray_scott_default_fills_the_box():
    v = datasets.gray_scott()
    assert v.shape == (64, 64, 64)
    assert 0.2 < (v > 0.1).mean() < 0.8


@pytest.mark.parametrize("kwargs", [{"n": 3}, {"n": 8.0}, {"steps": -1}, {"seed": "x"}])
def test_gray_scott_bad_arguments(kwargs):
    with pytest.raises(ValueError, match="must be"):
        datasets.gray_scott(**kwargs)


@pytest.mark.parametrize("kind", datasets.ADVERSARIAL_KINDS)
@pytest.mark.parametrize("shape", [(1000,), (40, 50), (12, 20, 24)])
def test_adversarial_deterministic(kind, shape):
    x = datasets.adversarial(kind, shape, seed=2)
    assert x.dtype == np.float32 and x.flags.c_contiguous
    assert x.shape == ((1,) * len(shape) if kind == "one_element" else shape)
    assert x.tobytes() == datasets.adversarial(kind, shape, seed=2).tobytes()
    assert x.tobytes() != datasets.adversarial(kind, shape, seed=3).tobytes()


def test_adversarial_nan_inf():
    x = datasets.adversarial("nan_inf", (32, 32, 32))
    assert np.isnan(x).mean() > 0.005
    assert (x == np.inf).mean() > 0.005 and (x == -np.inf).mean() > 0.005
    bits = x.view(np.uint32)
    nan_bits = set(bits[np.isnan(x)].tolist())
    assert {0x7FC00000, 0xFFC00000, 0x7FA00000} <= nan_bits
    finite = x[np.isfinite(x)]
    assert finite.size > 0.9 * x.size and 200 < finite.mean() < 350


def test_adversarial_subnormal():
    x = datasets.adversarial("subnormal", (64, 64))
    assert (np.abs(x) < SMALLEST_NORMAL).all()
    nonzero = x != 0
    assert nonzero.mean() > 0.5
    assert (np.signbit(x) & ~nonzero).any() and (~np.signbit(x) & ~nonzero).any()


def test_adversarial_constant_and_one_element():
    x = datasets.adversarial("constant", (10, 20), seed=9)
    assert (x == x.flat[0]).all() and x.flat[0] != 0
    y = datasets.adversarial("one_element", (7, 8, 9))
    assert y.size == 1 and np.isfinite(y).all()


def test_adversarial_alternating():
    x = datasets.adversarial("alternating", (30, 40)).astype(np.float64)
    mag = np.abs(x)
    even = np.indices(x.shape).sum(axis=0) % 2 == 0
    assert (mag[even] >= 1e30).all() and (mag[~even] <= 1e-30).all()
    assert (mag[~even] >= SMALLEST_NORMAL).all()
    assert (x < 0).any() and (x > 0).any()


def test_adversarial_fill():
    x = datasets.adversarial("fill", (50, 60, 70))
    land = x == datasets.FILL_VALUE
    assert 0.29 < land.mean() < 0.31
    assert 250 < x[~land].min() and x[~land].max() < 330


def test_adversarial_bad_kind():
    with pytest.raises(ValueError, match="unknown kind 'nan'"):
        datasets.adversarial("nan", (4,))
