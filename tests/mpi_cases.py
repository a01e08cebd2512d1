"""Run under mpiexec by tests/test_mpi.py: parallel writes and reads of a few cases.

    mpiexec -n 2 python tests/mpi_cases.py OUTDIR

Each case writes OUTDIR/<case>.cz with `write_parallel` and saves what each rank read back
with `read_parallel` as OUTDIR/<case>.rank<r>.npy (and its origin in .json); rank 0 saves the
input as OUTDIR/<case>.input.npy. The test checks everything with the ordinary decoder.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
from mpi4py import MPI

from ceaz import codec, datasets, mpi


def cases() -> dict[str, dict]:
    """Inputs every rank can make alike: a real field, and awkward synthetic ones."""
    rng = np.random.default_rng(7)
    noisy = np.cumsum(rng.standard_normal((101, 70)), axis=1)
    noisy[rng.random(noisy.shape) < 0.02] = np.nan  # the fill value
    noisy[3, 5] = np.inf
    line = np.sin(np.arange(10_007) / 50.0).astype(np.float32)
    holes = (100 + np.cos(np.arange(40 * 50) / 9.0)).astype(np.float32).reshape(40, 50)
    holes[:20] = np.nan
    return {
        # even cut at chunk boundaries (the chunk shape of a serial compress)
        "theta": dict(
            x=datasets.load("colpex_theta"), eb=1e-3, mode="rel", cut=None, chunk_values=1 << 16
        ),
        # an uneven cut: chunks shrink to fit it; float64 with NaN fill and an infinity
        "noisy": dict(x=noisy, eb=0.05, mode="abs", cut=36, chunk_values=2000),
        # 1-D, a rank with nothing at all
        "line": dict(x=line, eb=1e-4, mode="abs", cut=0, chunk_values=1000),
        # rank 0's slab is all fill: the global range must come from rank 1 alone
        "holes": dict(x=holes, eb=1e-3, mode="rel", cut=20, chunk_values=500),
    }


def main(out: Path) -> None:
    comm = MPI.COMM_WORLD
    for name, c in cases().items():
        x = c["x"]
        settings = codec.Settings(chunk_values=c.get("chunk_values", 1 << 20))
        if c["cut"] is None:
            bounds = mpi.partition(x.shape, comm.size, settings)
        else:
            cuts = [0, *[c["cut"]] * (comm.size - 1), x.shape[0]]
            bounds = list(zip(cuts[:-1], cuts[1:], strict=True))
        start, stop = bounds[comm.rank]
        origin = (start,) + (0,) * (x.ndim - 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the uneven cut warns that chunks shrink
            stats = mpi.write_parallel(
                comm,
                x[start:stop],
                x.shape,
                origin,
                out / f"{name}.cz",
                c["eb"],
                c["mode"],
                settings,
            )
        block, got_origin = mpi.read_parallel(comm, out / f"{name}.cz")
        np.save(out / f"{name}.rank{comm.rank}.npy", block)
        (out / f"{name}.rank{comm.rank}.json").write_text(
            json.dumps({"origin": list(got_origin), "n_chunks": stats.n_chunks})
        )
        if comm.rank == 0:
            np.save(out / f"{name}.input.npy", x)
    # Slabs that do not tile axis 0: every rank must raise, none may hang.
    x = cases()["line"]["x"]
    try:
        mpi.write_parallel(comm, x[:10], x.shape, (0,), out / "bad.cz", 1e-3)
    except ValueError as e:
        (out / f"bad.rank{comm.rank}.txt").write_text(str(e))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
