"""The reference codec: arrays in, container out, and back, chunk by chunk.

Streaming is the normal case: the encoder reads one chunk box at a time from any array-like
(a numpy memory map included) and writes records as they are made, and the decoder reads one
batch of chunk records at a time, so peak memory is a small multiple of the chunk size.
Codebook adaptation follows the hardware: chunk k is coded with the book built from the
histogram of chunk k - adapt_lag, and the first chunks with the offline book that
best fits chunk 0 (one of a fixed family, `huffman.offline_book`).
"""

from __future__ import annotations

import io
import math
import mmap
import sys
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from . import format as fmt
from . import huffman, symbols, tiling
from .chunk import Coding, EncodedChunk, code_chunk, decode_chunks, store_if_larger
from .container import (
    ChunkInfo,
    Header,
    chunk_record_size,
    index_size,
    pack_chunk,
    pack_index,
    pack_trailer,
    unpack_chunk,
    unpack_index,
    unpack_trailer,
)
from .errors import CorruptStreamError
from .quantizer import F32, F64, quant_params

#: Codes one chunk box of values with the given code lengths (see `ceaz.chunk.code_chunk`).
ChunkCoder = Callable[[np.ndarray, tiling.Box, Coding, np.ndarray], EncodedChunk]

#: Values decoded together in one vectorised batch.
DECODE_BATCH_VALUES = 1 << 22


@dataclass(frozen=True)
class Settings:
    """Encoder settings beyond the bound; every one is recorded in the header."""

    radius: int = fmt.DEFAULT_RADIUS
    chunk_values: int = fmt.DEFAULT_CHUNK_VALUES
    sync_interval: int = fmt.DEFAULT_SYNC_INTERVAL
    max_line: int = fmt.DEFAULT_MAX_LINE
    max_plane: int = fmt.DEFAULT_MAX_PLANE
    adapt_lag: int = fmt.DEFAULT_ADAPT_LAG
    fill_value: float | None = math.nan

    def __post_init__(self):
        symbols.check_radius(self.radius)
        if not 1 <= self.sync_interval <= fmt.MAX_CHUNK_VALUES:
            raise ValueError(f"sync_interval must be >= 1, got {self.sync_interval!r}")
        if not 0 <= self.adapt_lag <= 255:
            raise ValueError(f"adapt_lag must be in [0, 255], got {self.adapt_lag!r}")


def _uint(dtype: np.dtype) -> type:
    return np.uint32 if dtype == F32 else np.uint64


#: Values between two releases of a memory-mapped input's pages.
RELEASE_VALUES = 1 << 22


def _flat_slabs(src: np.ndarray, n: int = RELEASE_VALUES) -> Iterator[np.ndarray]:
    """Native-endian copies of consecutive slabs, releasing a memory map's pages as it goes."""
    flat = src.reshape(-1)
    native = src.dtype.newbyteorder("=")
    for start in range(0, flat.size, n):
        yield np.asarray(flat[start : start + n]).astype(native, copy=False)
        _release(src)


def value_range(
    src: np.ndarray, fill_bits: int | None, use_jit: bool = True
) -> tuple[float, float, float]:
    """(min, max, max |x|) over finite values that are not the fill value, in one pass."""
    lo, hi = math.inf, -math.inf
    for slab in _flat_slabs(src):
        if use_jit:
            from . import _jit

            s_lo, s_hi, n = _jit.finite_range(slab, fill_bits)
        else:
            ok = np.isfinite(slab)
            if fill_bits is not None:
                ok &= slab.view(_uint(slab.dtype)) != fill_bits
            n = int(ok.sum())
            if n:
                s_lo, s_hi = float(slab[ok].min()), float(slab[ok].max())
        if n:
            lo, hi = min(lo, s_lo), max(hi, s_hi)
    if lo > hi:
        return 0.0, 0.0, 0.0
    return lo, hi, max(abs(lo), abs(hi))


