"""Compress a large Dask array into Zarr with the ceaz codec, on a local Dask cluster.

    python docs/examples/dask_to_zarr.py OUT.zarr [--shape 256,1024,1024] [--chunks 16,1024,1024]
        [--eb 1e-3] [--workers 2] [--zarr-format 2|3]

The field is made chunk by chunk on the workers and each worker compresses and writes its own
Zarr chunks, so the array never exists in one piece. Needs `pip install 'ceaz[zarr]'`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import dask.array as da
import numpy as np
from dask.distributed import Client, LocalCluster

import ceaz.zarr3
from ceaz.numcodecs_codec import Ceaz


def field(z: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A smooth 3-D field (think temperature): long waves plus a little fine structure."""
    return (
        280.0
        + 10.0 * np.sin(x / 97.0) * np.cos(y / 131.0)
        + 2.0 * np.sin((x + 2.0 * y) / 17.0 + z / 11.0)
        + 0.05 * np.sin(x * 1.3) * np.cos(y * 0.7 + z)
    ).astype(np.float32)


def codec_options(zarr_format: int, eb: float) -> dict:
    """Format 2 takes a numcodecs compressor; format 3 takes ceaz as its array-to-bytes step.

    An absolute bound, because Zarr compresses each chunk on its own: a relative bound would
    be relative to each chunk's value range.
    """
    if zarr_format == 2:
        return {"compressors": Ceaz(eb=eb, mode="abs")}
    return {"serializer": ceaz.zarr3.Ceaz(eb=eb, mode="abs"), "compressors": None}


def stored_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("output", type=Path, help="Zarr store (a directory) to write")
    p.add_argument("--shape", default="256,1024,1024", help="array shape (default 1 GiB)")
    p.add_argument("--chunks", default="16,1024,1024", help="Dask and Zarr chunk shape")
    p.add_argument("--eb", type=float, default=1e-3, help="absolute error bound")
    p.add_argument("--workers", type=int, default=2, help="worker processes")
    p.add_argument("--zarr-format", type=int, choices=(2, 3), default=2)
    args = p.parse_args(argv)
    shape = tuple(int(s) for s in args.shape.split(","))
    chunks = tuple(int(c) for c in args.chunks.split(","))

    # Processes, not threads: the compiled ceaz kernels hold the GIL while they run.
    with (
        LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True) as cluster,
        Client(cluster),
    ):
        x = da.fromfunction(field, shape=shape, chunks=chunks, dtype=np.float32)
        t0 = time.perf_counter()
        x.to_zarr(
            str(args.output),
            zarr_format=args.zarr_format,
            mode="w",
            **codec_options(args.zarr_format, args.eb),
        )
        seconds = time.perf_counter() - t0
        # Read back through Zarr (any reader with ceaz installed can) and check the bound.
        y = da.from_zarr(str(args.output))
        max_error = float(abs(y.astype(np.float64) - x.astype(np.float64)).max().compute())

    result = {
        "shape": shape,
        "chunks": chunks,
        "n_chunks": int(np.prod(x.numblocks)),
        "raw_mb": x.nbytes / 1e6,
        "stored_mb": stored_bytes(args.output) / 1e6,
        "seconds": seconds,
        "max_error": max_error,
        "eb": args.eb,
    }
    print(
        f"{result['raw_mb']:.1f} MB in {result['n_chunks']} chunks -> {result['stored_mb']:.2f} "
        f"MB (ratio {result['raw_mb'] / result['stored_mb']:.1f}) in {seconds:.2f} s with "
        f"{args.workers} workers; max error {max_error:.3g} <= {args.eb:g}"
    )
    return result


if __name__ == "__main__":
    main()
