"""The packer: Huffman codes and raw escape fields concatenated MSB-first into one bitstream.

This is the numpy reference, vectorised over elements (packing) and over sync segments
(unpacking). `ceaz._jit` holds compiled kernels for the same two jobs; tests hold them equal.
Hand-written because the RTL packer must produce the same bits.
"""

from __future__ import annotations

import numpy as np

from . import format as fmt

_U64 = np.uint64


def _field_words(pos: np.ndarray, val: np.ndarray, width: np.ndarray):
    """(word index, contribution) pairs placing each field of 1..32 bits at bit `pos`."""
    keep = width > 0
    if not keep.all():
        pos, val, width = pos[keep], val[keep], width[keep]
    val = val.astype(_U64) & ((_U64(1) << width.astype(_U64)) - _U64(1))
    word = pos >> 6
    off = (pos & 63).astype(_U64)
    end = off + width.astype(_U64)
    fits = end <= 64
    left = np.where(fits, _U64(64) - end, _U64(0))
    right = np.where(fits, _U64(0), end - _U64(64))
    first = (val << left) >> right
    spill = ~fits
    second = val[spill] << (_U64(128) - end[spill])
    return np.concatenate([word, word[spill] + 1]), np.concatenate([first, second])


def pack(
    codes: np.ndarray, code_lens: np.ndarray, raw: np.ndarray, raw_lens: np.ndarray
) -> tuple[bytes, int, np.ndarray]:
    """Pack per-element (code, raw) fields; return bytes, bit length and element bit offsets.

    Raw fields may be up to 64 bits wide; they are split into two halves of <= 32 bits.
    Fields never overlap, so adding their word contributions is the same as OR-ing them.
    """
    code_lens = code_lens.astype(np.int64)
    raw_lens = raw_lens.astype(np.int64)
    sizes = code_lens + raw_lens
    starts = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    total = int(starts[-1])
    esc = np.flatnonzero(raw_lens)
    raw_e = raw[esc].astype(_U64)
    len_e = raw_lens[esc]
    lo_len = np.minimum(len_e, 32)
    hi_len = len_e - lo_len
    raw_pos = starts[esc] + code_lens[esc]
    parts = [
        _field_words(starts[:-1], codes, code_lens),
        _field_words(raw_pos, raw_e >> lo_len.astype(_U64), hi_len),
        _field_words(raw_pos + hi_len, raw_e, lo_len),
    ]
    words = np.zeros(total // 64 + 2, dtype=_U64)
    for idx, contrib in parts:
        np.add.at(words, idx, contrib)
    data = words.astype(">u8").tobytes()[: (total + 7) // 8]
    return data, total, starts[:-1]


def as_words(data: bytes | np.ndarray) -> np.ndarray:
    """Big-endian 64-bit words of a byte stream, with two zero words of read-ahead padding."""
    buf = np.frombuffer(data, dtype=np.uint8)
    padded = np.zeros(((len(buf) + 7) // 8 + 2) * 8, dtype=np.uint8)
    padded[: len(buf)] = buf
    return padded.view(">u8").astype(_U64)


def peek(words: np.ndarray, pos: np.ndarray, nbits: np.ndarray | int) -> np.ndarray:
    """The nbits (1..64) starting at bit pos, MSB-first, as uint64.

    A corrupt stream can run a segment past the end of words: such reads are clamped to the
    last words (garbage, not an IndexError), and the segment-end check then reports them.
    """
    w = np.minimum((pos >> 6).astype(np.int64), len(words) - 2)
    off = (pos & 63).astype(_U64)
    hi = words[w] << off
    lo = np.where(off > 0, words[w + 1] >> ((_U64(64) - off) & _U64(63)), _U64(0))
    return (hi | lo) >> (_U64(64) - np.asarray(nbits, dtype=_U64))


def unpack(
    words: np.ndarray,
    seg_start: np.ndarray,
    seg_count: np.ndarray,
    seg_table: np.ndarray,
    tables: np.ndarray,
    raw_width: np.ndarray,
    max_len: int = fmt.MAX_CODE_LEN,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode segments in lockstep: all segments advance one symbol per step.

    Segment i starts at bit seg_start[i], holds seg_count[i] symbols and uses decoding table
    tables[seg_table[i]] (from `huffman.decode_table`). raw_width maps a symbol to the width
    of the raw field that follows it. Returns symbols and raw fields in element order, and
    each segment's end bit position (for validation).
    """
    seg_count = seg_count.astype(np.int64)
    out_base = np.concatenate(([0], np.cumsum(seg_count)[:-1]))
    total = int(seg_count.sum())
    sym = np.zeros(total, dtype=np.uint16)
    raw = np.zeros(total, dtype=_U64)
    pos = seg_start.astype(np.int64).copy()
    table_base = seg_table.astype(np.int64) << max_len
    flat_tables = tables.reshape(-1)
    live = np.arange(len(pos))
    for step in range(int(seg_count.max(initial=0))):
        if step == int(seg_count[live].min()):
            live = live[seg_count[live] > step]
        p = pos[live]
        entry = flat_tables[table_base[live] + peek(words, p, max_len).astype(np.int64)]
        s = (entry >> 8).astype(np.uint16)
        p += (entry & 0xFF).astype(np.int64)
        out = out_base[live] + step
        sym[out] = s
        width = raw_width[s]
        esc = np.flatnonzero(width)
        if len(esc):
            raw[out[esc]] = peek(words, p[esc], width[esc])
            p[esc] += width[esc]
        pos[live] = p
    return sym, raw, pos
