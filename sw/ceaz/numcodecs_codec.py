"""ceaz as a numcodecs codec, so Zarr (and through it xarray and Dask) can store ceaz chunks.

Zarr hands the codec one chunk at a time, as a typed array with its shape, and each chunk
becomes one complete ceaz container. So a relative bound (`mode="rel"`) is relative to each
*Zarr chunk's* value range, not the array's: two chunks get different absolute bounds. Use
`mode="abs"` for Zarr unless a per-chunk relative bound is what you want.

The class registers itself under the id ``"ceaz"`` when imported, and the package declares
the ``numcodecs.codecs`` entry point, so ``numcodecs.get_codec({"id": "ceaz", ...})`` and
Zarr metadata written with it resolve without importing ceaz first.
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np
from numcodecs.abc import Codec
from numcodecs.compat import ensure_bytes, ensure_ndarray_like, ndarray_copy
from numcodecs.registry import register_codec

from . import codec
from . import format as fmt


def parse_fill(value: float | str | None) -> float | None:
    """A fill value from a config: a number, None, or 'nan'/'inf'/'-inf' (JSON has no NaN)."""
    if value is None:
        return None
    if isinstance(value, str):
        if value.strip().lower() in ("nan", "inf", "+inf", "-inf", "infinity", "-infinity"):
            return float(value)
        raise ValueError(
            f"fill_value must be a number, 'nan', 'inf', '-inf' or None, got {value!r}"
        )
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"fill_value must be a number or None, got {value!r}")
    return float(value)


def fill_to_json(value: float | None) -> float | str | None:
    """The inverse of `parse_fill`: non-finite fill values become strings."""
    if value is None or math.isfinite(value):
        return value
    return str(value)  # 'nan', 'inf' or '-inf'


class Ceaz(Codec):
    """Error-bounded lossy compression of float32/float64 chunks.

    eb: the error bound (absolute, or relative to each chunk's finite value range);
    mode: 'abs' (recommended for Zarr) or 'rel'; radius, chunk_values: as in
    `ceaz.codec.Settings` (chunk_values sizes ceaz's own chunks inside a Zarr chunk);
    fill_value: coded as one symbol and restored bit-exact (NaN by default, None for none).
    """

    codec_id = "ceaz"

    def __init__(
        self,
        eb: float,
        mode: str = "abs",
        radius: int = fmt.DEFAULT_RADIUS,
        chunk_values: int = fmt.DEFAULT_CHUNK_VALUES,
        fill_value: float | str | None = "nan",
    ):
        if isinstance(eb, bool) or not isinstance(eb, int | float | np.integer | np.floating):
            raise ValueError(f"the error bound must be a positive finite number, got {eb!r}")
        if not (math.isfinite(eb) and eb > 0):
            raise ValueError(f"the error bound must be a positive finite number, got {eb!r}")
        if mode not in fmt.EB_MODES:
            raise ValueError(f"mode must be 'abs' or 'rel', got {mode!r}")
        if not 1 <= int(chunk_values) <= fmt.MAX_CHUNK_VALUES:
            raise ValueError(
                f"chunk_values must be in [1, {fmt.MAX_CHUNK_VALUES}], got {chunk_values!r}"
            )
        self.eb = float(eb)
        self.mode = mode
        self.radius = int(radius)
        self.chunk_values = int(chunk_values)
        self.fill_value = parse_fill(fill_value)
        # Settings checks the radius and names it if it is bad.
        self.settings = codec.Settings(
            radius=self.radius, chunk_values=self.chunk_values, fill_value=self.fill_value
        )

    def get_config(self) -> dict[str, Any]:
        return {
            "id": self.codec_id,
            "eb": self.eb,
            "mode": self.mode,
            "radius": self.radius,
            "chunk_values": self.chunk_values,
            "fill_value": fill_to_json(self.fill_value),
        }

    def encode(self, buf: Any) -> bytes:
        """One chunk (a float array with its shape) to one ceaz container."""
        arr = ensure_ndarray_like(buf)
        if arr.dtype.kind != "f" or arr.dtype.itemsize not in (4, 8):
            raise TypeError(
                f"the ceaz codec compresses float32 or float64 arrays, got {arr.dtype!r}: "
                f"pass the typed chunk array, not its bytes"
            )
        if arr.dtype != arr.dtype.newbyteorder("<"):
            raise ValueError(
                f"the ceaz codec decodes little-endian values, got {arr.dtype.str!r}; "
                f"store the array as '<f4' or '<f8'"
            )
        if arr.ndim == 0:
            arr = arr.reshape(1)
        if not arr.flags.c_contiguous and arr.flags.f_contiguous:
            # Zarr v2 with order='F' passes Fortran-ordered chunks and reads the decoded bytes
            # back in Fortran order: the transpose is C-ordered with the same bytes.
            arr = arr.T
        return codec.compress(arr, self.eb, self.mode, self.settings)

    def decode(self, buf: Any, out: Any = None) -> np.ndarray:
        """One ceaz container back to its chunk; fills `out` (same byte size) if given."""
        data = ensure_bytes(buf)
        dec = codec.decode_stream(io.BytesIO(data))
        if out is not None:
            return ndarray_copy(dec, out)
        return dec

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(eb={self.eb!r}, mode={self.mode!r}, radius={self.radius}, "
            f"chunk_values={self.chunk_values}, fill_value={self.fill_value!r})"
        )


register_codec(Ceaz)
