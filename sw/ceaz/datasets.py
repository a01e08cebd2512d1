"""Scientific fields to compress: real Met Office data for the demo, tests and benchmarks, and
deterministic synthetic fields for the cases real data does not cover.

Real fields come from the PyPI package ``iris-sample-data`` (``pip install 'ceaz[data]'``),
read by the small PP reader below so that nothing heavier than numpy is needed and nothing is
downloaded at run time. What the package holds (version 2.5.2), all unpacked 32-bit PP:

============================== ================== ==========================================
name                           shape (float32)    source and layout
============================== ================== ==========================================
sea_ice_velocity               120 x 215 x 360    ``UM/northward_sea_ice_velocity.*.pp``, one
                                                  monthly mean per file, 1890-01..1899-12;
                                                  about 86.6 % exact zeros (land, open water)
surface_temperature_ensemble   13 x 6 x 145 x 192 ``GloSea4/ensemble_*.pp``: 13 members (000 to
                                                  013, member 006 is absent) x 6 monthly
                                                  means, STASH 24, kelvin
u_wind                         75 x 144 x 192     ``time_varying_hybrid_height/*.pp``: STASH 2
                                                  only, 15 months x 5 model levels
                                                  (month-major); orography (STASH 33) dropped
colpex_theta                   60 x 83 x 83       ``colpex.pp`` STASH 4, 6 times x 10 levels
colpex_pressure                60 x 83 x 83       ``colpex.pp`` STASH 408, 6 times x 10 levels
============================== ================== ==========================================

None of these fields holds the missing-data value (BMDI) or a non-finite value; the fill and
NaN cases come from `adversarial`.
"""

from __future__ import annotations

import functools
import math
import numbers
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# --- PP format -------------------------------------------------------------------------------

#: Integer and real words in a 32-bit PP header, and the header record's length in bytes.
PP_N_INTS = 45
PP_N_REALS = 19
PP_HEADER_BYTES = 4 * (PP_N_INTS + PP_N_REALS)

# 0-based positions in the integer header.
LBLREC = 14  # data record length in words (LBROW*LBNPT + LBEXT when unpacked)
LBROW = 17
LBNPT = 18
LBEXT = 19  # words of "extra data" (coordinate vectors) after the field
LBPACK = 20
LBLEV = 32
LBUSER1 = 38  # data type: 1 real, 2 integer, 3 logical
LBUSER4 = 41  # STASH code
# 0-based position in the real header.
BMDI = 17

STASH_U_WIND = 2
STASH_THETA = 4
STASH_SURFACE_TEMPERATURE = 24
STASH_PRESSURE = 408

_BE_INT = np.dtype(">i4")
_BE_REAL = np.dtype(">f4")


@dataclass(frozen=True, eq=False)
class PPField:
    """One field of a PP file, with the header kept so callers can tell fields apart."""

    ints: np.ndarray  #: the 45 integer header words, native int32
    reals: np.ndarray  #: the 19 real header words, native float32
    data: np.ndarray  #: LBROW x LBNPT, native float32, C-contiguous; missing values kept as BMDI

    @property
    def stash(self) -> int:
        """LBUSER4: what quantity this is (4 potential temperature, 408 pressure, ...)."""
        return int(self.ints[LBUSER4])

    @property
    def bmdi(self) -> float:
        """The missing-data indicator; the data is not altered, so compare against this."""
        return float(self.reals[BMDI])

    @property
    def lblev(self) -> int:
        """Model level number (LBLEV)."""
        return int(self.ints[LBLEV])


def _records(buf: bytes, path: Path) -> list[bytes]:
    """Split a Fortran sequential file into records, checking each length marker pair."""
    records = []
    offset = 0
    while offset < len(buf):
        remaining = len(buf) - offset
        if remaining < 4:
            raise ValueError(
                f"{path}: truncated: {remaining} stray byte(s) at offset {offset}, "
                "too few for a record length marker"
            )
        n = int(np.frombuffer(buf, _BE_INT, 1, offset)[0])
        if n < 0:
            raise ValueError(f"{path}: bad framing: negative record length {n} at offset {offset}")
        if remaining < n + 8:
            raise ValueError(
                f"{path}: truncated: record {len(records)} at offset {offset} claims {n} bytes "
                f"but only {remaining - 4} bytes follow its length marker"
            )
        tail = int(np.frombuffer(buf, _BE_INT, 1, offset + 4 + n)[0])
        if tail != n:
            raise ValueError(
                f"{path}: bad framing: record {len(records)} at offset {offset} has leading "
                f"length {n} but trailing length {tail}"
            )
        records.append(buf[offset + 4 : offset + 4 + n])
        offset += n + 8
    return records


