"""What the compressor card sends back for one chunk, and how the host reads it.

docs/hardware.md ("Packer") specifies the output stream: the payload, then the sync offsets,
then a 32-byte trailer, each zero-padded to whole output words of ``word_bits``. This module
is the model of that stream (`card_output`, which the RTL benches compare against byte for
byte) and its parser (`parse_card_output`, which the driver uses to build chunk records).
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from . import regmap
from .chunk import EncodedChunk
from .errors import DeviceError
from .tiling import Box

__all__ = ["TRAILER", "CardChunk", "card_output", "parse_card_output"]

#: magic, values, payload_bits, CRC32 of the payload (8-byte padded), outliers, verbatim, fill.
TRAILER = struct.Struct("<IIQIIII")
assert TRAILER.size == 32


def _pad(data: bytes, word_bytes: int) -> bytes:
    return data + bytes(-len(data) % word_bytes)


def _payload_crc(payload: bytes, payload_bits: int) -> int:
    return zlib.crc32(_pad(payload[: (payload_bits + 7) // 8], 8)[: (payload_bits + 63) // 64 * 8])


def card_output(enc: EncodedChunk, word_bits: int) -> bytes:
    """The bytes the card emits for a chunk the model coded as ``enc`` (never a stored chunk)."""
    if enc.stored:
        raise ValueError("the card never stores a chunk; pass the coded form")
    w = word_bits // 8
    payload = enc.payload[: (enc.payload_bits + 7) // 8]
    crc = _payload_crc(payload, enc.payload_bits)
    trailer = TRAILER.pack(
        regmap.TRAILER_MAGIC, enc.box.size, enc.payload_bits, crc,
        enc.n_outlier, enc.n_verbatim, enc.n_fill,
    )  # fmt: skip
    sync = np.asarray(enc.sync, dtype="<u4").tobytes()
    return _pad(payload, w) + _pad(sync, w) + _pad(trailer, w)


class CardChunk:
    """A chunk as the card returned it, checked: payload, bit length, sync offsets, counts."""

    def __init__(self, payload, payload_bits, sync, n_outlier, n_verbatim, n_fill):
        self.payload = payload
        self.payload_bits = payload_bits
        self.sync = sync
        self.n_outlier, self.n_verbatim, self.n_fill = n_outlier, n_verbatim, n_fill


def parse_card_output(data: bytes, box: Box, sync_interval: int, word_bits: int) -> CardChunk:
    """Split one chunk's output into its parts; raise DeviceError if it is not consistent
    with the chunk that was sent (wrong length, magic, value count or CRC)."""
    w = word_bits // 8
    if len(data) < TRAILER.size or len(data) % w:
        raise DeviceError(f"chunk {box.index}: card returned {len(data)} bytes, not whole words")
    magic, n, bits, crc, n_out, n_verb, n_fill = read_trailer(data, word_bits)
    if magic != regmap.TRAILER_MAGIC:
        raise DeviceError(f"chunk {box.index}: no trailer magic in the card's output")
    if n != box.size:
        raise DeviceError(f"chunk {box.index}: card coded {n} values, {box.size} were sent")
    n_sync = max(0, -(-n // sync_interval) - 1)
    payload_room = -(-bits // word_bits) * w
    sync_room = -(-4 * n_sync // w) * w
    if payload_room + sync_room + _trailer_room(w) != len(data):
        raise DeviceError(
            f"chunk {box.index}: card output of {len(data)} bytes does not hold a payload of "
            f"{bits} bits and {n_sync} sync offsets"
        )
    payload = data[: (bits + 7) // 8]
    if _payload_crc(payload, bits) != crc:
        raise DeviceError(f"chunk {box.index}: payload CRC mismatch (data damaged on the way)")
    sync = np.frombuffer(data, dtype="<u4", count=n_sync, offset=payload_room).astype(np.uint32)
    return CardChunk(payload, bits, sync, n_out, n_verb, n_fill)


def read_trailer(data: bytes, word_bits: int) -> tuple[int, ...]:
    """The trailer's fields (magic, values, payload bits, CRC, outliers, verbatims, fills) at
    the end of one chunk's output, unchecked."""
    return TRAILER.unpack_from(data, len(data) - _trailer_room(word_bits // 8))


def _trailer_room(word_bytes: int) -> int:
    return -(-TRAILER.size // word_bytes) * word_bytes
