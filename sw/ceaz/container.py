"""The chunked container: file header, chunk records, chunk index and trailer.

Every byte is covered by a CRC32 (header, each chunk record, index, trailer), so corruption
is detected before decoding. A file is complete only when its trailer is present and points
at a valid index, so a partially written file never passes for a valid one.
Layouts are in `ceaz.format` and explained in docs/format.md.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

from . import format as fmt
from . import huffman, tiling
from .chunk import ChunkPayload, EncodedChunk
from .errors import CorruptStreamError
from .quantizer import QuantParams, _recip


@dataclass(frozen=True)
class Header:
    """Stream-wide facts: what was compressed, with which bound and which settings."""

    dtype: np.dtype
    shape: tuple[int, ...]
    eb_mode: int
    eb_user: float
    eb_f: float
    step: float
    radius: int
    max_code_len: int
    adapt_lag: int
    sync_interval: int
    chunk: tuple[int, int, int]
    fill_bits: int | None
    finite_min: float
    finite_max: float

    @property
    def shape3(self) -> tuple[int, int, int]:
        return tiling.fold_to_3d(self.shape)

    @property
    def n_chunks(self) -> int:
        return math.prod(tiling.grid(self.shape3, self.chunk))

    @property
    def qparams(self) -> QuantParams:
        mant, exp = _recip(self.step)
        return QuantParams(self.dtype, self.eb_f, self.step, mant, exp, self.fill_bits)

    def pack(self) -> bytes:
        shape8 = list(self.shape) + [0] * (fmt.MAX_NDIM - len(self.shape))
        body = fmt.HEADER.pack(
            fmt.MAGIC,
            fmt.VERSION,
            fmt.HEADER_SIZE,
            fmt.DTYPE_CODES[self.dtype],
            len(self.shape),
            self.eb_mode,
            fmt.FLAG_FILL if self.fill_bits is not None else 0,
            *shape8,
            self.eb_user,
            self.eb_f,
            self.step,
            self.radius,
            self.max_code_len,
            self.adapt_lag,
            0,
            self.sync_interval,
            *self.chunk,
            self.n_chunks,
            self.fill_bits or 0,
            self.finite_min,
            self.finite_max,
        )
        return body + fmt.HEADER_CRC.pack(zlib.crc32(body))

    @classmethod
    def unpack(cls, data: bytes) -> Header:
        if len(data) < 4 or data[:4] != fmt.MAGIC:
            raise CorruptStreamError("not a ceaz stream: the file does not start with b'CEAZ'")
        if len(data) < fmt.HEADER_SIZE:
            raise CorruptStreamError(f"truncated header: {len(data)} of {fmt.HEADER_SIZE} bytes")
        body = data[: fmt.HEADER.size]
        (crc,) = fmt.HEADER_CRC.unpack_from(data, fmt.HEADER.size)
        if zlib.crc32(body) != crc:
            raise CorruptStreamError("header CRC mismatch: the header is damaged")
        f = fmt.HEADER.unpack(body)
        (_, version, size, dcode, ndim, mode, flags), f = f[:7], f[7:]
        shape8, f = f[:8], f[8:]
        eb_user, eb_f, step, radius, max_len, lag, _, sync = f[:8]
        chunk, (n_chunks, fill_bits, fmin, fmax) = tuple(f[8:11]), f[11:]
        _check(version == fmt.VERSION, f"unsupported format version {version}")
        _check(size == fmt.HEADER_SIZE, f"header size {size}, expected {fmt.HEADER_SIZE}")
        _check(dcode in fmt.CODE_DTYPES, f"unknown dtype code {dcode}")
        _check(1 <= ndim <= fmt.MAX_NDIM, f"invalid number of dimensions {ndim}")
        shape = tuple(int(s) for s in shape8[:ndim])
        _check(all(s >= 1 for s in shape) and not any(shape8[ndim:]), f"invalid shape {shape}")
        _check(mode in fmt.EB_MODES.values(), f"unknown error-bound mode {mode}")
        _check(fmt.MIN_RADIUS <= radius <= fmt.MAX_RADIUS, f"invalid radius {radius}")
        _check(max_len == fmt.MAX_CODE_LEN, f"unsupported maximum code length {max_len}")
        _check(sync >= 1, f"invalid sync interval {sync}")
        _check(step > 0 and math.isfinite(step), f"invalid quantization step {step}")
        _check(eb_f >= 0 and math.isfinite(eb_f), f"invalid error bound {eb_f}")
        _check(flags & ~fmt.FLAG_FILL == 0, f"unknown flags {flags:#x}")
        header = cls(
            dtype=fmt.CODE_DTYPES[dcode],
            shape=shape,
            eb_mode=mode,
            eb_user=eb_user,
            eb_f=eb_f,
            step=step,
            radius=radius,
            max_code_len=max_len,
            adapt_lag=lag,
            sync_interval=sync,
            chunk=chunk,
            fill_bits=fill_bits if flags & fmt.FLAG_FILL else None,
            finite_min=fmin,
            finite_max=fmax,
        )
        s3 = header.shape3
        _check(
            all(1 <= c <= n for c, n in zip(chunk, s3, strict=True))
            and math.prod(chunk) <= fmt.MAX_CHUNK_VALUES,
            f"invalid chunk shape {chunk} for array {s3}",
        )
        _check(n_chunks == header.n_chunks, f"chunk count {n_chunks}, expected {header.n_chunks}")
        return header


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise CorruptStreamError(message)


def _pad8(n: int) -> int:
    return n + (-n % 8)


def _pack_lengths(lengths: np.ndarray) -> bytes:
    nib = (np.asarray(lengths, dtype=np.uint8) - 1).reshape(-1, 2)
    return ((nib[:, 0] << 4) | nib[:, 1]).astype(np.uint8).tobytes()


def _unpack_lengths(data: bytes) -> np.ndarray:
    b = np.frombuffer(data, dtype=np.uint8)
    return (np.stack([b >> 4, b & 15], axis=1).reshape(-1) + 1).astype(np.uint8)


def pack_chunk(c: EncodedChunk) -> bytes:
    """A chunk record: header, code-length table, sync offsets, payload, CRC32."""
    head = fmt.CHUNK_HEADER.pack(
        fmt.CHUNK_MAGIC,
        c.box.index,
        c.box.size,
        *c.box.origin,
        *c.box.shape,
        c.payload_bits,
        len(c.sync),
        c.n_outlier,
        c.n_verbatim,
        c.n_fill,
        fmt.CHUNK_STORED if c.stored else 0,
    )
    payload = c.payload + bytes(_pad8(len(c.payload)) - len(c.payload))
    body = b"".join([head, _pack_lengths(c.lengths), c.sync.astype("<u4").tobytes(), payload])
    return body + fmt.CHUNK_CRC.pack(zlib.crc32(body))


@dataclass
class ChunkInfo:
    """A parsed chunk record: its payload plus the counts kept for `ceaz info`."""

    payload: ChunkPayload
    n_outlier: int
    n_verbatim: int
    n_fill: int
    record_size: int


def chunk_record_size(head: bytes, header: Header) -> int:
    """Total record size from the fixed chunk header (validated enough to size a read)."""
    f = fmt.CHUNK_HEADER.unpack(head[: fmt.CHUNK_HEADER.size])
    bits, n_sync = f[9], f[10]
    _check(f[0] == fmt.CHUNK_MAGIC, "chunk record does not start with b'CZCH'")
    _check(bits <= fmt.MAX_CHUNK_VALUES * 80 and n_sync < fmt.MAX_CHUNK_VALUES, "bad chunk sizes")
    return (
        fmt.CHUNK_HEADER.size
        + fmt.n_symbols(header.radius) // 2
        + 4 * n_sync
        + _pad8((bits + 7) // 8)
        + fmt.CHUNK_CRC.size
    )


def unpack_chunk(record: bytes, header: Header, box: tiling.Box) -> ChunkInfo:
    """Parse and verify one chunk record against the box the header says it covers."""
    where = f"chunk {box.index}"
    if len(record) < fmt.CHUNK_HEADER.size:
        raise CorruptStreamError(f"{where}: truncated record")
    size = chunk_record_size(record, header)
    if len(record) < size:
        raise CorruptStreamError(f"{where}: truncated record ({len(record)} of {size} bytes)")
    body = record[: size - fmt.CHUNK_CRC.size]
    (crc,) = fmt.CHUNK_CRC.unpack_from(record, size - fmt.CHUNK_CRC.size)
    if zlib.crc32(body) != crc:
        raise CorruptStreamError(f"{where}: CRC mismatch, the chunk is damaged")
    f = fmt.CHUNK_HEADER.unpack_from(body)
    index, n_values, origin, shape = f[1], f[2], tuple(f[3:6]), tuple(f[6:9])
    bits, n_sync, n_out, n_verb, n_fill, flags = f[9:]
    stored = bool(flags & fmt.CHUNK_STORED)
    _check(flags & ~fmt.CHUNK_STORED == 0, f"{where}: unknown flags {flags:#x}")
    _check(index == box.index, f"{where}: record claims index {index}")
    _check(origin == box.origin and shape == box.shape, f"{where}: box does not match the header")
    _check(n_values == box.size, f"{where}: value count {n_values}, expected {box.size}")
    k = header.sync_interval
    expected_sync = 0 if stored else -(-n_values // k) - 1
    _check(n_sync == expected_sync, f"{where}: {n_sync} sync points, expected {expected_sync}")
    if stored:
        value_bits = fmt.VALUE_BITS[header.dtype]
        _check(bits == n_values * value_bits, f"{where}: stored chunk of the wrong size")
    off = fmt.CHUNK_HEADER.size
    nsym = fmt.n_symbols(header.radius)
    lengths = _unpack_lengths(body[off : off + nsym // 2])
    _check(huffman.is_complete(lengths), f"{where}: code-length table is not a complete code")
    off += nsym // 2
    sync = np.frombuffer(body, dtype="<u4", count=n_sync, offset=off).astype(np.int64)
    off += 4 * n_sync
    _check(
        bool(np.all(np.diff(np.concatenate(([0], sync, [bits]))) > 0)),
        f"{where}: sync offsets are not increasing within the payload",
    )
    payload = body[off : off + (bits + 7) // 8]
    _check(not any(body[off + len(payload) :]), f"{where}: nonzero padding after the payload")
    return ChunkInfo(
        ChunkPayload(box, lengths, payload, bits, sync, stored), n_out, n_verb, n_fill, size
    )


def pack_index(offsets: list[int]) -> bytes:
    body = fmt.INDEX_HEAD.pack(fmt.INDEX_MAGIC, len(offsets)) + np.asarray(
        offsets, dtype="<u8"
    ).tobytes()
    return body + fmt.CHUNK_CRC.pack(zlib.crc32(body))


def pack_trailer(index_offset: int) -> bytes:
    body = fmt.TRAILER.pack(fmt.TRAILER_MAGIC, index_offset, 0)[:12]
    return body + fmt.CHUNK_CRC.pack(zlib.crc32(body))


def index_size(n_chunks: int) -> int:
    return fmt.INDEX_HEAD.size + 8 * n_chunks + fmt.CHUNK_CRC.size


def unpack_trailer(data: bytes, file_size: int) -> int:
    """Index offset from the trailer; a missing trailer means an incomplete file."""
    if len(data) != fmt.TRAILER.size or data[:4] != fmt.TRAILER_MAGIC:
        raise CorruptStreamError(
            "no end marker: the file is truncated or was not completely written"
        )
    magic, index_offset, crc = fmt.TRAILER.unpack(data)
    _check(zlib.crc32(data[:12]) == crc, "trailer CRC mismatch: the end marker is damaged")
    _check(fmt.HEADER_SIZE <= index_offset <= file_size - fmt.TRAILER.size, "bad index offset")
    return index_offset


def unpack_index(data: bytes, header: Header, index_offset: int) -> np.ndarray:
    """Chunk record offsets, checked to be increasing and to tile the body exactly."""
    n = header.n_chunks
    _check(len(data) == index_size(n), "index has the wrong size for the chunk count")
    magic, count = fmt.INDEX_HEAD.unpack_from(data)
    _check(magic == fmt.INDEX_MAGIC, "index does not start with b'CZIX'")
    _check(count == n, f"index lists {count} chunks, the header says {n}")
    (crc,) = fmt.CHUNK_CRC.unpack_from(data, len(data) - 4)
    _check(zlib.crc32(data[:-4]) == crc, "index CRC mismatch: the chunk index is damaged")
    offsets = np.frombuffer(data, dtype="<u8", count=n, offset=fmt.INDEX_HEAD.size)
    offsets = offsets.astype(np.int64)
    bounds = np.concatenate((offsets, [index_offset]))
    _check(
        (n == 0 or offsets[0] == fmt.HEADER_SIZE) and bool(np.all(np.diff(bounds) > 0)),
        "chunk offsets in the index are out of order",
    )
    return offsets
