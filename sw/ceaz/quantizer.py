"""Prequantization with a guaranteed error bound (the first half of cuSZ's dual-quantization).

Each value x becomes an integer q with x ~ q*S. The decoder reconstructs x' as ONE rounding of
the exact product q*S to the value type, and the encoder checks |x - x'| <= eb_f with exact
arithmetic, sending any value that fails verbatim. This is what makes the bound a promise rather
than a likelihood. For float32 the arithmetic is exact integer arithmetic on the IEEE fields,
and it is written out here by hand because the RTL must reproduce it bit for bit
(docs/format.md, "Prequantization").
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from . import format as fmt

F32 = np.dtype("<f4")
F64 = np.dtype("<f8")

#: Value kinds, decided per value by the prequantizer.
KIND_NORMAL = 0
KIND_VERBATIM = 1
KIND_FILL = 2


@dataclass(frozen=True)
class QuantParams:
    """The constants of the prequantizer, derived from the bound once per stream.

    eb_f is the bound actually enforced (the largest value of the dtype not above the user's
    absolute bound, or 0 for lossless), S the reconstruction step and Cm * 2**Ce the rounded
    reciprocal 1/S with a 32-bit mantissa.
    """

    dtype: np.dtype
    eb_f: float
    step: float
    recip_mant: int
    recip_exp: int
    fill_bits: int | None


def _largest_f32_at_most(r: Fraction) -> np.float32:
    top = np.finfo(np.float32).max
    if r >= Fraction(float(top)):
        return top
    f = np.float32(float(r))
    while f > 0 and Fraction(float(f)) > r:
        f = np.nextafter(f, np.float32(0))
    while True:
        up = np.nextafter(f, np.float32(np.inf))
        if not np.isfinite(up) or Fraction(float(up)) > r:
            return f
        f = up


def _largest_f64_at_most(r: Fraction) -> float:
    if r >= Fraction(sys.float_info.max):
        return sys.float_info.max
    f = float(r)
    while f > 0 and Fraction(f) > r:
        f = math.nextafter(f, 0.0)
    return f


def _truncate_significand(v: float, bits: int) -> float:
    m, e = math.frexp(v)
    return math.ldexp(math.floor(m * (1 << bits)), e - bits)


def _recip(step: float) -> tuple[int, int]:
    """1/step as a RECIP_BITS-bit mantissa and an exponent, rounded to nearest, ties even."""
    c = 1 / Fraction(step)
    exp = c.numerator.bit_length() - c.denominator.bit_length() - fmt.RECIP_BITS
    while c / Fraction(2) ** exp >= 1 << fmt.RECIP_BITS:
        exp += 1
    while c / Fraction(2) ** exp < 1 << (fmt.RECIP_BITS - 1):
        exp -= 1
    mant = round(c / Fraction(2) ** exp)  # Fraction.__round__ rounds half to even
    if mant == 1 << fmt.RECIP_BITS:
        mant, exp = mant >> 1, exp + 1
    return mant, exp


def _lossless_step(dtype: np.dtype, max_abs: float) -> float:
    """Step for a zero bound: the ulp of the largest magnitude, so that such values are exact."""
    if not max_abs > 0 or not math.isfinite(max_abs):
        return 1.0
    exp = math.frexp(max_abs)[1] - 1
    if dtype == F32:
        return math.ldexp(1.0, max(exp - 23, -149))
    return math.ldexp(1.0, max(exp - 26, -1074))


def quant_params(
    eb_abs: float, dtype: np.dtype, max_abs: float = 0.0, fill_value: float | None = None
) -> QuantParams:
    """Derive the prequantizer constants from an absolute bound (see docs/format.md)."""
    dtype = np.dtype(dtype)
    if dtype not in (F32, F64):
        raise TypeError(f"ceaz compresses float32 or float64, not {dtype!r}")
    if not (math.isfinite(eb_abs) and eb_abs >= 0):
        raise ValueError(f"the absolute error bound must be finite and >= 0, got {eb_abs!r}")
    r = Fraction(eb_abs)
    eb_f = float(_largest_f32_at_most(r)) if dtype == F32 else _largest_f64_at_most(r)
    if eb_f > 0:
        target = 2 * Fraction(eb_f) * (1 - Fraction(1, 1 << fmt.STEP_MARGIN_LOG2))
        if dtype == F32:
            step = float(_largest_f32_at_most(target))
        else:
            step = _truncate_significand(_largest_f64_at_most(target), 24)
    else:
        step = _lossless_step(dtype, max_abs)
    mant, exp = _recip(step)
    fill_bits = None
    if fill_value is not None:
        fill_bits = int(np.array(fill_value, dtype=dtype).view(_uint(dtype)))
    return QuantParams(dtype, eb_f, step, mant, exp, fill_bits)


def _uint(dtype: np.dtype) -> np.dtype:
    return np.dtype("<u4") if dtype == F32 else np.dtype("<u8")


def _prequantize_f32(x: np.ndarray, p: QuantParams) -> tuple[np.ndarray, np.ndarray]:
    """Exact q = RNE(x / S) from the float32 fields; returns q and a 'too large' mask."""
    b = x.view(np.uint32)
    e = ((b >> 23) & 0xFF).astype(np.int32)
    frac = b & 0x7FFFFF
    subnormal = e == 0
    mx = np.where(subnormal, frac, frac | 0x800000).astype(np.uint64)
    ex = np.where(subnormal, -149, e - 150)
    sh = -(ex + p.recip_exp)
    prod = mx * np.uint64(p.recip_mant)  # < 2**56: exact
    shc = np.clip(sh, 1, 63).astype(np.uint64)
    floor = prod >> shc
    rem = prod & ((np.uint64(1) << shc) - np.uint64(1))
    half = np.uint64(1) << (shc - np.uint64(1))
    up = (rem > half) | ((rem == half) & ((floor & np.uint64(1)) == 1))
    mag = (floor + up).astype(np.int64)
    too_large = (e == 255) | ((sh <= 0) & (mx != 0)) | (mag >= fmt.Q_LIMIT)
    q = np.where((b >> 31) != 0, -mag, mag)
    return q, too_large


def _prequantize_f64(x: np.ndarray, p: QuantParams) -> tuple[np.ndarray, np.ndarray]:
    """q = RNE(fl64(x / S)): software only, so IEEE float64 arithmetic suffices.

    A division rather than a product with 1/S, because 1/S overflows float64 when S is
    subnormal; x / S then overflows only for values that are too large anyway.
    """
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        qf = np.rint(x / p.step)
        too_large = ~(np.abs(qf) < fmt.Q_LIMIT)  # also catches NaN and Inf
    q = np.where(too_large, 0.0, qf).astype(np.int64)
    return q, too_large


def reconstruct(q: np.ndarray, p: QuantParams) -> np.ndarray:
    """x' = one rounding of the exact product q*S (exact in float64 since |q| < 2**27)."""
    with np.errstate(over="ignore"):
        return (q.astype(np.float64) * p.step).astype(p.dtype)


