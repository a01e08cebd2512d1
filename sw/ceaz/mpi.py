"""Parallel writes with MPI: each rank compresses its own slab, and one collective MPI-IO write
puts every rank's output into ONE ordinary ceaz container.

This is CEAZ's experiment (compress inside the simulation, before the parallel file system) in
software; `backend` is the hook for the card. The file needs no special reader: `ceaz
decompress` and `codec.decompress` read it like any other. What makes that work:

- The global array is cut along axis 0 into contiguous slabs, one per rank, in rank order.
  The container's chunk grid is chosen so that no chunk straddles two slabs (`aligned_chunk`),
  so each rank owns a contiguous run of chunk records.
- Every rank builds the same header: the finite value range comes from an allreduce, so the
  bound in force (eb_f) and the step are the ones a serial `compress` would choose, and the
  decoded values are bit for bit those of a serial round trip.
- Codebook adaptation is sequential over chunks, so each rank starts its own adaptation from
  the family book picked from its first chunk (`ceaz.codec.first_book`). Every chunk record
  carries its code-length table, so the decoder needs nothing else; only the first records
  of each slab may be a little larger.
- Record offsets come from an exclusive scan of the ranks' byte counts. Rank 0 prepends the
  header, the last rank (which gathers every offset) appends the index and trailer, and each
  rank writes one contiguous piece with a single collective `Write_at_all`.
- The file is written under a temporary name and renamed once complete, as the CLI does.
"""

from __future__ import annotations

import dataclasses
import math
import os
import secrets
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from . import codec, tiling
from . import format as fmt
from .chunk import Coding, EncodedChunk, decode_chunks, encode_chunk, store_if_larger
from .container import Header, index_size, pack_chunk, pack_index, pack_trailer
from .tiling import Box

#: Encodes one chunk: (values, box, coding, code lengths) -> EncodedChunk. The software model
#: by default; `card_encoder` puts a card (a board or the simulated one) behind the same call.
ChunkEncoder = Callable[[np.ndarray, Box, Coding, np.ndarray], EncodedChunk]

#: Values per piece when scanning a slab for its range (bounds the temporaries).
SCAN_VALUES = 1 << 22


def software_encoder(
    values: np.ndarray, box: Box, coding: Coding, lengths: np.ndarray
) -> EncodedChunk:
    """The reference encoder (compiled path), the default backend."""
    return encode_chunk(values, box, coding, lengths, use_jit=True)


def card_encoder(coder) -> ChunkEncoder:
    """Encode on a card: a `ceaz.driver.CardCoder` (from `ceaz.backends.coder_for`), with the
    host's stored-chunk decision on top, exactly as a serial `compress` on that backend."""

    def encode(values, box, coding, lengths):
        return store_if_larger(coder(values, box, coding, lengths), values)

    return encode


@dataclasses.dataclass(frozen=True)
class WriteStats:
    """What one rank did in `write_parallel`, for logs and benchmarks."""

    header: Header
    n_chunks: int  #: chunk records this rank wrote
    raw_bytes: int  #: this rank's uncompressed bytes
    local_bytes: int  #: this rank's compressed bytes (records, plus header/index/trailer)
    file_bytes: int  #: the whole container
    compress_seconds: float
    write_seconds: float  #: open, collective write, sync and close (this rank's view)


# --- where axis 0 lands in the folded (z, y, x) array ------------------------------------


def split_axis(shape: tuple[int, ...]) -> tuple[int, int]:
    """(folded axis, folded units per axis-0 index): axis 0 is z, y or x after folding."""
    if len(shape) == 1:
        return 2, 1
    if len(shape) == 2:
        return 1, 1
    return 0, math.prod(shape[1:-2])


def _unit(shape: tuple[int, ...], chunk: tuple[int, int, int]) -> int:
    """Smallest step along axis 0 whose multiples are chunk boundaries."""
    axis, scale = split_axis(shape)
    return chunk[axis] // math.gcd(chunk[axis], scale)


