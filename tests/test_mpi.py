"""Parallel write with MPI: two ranks write ONE container that the ordinary decoder reads.

The ranks run under mpiexec (from the mpich wheel) in a subprocess (tests/mpi_cases.py);
this process checks the files with `codec.decompress` and `ceaz decompress`. The decoded
values must equal those of a serial round trip bit for bit: the shared header fixes the
step, and the values do not depend on chunking or codebooks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from ceaz import cli, codec, mpi
from ceaz.codec import StreamReader
from ceaz.quantizer import within_bound

HERE = Path(__file__).resolve().parent
SW = HERE.parent / "sw"
N_RANKS = 2


def mpiexec() -> str | None:
    """The mpiexec beside this interpreter (the mpich wheel's), else one on PATH."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def _mpi_available() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return mpiexec() is not None


needs_mpi = pytest.mark.skipif(not _mpi_available(), reason="needs mpi4py and mpiexec")


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    """Run every case once under mpiexec; the tests below read the results."""
    out = tmp_path_factory.mktemp("mpi")
    path = [str(SW), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    cmd = [mpiexec(), "-n", str(N_RANKS), sys.executable, str(HERE / "mpi_cases.py"), str(out)]
    run = subprocess.run(
        cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, f"mpiexec failed:\n{run.stdout}\n{run.stderr}"
    return out


CASES = {
    "theta": (1e-3, "rel"),
    "noisy": (0.05, "abs"),
    "line": (1e-4, "abs"),
    "holes": (1e-3, "rel"),
}


@needs_mpi
@pytest.mark.parametrize("name", sorted(CASES))
def test_one_container_decodes_within_bound(written, name):
    x = np.load(written / f"{name}.input.npy")
    data = (written / f"{name}.cz").read_bytes()
    y = codec.decompress(data)
    h = StreamReader.from_bytes(data).header
    assert y.shape == x.shape and y.dtype == x.dtype
    finite = np.isfinite(x)
    assert within_bound(x[finite], y[finite], h.eb_f).all()
    np.testing.assert_array_equal(np.isnan(y), np.isnan(x))
    np.testing.assert_array_equal(y[np.isinf(x)], x[np.isinf(x)])
    eb, mode = CASES[name]
    serial = codec.decompress(codec.compress(x, eb, mode))
    assert StreamReader.from_bytes(codec.compress(x, eb, mode)).header.eb_f == h.eb_f
    assert np.array_equal(y, serial, equal_nan=True)  # same values as a serial round trip


@needs_mpi
def test_every_rank_wrote_chunks_and_cut_chunks_align(written):
    info = [json.loads((written / f"theta.rank{r}.json").read_text()) for r in range(N_RANKS)]
    assert all(i["n_chunks"] > 0 for i in info)  # the real field really was split
    noisy = StreamReader.from_bytes((written / "noisy.cz").read_bytes()).header
    assert 36 % noisy.chunk[1] == 0  # the uneven cut at row 36 is a chunk boundary


@needs_mpi
@pytest.mark.parametrize("name", sorted(CASES))
def test_read_parallel_gives_each_rank_its_slab(written, name):
    y = codec.decompress((written / f"{name}.cz").read_bytes())
    parts = [np.load(written / f"{name}.rank{r}.npy") for r in range(N_RANKS)]
    origins = [
        json.loads((written / f"{name}.rank{r}.json").read_text())["origin"] for r in range(N_RANKS)
    ]
    assert [o[0] for o in origins] == [0, parts[0].shape[0]]
    assert np.array_equal(np.concatenate(parts), y, equal_nan=True)


@needs_mpi
def test_a_rank_of_only_fill_values_does_not_move_the_range(written):
    x = np.load(written / "holes.input.npy")
    h = StreamReader.from_bytes((written / "holes.cz").read_bytes()).header
    assert (h.finite_min, h.finite_max) == (float(np.nanmin(x)), float(np.nanmax(x)))


@needs_mpi
def test_bad_slabs_raise_on_every_rank(written):
    for r in range(N_RANKS):
        assert "tile axis 0" in (written / f"bad.rank{r}.txt").read_text()
    assert not (written / "bad.cz").exists()


@needs_mpi
def test_cli_decompresses_the_parallel_file(written, tmp_path):
    out = tmp_path / "theta.npy"
    assert cli.main(["decompress", str(written / "theta.cz"), str(out), "--no-progress"]) == 0
    y = codec.decompress((written / "theta.cz").read_bytes())
    np.testing.assert_array_equal(np.load(out), y)


# --- the pieces that need no MPI ------------------------------------------------------------


def test_partition_cuts_at_chunk_boundaries():
    settings = codec.Settings(chunk_values=1 << 16)
    shape = (60, 83, 83)  # 9 planes a chunk
    bounds = mpi.partition(shape, 2, settings)
    assert bounds == [(0, 27), (27, 60)]
    assert mpi.aligned_chunk(shape, bounds, settings) == mpi.default_chunk(shape, settings)


def test_aligned_chunk_shrinks_to_fit_an_awkward_cut():
    settings = codec.Settings(chunk_values=2000)
    shape = (101, 70)  # 28 rows a chunk
    assert mpi.aligned_chunk(shape, [(0, 36), (36, 101)], settings) == (1, 18, 70)
    with pytest.warns(UserWarning, match="shrink chunks"):
        assert mpi.aligned_chunk(shape, [(0, 37), (37, 101)], settings) == (1, 1, 70)


def test_local_range_tells_no_values_from_zeros():
    nan = np.full((3, 4), np.nan, dtype=np.float32)
    assert mpi.local_range(nan, None) == (np.inf, -np.inf)
    assert mpi.local_range(np.zeros((3, 4), np.float32), None) == (0.0, 0.0)
    fill = np.array([[-1e34, 2.0], [5.0, np.inf]], dtype=np.float32)
    bits = int(np.array(-1e34, dtype=np.float32).view(np.uint32))
    assert mpi.local_range(fill, bits) == (2.0, 5.0)


def test_folded_split_axis():
    assert mpi.split_axis((10,)) == (2, 1)
    assert mpi.split_axis((10, 20)) == (1, 1)
    assert mpi.split_axis((4, 5, 6, 7)) == (0, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # 4 x 5 x (6, 7) folds to 20 planes; a cut at axis-0 index 2 is plane 10
        assert mpi.aligned_chunk((4, 5, 6, 7), [(0, 2), (2, 4)], codec.Settings())[0] == 10
