"""Golden vectors pin the format byte for byte; every bit flip and truncation is detected."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ceaz import codec
from ceaz.codec import Settings
from ceaz.errors import CorruptStreamError

GOLDEN = Path(__file__).parent / "golden"
MANIFEST = json.loads((GOLDEN / "manifest.json").read_text())



@pytest.mark.parametrize("name", sorted(MANIFEST))
@pytest.mark.parametrize("use_jit", [True, False])
def test_golden_bytes(name, use_jit):
    x = np.load(GOLDEN / f"{name}.in.npy")
    expected = (GOLDEN / f"{name}.ceaz").read_bytes()
    p = dict(MANIFEST[name])
    eb, mode = p.pop("eb"), p.pop("mode")
    assert codec.compress(x, eb, mode, Settings(**p), use_jit=use_jit) == expected
    decoded = codec.decompress(expected, use_jit=use_jit)
    expected_values = np.load(GOLDEN / f"{name}.out.npy")
    np.testing.assert_array_equal(decoded.view(np.uint8), expected_values.view(np.uint8))


def test_every_single_bit_flip_is_detected():
    """A small stream with every structure present: two chunks, sync points, escapes."""
    x = np.cumsum(np.random.default_rng(1).standard_normal(60)).astype(np.float32)
    x[[5, 40]] = np.nan, 1e30
    data = codec.compress(x, 0.05, "abs", Settings(radius=4, chunk_values=30, sync_interval=8))
    buf = bytearray(data)
    for i in range(len(buf)):
        for b in range(8):
            buf[i] ^= 1 << b
            with pytest.raises(CorruptStreamError):
                codec.decompress(bytes(buf))
            buf[i] ^= 1 << b


def test_every_truncation_is_detected():
    data = (GOLDEN / "escapes3d_f32.ceaz").read_bytes()
    for n in range(len(data)):
        with pytest.raises(CorruptStreamError):
            codec.decompress(data[:n])
