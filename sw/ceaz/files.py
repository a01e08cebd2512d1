"""File-level I/O for the command line and other tools: arrays in, atomic outputs out.

Inputs are memory-mapped rather than read, and outputs are memory maps whose written pages are
dropped as the decoder goes, so that peak memory is a small multiple of the chunk size however
large the file. Every output is written to a hidden temporary file beside the target and renamed
onto it only when complete: an interrupted or failed run never leaves a half-written file where
a good one is expected, and never damages a file that was already there.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from . import format as fmt

#: Raw file suffixes and the little-endian dtype each implies.
RAW_SUFFIXES = {".f32": np.dtype("<f4"), ".f64": np.dtype("<f8")}
#: Names accepted for --dtype.
DTYPE_NAMES = {
    "f32": np.dtype("<f4"),
    "float32": np.dtype("<f4"),
    "f4": np.dtype("<f4"),
    "f64": np.dtype("<f8"),
    "float64": np.dtype("<f8"),
    "f8": np.dtype("<f8"),
}

PathLike = str | os.PathLike


def parse_dtype(text: str) -> np.dtype:
    """The dtype named by --dtype (f32/float32 or f64/float64)."""
    try:
        return DTYPE_NAMES[text.strip().lower()]
    except KeyError:
        raise ValueError(f"dtype must be f32 or f64, got {text!r}") from None


def parse_shape(text: str) -> tuple[int, ...]:
    """A shape written as 'Z,Y,X' (or 'ZxYxX'), slowest dimension first."""
    parts = text.replace("x", ",").replace("X", ",").split(",")
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise ValueError(
            f"shape must be comma-separated integers like 64,64,64, got {text!r}"
        ) from None
    if not 1 <= len(shape) <= fmt.MAX_NDIM:
        raise ValueError(f"shape must have 1 to {fmt.MAX_NDIM} dimensions, got {text!r}")
    if any(s < 1 for s in shape):
        raise ValueError(f"every dimension must be at least 1, got {text!r}")
    return shape


def _dtype_name(dtype: np.dtype) -> str:
    return f"{dtype.name} ({dtype.str})"


def _check_float(dtype: np.dtype, path: Path) -> None:
    """ceaz codes little-endian float32/float64 only; say why anything else is refused."""
    if dtype.kind != "f" or dtype.itemsize not in (4, 8):
        raise ValueError(
            f"{str(path)!r} holds {_dtype_name(dtype)} values; ceaz compresses float32 or "
            f"float64 only (convert the array first, e.g. arr.astype(np.float32))"
        )
    if dtype.byteorder == ">" or (dtype.byteorder == "=" and not np.little_endian):
        raise ValueError(
            f"{str(path)!r} holds big-endian {dtype.name} values, which are not supported "
            f"(converting would need a full copy in memory); convert it first with "
            f"np.save(out, np.load(path).astype('<{dtype.kind}{dtype.itemsize}'))"
        )


def _require_file(path: Path) -> None:
    if not path.exists():
        raise FileNotFoundError(f"no such file: {str(path)!r}")
    if not path.is_file():
        raise IsADirectoryError(f"not a regular file: {str(path)!r}")


def raw_dtype(path: PathLike, dtype: np.dtype | str | None = None) -> np.dtype:
    """dtype of a raw file: from its suffix (.f32/.f64), or given for any other suffix."""
    path = Path(path)
    implied = RAW_SUFFIXES.get(path.suffix.lower())
    if dtype is not None:
        dtype = parse_dtype(dtype) if isinstance(dtype, str) else np.dtype(dtype)
        if implied is not None and dtype != implied:
            raise ValueError(
                f"--dtype {dtype.name} contradicts the suffix of {str(path)!r} "
                f"({implied.name}); rename the file or drop --dtype"
            )
        return dtype
    if implied is None:
        raise ValueError(
            f"cannot tell the value type of {str(path)!r} from its suffix {path.suffix!r}: "
            f"use .npy, .f32 or .f64, or pass --dtype f32|f64"
        )
    return implied


def open_input(
    path: PathLike, shape: tuple[int, ...] | None = None, dtype: np.dtype | str | None = None
) -> np.ndarray:
    """A read-only memory map of a .npy or raw float file, checked to be compressible.

    For .npy, shape (if given) reshapes the stored array and must hold the same number of
    values; for raw files it is required and must match the file size exactly.
    """
    path = Path(path)
    _require_file(path)
    if path.suffix.lower() == ".npy":
        arr = _open_npy(path)
        if dtype is not None:
            want = parse_dtype(dtype) if isinstance(dtype, str) else np.dtype(dtype)
            if want != arr.dtype:
                raise ValueError(
                    f"--dtype {want.name} contradicts {str(path)!r}, which holds {arr.dtype.name}"
                )
        if shape is not None and tuple(shape) != arr.shape:
            if math.prod(shape) != arr.size:
                raise ValueError(
                    f"shape {tuple(shape)!r} holds {math.prod(shape)} values but {str(path)!r} "
                    f"holds {arr.size} (shape {arr.shape!r})"
                )
            arr = arr.reshape(shape)
        return arr
    dt = raw_dtype(path, dtype)
    if shape is None:
        raise ValueError(f"raw file {str(path)!r} needs a shape: pass --shape Z,Y,X")
    shape = tuple(int(s) for s in shape)
    size = path.stat().st_size
    if size % dt.itemsize:
        raise ValueError(
            f"{str(path)!r} is {size} bytes, not a whole number of {dt.name} values "
            f"({dt.itemsize} bytes each)"
        )
    n_file, n_shape = size // dt.itemsize, math.prod(shape)
    if n_file != n_shape:
        raise ValueError(
            f"shape {shape!r} holds {n_shape} values but {str(path)!r} holds {n_file} "
            f"{dt.name} values ({size} bytes)"
        )
    return np.memmap(path, dtype=dt, mode="r", shape=shape)


def _open_npy(path: Path) -> np.ndarray:
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as e:  # object arrays cannot be memory-mapped
        raise ValueError(f"cannot read {str(path)!r} as a numeric .npy array: {e}") from None
    except (EOFError, OSError) as e:
        if isinstance(e, FileNotFoundError | PermissionError):
            raise
        raise ValueError(f"{str(path)!r} is not a valid .npy file: {e}") from None
    if not isinstance(arr, np.ndarray):
        raise ValueError(f"{str(path)!r} is not a .npy array")
    _check_float(arr.dtype, path)
    if arr.ndim == 0 or arr.size == 0:
        raise ValueError(f"{str(path)!r} holds an empty or 0-d array of shape {arr.shape!r}")
    if not arr.flags.c_contiguous:
        raise ValueError(
            f"{str(path)!r} is stored in Fortran order, which would need a full copy to "
            f"compress; save it C-ordered with np.save(out, np.ascontiguousarray(arr))"
        )
    return arr


def release(arr: np.ndarray) -> None:
    """Write back and drop the pages of a memory map mapped so far, to bound RSS.

    Safe for both read-only and writable maps: dirty pages are flushed first, so dropping
    them loses nothing, and later accesses fault them back in from the file.
    """
    base = getattr(arr, "_mmap", None)
    if not isinstance(base, mmap.mmap):
        return
    if isinstance(arr, np.memmap) and arr.mode != "r":
        arr.flush()
    if hasattr(mmap, "MADV_DONTNEED"):
        try:
            base.madvise(mmap.MADV_DONTNEED)
        except (OSError, ValueError):
            pass


def _temp_path(path: Path) -> tuple[Path, int]:
    """A fresh hidden sibling of path, created exclusively, and its descriptor."""
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.partial")
        try:
            # 0o666 so that the final file gets the permissions the umask allows, like open().
            return tmp, os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        except PermissionError:
            raise PermissionError(
                f"cannot write {str(path)!r}: no permission to create files in "
                f"{str(path.parent)!r}"
            ) from None
    raise FileExistsError(f"could not create a temporary file beside {str(path)!r}")


def _check_target(path: Path) -> None:
    if path.is_dir():
        raise IsADirectoryError(f"output {str(path)!r} is a directory")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"output directory {str(path.parent)!r} does not exist")


def _fsync_dir(directory: Path) -> None:
    """Make the rename itself durable; not every platform can open a directory."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _commit(tmp: Path, path: Path) -> None:
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _discard(tmp: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)


