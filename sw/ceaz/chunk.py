"""One chunk through the pipeline: quantizer, predictor, symbols, entropy coder, packer.

`code_chunk` is what the hardware does to one chunk; `decode_chunks` is its inverse for a
batch of chunks at once (vectorised across chunks and sync segments). The fast compiled path
(`ceaz._jit`) and this numpy reference produce the same bytes; `use_jit` picks one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import format as fmt
from . import huffman, packer, predictor, quantizer, symbols
from .errors import CorruptStreamError
from .quantizer import KIND_FILL, KIND_NORMAL, KIND_VERBATIM, QuantParams
from .tiling import Box

_OUTLIER_MASK = (1 << fmt.OUTLIER_BITS) - 1


@dataclass
class EncodedChunk:
    """A chunk's coded form plus what the encoder keeps for adapting the next codebook."""

    box: Box
    lengths: np.ndarray
    payload: bytes
    payload_bits: int
    sync: np.ndarray
    hist: np.ndarray
    n_outlier: int
    n_verbatim: int
    n_fill: int
    stored: bool = False


@dataclass(frozen=True)
class Coding:
    """Stream-wide settings every chunk shares."""

    qp: QuantParams
    radius: int
    sync_interval: int


def _uint_view(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint32 if x.dtype.itemsize == 4 else np.uint64)


def chunk_symbols(values: np.ndarray, coding: Coding):
    """Symbols, raw escape fields and raw widths of a (z, y, x) box of values."""
    x = np.ascontiguousarray(values).reshape(-1)
    q, kind = quantizer.prequantize(x, coding.qp)
    delta = predictor.residuals(q.reshape(values.shape)).reshape(-1)
    sym = symbols.encode(delta, kind, coding.radius)
    raw = np.where(sym == fmt.SYM_OUTLIER, delta & _OUTLIER_MASK, 0).astype(np.uint64)
    verbatim = kind == KIND_VERBATIM
    raw[verbatim] = _uint_view(x)[verbatim]
    return sym, raw, symbols.raw_widths(sym, coding.radius, x.dtype)


def code_chunk(
    values: np.ndarray, box: Box, coding: Coding, lengths: np.ndarray, use_jit: bool = True
) -> EncodedChunk:
    """A chunk's coded form, exactly what the compressor pipeline (and the card) produces."""
    if values.shape != box.shape:
        raise ValueError(f"chunk values have shape {values.shape!r}, box is {box.shape!r}")
    if use_jit:
        from . import _jit

        return _jit.encode_chunk(values, box, coding, lengths)
    return _encode_reference(values, box, coding, lengths)


def store_if_larger(enc: EncodedChunk, values: np.ndarray) -> EncodedChunk:
    """The host's decision after coding: keep the raw values when coding made them larger."""
    raw_bits = values.size * fmt.VALUE_BITS[values.dtype]
    if enc.payload_bits <= raw_bits:
        return enc
    raw = np.ascontiguousarray(values).astype(values.dtype.newbyteorder("<"), copy=False)
    enc.payload, enc.payload_bits = raw.tobytes(), raw_bits
    enc.sync, enc.stored = np.zeros(0, dtype=np.uint32), True
    return enc


def encode_chunk(
    values: np.ndarray, box: Box, coding: Coding, lengths: np.ndarray, use_jit: bool = True
) -> EncodedChunk:
    """The coded chunk, or its raw values when coding would not make it smaller."""
    return store_if_larger(code_chunk(values, box, coding, lengths, use_jit), values)


def _encode_reference(
    values: np.ndarray, box: Box, coding: Coding, lengths: np.ndarray
) -> EncodedChunk:
    sym, raw, raw_lens = chunk_symbols(values, coding)
    codes = huffman.canonical_codes(lengths)
    payload, bits, starts = packer.pack(codes[sym], lengths[sym], raw, raw_lens)
    k = coding.sync_interval
    hist = np.bincount(sym, minlength=fmt.n_symbols(coding.radius)).astype(np.uint64)
    r = coding.radius
    return EncodedChunk(
        box=box,
        lengths=np.asarray(lengths, dtype=np.uint8),
        payload=payload,
        payload_bits=bits,
        sync=starts[k::k].astype(np.uint32),
        hist=hist,
        n_outlier=int(hist[fmt.SYM_OUTLIER]),
        n_verbatim=int(hist[fmt.sym_verbatim(r)]),
        n_fill=int(hist[fmt.sym_fill(r)]),
    )


@dataclass
class ChunkPayload:
    """What the decoder needs of one chunk, parsed and CRC-checked by the container."""

    box: Box
    lengths: np.ndarray
    payload: bytes
    payload_bits: int
    sync: np.ndarray
    stored: bool = False


