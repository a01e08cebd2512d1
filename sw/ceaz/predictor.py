"""The Lorenzo predictor on prequantized integers, with zero outside the chunk.

On integers the 3-D Lorenzo residual is exactly the mixed first difference along z, y and x,
so prediction is three `diff`s and reconstruction three `cumsum`s, with no feedback loop. A
1-D or 2-D chunk is a box with unit z (and y) extent, where the extra differences are the
identity, so one formula serves every dimensionality (docs/format.md, "Prediction").

Escaped values (verbatim and fill) enter the prediction as q = 0. Their residuals are not
transmitted, so a chunk with escapes is reconstructed with that constraint (`reconstruct`).
"""

from __future__ import annotations

import numpy as np


def residuals(q: np.ndarray) -> np.ndarray:
    """Lorenzo residuals of a (z, y, x) box of integers: delta = q - prediction."""
    if q.ndim != 3:
        raise ValueError(f"expected a 3-D box, got shape {q.shape!r}")
    d = q.astype(np.int64, copy=False)
    for axis in range(3):
        d = np.diff(d, axis=axis, prepend=0)
    return d


def integrate(delta: np.ndarray) -> np.ndarray:
    """Inverse of `residuals` when every residual is known: three prefix sums."""
    q = delta.astype(np.int64, copy=True)
    for axis in range(3):
        np.cumsum(q, axis=axis, out=q)
    return q


def reconstruct(delta: np.ndarray, escaped: np.ndarray) -> np.ndarray:
    """Integers of a box from the residuals of its non-escaped values (numpy reference).

    q is 0 at escaped positions and their residuals are unknown. Without escapes this is
    `integrate`. With them, each row is a prefix sum that restarts at every escape: given the
    row above (and the plane before, already final), row values satisfy
    q[j] = q[j-1] + r[j] with r[j] = delta[j] + (terms from the previous row and plane).
    """
    if not escaped.any():
        return integrate(delta)
    nz, ny, nx = delta.shape
    q = np.zeros(delta.shape, dtype=np.int64)
    zero_row = np.zeros(nx, dtype=np.int64)
    for z in range(nz):
        for y in range(ny):
            up = q[z, y - 1] if y else zero_row
            back = q[z - 1, y] if z else zero_row
            back_up = q[z - 1, y - 1] if (z and y) else zero_row
            # r[j] = delta + up[j] - up[j-1] + back[j] - back[j-1] - back_up[j] + back_up[j-1]
            v = up + back - back_up
            r = delta[z, y] + v - np.concatenate(([0], v[:-1]))
            esc = escaped[z, y]
            if not esc.any():
                q[z, y] = np.cumsum(r)
                continue
            r = np.where(esc, 0, r)
            run = np.cumsum(r)
            # Subtract the running sum at the most recent escape: the restart point.
            last = np.maximum.accumulate(np.where(esc, np.arange(nx), -1))
            base = np.where(last >= 0, run[np.maximum(last, 0)], 0)
            q[z, y] = np.where(esc, 0, run - base)
    return q
