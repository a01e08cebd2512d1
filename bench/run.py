"""Benchmark ceaz beside SZ3 (pysz) and ZFP (zfpy) on real and large synthetic fields.

    python bench/run.py [--quick] [--out bench] [--no-rss] [--reps 3]

One run measures, for every field and relative bound, each compressor's ratio, bit rate,
PSNR, maximum error against the absolute bound they all received, and single-threaded
compress / decompress throughput (best of several timed repetitions after a warm-up, so JIT
compilation is excluded). For ceaz it also compares the Huffman payload with the empirical
entropy of the same symbols and splits out the container overhead, and it measures the peak
memory of the command line compressing and decompressing a 1 GB float32 field.

Writes OUT/results.json and OUT/results.md (OUT/results-quick.* with --quick, so a smoke run
never overwrites the full results). This is a benchmark, not a test: it reports, it does not
assert; a bound broken by any compressor shows as "NO" in the tables.
"""

from __future__ import annotations

import os

# Single-threaded throughout: these must be set before numpy, numba or the peers load.
for _var in (
    "OMP_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import datetime  # noqa: E402
import gc  # noqa: E402
import importlib.metadata  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
if importlib.util.find_spec("ceaz") is None:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT / "sw"))

import zfpy  # noqa: E402
from pysz import sz, szAlgorithm, szConfig, szErrorBoundMode  # noqa: E402

from ceaz import codec, datasets, huffman, metrics  # noqa: E402
from ceaz import format as fmt  # noqa: E402
from ceaz.chunk import chunk_symbols  # noqa: E402

REL_BOUNDS = (1e-2, 1e-3, 1e-4)
COMPRESSORS = ("ceaz", "sz3", "zfp")
MB = 1e6
#: The target of the payload against the entropy, where the entropy is high enough to matter.
ENTROPY_TARGET_PCT = 2.0
ENTROPY_TARGET_MIN_BITS = 2.0
#: Peak-memory target for the CLI on the 1 GB field.
RSS_TARGET_MB = 300.0
#: The 1 GB field of the memory test: 268,435,456 float32 values.
RSS_SHAPE = (1024, 512, 512)
RSS_QUICK_SHAPE = (64, 512, 512)
RSS_REL = 1e-3


# --- fields ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldSpec:
    """A named field and how to make it; synthetic ones are large so per-value cost shows."""

    name: str
    make: Callable[[], np.ndarray]
    source: str


def field_specs(quick: bool) -> list[FieldSpec]:
    """Every real field plus two synthetic fields of over 10 million values (small if quick)."""
    real = [
        FieldSpec(n, (lambda n=n: datasets.load(n)), "Met Office (iris-sample-data)")
        for n in datasets.REAL_FIELDS
    ]
    if quick:
        keep = {"u_wind", "colpex_theta"}
        return [f for f in real if f.name in keep] + [
            FieldSpec(
                "grf64_s-3.5",
                lambda: datasets.gaussian_random_field((64, 64, 64), slope=-3.5, seed=1),
                "gaussian_random_field((64, 64, 64), slope=-3.5, seed=1)",
            ),
        ]
    return real + [
        FieldSpec(
            "grf256_s-3.5",
            lambda: datasets.gaussian_random_field((256, 256, 256), slope=-3.5, seed=1),
            "gaussian_random_field((256, 256, 256), slope=-3.5, seed=1)",
        ),
        FieldSpec(
            "gray_scott216",
            lambda: datasets.gray_scott(216, steps=400, seed=0),
            "gray_scott(216, steps=400, seed=0)",
        ),
    ]


# --- compressors -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Compressor:
    """One peer: compress to something with .nbytes or len(), decompress back to an array."""

    name: str
    compress: Callable[[np.ndarray, float], Any]
    decompress: Callable[[Any, np.ndarray], np.ndarray]
    note: str


def _ceaz_c(x: np.ndarray, eb: float) -> bytes:
    return codec.compress(x, eb, "abs")


def _ceaz_d(blob: bytes, x: np.ndarray) -> np.ndarray:
    return codec.decompress(blob)


def _sz3_config(eb: float) -> szConfig:
    conf = szConfig()
    conf.errorBoundMode = szErrorBoundMode.ABS
    conf.absErrorBound = eb
    conf.openmp = False
    return conf


def _sz3_c(x: np.ndarray, eb: float) -> np.ndarray:
    blob, _ = sz.compress(x, _sz3_config(eb))
    return blob


def _sz3_d(blob: np.ndarray, x: np.ndarray) -> np.ndarray:
    y, _ = sz.decompress(blob, x.dtype, x.shape)
    return y


def _zfp_c(x: np.ndarray, eb: float) -> bytes:
    return zfpy.compress_numpy(x, tolerance=eb)


def _zfp_d(blob: bytes, x: np.ndarray) -> np.ndarray:
    return zfpy.decompress_numpy(blob)


def _sz3_algorithm() -> str:
    code = szConfig().cmprAlgo
    names = {v: k for k, v in vars(szAlgorithm).items() if not k.startswith("_")}
    return names.get(code, str(code))


