"""ceaz in the Zarr ecosystem: the numcodecs codec, Zarr formats 2 and 3, xarray and Dask.

The bound is checked on a real field (Met Office potential temperature) after a round trip
through each route, and the codec's config must survive JSON, NaN fill value included.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import warnings
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest

numcodecs = pytest.importorskip("numcodecs")
zarr = pytest.importorskip("zarr")

from ceaz import datasets  # noqa: E402
from ceaz.numcodecs_codec import Ceaz  # noqa: E402
from ceaz.quantizer import within_bound  # noqa: E402

SW = Path(__file__).resolve().parents[1] / "sw"
EB = 0.01  # kelvin, absolute: the recommended mode for Zarr
CHUNKS = (20, 83, 83)

# Zarr 3 warns that numcodecs codecs are outside its spec; that is known and intended.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def theta() -> np.ndarray:
    return np.asarray(datasets.load("colpex_theta"))


def assert_bound(x: np.ndarray, y: np.ndarray, eb: float) -> None:
    assert x.shape == y.shape and x.dtype == y.dtype
    assert within_bound(x.reshape(-1), y.reshape(-1), eb).all()


def _installed(group: str, name: str) -> bool:
    return any(e.name == name for e in entry_points(group=group))


# --- the codec on its own -----------------------------------------------------------------------


@pytest.mark.parametrize("fill", ["nan", float("nan"), None, -1e34, "-inf"])
def test_config_round_trips_through_json(fill):
    c = Ceaz(eb=1e-3, mode="rel", radius=256, chunk_values=4096, fill_value=fill)
    config = json.loads(json.dumps(c.get_config(), allow_nan=False))
    assert config["id"] == "ceaz"
    again = numcodecs.get_codec(config)
    assert isinstance(again, Ceaz)
    assert again.get_config() == config
    if fill is not None and np.isnan(float(fill)):
        assert config["fill_value"] == "nan" and np.isnan(again.fill_value)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(eb=0), "positive finite"),
        (dict(eb=float("inf")), "positive finite"),
        (dict(eb="1e-3"), "positive finite"),
        (dict(eb=1.0, mode="relative"), "'relative'"),
        (dict(eb=1.0, radius=1), "radius"),
        (dict(eb=1.0, chunk_values=0), "chunk_values"),
        (dict(eb=1.0, fill_value="missing"), "'missing'"),
    ],
)
def test_bad_config_names_the_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Ceaz(**kwargs)


def test_encode_decode_fills_out_and_keeps_fortran_order(theta):
    c = Ceaz(eb=EB)
    block = theta[:5]
    enc = c.encode(block)
    assert_bound(block, c.decode(enc), EB)
    out = np.empty(block.nbytes, dtype=np.uint8)  # Zarr may hand a flat byte buffer
    c.decode(enc, out=out)
    assert_bound(block, out.view(block.dtype).reshape(block.shape), EB)
    fortran = np.asfortranarray(block)
    out_f = np.empty_like(fortran, order="F")
    c.decode(c.encode(fortran), out=out_f)
    assert_bound(block, out_f, EB)


def test_codec_refuses_what_it_cannot_return(theta):
    with pytest.raises(TypeError, match="float32 or float64"):
        Ceaz(eb=EB).encode(theta.tobytes())
    with pytest.raises(ValueError, match="little-endian"):
        Ceaz(eb=EB).encode(theta[:2].astype(">f4"))


def test_relative_bound_is_per_chunk(theta):
    """mode='rel' in Zarr: each Zarr chunk gets eb times *its own* value range."""
    c = Ceaz(eb=1e-3, mode="rel")
    for block in (theta[:20], theta[20:40]):
        y = c.decode(c.encode(block))
        assert_bound(block, y, 1e-3 * float(block.max() - block.min()))


@pytest.mark.skipif(not _installed("numcodecs.codecs", "ceaz"), reason="ceaz not pip-installed")
def test_entry_points_resolve_without_importing_ceaz(tmp_path, theta):
    """numcodecs.get_codec and zarr.open_array (format 3) find ceaz through entry points."""
    path = tmp_path / "v3.zarr"
    import ceaz.zarr3

    z = zarr.create_array(
        path,
        shape=theta.shape,
        chunks=CHUNKS,
        dtype=theta.dtype,
        serializer=ceaz.zarr3.Ceaz(eb=EB),
        compressors=None,
    )
    z[:] = theta
    script = (
        "import sys, numcodecs, zarr\n"
        "c = numcodecs.get_codec({'id': 'ceaz', 'eb': 0.5, 'fill_value': 'nan'})\n"
        f"a = zarr.open_array({str(path)!r})[:]\n"
        "print(type(c).__module__, 'ceaz' in sys.modules, a.dtype, a.shape)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["ceaz.numcodecs_codec", "True", "float32", "(60,", "83,", "83)"]


# --- Zarr formats 2 and 3 -------------------------------------------------------------------


def test_zarr_v2_round_trip(tmp_path, theta):
    path = tmp_path / "v2.zarr"
    z = zarr.create_array(
        path,
        shape=theta.shape,
        chunks=CHUNKS,
        dtype=theta.dtype,
        zarr_format=2,
        compressors=Ceaz(eb=EB),
    )
    z[:] = theta
    meta = json.loads((path / ".zarray").read_text())
    assert meta["compressor"] == Ceaz(eb=EB).get_config()
    assert_bound(theta, zarr.open_array(path)[:], EB)
    stored = sum(f.stat().st_size for f in path.iterdir() if not f.name.startswith("."))
    assert stored < theta.nbytes / 3  # it did compress


def test_zarr_v3_round_trip_through_the_numcodecs_wrapper(tmp_path, theta):
    import ceaz.zarr3

    path = tmp_path / "v3.zarr"
    z = zarr.create_array(
        path,
        shape=theta.shape,
        chunks=CHUNKS,
        dtype=theta.dtype,
        serializer=ceaz.zarr3.Ceaz(eb=EB, fill_value=float("nan")),
        compressors=None,
    )
    z[:] = theta
    meta = json.loads((path / "zarr.json").read_text())
    (serializer,) = meta["codecs"]
    assert serializer["name"] == "numcodecs.ceaz"
    assert serializer["configuration"]["fill_value"] == "nan"
    assert_bound(theta, zarr.open_array(path)[:], EB)
    with pytest.raises(ValueError, match="positive finite"):
        ceaz.zarr3.Ceaz(eb=-1)


# --- xarray -------------------------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_xarray_to_zarr_and_open_zarr(tmp_path, theta, zarr_format):
    xr = pytest.importorskip("xarray")
    import ceaz.zarr3

    ds = xr.Dataset(
        {"theta": (("level_time", "y", "x"), theta, {"units": "K"})},
        coords={"y": np.arange(theta.shape[1]), "x": np.arange(theta.shape[2])},
    )
    if zarr_format == 2:
        enc = {"compressors": [Ceaz(eb=EB)], "chunks": CHUNKS}
    else:
        enc = {"serializer": ceaz.zarr3.Ceaz(eb=EB), "compressors": None, "chunks": CHUNKS}
    path = tmp_path / "ds.zarr"
    ds.to_zarr(path, zarr_format=zarr_format, encoding={"theta": enc}, consolidated=False)
    back = xr.open_zarr(path, consolidated=False)
    assert back.theta.attrs["units"] == "K"
    assert_bound(theta, back.theta.values, EB)


# --- Dask ---------------------------------------------------------------------------------


class _Watched(Ceaz):
    """Counts encodes in flight at once; the sleep lets overlapping calls meet."""

    lock = threading.Lock()
    active = 0
    peak = 0
    calls = 0

    def encode(self, buf):
        cls = type(self)
        with cls.lock:
            cls.active += 1
            cls.calls += 1
            cls.peak = max(cls.peak, cls.active)
        try:
            time.sleep(0.05)
            return super().encode(buf)
        finally:
            with cls.lock:
                cls.active -= 1


def test_dask_to_zarr_compresses_chunks_in_parallel(tmp_path, theta):
    da = pytest.importorskip("dask.array")
    import dask

    x = da.from_array(theta, chunks=(10, 83, 83))  # 6 chunks, one Zarr chunk each
    path = tmp_path / "dask.zarr"
    with warnings.catch_warnings(), dask.config.set(scheduler="threads", num_workers=2):
        warnings.simplefilter("ignore")
        x.to_zarr(str(path), zarr_format=2, compressors=_Watched(eb=EB))
    assert _Watched.calls == 6
    assert _Watched.peak >= 2  # two chunks were being compressed at the same time
    y = da.from_zarr(str(path))
    assert_bound(theta, y.compute(), EB)
