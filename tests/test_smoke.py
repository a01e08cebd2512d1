import numpy as np

from ceaz import codec


def test_numpy_reference_round_trip():
    rng = np.random.default_rng(0)
    x = np.cumsum(rng.standard_normal((8, 30, 20)), axis=1).astype(np.float32)
    data = codec.compress(x, 1e-3, "rel", use_jit=False)
    y = codec.decompress(data, use_jit=False)
    eb = 1e-3 * float(x.max() - x.min())
    assert np.abs(x.astype(np.float64) - y).max() <= eb
