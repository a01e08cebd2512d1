"""Quantization codes: Lorenzo residuals and value kinds mapped to the symbol alphabet.

With radius R the alphabet has 2R + 2 symbols: 0 is an outlier (|delta| >= R, its delta
follows as OUTLIER_BITS two's complement), R + delta for |delta| < R, 2R a verbatim value
(its raw IEEE bits follow) and 2R + 1 the fill value (nothing follows). See docs/format.md.
"""

from __future__ import annotations

import numpy as np

from . import format as fmt
from .quantizer import KIND_FILL, KIND_NORMAL, KIND_VERBATIM


def check_radius(radius: int) -> int:
    if not (isinstance(radius, int | np.integer) and fmt.MIN_RADIUS <= radius <= fmt.MAX_RADIUS):
        raise ValueError(
            f"radius must be an integer in [{fmt.MIN_RADIUS}, {fmt.MAX_RADIUS}], got {radius!r}"
        )
    return int(radius)


def encode(delta: np.ndarray, kind: np.ndarray, radius: int) -> np.ndarray:
    """Symbols (uint16) for flat residuals and kinds."""
    in_band = (kind == KIND_NORMAL) & (np.abs(delta) < radius)
    sym = np.where(in_band, delta + radius, fmt.SYM_OUTLIER)
    sym = np.where(kind == KIND_VERBATIM, fmt.sym_verbatim(radius), sym)
    sym = np.where(kind == KIND_FILL, fmt.sym_fill(radius), sym)
    return sym.astype(np.uint16)


def decode(sym: np.ndarray, radius: int) -> tuple[np.ndarray, np.ndarray]:
    """In-band residuals (0 elsewhere) and kinds from symbols; outliers read as KIND_NORMAL."""
    s = sym.astype(np.int64)
    kind = np.full(s.shape, KIND_NORMAL, dtype=np.uint8)
    kind[s == fmt.sym_verbatim(radius)] = KIND_VERBATIM
    kind[s == fmt.sym_fill(radius)] = KIND_FILL
    in_band = (s > fmt.SYM_OUTLIER) & (s < fmt.sym_verbatim(radius))
    delta = np.where(in_band, s - radius, 0)
    return delta, kind


def raw_widths(sym: np.ndarray, radius: int, dtype: np.dtype) -> np.ndarray:
    """Bits of in-band raw payload that follow each symbol's code."""
    w = np.zeros(sym.shape, dtype=np.int64)
    w[sym == fmt.SYM_OUTLIER] = fmt.OUTLIER_BITS
    w[sym == fmt.sym_verbatim(radius)] = fmt.VALUE_BITS[np.dtype(dtype)]
    return w
