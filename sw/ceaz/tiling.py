"""How an array is cut into chunks: folding to 3-D and the chunk grid.

A chunk is a box of whole rows (2-D) or planes (3-D), limited so that the hardware's line
buffer (x extent) and plane buffer (y*x extent) hold it. The Lorenzo predictor sees zero
outside each chunk, so chunks are independent: they decode in parallel and in any order.
The rules are part of the format (docs/format.md, "Chunking"); the chunk shape is stored in
the header, so a decoder never re-derives it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from . import format as fmt


def fold_to_3d(shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(z, y, x): 1-D is (1, 1, n), 2-D (1, ny, nx); leading dimensions beyond 3 fold into z."""
    shape = tuple(int(s) for s in shape)
    if not 1 <= len(shape) <= fmt.MAX_NDIM:
        raise ValueError(f"arrays of 1 to {fmt.MAX_NDIM} dimensions are supported, got {shape!r}")
    if any(s < 1 for s in shape):
        raise ValueError(f"every dimension must be at least 1, got shape {shape!r}")
    padded = (1, 1) + shape
    return (math.prod(padded[:-2]), padded[-2], padded[-1])


def chunk_shape(
    shape3: tuple[int, int, int],
    ndim: int,
    chunk_values: int = fmt.DEFAULT_CHUNK_VALUES,
    max_line: int = fmt.DEFAULT_MAX_LINE,
    max_plane: int = fmt.DEFAULT_MAX_PLANE,
) -> tuple[int, int, int]:
    """The encoder's default chunk box for a folded shape (see docs/format.md)."""
    if not 1 <= chunk_values <= fmt.MAX_CHUNK_VALUES:
        raise ValueError(
            f"chunk_values must be in [1, {fmt.MAX_CHUNK_VALUES}], got {chunk_values!r}"
        )
    if max_line < 1 or max_plane < max_line:
        raise ValueError(f"need 1 <= max_line <= max_plane, got {max_line!r}, {max_plane!r}")
    nz, ny, nx = shape3
    if ndim == 1:
        return (1, 1, min(nx, chunk_values))
    cx = min(nx, max_line)
    if ndim == 2:
        return (1, min(ny, max(1, chunk_values // cx)), cx)
    cy = min(ny, max(1, max_plane // cx), max(1, chunk_values // cx))
    return (min(nz, max(1, chunk_values // (cy * cx))), cy, cx)


@dataclass(frozen=True)
class Box:
    index: int
    origin: tuple[int, int, int]
    shape: tuple[int, int, int]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def slices(self) -> tuple[slice, slice, slice]:
        return tuple(slice(o, o + s) for o, s in zip(self.origin, self.shape, strict=True))


def grid(shape3: tuple[int, int, int], chunk: tuple[int, int, int]) -> tuple[int, int, int]:
    return tuple(-(-n // c) for n, c in zip(shape3, chunk, strict=True))


def boxes(shape3: tuple[int, int, int], chunk: tuple[int, int, int]) -> Iterator[Box]:
    """Chunk boxes in stream order: z slowest, then y, then x; edge boxes are clipped."""
    gz, gy, gx = grid(shape3, chunk)
    index = 0
    for iz in range(gz):
        for iy in range(gy):
            for ix in range(gx):
                origin = (iz * chunk[0], iy * chunk[1], ix * chunk[2])
                shape = tuple(min(c, n - o) for c, n, o in zip(chunk, shape3, origin, strict=True))
                yield Box(index, origin, shape)
                index += 1
