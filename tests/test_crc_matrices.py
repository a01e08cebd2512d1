"""The CRC unit's elaboration-time algebra (ceaz_hw.crc), checked against zlib: a whole beat
with the final beat's padding zeros, then the padding undone by the inverse matrix, gives the
CRC of the unpadded bytes (sim/test_crc.py checks the RTL itself)."""

from __future__ import annotations

import random
import zlib

import pytest

from ceaz_hw.crc import gf2_inverse, initial_state, update_matrices

MASK = 0xFFFFFFFF


def _apply(rows: list[int], vector: int) -> int:
    return sum(((row & vector).bit_count() & 1) << i for i, row in enumerate(rows))


def test_inverse_of_a_singular_matrix_is_refused():
    with pytest.raises(ValueError, match="singular"):
        gf2_inverse([0b01, 0b01])


@pytest.mark.parametrize("width", [8, 32])
def test_padding_undone_matches_zlib(width):
    rng = random.Random(width)
    full = update_matrices(width)
    for n in range(8, width, 8):
        undo = gf2_inverse([row & MASK for row in update_matrices(width - n)])
        for _ in range(5):
            head = rng.randbytes(width * rng.randint(0, 2))
            tail = rng.randbytes(n)
            state = initial_state()
            for k in range(0, len(head), width):
                state = _apply(full, state | int.from_bytes(head[k:k + width], "little") << 32)
            padded = _apply(full, state | int.from_bytes(tail + bytes(width - n), "little") << 32)
            assert _apply(undo, padded) ^ MASK == zlib.crc32(head + tail)