def _field(path: Path, index: int, header: bytes, data: bytes) -> PPField:
    """Decode one header/data record pair, refusing anything that is not unpacked float32."""
    where = f"{path}: field {index}"
    if len(header) != PP_HEADER_BYTES:
        extra = "; 64-bit PP is not supported" if len(header) == 2 * PP_HEADER_BYTES else ""
        raise ValueError(
            f"{where}: header record is {len(header)} bytes, expected {PP_HEADER_BYTES} "
            f"({PP_N_INTS} int32 + {PP_N_REALS} float32){extra}"
        )
    ints = np.frombuffer(header, _BE_INT, PP_N_INTS).astype(np.int32)
    reals = np.frombuffer(header, _BE_REAL, PP_N_REALS, 4 * PP_N_INTS).astype(np.float32)
    stash = int(ints[LBUSER4])
    where = f"{where} (STASH {stash})"
    if ints[LBPACK] != 0:
        raise ValueError(
            f"{where}: LBPACK={int(ints[LBPACK])}: packed data is not supported, "
            "only LBPACK=0 (unpacked 32-bit)"
        )
    if ints[LBUSER1] in (2, 3):
        raise ValueError(f"{where}: LBUSER1={int(ints[LBUSER1])}: only real data is supported")
    rows, npt, ext = int(ints[LBROW]), int(ints[LBNPT]), max(int(ints[LBEXT]), 0)
    if rows <= 0 or npt <= 0:
        raise ValueError(
            f"{where}: LBROW={rows}, LBNPT={npt}: not a regular grid (both must be positive)"
        )
    if len(data) % 4:
        raise ValueError(f"{where}: data record is {len(data)} bytes, not whole 32-bit words")
    need = rows * npt + ext
    if len(data) // 4 < need:
        raise ValueError(
            f"{where}: data record holds {len(data) // 4} words but LBROW*LBNPT+LBEXT = "
            f"{rows}*{npt}+{ext} = {need}"
        )
    values = np.frombuffer(data, _BE_REAL, rows * npt).astype(np.float32).reshape(rows, npt)
    return PPField(ints=ints, reals=reals, data=values)


