"""Parallel write time with and without ceaz: raw MPI-IO against compress + MPI-IO.

    mpiexec -n 2 python bench/mpi_write.py [--fields sea_ice_velocity,grf256] [--rel 1e-3]
        [--repeat 3] [--dir DIR] [--json OUT.json]

For each field every rank takes its axis-0 slab (cut with `ceaz.mpi.partition`) and the same
data is written twice into one shared file per method:

- raw:  one collective `Write_at_all` of the uncompressed slab at its offset, then Sync;
- ceaz: `ceaz.mpi.write_parallel` (range allreduce, compress, exscan, one collective write,
  Sync, rename), which includes all of ceaz's coordination.

Times are wall clock between barriers, seen by rank 0, median of --repeat runs; the ceaz file
is checked with the ordinary decoder afterwards. What this measures is this machine (its
cores and its file system, named in the output), not a parallel file system: the ratio is
what carries over, the times do not.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

import numpy as np
from mpi4py import MPI

from ceaz import codec, datasets, mpi
from ceaz.quantizer import within_bound

SYNTHETIC = {"grf256": lambda: datasets.gaussian_random_field((256, 256, 256), slope=-3.0)}


def load(name: str) -> np.ndarray:
    if name in SYNTHETIC:
        return SYNTHETIC[name]()
    return np.asarray(datasets.load(name))


def filesystem(path: Path) -> str:
    """The mount type of path (from /proc/mounts), to say what the times were measured on."""
    best, kind = "", "unknown"
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return kind
    real = str(path.resolve())
    for line in mounts:
        parts = line.split()
        if len(parts) >= 3 and real.startswith(parts[1]) and len(parts[1]) > len(best):
            best, kind = parts[1], parts[2]
    return kind


def timed(comm, action) -> float:
    comm.Barrier()
    t0 = MPI.Wtime()
    action()
    comm.Barrier()
    return MPI.Wtime() - t0


def raw_write(comm, slab: np.ndarray, offset: int, path: Path) -> None:
    fh = MPI.File.Open(comm, str(path), MPI.MODE_WRONLY | MPI.MODE_CREATE)
    try:
        fh.Write_at_all(offset, [np.ascontiguousarray(slab), MPI.BYTE])
        fh.Sync()
    finally:
        fh.Close()


def remove(comm, *paths: Path) -> None:
    comm.Barrier()
    if comm.rank == 0:
        for p in paths:
            p.unlink(missing_ok=True)
    comm.Barrier()


def bench_field(comm, name: str, rel: float, repeat: int, directory: Path) -> dict:
    x = load(name)
    settings = codec.Settings()
    start, stop = mpi.partition(x.shape, comm.size, settings)[comm.rank]
    slab = x[start:stop]
    origin = (start,) + (0,) * (x.ndim - 1)
    row_bytes = x[0].nbytes
    raw_path = directory / f"{name}.raw"
    cz_path = directory / f"{name}.cz"
    raw_t, cz_t, comp_t, write_t = [], [], [], []
    stats = None
    # One untimed ceaz write loads the compiled kernels on every rank.
    mpi.write_parallel(comm, slab, x.shape, origin, cz_path, rel, "rel", settings)
    for _ in range(repeat):
        remove(comm, raw_path, cz_path)
        raw_t.append(timed(comm, lambda: raw_write(comm, slab, start * row_bytes, raw_path)))
        remove(comm, cz_path)

        def write() -> None:
            nonlocal stats
            stats = mpi.write_parallel(comm, slab, x.shape, origin, cz_path, rel, "rel", settings)

        cz_t.append(timed(comm, write))
        comp_t.append(comm.allreduce(stats.compress_seconds, op=MPI.MAX))
        write_t.append(comm.allreduce(stats.write_seconds, op=MPI.MAX))
    chunks = comm.gather(stats.n_chunks, root=0)
    result = None
    if comm.rank == 0:
        y = codec.decompress(cz_path.read_bytes())
        held = bool(within_bound(x.reshape(-1), y.reshape(-1), stats.header.eb_f).all())
        raw_mb = x.nbytes / 1e6
        result = {
            "field": name,
            "shape": list(x.shape),
            "ranks": comm.size,
            "chunks_per_rank": chunks,
            "rel_eb": rel,
            "raw_mb": raw_mb,
            "file_mb": stats.file_bytes / 1e6,
            "ratio": x.nbytes / stats.file_bytes,
            "raw_write_s": statistics.median(raw_t),
            "ceaz_write_s": statistics.median(cz_t),
            "ceaz_compress_s": statistics.median(comp_t),
            "ceaz_io_s": statistics.median(write_t),  # open, write, sync, close
            "raw_mb_per_s": raw_mb / statistics.median(raw_t),
            "ceaz_mb_per_s": raw_mb / statistics.median(cz_t),
            "bound_held": held,
        }
    remove(comm, raw_path, cz_path)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description="raw MPI-IO write against ceaz compress + write")
    p.add_argument("--fields", default="sea_ice_velocity,u_wind,grf256")
    p.add_argument("--rel", type=float, default=1e-3, help="relative error bound")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dir", type=Path, default=Path("."), help="where the files are written")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args()
    comm = MPI.COMM_WORLD
    results = [
        bench_field(comm, name, args.rel, args.repeat, args.dir) for name in args.fields.split(",")
    ]
    if comm.rank != 0:
        return
    print(
        f"{comm.size} ranks, {os.cpu_count()} cores, files on {filesystem(args.dir)} "
        f"({args.dir.resolve()}), {MPI.Get_library_version().splitlines()[0].strip()}; "
        f"relative bound {args.rel:g}, median of {args.repeat}; "
        f"time = barrier to barrier, Sync included"
    )
    print("rest = value-range scan and allreduce, exscan, gather, rename")
    print()
    print(
        "| field | MB | ratio | raw write s | ceaz s (compress + I/O + rest) | raw MB/s "
        "| ceaz MB/s | bound |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in results:
        rest = r["ceaz_write_s"] - r["ceaz_compress_s"] - r["ceaz_io_s"]
        print(
            f"| {r['field']} {'x'.join(map(str, r['shape']))} | {r['raw_mb']:.1f} | "
            f"{r['ratio']:.2f} | {r['raw_write_s']:.3f} | {r['ceaz_write_s']:.3f} "
            f"({r['ceaz_compress_s']:.3f} + {r['ceaz_io_s']:.3f} + {rest:.3f}) | "
            f"{r['raw_mb_per_s']:.0f} | "
            f"{r['ceaz_mb_per_s']:.0f} | {'held' if r['bound_held'] else 'BROKEN'} |"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