def _stored_values(c: ChunkPayload, coding: Coding) -> np.ndarray:
    dtype = coding.qp.dtype
    if c.payload_bits != c.box.size * fmt.VALUE_BITS[dtype] or len(c.sync):
        raise CorruptStreamError(f"chunk {c.box.index}: stored chunk of the wrong size")
    values = np.frombuffer(c.payload, dtype=dtype).astype(dtype.newbyteorder("="))
    return values.reshape(c.box.shape)


def _raw_width_table(radius: int, dtype: np.dtype) -> np.ndarray:
    w = np.zeros(fmt.n_symbols(radius), dtype=np.int64)
    w[fmt.SYM_OUTLIER] = fmt.OUTLIER_BITS
    w[fmt.sym_verbatim(radius)] = fmt.VALUE_BITS[np.dtype(dtype)]
    return w


def decode_symbols(chunks: list[ChunkPayload], coding: Coding):
    """Symbols and raw fields of a batch of chunks, decoded across all their sync segments."""
    k = coding.sync_interval
    tables, starts, counts, seg_table, blobs = [], [], [], [], []
    base_bits = 0
    for i, c in enumerate(chunks):
        tables.append(huffman.decode_table(c.lengths))
        seg = np.concatenate(([0], c.sync.astype(np.int64)))
        starts.append(seg + base_bits)
        n = c.box.size
        counts.append(np.minimum(k, n - k * np.arange(len(seg))))
        seg_table.append(np.full(len(seg), i))
        blob = c.payload + bytes(-len(c.payload) % 8 + 8)  # keep chunks word-aligned
        blobs.append(blob)
        base_bits += 8 * len(blob)
    words = packer.as_words(b"".join(blobs))
    starts = np.concatenate(starts)
    counts = np.concatenate(counts)
    sym, raw, ends = packer.unpack(
        words,
        starts,
        counts,
        np.concatenate(seg_table),
        np.stack(tables),
        _raw_width_table(coding.radius, coding.qp.dtype),
    )
    segments = _split(starts, chunks)
    expected_end = np.concatenate(
        [np.append(s[1:], s[0] + c.payload_bits) for s, c in zip(segments, chunks, strict=True)]
    )
    bad = np.flatnonzero(ends != expected_end)
    if len(bad):
        raise CorruptStreamError(
            f"sync segment {int(bad[0])} ends at bit {int(ends[bad[0]])}, "
            f"expected {int(expected_end[bad[0]])}: the payload does not decode cleanly"
        )
    return sym, raw


def _split(starts: np.ndarray, chunks: list[ChunkPayload]) -> list[np.ndarray]:
    sizes = [len(c.sync) + 1 for c in chunks]
    return np.split(starts, np.cumsum(sizes)[:-1])


def values_from_symbols(
    sym: np.ndarray, raw: np.ndarray, box: Box, coding: Coding
) -> np.ndarray:
    """Invert symbols, prediction and prequantization for one chunk."""
    r = coding.radius
    qp = coding.qp
    delta, kind = symbols.decode(sym, r)
    outlier = sym == fmt.SYM_OUTLIER
    d_out = raw[outlier].astype(np.int64)
    sign = d_out >> (fmt.OUTLIER_BITS - 1)
    delta[outlier] = d_out - (sign << fmt.OUTLIER_BITS)
    escaped = kind != KIND_NORMAL
    q = predictor.reconstruct(delta.reshape(box.shape), escaped.reshape(box.shape)).reshape(-1)
    if np.abs(q).max(initial=0) >= fmt.Q_LIMIT:
        raise CorruptStreamError(f"chunk {box.index}: a prequantized value is out of range")
    x = quantizer.reconstruct(q, qp)
    xu = _uint_view(x)
    verbatim = kind == KIND_VERBATIM
    xu[verbatim] = raw[verbatim].astype(xu.dtype)
    if qp.fill_bits is not None:
        xu[kind == KIND_FILL] = qp.fill_bits
    elif (kind == KIND_FILL).any():
        raise CorruptStreamError(f"chunk {box.index}: fill symbol in a stream without fill value")
    return x.reshape(box.shape)


def decode_chunks(
    chunks: list[ChunkPayload], coding: Coding, use_jit: bool = True
) -> list[np.ndarray]:
    """Values of each chunk, as (z, y, x) boxes."""
    coded = [c for c in chunks if not c.stored]
    if use_jit:
        from . import _jit

        decoded = [_jit.decode_chunk(c, coding) for c in coded]
    else:
        decoded, base = [], 0
        sym, raw = decode_symbols(coded, coding) if coded else (None, None)
        for c in coded:
            n = c.box.size
            s, r = sym[base : base + n], raw[base : base + n]
            decoded.append(values_from_symbols(s, r, c.box, coding))
            base += n
    it = iter(decoded)
    return [_stored_values(c, coding) if c.stored else next(it) for c in chunks]