def read_pp(path: str | os.PathLike[str]) -> list[PPField]:
    """Read every field of a 32-bit big-endian PP file (the Met Office's UM output format).

    Raises ValueError naming the file and the fault for bad framing, truncation, packed data
    or a header that does not match its data record.
    """
    path = Path(path)
    records = _records(path.read_bytes(), path)
    if not records:
        raise ValueError(f"{path}: empty file, no PP records")
    if len(records) % 2:
        raise ValueError(
            f"{path}: {len(records)} records, but a PP file holds header/data pairs; "
            "the last header has no data record"
        )
    return [_field(path, i // 2, records[i], records[i + 1]) for i in range(0, len(records), 2)]


# --- Named real fields -----------------------------------------------------------------------


def available() -> bool:
    """Whether iris-sample-data is installed, so the real fields can be loaded."""
    try:
        import iris_sample_data  # noqa: F401
    except ImportError:
        return False
    return True


def data_dir() -> Path:
    """The folder of the installed iris-sample-data package."""
    try:
        import iris_sample_data
    except ImportError as exc:
        raise ModuleNotFoundError(
            "iris-sample-data is not installed; the real fields need it: "
            "pip install 'ceaz[data]' (or pip install iris-sample-data)"
        ) from exc
    return Path(iris_sample_data.path)


def _files(pattern: str) -> list[Path]:
    root = data_dir()
    files = sorted(root.glob(pattern))
    if not files:
        raise FileNotFoundError(f"no file matches {pattern!r} in {root}")
    return files


def _stack(fields: Sequence[PPField], what: str) -> np.ndarray:
    """Stack same-shaped 2-D fields along a new first axis into a read-only array."""
    if not fields:
        raise ValueError(f"{what}: no fields found")
    shapes = sorted({f.data.shape for f in fields})
    if len(shapes) != 1:
        raise ValueError(f"{what}: fields have different shapes {shapes}")
    return _frozen(np.stack([f.data for f in fields]))


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=np.float32)
    a.setflags(write=False)
    return a


def _with_stash(paths: Sequence[Path], stash: int | None) -> list[PPField]:
    return [f for p in paths for f in read_pp(p) if stash is None or f.stash == stash]


# The loaders are cached: each returns the same read-only array on every call (no copy is made,
# so repeated use in tests and benchmarks costs nothing). Copy it to modify it.


@functools.cache
def sea_ice_velocity() -> np.ndarray:
    """Northward sea-ice velocity, 10 years of monthly means: (120, 215, 360), mostly zeros."""
    return _stack(_with_stash(_files("UM/northward_sea_ice_velocity.*.pp"), None), "sea ice")


@functools.cache
def surface_temperature_ensemble() -> np.ndarray:
    """GloSea4 surface temperature: (members, months, 145, 192) = (13, 6, 145, 192).

    Kept 4-D because both leading axes are natural (member, lead time); every member file
    must hold the same number of months.
    """
    members = [read_pp(p) for p in _files("GloSea4/ensemble_*.pp")]
    counts = sorted({len(m) for m in members})
    if len(counts) != 1:
        raise ValueError(f"GloSea4 ensemble: members hold different numbers of fields {counts}")
    flat = _stack([f for m in members for f in m], "GloSea4 ensemble")
    return _frozen(flat.reshape(len(members), counts[0], *flat.shape[1:]))


@functools.cache
def u_wind() -> np.ndarray:
    """Eastward wind (STASH 2) on 5 model levels over 15 months: (75, 144, 192), month-major."""
    paths = _files("time_varying_hybrid_height/*.pp")
    return _stack(_with_stash(paths, STASH_U_WIND), "u wind")


@functools.cache
def colpex_theta() -> np.ndarray:
    """COLPEX potential temperature (STASH 4), 6 times x 10 levels: (60, 83, 83)."""
    return _stack(_with_stash(_files("colpex.pp"), STASH_THETA), "COLPEX theta")


@functools.cache
def colpex_pressure() -> np.ndarray:
    """COLPEX pressure (STASH 408), 6 times x 10 levels: (60, 83, 83)."""
    return _stack(_with_stash(_files("colpex.pp"), STASH_PRESSURE), "COLPEX pressure")


REAL_FIELDS: dict[str, Callable[[], np.ndarray]] = {
    "sea_ice_velocity": sea_ice_velocity,
    "surface_temperature_ensemble": surface_temperature_ensemble,
    "u_wind": u_wind,
    "colpex_theta": colpex_theta,
    "colpex_pressure": colpex_pressure,
}

#: The fields the offline codebook is trained on (ceaz.train). The GloSea4 ensemble and COLPEX
#: pressure are held out, so the demo also shows fields the book has never seen.
TRAINING_FIELDS: tuple[str, ...] = ("sea_ice_velocity", "u_wind", "colpex_theta")


def load(name: str) -> np.ndarray:
    """The real field called `name` (a key of REAL_FIELDS), read-only and cached."""
    if name not in REAL_FIELDS:
        raise ValueError(f"unknown field {name!r}; choose one of {sorted(REAL_FIELDS)}")
    return REAL_FIELDS[name]()


# --- Synthetic fields ------------------------------------------------------------------------
# Pure numpy and seeded, so the same arguments give the same bytes on a given numpy build.

#: The land value of adversarial("fill", ...), as in many ocean model outputs.
FILL_VALUE = np.float32(-1e34)

ADVERSARIAL_KINDS: tuple[str, ...] = (
    "nan_inf",
    "subnormal",
    "constant",
    "alternating",
    "fill",
    "one_element",
)


def _is_int(x: object) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _check_shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    dims = (shape,) if _is_int(shape) else shape
    try:
        dims = tuple(dims)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"shape must be an int or a sequence of ints, not {shape!r}") from None
    if not dims or not all(_is_int(d) and d >= 1 for d in dims):
        raise ValueError(f"shape must be one or more positive ints, not {shape!r}")
    return tuple(int(d) for d in dims)


def _check_seed(seed: int) -> int:
    if not _is_int(seed) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, not {seed!r}")
    return int(seed)