@contextlib.contextmanager
def atomic_output(path: PathLike) -> Iterator[BinaryIO]:
    """A binary file that appears at path, complete and synced, only if the block succeeds.

    On any exception (KeyboardInterrupt included) the temporary file is removed and whatever
    was at path before is left untouched.
    """
    path = Path(path)
    _check_target(path)
    tmp, fd = _temp_path(path)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        _commit(tmp, path)
    except BaseException:
        _discard(tmp)
        raise


class OutputArray:
    """A writable memory map being filled; `release()` bounds the pages it keeps resident."""

    def __init__(self, array: np.memmap | None, path: Path):
        self.array = array
        self.path = path

    def release(self) -> None:
        release(self.array)


def output_kind(path: PathLike) -> str:
    """'npy' or 'raw', from the suffix; any other suffix is refused rather than guessed."""
    suffix = Path(path).suffix.lower()
    if suffix == ".npy":
        return "npy"
    if suffix in RAW_SUFFIXES:
        return "raw"
    raise ValueError(
        f"cannot tell the output format of {str(path)!r} from its suffix {suffix!r}: "
        f"use .npy, .f32 or .f64"
    )


@contextlib.contextmanager
def open_output_array(
    path: PathLike, shape: tuple[int, ...], dtype: np.dtype
) -> Iterator[OutputArray]:
    """A writable memory map (.npy or raw .f32/.f64) that is committed atomically on success.

    The caller fills `.array` and calls `.release()` every few chunks so that written pages
    are flushed and dropped instead of accumulating as resident memory.
    """
    path = Path(path)
    dtype = np.dtype(dtype)
    kind = output_kind(path)
    if kind == "raw" and RAW_SUFFIXES[path.suffix.lower()] != dtype:
        raise ValueError(
            f"the stream holds {dtype.name} values but {str(path)!r} asks for "
            f"{RAW_SUFFIXES[path.suffix.lower()].name}: use the "
            f"{'.f32' if dtype.itemsize == 4 else '.f64'} suffix or .npy"
        )
    _check_target(path)
    tmp, fd = _temp_path(path)
    os.close(fd)
    out = OutputArray(None, path)
    try:
        if kind == "npy":
            out.array = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=tuple(shape))
        else:
            out.array = np.memmap(tmp, dtype=dtype, mode="w+", shape=tuple(shape))
        yield out
        out.array.flush()
        out.array = None  # unmaps once the caller's views are gone too
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        _commit(tmp, path)
    except BaseException:
        out.array = None
        _discard(tmp)
        raise