def _check_array(src) -> np.ndarray:
    if not hasattr(src, "dtype") or not hasattr(src, "shape"):
        src = np.asarray(src)
    dtype = np.dtype(src.dtype)
    if dtype.kind != "f" or dtype.itemsize not in (4, 8):
        raise TypeError(f"ceaz compresses float32 or float64 arrays, not {dtype!r}")
    if src.size == 0:
        raise ValueError(f"cannot compress an empty array of shape {src.shape!r}")
    tiling.fold_to_3d(src.shape)  # checks the number of dimensions
    return src


def make_header(
    src: np.ndarray, eb: float, mode: str, settings: Settings, use_jit: bool = True
) -> Header:
    """Everything the stream needs to know up front: one pass for the value range."""
    if mode not in fmt.EB_MODES:
        raise ValueError(f"mode must be 'abs' or 'rel', got {mode!r}")
    if not (isinstance(eb, int | float | np.floating) and math.isfinite(eb) and eb > 0):
        raise ValueError(f"the error bound must be a positive finite number, got {eb!r}")
    dtype = np.dtype(src.dtype).newbyteorder("<")
    fill_bits = None
    if settings.fill_value is not None:
        fill_bits = int(np.array(settings.fill_value, dtype=dtype).view(_uint(dtype)))
    lo, hi, max_abs = value_range(src, fill_bits, use_jit)
    # A range wider than float64 (values near +-1.8e308) saturates: every value is in bound.
    eb_abs = float(eb) if mode == "abs" else min(float(eb) * (hi - lo), sys.float_info.max)
    qp = quant_params(eb_abs, dtype, max_abs, None)
    shape3 = tiling.fold_to_3d(src.shape)
    chunk = tiling.chunk_shape(
        shape3,
        min(len(src.shape), 3),
        settings.chunk_values,
        settings.max_line,
        settings.max_plane,
    )
    return Header(
        dtype=F32 if dtype == F32 else F64,
        shape=tuple(int(s) for s in src.shape),
        eb_mode=fmt.EB_MODES[mode],
        eb_user=float(eb),
        eb_f=qp.eb_f,
        step=qp.step,
        radius=settings.radius,
        max_code_len=fmt.MAX_CODE_LEN,
        adapt_lag=settings.adapt_lag,
        sync_interval=settings.sync_interval,
        chunk=chunk,
        fill_bits=fill_bits,
        finite_min=lo,
        finite_max=hi,
    )


def first_book(values: np.ndarray, box: tiling.Box, coding: Coding, use_jit: bool = True) -> int:
    """The family book (`huffman.offline_book`) for a stream's first chunks, picked from chunk
    0's own histogram. Every coder (the model, the card's driver, MPI ranks, rate control)
    reaches it through `CodebookSchedule`, so the card's bytes equal the model's.

    The histogram comes from the model's own chunk coder (its compiled path is much faster
    than `chunk.chunk_symbols`'s numpy one): one extra pass over chunk 0; any book gives the
    same counts.
    """
    hist = code_chunk(values, box, coding, huffman.offline_lengths(coding.radius), use_jit).hist
    return huffman.pick_offline_book(hist, coding.radius)


class CodebookSchedule:
    """Which code lengths code the next chunk: the adaptation rule shared with the RTL.

    Chunk k is coded with the book built from chunk k - lag's histogram; the first ``lag``
    chunks (every chunk if lag is 0) with the family book picked from the first chunk's own
    histogram (`first_book`).
    """

    def __init__(self, radius: int, lag: int, use_jit: bool = True):
        self.radius = radius
        self.lag = lag
        self.use_jit = use_jit
        self.history: deque[np.ndarray] = deque()
        self.first: int | None = None  # the picked family book, once the first chunk is seen

    def next_lengths(self, values: np.ndarray, box: tiling.Box, coding: Coding) -> np.ndarray:
        """The lengths for the chunk of ``values`` (read only for the stream's first chunk)."""
        if self.lag == 0 or len(self.history) < self.lag:
            if self.first is None:
                self.first = first_book(values, box, coding, self.use_jit)
            return huffman.offline_book(self.radius, self.first)
        weights = huffman.weights_from_histogram(self.history[0])
        if self.use_jit:
            from . import _jit

            return _jit.code_lengths(weights)
        return huffman.code_lengths(weights)

    def observe(self, hist: np.ndarray) -> None:
        self.history.append(hist)
        if len(self.history) > self.lag:
            self.history.popleft()


