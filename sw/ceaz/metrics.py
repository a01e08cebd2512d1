"""Quality of a reconstruction: the numbers `ceaz verify`, the demo and the benchmark report.

Errors are computed over the finite values in float64; non-finite values and the fill value
are not errors but must come back bit-exact, which `special_values_exact` checks.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np


@dataclass
class Quality:
    max_error: float
    psnr_db: float
    nrmse: float
    value_range: float
    n_values: int
    n_special: int
    special_exact: bool

    def as_dict(self) -> dict:
        return asdict(self)


class QualityAccumulator:
    """Streaming form, so that a large field can be verified one batch at a time."""

    def __init__(self, fill_bits: int | None = None):
        self.fill_bits = fill_bits
        self.sq = 0.0
        self.max_err = 0.0
        self.lo, self.hi = math.inf, -math.inf
        self.n = self.n_finite = self.n_special = 0
        self.special_exact = True

    def add(self, original: np.ndarray, decoded: np.ndarray) -> None:
        if original.shape != decoded.shape or original.dtype != decoded.dtype:
            raise ValueError(
                f"cannot compare {original.dtype}{original.shape}"
                f" with {decoded.dtype}{decoded.shape}"
            )
        a = np.asarray(original).reshape(-1)
        b = np.asarray(decoded).reshape(-1)
        ut = np.uint32 if a.dtype.itemsize == 4 else np.uint64
        special = ~np.isfinite(a)
        if self.fill_bits is not None:
            special |= a.view(ut) == self.fill_bits
        if special.any():
            self.n_special += int(special.sum())
            self.special_exact &= bool(np.array_equal(a.view(ut)[special], b.view(ut)[special]))
        fa = a[~special].astype(np.float64)
        fb = b[~special].astype(np.float64)
        self.n += a.size
        if fa.size:
            err = np.abs(fa - fb)
            err[np.isnan(err)] = np.inf  # a finite value decoded as NaN is an unbounded error
            self.max_err = max(self.max_err, float(err.max()))
            self.sq += float(np.dot(err, err))
            self.n_finite += fa.size
            self.lo, self.hi = min(self.lo, float(fa.min())), max(self.hi, float(fa.max()))

    def result(self) -> Quality:
        rng = self.hi - self.lo if self.n_finite else 0.0
        rmse = math.sqrt(self.sq / self.n_finite) if self.n_finite else 0.0
        if rmse == 0:
            psnr = math.inf
        elif rng == 0:
            psnr = -math.inf
        else:
            psnr = 20 * math.log10(rng / rmse)
        return Quality(
            max_error=self.max_err,
            psnr_db=psnr,
            nrmse=rmse / rng if rng else (0.0 if rmse == 0 else math.inf),
            value_range=rng,
            n_values=self.n,
            n_special=self.n_special,
            special_exact=self.special_exact,
        )


def quality(original: np.ndarray, decoded: np.ndarray, fill_bits: int | None = None) -> Quality:
    acc = QualityAccumulator(fill_bits)
    acc.add(original, decoded)
    return acc.result()