PEERS = {
    "ceaz": Compressor("ceaz", _ceaz_c, _ceaz_d, "codec.compress(x, eb_abs, 'abs'), defaults"),
    "sz3": Compressor(
        "sz3", _sz3_c, _sz3_d, f"pysz, ABS mode, default algorithm ({_sz3_algorithm()}), no OpenMP"
    ),
    "zfp": Compressor("zfp", _zfp_c, _zfp_d, "zfpy fixed-accuracy mode, tolerance = eb_abs"),
}


def _size(blob: Any) -> int:
    return int(blob.nbytes) if isinstance(blob, np.ndarray) else len(blob)


#: Keep repeating a fast operation until this much time has been timed (or MAX_REPS runs), so
#: that on small fields a burst of other work on the machine cannot decide the best time.
MIN_TIMED_S = 1.0
MAX_REPS = 40


def best_time(fn: Callable[[], Any], reps: int) -> tuple[float, Any]:
    """Best wall time of at least reps calls after one untimed warm-up (which pays for JIT and
    caches); fast calls are repeated until MIN_TIMED_S has been timed, up to MAX_REPS."""
    out = fn()
    best, spent, n = math.inf, 0.0, 0
    gc.collect()
    gc.disable()  # a collection inside a timed call would be charged to the compressor
    try:
        while n < reps or (spent < MIN_TIMED_S and n < MAX_REPS):
            del out
            t0 = time.perf_counter()
            out = fn()
            dt = time.perf_counter() - t0
            best, spent, n = min(best, dt), spent + dt, n + 1
    finally:
        gc.enable()
    return best, out


def measure(comp: Compressor, x: np.ndarray, eb: float, reps: int) -> tuple[dict, Any]:
    """Ratio, quality and throughput of one compressor on one field at one absolute bound."""
    t_c, blob = best_time(lambda: comp.compress(x, eb), reps)
    t_d, y = best_time(lambda: comp.decompress(blob, x), reps)
    if y.shape != x.shape or y.dtype != x.dtype:
        y = np.asarray(y, dtype=x.dtype).reshape(x.shape)
    q = metrics.quality(x, y)
    size = _size(blob)
    row = {
        "compressor": comp.name,
        "bytes": size,
        "ratio": x.nbytes / size,
        "bits_per_value": 8 * size / x.size,
        "psnr_db": q.psnr_db,
        "nrmse": q.nrmse,
        "max_error": q.max_error,
        "max_error_over_bound": q.max_error / eb,
        "held": bool(q.max_error <= eb),
        "n_over_bound": int(np.count_nonzero(np.abs(x.astype(np.float64) - y) > eb)),
        "compress_s": t_c,
        "decompress_s": t_d,
        "compress_mb_s": x.nbytes / MB / t_c,
        "decompress_mb_s": x.nbytes / MB / t_d,
    }
    return row, blob


# --- ceaz: payload against entropy, container overhead ---------------------------------------


def _pad8(n: int) -> int:
    return n + (-n % 8)