def within_bound(x: np.ndarray, xr: np.ndarray, eb: float) -> np.ndarray:
    """Exact test of |x - xr| <= eb for float arrays, via an error-free transformation (TwoSum).

    fl(x - xr) alone can round a difference just above eb down onto eb; TwoSum recovers the
    rounding error so that the tie is decided exactly.
    """
    with np.errstate(invalid="ignore", over="ignore"):  # signalling NaNs warn on the cast
        a = x.astype(np.float64)
        b = -xr.astype(np.float64)
        s = a + b
        bv = s - a
        err = (a - (s - bv)) + (b - bv)
        mag = np.abs(s)
        return (mag < eb) | ((mag == eb) & (np.sign(s) * err <= 0))


def prequantize(x: np.ndarray, p: QuantParams) -> tuple[np.ndarray, np.ndarray]:
    """Return (q, kind) for a flat array: q is 0 wherever kind is not KIND_NORMAL."""
    if x.dtype != p.dtype:
        raise TypeError(f"expected {p.dtype}, got {x.dtype!r}")
    if p.dtype == F32:
        q, too_large = _prequantize_f32(x, p)
    else:
        q, too_large = _prequantize_f64(x, p)
    q = np.where(too_large, 0, q)
    ok = ~too_large & within_bound(x, reconstruct(q, p), p.eb_f)
    kind = np.where(ok, KIND_NORMAL, KIND_VERBATIM).astype(np.uint8)
    if p.fill_bits is not None:
        kind[x.view(_uint(p.dtype)) == p.fill_bits] = KIND_FILL
    q = np.where(kind == KIND_NORMAL, q, 0)
    return q, kind