def _even(length: int, n_parts: int, unit: int) -> list[tuple[int, int]]:
    """length cut into n_parts contiguous (start, stop) ranges at multiples of unit."""
    units = -(-length // unit)
    cuts = [min(length, unit * (units * k // n_parts)) for k in range(n_parts + 1)]
    return list(zip(cuts[:-1], cuts[1:], strict=True))


def default_chunk(shape: tuple[int, ...], settings: codec.Settings) -> tuple[int, int, int]:
    """The chunk shape a serial `compress` would use for this global shape."""
    shape3 = tiling.fold_to_3d(shape)
    return tiling.chunk_shape(
        shape3, min(len(shape), 3), settings.chunk_values, settings.max_line, settings.max_plane
    )


def partition(
    global_shape: tuple[int, ...], n_ranks: int, settings: codec.Settings | None = None
) -> list[tuple[int, int]]:
    """Axis-0 slabs (start, stop) for n_ranks ranks, as even as the default chunk grid allows.

    Cutting at chunk boundaries keeps the serial chunk shape; any other cut makes
    `write_parallel` shrink the chunks until they fit (see `aligned_chunk`).
    """
    if n_ranks < 1:
        raise ValueError(f"need at least one rank, got {n_ranks!r}")
    shape = tuple(int(s) for s in global_shape)
    chunk = default_chunk(shape, settings or codec.Settings())
    return _even(shape[0], n_ranks, _unit(shape, chunk))


def _divisor_at_most(n: int, cap: int) -> int:
    """The largest divisor of n that is <= cap."""
    best = 1
    for d in range(1, math.isqrt(n) + 1):
        if n % d == 0:
            for e in (d, n // d):
                if best < e <= cap:
                    best = e
    return best


def aligned_chunk(
    global_shape: tuple[int, ...], bounds: list[tuple[int, int]], settings: codec.Settings
) -> tuple[int, int, int]:
    """The default chunk shape, shrunk along the split axis so every slab cut is a chunk cut."""
    shape = tuple(int(s) for s in global_shape)
    chunk = list(default_chunk(shape, settings))
    axis, scale = split_axis(shape)
    g = 0
    for start, _ in bounds:
        if 0 < start < shape[0]:
            g = math.gcd(g, start * scale)
    if g:
        before = chunk[axis]
        chunk[axis] = _divisor_at_most(g, before)
        if chunk[axis] * 4 <= before:
            warnings.warn(
                f"slab cuts at axis-0 positions {[s for s, _ in bounds[1:]]} shrink chunks from "
                f"{before} to {chunk[axis]} along the split axis; cut with ceaz.mpi.partition "
                f"to keep the default chunk size",
                stacklevel=3,
            )
    return tuple(chunk)


# --- agreeing on errors so that no rank is left waiting -----------------------------------


def _agree(comm, problem: str | None, kind: type[Exception] = ValueError) -> None:
    """Raise on every rank if any rank found a problem (a lone raise would deadlock)."""
    problems = comm.allgather(problem)
    bad = [(r, p) for r, p in enumerate(problems) if p]
    if bad:
        raise kind("; ".join(f"rank {r}: {p}" for r, p in bad))


def _check_local(
    block: np.ndarray, global_shape: tuple[int, ...], origin: tuple[int, ...]
) -> str | None:
    dtype = np.dtype(block.dtype)
    if dtype.kind != "f" or dtype.itemsize not in (4, 8):
        return f"ceaz compresses float32 or float64 arrays, not {dtype!r}"
    if not 1 <= len(global_shape) <= fmt.MAX_NDIM or any(s < 1 for s in global_shape):
        return f"invalid global shape {global_shape!r}"
    if block.ndim != len(global_shape) or tuple(block.shape[1:]) != global_shape[1:]:
        return (
            f"local block of shape {block.shape!r} is not a slab of {global_shape!r} along "
            f"axis 0 (all other axes must be whole)"
        )
    if len(origin) != len(global_shape) or any(origin[1:]):
        return f"origin {origin!r} must be (start, 0, ..., 0) for a slab along axis 0"
    if not 0 <= origin[0] <= origin[0] + block.shape[0] <= global_shape[0]:
        stop = origin[0] + block.shape[0]
        return f"slab {origin[0]}:{stop} is outside axis 0 of {global_shape!r}"
    return None


def _check_tiling(bounds: list[tuple[int, int]], n0: int) -> str | None:
    stop = 0
    for r, (a, b) in enumerate(bounds):
        if a != stop:
            return (
                f"slabs must tile axis 0 in rank order: rank {r} starts at {a}, "
                f"expected {stop} (slabs {bounds!r})"
            )
        stop = b
    if stop != n0:
        return f"slabs {bounds!r} cover axis 0 up to {stop}, not the whole {n0}"
    return None


# --- the shared header ------------------------------------------------------------------------


def _pieces(block: np.ndarray) -> Iterator[np.ndarray]:
    """Native-endian, flat pieces of a slab along axis 0, a few million values at a time."""
    if block.shape[0] == 0:
        return
    row = max(1, block.size // block.shape[0])
    step = max(1, SCAN_VALUES // row)
    native = block.dtype.newbyteorder("=")
    for i in range(0, block.shape[0], step):
        yield np.asarray(block[i : i + step]).astype(native, copy=False).reshape(-1)


def _fill_bits(dtype: np.dtype, settings: codec.Settings) -> int | None:
    if settings.fill_value is None:
        return None
    dt = np.dtype(dtype).newbyteorder("<")
    uint = np.uint32 if dt.itemsize == 4 else np.uint64
    return int(np.array(settings.fill_value, dtype=dt).view(uint))


def local_range(block: np.ndarray, fill_bits: int | None) -> tuple[float, float]:
    """(min, max) of the finite non-fill values, (inf, -inf) if there are none.

    Unlike `codec.value_range`, "none" stays distinguishable from an all-zero slab, so a rank
    whose slab is all fill does not drag the global range to 0 in the allreduce.
    """
    from . import _jit

    lo, hi = math.inf, -math.inf
    for x in _pieces(block):
        s_lo, s_hi, n = _jit.finite_range(np.ascontiguousarray(x), fill_bits)
        if n:
            lo, hi = min(lo, s_lo), max(hi, s_hi)
    return lo, hi


def shared_header(
    comm,
    block: np.ndarray,
    global_shape: tuple[int, ...],
    bounds: list[tuple[int, int]],
    eb: float,
    mode: str,
    settings: codec.Settings,
) -> Header:
    """The header every rank agrees on: global range by allreduce, aligned chunk grid.

    `codec.make_header` is applied to the two extreme values, so the bound in force and the
    step follow exactly the serial rules; then the global shape and chunk are put in.
    """
    from mpi4py import MPI

    dtype = np.dtype(block.dtype).newbyteorder("<")
    lo, hi = local_range(block, _fill_bits(dtype, settings))
    lo = comm.allreduce(lo, op=MPI.MIN)
    hi = comm.allreduce(hi, op=MPI.MAX)
    probe = np.array([lo, hi] if lo <= hi else [0.0], dtype=dtype)
    header = codec.make_header(probe, eb, mode, settings)
    return dataclasses.replace(
        header,
        shape=tuple(global_shape),
        chunk=aligned_chunk(global_shape, bounds, settings),
    )


# --- the write ------------------------------------------------------------------------------


def _local3(block: np.ndarray, global_shape: tuple[int, ...]) -> np.ndarray:
    """The slab folded like the global array: (z, y, x) with the split axis shortened."""
    axis, scale = split_axis(global_shape)
    shape3 = list(tiling.fold_to_3d(global_shape))
    shape3[axis] = block.shape[0] * scale
    return block.reshape(shape3)


def _owned(
    boxes: list[Box], axis: int, lo: int, hi: int
) -> Iterator[tuple[Box, tuple[slice, ...], tuple[slice, ...]]]:
    """Boxes meeting folded range [lo, hi) on axis: (box, slices in the box, slices local)."""
    for box in boxes:
        a, b = box.origin[axis], box.origin[axis] + box.shape[axis]
        if b <= lo or a >= hi:
            continue
        s, e = max(a, lo), min(b, hi)
        inner = list(slice(0, n) for n in box.shape)
        inner[axis] = slice(s - a, e - a)
        local = list(box.slices)
        local[axis] = slice(s - lo, e - lo)
        yield box, tuple(inner), tuple(local)


def _encode_slab(
    header: Header, local3: np.ndarray, lo: int, hi: int, backend: ChunkEncoder
) -> list[bytes]:
    """This rank's chunk records, adapting codebooks as the RTL does; its first chunks use
    the family book picked from the rank's first chunk (each rank's schedule starts afresh)."""
    axis, _ = split_axis(header.shape)
    coding = Coding(header.qparams, header.radius, header.sync_interval)
    schedule = codec.CodebookSchedule(header.radius, header.adapt_lag)
    boxes = list(tiling.boxes(header.shape3, header.chunk))
    records = []
    for box, _, local in _owned(boxes, axis, lo, hi):
        values = np.ascontiguousarray(local3[local], dtype=header.dtype)
        enc = backend(values, box, coding, schedule.next_lengths(values, box, coding))
        schedule.observe(enc.hist)
        records.append(pack_chunk(enc))
    return records


def _temp_name(comm, path: Path) -> Path:
    name = None
    if comm.rank == 0:
        name = f".{path.name}.{secrets.token_hex(4)}.partial"
    return path.with_name(comm.bcast(name, root=0))


def write_parallel(
    comm,
    local_block: np.ndarray,
    global_shape: tuple[int, ...],
    origin: tuple[int, ...],
    path: str | os.PathLike[str],
    eb: float,
    mode: str = "abs",
    settings: codec.Settings | None = None,
    backend: ChunkEncoder | None = None,
) -> WriteStats:
    """Compress this rank's slab and write all slabs, collectively, as one container at path.

    Collective over comm: every rank calls it with its own slab (shape (n, *global_shape[1:]),
    origin (start, 0, ...)); slabs tile axis 0 in rank order (a rank may hold none). eb, mode
    and settings must be the same on every rank. Errors are raised on every rank.
    """
    from mpi4py import MPI

    settings = settings or codec.Settings()
    backend = backend or software_encoder
    block = local_block if isinstance(local_block, np.ndarray) else np.asarray(local_block)
    global_shape = tuple(int(s) for s in global_shape)
    origin = tuple(int(o) for o in origin)
    path = Path(path)

    _agree(comm, _check_local(block, global_shape, origin))
    n0 = block.shape[0]
    bounds = comm.allgather((origin[0], origin[0] + n0))
    # repr, because a NaN fill value never equals itself once it has crossed ranks
    same = comm.allgather(repr((np.dtype(block.dtype).str, eb, mode, settings)))
    problem = _check_tiling(bounds, global_shape[0])
    if problem is None and any(s != same[0] for s in same):
        problem = f"dtype, eb, mode and settings must agree on all ranks, got {same!r}"
    if problem is None and not path.parent.is_dir():
        problem = f"output directory {str(path.parent)!r} does not exist"
    _agree(comm, problem if comm.rank == 0 else None)
    # A bad bound or mode raises here on every rank alike, after the same collective calls.
    header = shared_header(comm, block, global_shape, bounds, eb, mode, settings)

    axis, scale = split_axis(global_shape)
    lo, hi = origin[0] * scale, (origin[0] + n0) * scale
    t0 = time.perf_counter()
    records: list[bytes] = []
    problem = None
    try:
        records = _encode_slab(header, _local3(block, global_shape), lo, hi, backend)
    except Exception as e:  # reported on every rank by _agree
        problem = f"{type(e).__name__}: {e}"
    _agree(comm, problem, RuntimeError)
    compress_seconds = time.perf_counter() - t0

    sizes = np.array([len(r) for r in records], dtype=np.int64)
    local_records = int(sizes.sum())
    before = comm.exscan(local_records)
    start = fmt.HEADER_SIZE + (before if comm.rank > 0 else 0)
    offsets = (start + np.concatenate(([0], np.cumsum(sizes)[:-1]))).tolist() if records else []
    last = comm.size - 1
    gathered = comm.gather(offsets, root=last)
    total_records = comm.allreduce(local_records)
    index_offset = fmt.HEADER_SIZE + total_records

    pieces = records
    at = start
    problem = None
    if comm.rank == 0:
        pieces = [header.pack(), *pieces]
        at = 0
    if comm.rank == last:
        all_offsets = [o for part in gathered for o in part]
        if len(all_offsets) != header.n_chunks:
            problem = f"internal error: {len(all_offsets)} records for {header.n_chunks} chunks"
        pieces = [*pieces, pack_index(all_offsets), pack_trailer(index_offset)]
    _agree(comm, problem, RuntimeError)
    buf = b"".join(pieces)
    file_bytes = index_offset + index_size(header.n_chunks) + fmt.TRAILER.size

    tmp = _temp_name(comm, path)
    t1 = time.perf_counter()
    problem = None
    try:
        fh = MPI.File.Open(comm, str(tmp), MPI.MODE_WRONLY | MPI.MODE_CREATE | MPI.MODE_EXCL)
    except MPI.Exception as e:
        raise OSError(f"cannot create {str(tmp)!r}: {e.Get_error_string()}") from None
    try:
        fh.Write_at_all(at, [buf, MPI.BYTE])
        fh.Sync()
    except MPI.Exception as e:
        problem = f"writing {str(tmp)!r} failed: {e.Get_error_string()}"
    finally:
        fh.Close()
    write_seconds = time.perf_counter() - t1
    failed = [p for p in comm.allgather(problem) if p]
    problem = None
    if comm.rank == 0:  # rank 0 alone renames or removes, and speaks for all
        if failed:
            _discard(tmp)
            problem = "; ".join(failed)
        else:
            problem = _commit(tmp, path)
    _agree(comm, problem, OSError)
    return WriteStats(
        header=header,
        n_chunks=len(records),
        raw_bytes=block.size * np.dtype(block.dtype).itemsize,
        local_bytes=len(buf),
        file_bytes=file_bytes,
        compress_seconds=compress_seconds,
        write_seconds=write_seconds,
    )


def _commit(tmp: Path, path: Path) -> str | None:
    try:
        os.replace(tmp, path)
    except OSError as e:
        _discard(tmp)
        return f"cannot rename {str(tmp)!r} to {str(path)!r}: {e}"
    return None


def _discard(tmp: Path) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass


# --- the parallel read ------------------------------------------------------------------------


def read_parallel(
    comm, path: str | os.PathLike[str], bounds: list[tuple[int, int]] | None = None
) -> tuple[np.ndarray, tuple[int, ...]]:
    """This rank's axis-0 slab of a container, decoded from the chunks it meets: (block, origin).

    Any container reads (not only one written in parallel). bounds gives every rank's
    (start, stop); by default axis 0 is cut evenly at chunk boundaries, so each chunk is
    decoded by exactly one rank.
    """
    with open(path, "rb") as f:
        reader = codec.StreamReader(f)
        h = reader.header
        if bounds is None:
            bounds = _even(h.shape[0], comm.size, _unit(h.shape, h.chunk))
        if len(bounds) != comm.size:
            raise ValueError(f"bounds lists {len(bounds)} slabs for {comm.size} ranks")
        start, stop = (int(b) for b in bounds[comm.rank])
        if not 0 <= start <= stop <= h.shape[0]:
            raise ValueError(f"slab {start}:{stop} is outside axis 0 of {h.shape!r}")
        block = np.empty((stop - start, *h.shape[1:]), dtype=h.dtype)
        axis, scale = split_axis(h.shape)
        lo, hi = start * scale, stop * scale
        local3 = _local3(block, h.shape)
        owned = list(_owned(reader.boxes, axis, lo, hi))
        batch: list[tuple[int, tuple[slice, ...], tuple[slice, ...]]] = []
        values = 0
        for box, inner, local in owned:
            batch.append((box.index, inner, local))
            values += box.size
            if values >= codec.DECODE_BATCH_VALUES:
                _decode_into(reader, batch, local3)
                batch, values = [], 0
        _decode_into(reader, batch, local3)
    return block, (start,) + (0,) * (len(h.shape) - 1)


def _decode_into(reader: codec.StreamReader, batch, local3: np.ndarray) -> None:
    if not batch:
        return
    payloads = [reader.chunk(i).payload for i, _, _ in batch]
    for (_, inner, local), v in zip(batch, decode_chunks(payloads, reader.coding), strict=True):
        local3[local] = v[inner]