def entropy_report(x: np.ndarray, blob: bytes) -> dict:
    """The Huffman payload of each chunk against the empirical entropy of its own symbols.

    The symbols are recomputed from the same boxes and coding the stream used, and checked
    against the stream: code lengths x counts + raw escape bits must equal payload_bits.
    Both sides carry the raw escape bits (31 per outlier, 32/64 per verbatim value); the
    Huffman side also carries the chunk's code-length table.
    """
    reader = codec.StreamReader.from_bytes(blob)
    h = reader.header
    x3 = x.reshape(h.shape3)
    nsym = fmt.n_symbols(h.radius)
    table_bits_per_chunk = 8 * (nsym // 2)
    keys = ("chunks", "values", "code", "own", "raw", "table", "entropy")
    # all chunks; chunks whose own entropy > 2 bits/value; chunks coded with the offline book
    # (the first adapt_lag); chunks coded with a book adapted from an earlier chunk.
    groups = {g: dict.fromkeys(keys, 0.0) for g in ("all", "high", "offline", "adapted")}
    tot = dict.fromkeys(("payload", "sync", "pad"), 0)
    n_outlier = n_verbatim = mismatches = 0
    for i, box in enumerate(reader.boxes):
        info = reader.chunk(i)
        sym, _, widths = chunk_symbols(x3[box.slices], reader.coding)
        counts = np.bincount(sym, minlength=nsym).astype(np.int64)
        lengths = info.payload.lengths.astype(np.int64)
        code_bits = int(counts @ lengths)
        # What a book built from this chunk's own histogram would cost (no adaptation lag).
        own = huffman.code_lengths(huffman.weights_from_histogram(counts)).astype(np.int64)
        raw_bits = int(widths.sum())
        bits = info.payload.payload_bits
        mismatches += code_bits + raw_bits != bits
        ent = huffman.entropy_bits(counts)  # counts sum to box.size: one symbol per value
        vals = dict(
            chunks=1,
            values=box.size,
            code=code_bits,
            own=int(counts @ own),
            raw=raw_bits,
            table=table_bits_per_chunk,
            entropy=ent,
        )
        offline = h.adapt_lag == 0 or i < h.adapt_lag
        for g in ("all", "offline" if offline else "adapted") + (
            ("high",) if ent > ENTROPY_TARGET_MIN_BITS * box.size else ()
        ):
            for k, v in vals.items():
                groups[g][k] += v
        tot["payload"] += bits
        tot["sync"] += 32 * len(info.payload.sync)
        tot["pad"] += 8 * _pad8((bits + 7) // 8) - bits
        n_outlier += info.n_outlier
        n_verbatim += info.n_verbatim

    def overhead(t: dict, code: str = "code", with_table: bool = True) -> float | None:
        ideal = t["entropy"] + t["raw"]
        if ideal == 0:
            return None
        actual = t[code] + t["raw"] + (t["table"] if with_table else 0)
        return 100 * (actual / ideal - 1)

    n_chunks = len(reader.boxes)
    file_bits = 8 * len(blob)
    header_bits = 8 * (
        fmt.HEADER_SIZE
        + n_chunks * fmt.CHUNK_HEADER.size
        + fmt.INDEX_HEAD.size
        + 8 * n_chunks
        + fmt.CHUNK_CRC.size
        + fmt.TRAILER.size
    )
    crc_bits = 32 * n_chunks
    parts = {
        "payload": tot["payload"],
        "headers_index_trailer": header_bits,
        "tables": int(groups["all"]["table"]),
        "sync": tot["sync"],
        "crc": crc_bits,
        "padding": tot["pad"],
    }
    t = groups["all"]
    entropy_bpv = t["entropy"] / t["values"]
    ovh = overhead(t)
    hi = groups["high"]
    return {
        "n_chunks": n_chunks,
        "chunk_shape": list(h.chunk),
        "adapt_lag": h.adapt_lag,
        "symbols_match_stream": mismatches == 0,
        "n_outlier": n_outlier,
        "n_verbatim": n_verbatim,
        "entropy_bits_per_value": entropy_bpv,
        "code_bits_per_value": t["code"] / t["values"],
        "table_bits_per_value": t["table"] / t["values"],
        "raw_bits_per_value": t["raw"] / t["values"],
        "overhead_pct": ovh,
        "overhead_code_only_pct": overhead(t, with_table=False),
        "own_book_overhead_pct": overhead(t, "own"),
        "target_applies": entropy_bpv > ENTROPY_TARGET_MIN_BITS,
        "target_met": None if ovh is None else ovh <= ENTROPY_TARGET_PCT,
        "high_entropy_chunks": int(hi["chunks"]),
        "high_entropy_overhead_pct": overhead(hi) if hi["chunks"] else None,
        "high_entropy_overhead_code_only_pct": (
            overhead(hi, with_table=False) if hi["chunks"] else None
        ),
        "offline_book_chunks": int(groups["offline"]["chunks"]),
        "offline_book_values": int(groups["offline"]["values"]),
        "offline_book_overhead_pct": overhead(groups["offline"]),
        "adapted_book_overhead_pct": overhead(groups["adapted"]),
        "groups": groups,
        "file_bits": file_bits,
        "parts_bits": parts,
        "parts_accounted": sum(parts.values()) == file_bits,
        "container_overhead_pct": 100 * (file_bits - tot["payload"]) / file_bits,
        "container_parts_pct": {k: 100 * v / file_bits for k, v in parts.items() if k != "payload"},
    }


# --- peak memory of the command line ---------------------------------------------------------


def _smooth_slabs(shape: tuple[int, int, int], slab: int = 16) -> Iterator[np.ndarray]:
    """A deterministic smooth float32 field, slab by slab: sines plus a z-tiled periodic GRF.

    The Gaussian random field is built by FFT, so it is periodic and tiles along z without a
    seam; the sines vary along every axis, so no two tiles are equal.
    """
    nz, ny, nx = shape
    tile_z = min(nz, 64)
    grf = 0.15 * datasets.gaussian_random_field((tile_z, ny, nx), slope=-3.5, seed=7)
    y = np.arange(ny, dtype=np.float64)[:, None]
    x = np.arange(nx, dtype=np.float64)[None, :]
    two_pi = 2 * np.pi
    plane = np.sin(two_pi * x / 173 + 0.8 * np.sin(two_pi * y / 311)) * np.cos(two_pi * y / 97)
    b = two_pi * (x + y) / 57
    cos_b, sin_b = np.cos(b), np.sin(b)
    for z0 in range(0, nz, slab):
        zs = np.arange(z0, min(nz, z0 + slab), dtype=np.float64)
        out = np.empty((len(zs), ny, nx), dtype=np.float32)
        for k, z in enumerate(zs):
            a = two_pi * z / 57
            v = plane + 0.6 * np.sin(two_pi * (z / 211 + x / 389))
            v = v + 0.3 * (np.cos(a) * cos_b - np.sin(a) * sin_b)  # cos(a + b)
            out[k] = v + grf[int(z) % tile_z]
        yield out


def _cli_env() -> dict[str, str]:
    env = dict(os.environ)
    sw = str(ROOT / "sw")
    if importlib.util.find_spec("ceaz") is not None:
        origin = Path(importlib.util.find_spec("ceaz").origin or "").parent.parent
        sw = str(origin)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (sw, env.get("PYTHONPATH", "")) if p)
    return env


def cli_available() -> str | None:
    """None if `python -m ceaz.cli` answers; otherwise why not."""
    if importlib.util.find_spec("ceaz.cli") is None:
        return "ceaz.cli is not importable"
    try:
        r = subprocess.run(
            [sys.executable, "-m", "ceaz.cli", "--help"],
            env=_cli_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"python -m ceaz.cli --help failed: {e}"
    if r.returncode != 0 or "compress" not in r.stdout:
        return f"python -m ceaz.cli --help exited {r.returncode}: {r.stderr.strip()[-300:]}"
    return None


#: Runs one command and prints its peak RSS. A child's ru_maxrss starts from the high-water
#: mark of the memory image it was forked from (Linux keeps it across exec), so measuring from
#: this large process would report this process's peak; a fresh small wrapper avoids that.
_WRAPPER = """
import json, os, resource, subprocess, sys, time
log = open(sys.argv[1], "w")
t0 = time.perf_counter()
rc = subprocess.call(sys.argv[2:], stdout=log, stderr=subprocess.STDOUT)
wall = time.perf_counter() - t0
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"exit_code": rc, "wall_s": wall, "maxrss_kib": u.ru_maxrss,
                  "utime": u.ru_utime, "stime": u.ru_stime}))
"""


def run_measured(cmd: list[str], log: Path) -> dict:
    """Run a command, returning its wall time and peak RSS (kernel high-water mark).

    The command runs under a fresh wrapper process that reports getrusage(RUSAGE_CHILDREN);
    psutil polling of the command (every 10 ms) is recorded too as a cross-check.
    """
    samples: list[float] = []
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRAPPER, str(log), *cmd],
        env=_cli_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    done = threading.Event()

    def poll() -> None:
        try:
            import psutil
        except ImportError:
            return
        try:
            wrapper = psutil.Process(proc.pid)
            while not done.is_set():
                rss = sum(c.memory_info().rss for c in wrapper.children(recursive=True))
                samples.append(rss)
                time.sleep(0.01)
        except psutil.Error:
            pass

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    stdout, _ = proc.communicate()
    done.set()
    poller.join()
    try:
        rep = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        rep = {
            "exit_code": proc.returncode or -1,
            "wall_s": math.nan,
            "maxrss_kib": 0,
            "utime": math.nan,
            "stime": math.nan,
        }
    text = log.read_text() if log.exists() else ""
    return {
        "command": " ".join(cmd),
        "exit_code": rep["exit_code"],
        "wall_s": rep["wall_s"],
        "peak_rss_mb": rep["maxrss_kib"] * 1024 / MB,  # ru_maxrss is in KiB on Linux
        "peak_rss_polled_mb": max(samples) / MB if samples else None,
        "cpu_user_s": rep["utime"],
        "cpu_sys_s": rep["stime"],
        "output": text.strip()[-2000:],
    }


def _max_error_files(a: Path, b: Path, shape: tuple[int, ...]) -> float:
    """Largest |a - b| of two raw float32 files, a slab at a time."""
    ma = np.memmap(a, dtype="<f4", mode="r", shape=shape)
    mb = np.memmap(b, dtype="<f4", mode="r", shape=shape)
    worst = 0.0
    for z in range(0, shape[0], 16):
        d = np.abs(ma[z : z + 16].astype(np.float64) - mb[z : z + 16])
        worst = max(worst, float(d.max()))
    del ma, mb
    return worst


def rss_test(shape: tuple[int, int, int], workdir: str | None) -> dict:
    """Peak RSS and wall time of `ceaz compress` and `ceaz decompress` on a raw float32 file."""
    why = cli_available()
    if why:
        return {"skipped": f"the CLI is not available ({why})"}
    n = math.prod(shape)
    nbytes = 4 * n
    with tempfile.TemporaryDirectory(prefix="ceaz-bench-", dir=workdir) as tmp:
        free = shutil.disk_usage(tmp).free
        if free < 2.5 * nbytes:
            return {"skipped": f"{tmp} has {free / 1e9:.1f} GB free, need {2.5 * nbytes / 1e9:.1f}"}
        d = Path(tmp)
        raw, comp, back = d / "field.f32", d / "field.ceaz", d / "back.f32"
        t0 = time.perf_counter()
        lo, hi = math.inf, -math.inf
        with open(raw, "wb") as f:
            for s in _smooth_slabs(shape):
                lo, hi = min(lo, float(s.min())), max(hi, float(s.max()))
                s.tofile(f)
        gen_s = time.perf_counter() - t0
        shape_arg = ",".join(map(str, shape))
        py = [sys.executable, "-m", "ceaz.cli"]
        # The fixed cost: interpreter, numpy, numba and loading the cached JIT code.
        small = d / "small.f32"
        np.zeros((8, 64, 64), np.float32).tofile(small)
        base = run_measured(
            py
            + [
                "compress",
                str(small),
                str(d / "small.ceaz"),
                "--rel",
                "1e-3",
                "--shape",
                "8,64,64",
                "--no-progress",
            ],
            d / "base.log",
        )
        c = run_measured(
            py
            + [
                "compress",
                str(raw),
                str(comp),
                "--rel",
                str(RSS_REL),
                "--shape",
                shape_arg,
                "--no-progress",
            ],
            d / "compress.log",
        )
        dd = run_measured(
            py + ["decompress", str(comp), str(back), "--no-progress"], d / "decompress.log"
        )
        result: dict[str, Any] = {
            "shape": list(shape),
            "values": n,
            "input_mb": nbytes / MB,
            "rel_bound": RSS_REL,
            "abs_bound": RSS_REL * (hi - lo),
            "field": "sum of sines + 0.15 x z-tiled GRF(64, 512, 512, slope -3.5), float32",
            "generate_s": gen_s,
            "baseline_tiny_compress": base,
            "compress": c,
            "decompress": dd,
            "target_mb": RSS_TARGET_MB,
        }
        if c["exit_code"] == 0:
            result["compressed_mb"] = comp.stat().st_size / MB
            result["ratio"] = nbytes / comp.stat().st_size
        if c["exit_code"] == 0 and dd["exit_code"] == 0:
            err = _max_error_files(raw, back, shape)
            result["max_error"] = err
            result["held"] = err <= result["abs_bound"]
        result["target_met"] = all(
            r["exit_code"] == 0 and r["peak_rss_mb"] < RSS_TARGET_MB for r in (c, dd)
        )
    return result


# --- machine and run information -------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(pkg: str) -> str | None:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> str | None:
    try:
        r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def machine_info() -> dict:
    mem = None
    try:
        m = re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text())
        mem = int(m.group(1)) * 1024 / 1e9 if m else None
    except OSError:
        pass
    import numba

    return {
        "cpu_model": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "memory_gb": mem,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "versions": {
            "numpy": np.__version__,
            "numba": numba.__version__,
            "pysz": _version("pysz"),
            "zfpy": _version("zfpy"),
            "psutil": _version("psutil"),
            "ceaz": _version("ceaz"),
        },
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "threads": {v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS")},
        "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command_line": [sys.executable, *sys.argv],
    }


# --- reporting -------------------------------------------------------------------------------


def _jsonable(x: Any) -> Any:
    """Strict JSON: non-finite floats become strings, numpy scalars plain numbers."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x


def _f(v: float | None, digits: int = 2) -> str:
    if v is None:
        return "–"
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return f"{v:.{digits}f}"


def _g(v: float | None) -> str:
    return "–" if v is None else f"{v:.3g}"


def markdown(res: dict) -> str:
    m = res["machine"]
    lines = [
        "# ceaz benchmark" + (" (quick smoke run)" if res["quick"] else ""),
        "",
        f"{m['date_utc']}, {m['cpu_model']} ({m['logical_cpus']} logical CPUs), single-threaded "
        f"(OMP/NUMBA_NUM_THREADS=1); Python {m['python']}, numpy {m['versions']['numpy']}, "
        f"numba {m['versions']['numba']}, pysz {m['versions']['pysz']}, "
        f"zfpy {m['versions']['zfpy']}; ceaz commit {str(m['git_commit'])[:10]}"
        f"{' (dirty)' if m['git_dirty'] else ''}. Total run time {res['total_s']:.0f} s. "
        f"Load average (1 min) {res['load_average_1_5_15']['start'][0]:.2f} at start, "
        f"{res['load_average_1_5_15']['end'][0]:.2f} at end (other work on the machine "
        "makes throughput noisy; the best of several runs damps it).",
        "",
        f"Command: `{' '.join(m['command_line'])}`",
        "",
        "Every compressor gets the same absolute bound eb = rel x (max - min) of the field. "
        f"Throughput is MB/s (10^6 bytes) of input (float32) bytes, the best of at least "
        f"{res['reps']} timed run(s) after one warm-up (fast calls repeat until {MIN_TIMED_S:g} s "
        f"is timed, up to {MAX_REPS} runs). PSNR = 20 log10(range / RMSE). "
        "*held?* is max |x - x'| <= eb in float64.",
        "",
        "Peers: " + "; ".join(f"**{k}**: {v}" for k, v in res["compressors"].items()) + ".",
        "",
        "## Targets at a glance",
        "",
        *targets(res),
        "",
        "## Fields",
        "",
        "| field | shape | values | range | source |",
        "| --- | --- | ---: | ---: | --- |",
    ]
    for f in res["fields"]:
        lines.append(
            f"| {f['name']} | {'x'.join(map(str, f['shape']))} | {f['values']:,} | "
            f"{_g(f['range'])} | {f['source']} |"
        )
    for rel in res["rel_bounds"]:
        lines += [
            "",
            f"## Relative bound {rel:g}",
            "",
            "| field | compressor | ratio | bits/value | PSNR dB | max err / eb | held? | "
            "compress MB/s | decompress MB/s |",
            "| --- | --- | ---: | ---: | ---: | ---: | :---: | ---: | ---: |",
        ]
        for r in (r for r in res["results"] if r["rel_bound"] == rel):
            held = "yes" if r["held"] else f"**NO** ({r['n_over_bound']} values)"
            lines.append(
                f"| {r['field']} | {r['compressor']} | {_f(r['ratio'])} | "
                f"{_f(r['bits_per_value'], 3)} | {_f(r['psnr_db'], 1)} | "
                f"{_f(r['max_error_over_bound'], 4)} | {held} | {_f(r['compress_mb_s'], 1)} | "
                f"{_f(r['decompress_mb_s'], 1)} |"
            )
    lines += [
        "",
        "## ceaz throughput against SZ3 (target: at least SZ3's on every field)",
        "",
        "| field | rel bound | ceaz/SZ3 compress | ceaz/SZ3 decompress | ceaz/ZFP compress | "
        "ceaz/ZFP decompress | ratio ceaz/SZ3 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s in res["speed_vs_peers"]:
        mark = "" if s["meets_sz3"] else " ✗"
        lines.append(
            f"| {s['field']} | {s['rel_bound']:g} | {_f(s['compress_vs_sz3'])}x | "
            f"{_f(s['decompress_vs_sz3'])}x{mark} | {_f(s['compress_vs_zfp'])}x | "
            f"{_f(s['decompress_vs_zfp'])}x | {_f(s['ratio_vs_sz3'])}x |"
        )
    lines += [
        "",
        "## ceaz Huffman payload against the entropy of its symbols",
        "",
        "Per chunk: H = sum n_s log2(N / n_s) over that chunk's own symbols (the ideal for a "
        "code fitted to the chunk). Overhead = (Huffman code bits + raw escape bits + "
        "code-length tables) / (H + raw escape bits) - 1; *code only* leaves the tables out. "
        f"Target: within {ENTROPY_TARGET_PCT:g} % where H > {ENTROPY_TARGET_MIN_BITS:g} "
        "bits/value. *H>2 chunks* is the same over only the chunks whose own entropy exceeds 2 "
        "bits/value. Container share = headers, index, trailer, tables, sync offsets, CRCs "
        "and padding as a share of the file.",
        "",
        "| field | rel bound | H bits/value | Huffman bits/value | table bits/value | "
        "raw bits/value | overhead % | code only % | target applies? | met? | "
        "H>2 chunks | H>2 overhead % | container share % |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: | :---: | ---: | ---: "
        "| ---: |",
    ]
    for e in res["entropy"]:
        applies = "yes" if e["target_applies"] else "no"
        met = "yes" if e["target_met"] else "**NO**"
        if not e["target_applies"]:
            met = f"({met.strip('*').lower()})"
        lines.append(
            f"| {e['field']} | {e['rel_bound']:g} | {_f(e['entropy_bits_per_value'], 3)} | "
            f"{_f(e['code_bits_per_value'], 3)} | {_f(e['table_bits_per_value'], 4)} | "
            f"{_f(e['raw_bits_per_value'], 4)} | {_f(e['overhead_pct'])} | "
            f"{_f(e['overhead_code_only_pct'])} | {applies} | {met} | "
            f"{e['high_entropy_chunks']}/{e['n_chunks']} | "
            f"{_f(e['high_entropy_overhead_pct'])} | {_f(e['container_overhead_pct'], 3)} |"
        )
    lines += [
        "",
        "Where the overhead comes from. The first adapt_lag chunks are coded with the offline "
        "book (a field of one chunk is coded with it entirely); later chunks with the book of "
        "the chunk before. *own book* is the cost had every chunk been coded with the book "
        "built from its own histogram (the same construction: add-one weights, 16-bit limit), "
        "which isolates the Huffman construction from the adaptation lag.",
        "",
        "| field | rel bound | chunks | offline-book values % | overhead offline-book chunks % "
        "| overhead adapted chunks % | overhead own book % |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for e in res["entropy"]:
        share = 100 * e["offline_book_values"] / e["groups"]["all"]["values"]
        lines.append(
            f"| {e['field']} | {e['rel_bound']:g} | {e['n_chunks']} | {_f(share, 1)} | "
            f"{_f(e['offline_book_overhead_pct'])} | {_f(e['adapted_book_overhead_pct'])} | "
            f"{_f(e['own_book_overhead_pct'])} |"
        )
    lines += ["", "Container overhead by part (% of file bits):", ""]
    lines += [
        "| field | rel bound | headers+index+trailer | tables | sync | CRC | padding |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for e in res["entropy"]:
        p = e["container_parts_pct"]
        lines.append(
            f"| {e['field']} | {e['rel_bound']:g} | {_f(p['headers_index_trailer'], 3)} | "
            f"{_f(p['tables'], 3)} | {_f(p['sync'], 3)} | {_f(p['crc'], 4)} | "
            f"{_f(p['padding'], 4)} |"
        )
    lines += ["", "## Peak memory of the command line", ""]
    rss = res.get("rss")
    if rss is None:
        lines.append("Not measured (--no-rss).")
    elif "skipped" in rss:
        lines.append(f"Skipped: {rss['skipped']}.")
    else:
        lines += [
            f"A {rss['input_mb']:.0f} MB float32 raw file, shape {'x'.join(map(str, rss['shape']))}"
            f" ({rss['values']:,} values; {rss['field']}), `--rel {rss['rel_bound']:g}`. Peak RSS "
            "is the kernel's high-water mark of the command's process (ru_maxrss from "
            "getrusage(RUSAGE_CHILDREN) in a fresh wrapper process), which counts mapped file "
            "pages while resident; the polled value (psutil, every 10 ms) is a cross-check. "
            "The tiny-file row is the fixed cost of the interpreter, numpy, numba and the "
            f"cached JIT code. Target: below {rss['target_mb']:.0f} MB each.",
            "",
            "| command | peak RSS MB | polled MB | wall s | MB/s | exit | below target? |",
            "| --- | ---: | ---: | ---: | ---: | ---: | :---: |",
        ]
        for name in ("baseline_tiny_compress", "compress", "decompress"):
            r = rss[name]
            rate = rss["input_mb"] / r["wall_s"] if name != "baseline_tiny_compress" else None
            ok = "yes" if r["peak_rss_mb"] < rss["target_mb"] else "**NO**"
            label = "compress a tiny file (fixed cost)" if name.startswith("base") else name
            lines.append(
                f"| {label} | {_f(r['peak_rss_mb'], 1)} | {_f(r['peak_rss_polled_mb'], 1)} | "
                f"{_f(r['wall_s'], 1)} | {_f(rate, 1)} | {r['exit_code']} | {ok} |"
            )
        if "ratio" in rss:
            lines += [
                "",
                f"Compressed to {rss['compressed_mb']:.1f} MB (ratio {rss['ratio']:.1f}); "
                f"max error {_g(rss.get('max_error'))} against bound {_g(rss['abs_bound'])}: "
                f"{'held' if rss.get('held') else 'NOT held'}. Generating the file took "
                f"{rss['generate_s']:.1f} s.",
            ]
    lines.append("")
    return "\n".join(lines)


def targets(res: dict) -> list[str]:
    """One line per target: met or not, and where not."""
    sp = res["speed_vs_peers"]
    slow = [f"{s['field']} {s['rel_bound']:g}" for s in sp if not s["meets_sz3"]]
    ent = [e for e in res["entropy"] if e["target_applies"]]
    missed = [e for e in ent if not e["target_met"]]
    broken = [
        f"{r['compressor']} on {r['field']} {r['rel_bound']:g}"
        for r in res["results"]
        if not r["held"]
    ]
    out = [
        f"- ceaz compress and decompress at least SZ3's: {len(sp) - len(slow)}/{len(sp)} "
        "(field, bound) pairs" + (f"; not on {', '.join(slow)}" if slow else ""),
        f"- Huffman payload within {ENTROPY_TARGET_PCT:g} % of the entropy where H > "
        f"{ENTROPY_TARGET_MIN_BITS:g} bits/value: {len(ent) - len(missed)}/{len(ent)}"
        + (
            "; missed on "
            + ", ".join(
                f"{e['field']} {e['rel_bound']:g} ({e['overhead_pct']:.1f} %)" for e in missed
            )
            if missed
            else ""
        ),
        "- Every bound held: " + ("yes" if not broken else "NO: " + ", ".join(broken)),
    ]
    rss = res.get("rss")
    if rss and "skipped" not in rss:
        out.append(
            f"- CLI peak RSS below {rss['target_mb']:.0f} MB on {rss['input_mb']:.0f} MB: "
            f"{'yes' if rss['target_met'] else 'NO'} (compress "
            f"{rss['compress']['peak_rss_mb']:.0f} MB, decompress "
            f"{rss['decompress']['peak_rss_mb']:.0f} MB)"
        )
    else:
        out.append("- CLI peak RSS: not measured")
    return out


def speed_vs_peers(results: list[dict]) -> list[dict]:
    """ceaz's throughput and ratio as multiples of SZ3's and ZFP's on the same run."""
    by = {(r["field"], r["rel_bound"], r["compressor"]): r for r in results}
    out = []
    for (field, rel, comp), c in by.items():
        if comp != "ceaz":
            continue
        s, z = by[(field, rel, "sz3")], by[(field, rel, "zfp")]
        cs = c["compress_mb_s"] / s["compress_mb_s"]
        ds = c["decompress_mb_s"] / s["decompress_mb_s"]
        out.append(
            {
                "field": field,
                "rel_bound": rel,
                "compress_vs_sz3": cs,
                "decompress_vs_sz3": ds,
                "compress_vs_zfp": c["compress_mb_s"] / z["compress_mb_s"],
                "decompress_vs_zfp": c["decompress_mb_s"] / z["decompress_mb_s"],
                "ratio_vs_sz3": c["ratio"] / s["ratio"],
                "meets_sz3": cs >= 1 and ds >= 1,
            }
        )
    return out


def summary(res: dict) -> str:
    lines = []
    for rel in res["rel_bounds"]:
        lines.append(f"rel {rel:g}: ratio / PSNR dB / compress MB/s / decompress MB/s")
        rows = [r for r in res["results"] if r["rel_bound"] == rel]
        for field in dict.fromkeys(r["field"] for r in rows):
            cells = []
            for r in (r for r in rows if r["field"] == field):
                bad = "" if r["held"] else " BOUND BROKEN"
                cells.append(
                    f"{r['compressor']} {r['ratio']:.1f}/{r['psnr_db']:.1f}/"
                    f"{r['compress_mb_s']:.0f}/{r['decompress_mb_s']:.0f}{bad}"
                )
            lines.append(f"  {field:<30} " + "  ".join(cells))
    slow = [s for s in res["speed_vs_peers"] if not s["meets_sz3"]]
    lines.append(
        f"ceaz throughput >= SZ3: {len(res['speed_vs_peers']) - len(slow)}"
        f"/{len(res['speed_vs_peers'])} (field, bound) pairs"
    )
    for s in slow:
        lines.append(
            f"  slower on {s['field']} rel {s['rel_bound']:g}: compress "
            f"{s['compress_vs_sz3']:.2f}x, decompress {s['decompress_vs_sz3']:.2f}x SZ3"
        )
    for e in res["entropy"]:
        if e["target_applies"]:
            lines.append(
                f"entropy {e['field']} rel {e['rel_bound']:g}: H {e['entropy_bits_per_value']:.2f}"
                f" b/v, overhead {e['overhead_pct']:.2f} % "
                f"({'met' if e['target_met'] else 'MISSED'})"
            )
    broken = [r for r in res["results"] if not r["held"]]
    for r in broken:
        lines.append(
            f"bound broken: {r['compressor']} on {r['field']} rel {r['rel_bound']:g} "
            f"({r['n_over_bound']} values, max err/eb {r['max_error_over_bound']:.4f})"
        )
    rss = res.get("rss")
    if rss and "skipped" not in rss:
        lines.append(
            f"CLI peak RSS on {rss['input_mb']:.0f} MB: compress "
            f"{rss['compress']['peak_rss_mb']:.0f} MB ({rss['compress']['wall_s']:.1f} s), "
            f"decompress {rss['decompress']['peak_rss_mb']:.0f} MB "
            f"({rss['decompress']['wall_s']:.1f} s); target < {rss['target_mb']:.0f} MB "
            f"{'met' if rss['target_met'] else 'MISSED'}"
        )
    elif rss:
        lines.append(f"RSS test skipped: {rss['skipped']}")
    lines.append(f"total {res['total_s']:.0f} s")
    return "\n".join(lines)


# --- main ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small fields, 1 timed run: a smoke run")
    p.add_argument("--out", default=str(ROOT / "bench"), help="folder for results.{json,md}")
    p.add_argument("--no-rss", action="store_true", help="skip the CLI peak-memory test")
    p.add_argument(
        "--reps",
        type=int,
        help="timed repetitions at least (default 5, 1 with --quick); fast calls repeat more",
    )
    p.add_argument("--tmp", help="folder for the 1 GB memory-test files (default: system temp)")
    args = p.parse_args(argv)
    reps = args.reps or (1 if args.quick else 5)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = "results-quick" if args.quick else "results"
    t_start = time.perf_counter()
    load_start = os.getloadavg()

    results, entropy, fields = [], [], []
    for spec in field_specs(args.quick):
        t0 = time.perf_counter()
        x = np.ascontiguousarray(spec.make(), dtype=np.float32)
        make_s = time.perf_counter() - t0
        lo, hi = float(x.min()), float(x.max())
        fields.append(
            {
                "name": spec.name,
                "shape": list(x.shape),
                "values": int(x.size),
                "min": lo,
                "max": hi,
                "range": hi - lo,
                "source": spec.source,
                "make_s": make_s,
            }
        )
        print(f"{spec.name} {x.shape} ({x.size:,} values, made in {make_s:.1f} s)", flush=True)
        for rel in REL_BOUNDS:
            eb = rel * (hi - lo)
            for name in COMPRESSORS:
                row, blob = measure(PEERS[name], x, eb, reps)
                row.update(field=spec.name, rel_bound=rel, abs_bound=eb, values=int(x.size))
                results.append(row)
                print(
                    f"  rel {rel:g} {name:<5} ratio {row['ratio']:8.2f}  "
                    f"{row['bits_per_value']:6.3f} b/v  PSNR {row['psnr_db']:6.1f}  "
                    f"err/eb {row['max_error_over_bound']:.4f}{'' if row['held'] else ' BROKEN'}"
                    f"  c {row['compress_mb_s']:7.1f} MB/s  d {row['decompress_mb_s']:7.1f} MB/s",
                    flush=True,
                )
                if name == "ceaz":
                    e = entropy_report(x, blob)
                    e.update(field=spec.name, rel_bound=rel)
                    entropy.append(e)
                del blob
        del x
        gc.collect()

    rss = None
    if not args.no_rss:
        shape = RSS_QUICK_SHAPE if args.quick else RSS_SHAPE
        print(f"CLI memory test on {math.prod(shape) * 4 / MB:.0f} MB ...", flush=True)
        rss = rss_test(shape, args.tmp)

    res = {
        "quick": args.quick,
        "reps": reps,
        "rel_bounds": list(REL_BOUNDS),
        "compressors": {k: v.note for k, v in PEERS.items()},
        "machine": machine_info(),
        "fields": fields,
        "results": results,
        "speed_vs_peers": speed_vs_peers(results),
        "entropy": entropy,
        "rss": rss,
    }
    res["total_s"] = time.perf_counter() - t_start
    res["load_average_1_5_15"] = {"start": list(load_start), "end": list(os.getloadavg())}
    (out_dir / f"{stem}.json").write_text(
        json.dumps(_jsonable(res), indent=1, allow_nan=False) + "\n"
    )
    (out_dir / f"{stem}.md").write_text(markdown(res))
    print()
    print(summary(res))
    print(f"wrote {out_dir / stem}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