def _release(src: np.ndarray) -> None:
    """Drop the pages of a read-only memory map already consumed, to bound RSS."""
    base = getattr(src, "_mmap", None)
    if isinstance(base, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        try:
            base.madvise(mmap.MADV_DONTNEED)
        except (OSError, ValueError):
            pass


def encode_stream(
    src: np.ndarray,
    out: BinaryIO,
    eb: float,
    mode: str = "abs",
    settings: Settings | None = None,
    use_jit: bool = True,
    on_chunk: Callable[[int], None] | None = None,
    coder: ChunkCoder | None = None,
) -> Header:
    """Compress src into the writable stream out, one chunk at a time.

    ``coder`` codes one chunk (the software model by default; the card's driver is another);
    whichever codes, the host keeps the raw values of a chunk that coding made larger.
    """
    if coder is None:
        def coder(values, box, coding, lengths):
            return code_chunk(values, box, coding, lengths, use_jit)

    src = _check_array(src)
    settings = settings or Settings()
    header = make_header(src, eb, mode, settings, use_jit)
    coding = Coding(header.qparams, header.radius, header.sync_interval)
    src3 = src.reshape(header.shape3)
    schedule = CodebookSchedule(header.radius, header.adapt_lag, use_jit)
    pos = out.write(header.pack())
    offsets = []
    unreleased = 0
    # A coder with `prefetch` (the card's driver) is told the next chunk before it codes this
    # one, so it can fill its spare DMA buffer while the card works (double buffering).
    prefetch = getattr(coder, "prefetch", None)
    start_stream = getattr(coder, "start_stream", None)  # the card: on-chip adaptation or not
    if start_stream is not None:
        start_stream(header)
    boxes = list(tiling.boxes(header.shape3, header.chunk))
    for i, box in enumerate(boxes):
        values = np.ascontiguousarray(src3[box.slices], dtype=header.dtype)
        if prefetch is not None and i + 1 < len(boxes):
            prefetch(src3[boxes[i + 1].slices], boxes[i + 1])
        lengths = schedule.next_lengths(values, box, coding)
        enc = store_if_larger(coder(values, box, coding, lengths), values)
        schedule.observe(enc.hist)
        offsets.append(pos)
        pos += out.write(pack_chunk(enc))
        unreleased += box.size
        if unreleased >= RELEASE_VALUES:
            _release(src)
            unreleased = 0
        if on_chunk:
            on_chunk(box.size)
    out.write(pack_index(offsets))
    out.write(pack_trailer(pos))
    _release(src)
    return header


def compress(
    array: np.ndarray,
    eb: float | None = None,
    mode: str = "abs",
    settings: Settings | None = None,
    use_jit: bool = True,
    backend: str = "model",
    *,
    ratio: float | None = None,
    bit_rate: float | None = None,
) -> bytes:
    """Compress an array into a complete ceaz container (bytes).

    Give either an error bound ``eb`` (absolute, or relative to the value range with
    ``mode="rel"``) or a target: ``ratio`` (input bytes / output bytes) or ``bit_rate`` (bits
    per value). A target is met within a few per cent by fitting an absolute bound
    (`ceaz.ratecontrol`); the header records the bound every value was held to.

    ``backend`` picks what codes the chunks (`ceaz.backends`: "model", "sim", "pynq" or
    "auto"); every backend gives the same bytes.
    """
    from .backends import coder_for

    settings = settings or Settings()
    targeted = ratio is not None or bit_rate is not None
    if targeted == (eb is not None):
        raise ValueError("give an error bound eb, or a target ratio or bit_rate, not both")
    buf = io.BytesIO()
    with coder_for(backend, settings) as coder:
        if not targeted:
            encode_stream(array, buf, eb, mode, settings, use_jit, coder=coder)
            return buf.getvalue()
        from . import ratecontrol

        array = _check_array(array)
        bits = ratecontrol.target_bits(np.dtype(array.dtype).itemsize, ratio, bit_rate)
        ratecontrol.encode_to_rate(array, buf, bits, settings, use_jit=use_jit, coder=coder)
    return buf.getvalue()


class StreamReader:
    """Random access to a complete container: header, chunk index and chunk records."""

    def __init__(self, f: BinaryIO):
        self.f = f
        f.seek(0, io.SEEK_END)
        self.size = f.tell()
        self.header = Header.unpack(self._read(0, fmt.HEADER_SIZE))
        if self.size < fmt.HEADER_SIZE + fmt.TRAILER.size:
            raise CorruptStreamError("truncated stream: no room for the end marker")
        tail = self._read(self.size - fmt.TRAILER.size, fmt.TRAILER.size)
        self.index_offset = unpack_trailer(tail, self.size)
        n = self.header.n_chunks
        if self.index_offset + index_size(n) + fmt.TRAILER.size != self.size:
            raise CorruptStreamError("the chunk index does not end where the trailer starts")
        index = self._read(self.index_offset, index_size(n))
        self.offsets = unpack_index(index, self.header, self.index_offset)
        self.boxes = list(tiling.boxes(self.header.shape3, self.header.chunk))
        self.coding = Coding(self.header.qparams, self.header.radius, self.header.sync_interval)

    @classmethod
    def from_bytes(cls, data: bytes) -> StreamReader:
        return cls(io.BytesIO(data))

    def _read(self, offset: int, n: int) -> bytes:
        self.f.seek(offset)
        data = self.f.read(n)
        if len(data) != n:
            raise CorruptStreamError(f"truncated stream: wanted {n} bytes at offset {offset}")
        return data

    def chunk(self, i: int) -> ChunkInfo:
        end = self.offsets[i + 1] if i + 1 < len(self.offsets) else self.index_offset
        record = self._read(int(self.offsets[i]), int(end - self.offsets[i]))
        head = record[: fmt.CHUNK_HEADER.size]
        if len(head) < fmt.CHUNK_HEADER.size or chunk_record_size(head, self.header) != len(
            record
        ):
            raise CorruptStreamError(f"chunk {i}: record size disagrees with the index")
        return unpack_chunk(record, self.header, self.boxes[i])

    def chunks(self) -> Iterator[ChunkInfo]:
        for i in range(len(self.boxes)):
            yield self.chunk(i)

    def batches(self) -> Iterator[list[ChunkInfo]]:
        batch, size = [], 0
        for info in self.chunks():
            batch.append(info)
            size += info.payload.box.size
            if size >= DECODE_BATCH_VALUES:
                yield batch
                batch, size = [], 0
        if batch:
            yield batch


def decode_stream(
    f: BinaryIO,
    out: np.ndarray | None = None,
    use_jit: bool = True,
    on_chunk: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Decompress a container from a seekable stream into out (allocated if None)."""
    reader = StreamReader(f)
    h = reader.header
    if out is None:
        out = np.empty(h.shape, dtype=h.dtype)
    elif out.shape != h.shape or out.dtype != h.dtype:
        raise ValueError(f"output is {out.dtype}{out.shape}, the stream holds {h.dtype}{h.shape}")
    out3 = out.reshape(h.shape3)
    for batch in reader.batches():
        values = decode_chunks([c.payload for c in batch], reader.coding, use_jit)
        for info, v in zip(batch, values, strict=True):
            out3[info.payload.box.slices] = v
            if on_chunk:
                on_chunk(info.payload.box.size)
    return out


def decompress(data: bytes, use_jit: bool = True) -> np.ndarray:
    """Decompress a complete container held in memory."""
    return decode_stream(io.BytesIO(data), use_jit=use_jit)