def _grf(dims: tuple[int, ...], slope: float, rng: np.random.Generator) -> np.ndarray:
    """Zero-mean, unit-variance float64 field whose power spectrum goes as |k|**slope."""
    spec = np.fft.rfftn(rng.standard_normal(dims))
    k2 = np.zeros(spec.shape)
    for axis, n in enumerate(dims):
        f = np.fft.rfftfreq(n) if axis == len(dims) - 1 else np.fft.fftfreq(n)
        k2 += (f**2).reshape([-1 if a == axis else 1 for a in range(len(dims))])
    k2.flat[0] = 1.0
    amp = k2 ** (slope / 4.0)  # amplitude is |k|**(slope/2)
    amp.flat[0] = 0.0
    x = np.fft.irfftn(spec * amp, s=dims, axes=tuple(range(len(dims))))
    std = x.std()
    return x / std if std > 0 else x


def gaussian_random_field(
    shape: int | Sequence[int], slope: float = -3.0, seed: int = 0
) -> np.ndarray:
    """Gaussian random field with power spectrum P(|k|) ~ |k|**slope, as float32.

    A tunable stand-in for turbulence-like data: the more negative `slope`, the smoother the
    field (0 is white noise). Zero mean and unit standard deviation (all zeros if the shape
    has one element). Any number of dimensions; 1-D to 3-D is what the codec sees.
    """
    dims = _check_shape(shape)
    if not isinstance(slope, numbers.Real) or not math.isfinite(slope):
        raise ValueError(f"slope must be a finite number, not {slope!r}")
    rng = np.random.default_rng(_check_seed(seed))
    return np.ascontiguousarray(_grf(dims, float(slope), rng), dtype=np.float32)


def _laplacian(a: np.ndarray, out: np.ndarray) -> None:
    """7-point periodic Laplacian (grid spacing 1) into `out`, without temporaries per axis."""
    np.multiply(a, np.float32(-6.0), out=out)
    for axis in range(3):
        n = a.shape[axis]

        def s(lo: int, hi: int, axis: int = axis) -> tuple[slice, ...]:
            return tuple(slice(lo, hi) if i == axis else slice(None) for i in range(3))

        out[s(1, n)] += a[s(0, n - 1)]
        out[s(0, 1)] += a[s(n - 1, n)]
        out[s(0, n - 1)] += a[s(1, n)]
        out[s(n - 1, n)] += a[s(0, 1)]


