"""Real fields (Met Office sample data) and the synthetic adversaries keep every promise."""

from __future__ import annotations

import numpy as np
import pytest

from ceaz import codec, datasets
from ceaz.codec import Settings, StreamReader
from ceaz.metrics import quality

pytestmark = pytest.mark.skipif(not datasets.available(), reason="iris-sample-data missing")


@pytest.mark.parametrize("name", sorted(datasets.REAL_FIELDS))
@pytest.mark.parametrize("eb", [1e-2, 1e-3, 1e-4])
def test_real_fields_keep_the_bound(name, eb):
    x = datasets.load(name)
    data = codec.compress(x, eb, "rel")
    header = StreamReader.from_bytes(data).header
    q = quality(x, codec.decompress(data), header.fill_bits)
    assert header.eb_f <= eb * (float(x.max()) - float(x.min()))
    assert q.max_error <= header.eb_f
    assert len(data) < x.nbytes  # these smooth fields always compress


def test_real_field_sample_matches_the_reference_path():
    """The compiled path and the numpy reference agree on real data, byte for byte."""
    x = datasets.load("colpex_theta")[:20]
    s = Settings(chunk_values=40_000, sync_interval=512)
    fast = codec.compress(x, 1e-4, "rel", s)
    assert fast == codec.compress(x, 1e-4, "rel", s, use_jit=False)
    ref = codec.decompress(fast, use_jit=False)
    np.testing.assert_array_equal(codec.decompress(fast).view(np.uint32), ref.view(np.uint32))


@pytest.mark.parametrize("kind", datasets.ADVERSARIAL_KINDS)
def test_adversarial_fields(kind):
    x = datasets.adversarial(kind, (16, 40, 50), seed=3)
    s = Settings(fill_value=datasets.FILL_VALUE if kind == "fill" else np.nan, chunk_values=8000)
    for eb in (1e-2, 1e-5):
        data = codec.compress(x, eb, "rel", s)
        header = StreamReader.from_bytes(data).header
        q = quality(x, codec.decompress(data), header.fill_bits)
        assert q.max_error <= header.eb_f and q.special_exact