def gray_scott(n: int = 64, steps: int = 500, seed: int = 0) -> np.ndarray:
    """The V concentration of a 3-D Gray-Scott reaction-diffusion run, shape (n, n, n), float32.

    The simulation of the ADIOS2 tutorial: smooth regions bounded by sharp fronts, a hard case
    for predictors. Periodic box, explicit Euler (Du=0.1, Dv=0.05, F=0.02, k=0.05, dt=1)
    from seeded cubes of V plus a little noise. n=64 with 500 steps takes under a second.
    """
    if not _is_int(n) or n < 4:
        raise ValueError(f"n must be an int >= 4, not {n!r}")
    if not _is_int(steps) or steps < 0:
        raise ValueError(f"steps must be a non-negative int, not {steps!r}")
    rng = np.random.default_rng(_check_seed(seed))
    f32 = np.float32
    du, dv, feed, kill, dt = f32(0.1), f32(0.05), f32(0.02), f32(0.05), f32(1.0)
    u = np.ones((n, n, n), np.float32)
    v = np.zeros_like(u)
    for _ in range(max(1, n // 8)):
        centre = rng.integers(0, n, 3)
        r = int(rng.integers(2, max(2, n // 16) + 1))
        box = tuple(slice(max(0, int(c) - r), int(c) + r) for c in centre)
        u[box] = 0.5
        v[box] = 0.25
    u += f32(0.02) * rng.random(u.shape, dtype=np.float32)
    v += f32(0.02) * rng.random(v.shape, dtype=np.float32)
    lu, lv, uvv, tmp = (np.empty_like(u) for _ in range(4))
    for _ in range(steps):
        _laplacian(u, lu)
        _laplacian(v, lv)
        np.multiply(v, v, out=uvv)
        uvv *= u
        # u += dt * (Du lap u - u v^2 + F (1 - u))
        lu *= du
        lu -= uvv
        np.subtract(f32(1.0), u, out=tmp)
        tmp *= feed
        lu += tmp
        lu *= dt
        u += lu
        # v += dt * (Dv lap v + u v^2 - (F + k) v)
        lv *= dv
        lv += uvv
        np.multiply(v, feed + kill, out=tmp)
        lv -= tmp
        lv *= dt
        v += lv
    return v


def _blocks(dims: tuple[int, ...], rng: np.random.Generator) -> tuple[slice, ...]:
    """A random box about 1/8 of each extent (at least 1), for contiguous runs of specials."""
    out = []
    for d in dims:
        length = max(1, d // 8)
        start = int(rng.integers(0, d - length + 1))
        out.append(slice(start, start + length))
    return tuple(out)


# NaNs with payloads and sign, quiet and signalling: a codec must return each bit pattern.
_ODD_NANS = np.array([0x7FC00000, 0xFFC00000, 0x7FC00001, 0x7FA00000, 0xFF800001], np.uint32)


def _nan_inf(dims: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    x = (280.0 + 10.0 * _grf(dims, -4.0, rng)).astype(np.float32)
    flat = x.reshape(-1)
    specials = np.array([np.nan, np.inf, -np.inf], np.float32)
    m = min(flat.size, max(3, flat.size // 50))
    where = rng.choice(flat.size, m, replace=False)
    flat[where] = specials[np.arange(m) % 3]
    for value in specials:
        x[_blocks(dims, rng)] = value
    bits = flat.view(np.uint32)
    odd = rng.choice(flat.size, min(flat.size, len(_ODD_NANS)), replace=False)
    bits[odd] = _ODD_NANS[: len(odd)]
    return x


def _subnormal(dims: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    tiny = float(np.finfo(np.float32).smallest_normal)
    g = _grf(dims, -3.0, rng)
    peak = np.abs(g).max()
    x = (g / peak * 0.999 * tiny if peak > 0 else g).astype(np.float32)
    x[_blocks(dims, rng)] = np.float32(0.0)
    x[_blocks(dims, rng)] = np.float32(-0.0)
    flat = x.reshape(-1)
    where = rng.random(flat.size) < 0.05
    flat[where] = np.where(rng.random(int(where.sum())) < 0.5, -0.0, 0.0).astype(np.float32)
    return x


def _alternating(dims: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    parity = np.indices(dims).sum(axis=0) % 2
    huge = 10.0 ** rng.uniform(30, 38, dims)
    tiny = 10.0 ** rng.uniform(-37, -30, dims)
    sign = rng.choice([-1.0, 1.0], dims)
    return (sign * np.where(parity == 0, huge, tiny)).astype(np.float32)


def _fill(dims: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    sst = 288.0 + 8.0 * _grf(dims, -4.0, rng)
    land = _grf(dims, -4.5, rng)
    x = sst.astype(np.float32)
    x[land > np.quantile(land, 0.7)] = FILL_VALUE
    return x


def adversarial(kind: str, shape: int | Sequence[int], seed: int = 0) -> np.ndarray:
    """A float32 array built to break compressors; `kind` is one of ADVERSARIAL_KINDS.

    - "nan_inf": smooth field with NaN, +Inf and -Inf scattered (~2 %) and in blocks, plus a
      few NaNs with sign and payload bits set (some signalling), to test bit-exact return.
    - "subnormal": smooth field scaled into the subnormal range, with +0 and -0 scattered and
      in blocks; every value is a subnormal or a zero.
    - "constant": one seeded value everywhere.
    - "alternating": checkerboard of huge (1e30..1e38) and tiny (1e-37..1e-30) magnitudes with
      random signs.
    - "fill": ocean-like field (about 288 K) where a smooth 30 % land mask holds FILL_VALUE.
    - "one_element": a single seeded value, shape (1,) * len(shape).
    """
    if kind not in ADVERSARIAL_KINDS:
        raise ValueError(f"unknown kind {kind!r}; choose one of {list(ADVERSARIAL_KINDS)}")
    dims = _check_shape(shape)
    rng = np.random.default_rng(_check_seed(seed))
    if kind == "nan_inf":
        x = _nan_inf(dims, rng)
    elif kind == "subnormal":
        x = _subnormal(dims, rng)
    elif kind == "constant":
        x = np.full(dims, rng.uniform(-1000.0, 1000.0), np.float32)
    elif kind == "alternating":
        x = _alternating(dims, rng)
    elif kind == "fill":
        x = _fill(dims, rng)
    else:
        x = np.full((1,) * len(dims), rng.standard_normal(), np.float32)
    return np.ascontiguousarray(x)
