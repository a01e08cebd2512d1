"""The ceaz command line: compress, decompress, inspect and verify files.

    ceaz compress IN OUT (--abs EB | --rel EB | --ratio R | --bit-rate B) [--shape Z,Y,X] ...
    ceaz decompress IN OUT
    ceaz info IN [--all] [--json]
    ceaz verify ORIGINAL COMPRESSED [--shape Z,Y,X] [--json]
    ceaz report IN OUTDIR [--rel EB,EB,...] [--detail EB] [--no-peers] [--shape Z,Y,X] ...

Inputs are .npy files or raw little-endian .f32/.f64 files (which need --shape). Everything
streams chunk by chunk, so memory stays a small multiple of the chunk size, and outputs appear
only when complete. Exit status: 0 success, 1 `verify` found the bound broken or a special
value changed, 2 bad arguments, bad input or a corrupt stream, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from . import codec, files, ratecontrol, report
from . import format as fmt
from .backends import BACKENDS, coder_for
from .chunk import decode_chunks
from .container import Header
from .errors import CeazError, CorruptStreamError
from .metrics import QualityAccumulator
from .quantizer import within_bound

#: Release written or read pages of a memory map after about this many values.
RELEASE_VALUES = codec.DECODE_BATCH_VALUES
#: `info` lists this many chunks at each end unless --all.
INFO_HEAD = 10

_MODE_NAMES = {code: name for name, code in fmt.EB_MODES.items()}


# --- argument parsing ------------------------------------------------------------------------


def parse_bound(text: str, what: str = "error bound") -> float:
    """An error bound (or another positive quantity, named by ``what``): a positive finite
    number (0 is refused, as the codec refuses it)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{what} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{what} must be a positive finite number, got {text}")
    if value <= 0:
        raise ValueError(f"{what} must be positive, got {text}")
    return value


def parse_fill(text: str) -> float | None:
    """--fill: a float (nan, inf and -1e34 are typical) or 'none' to disable the fill symbol."""
    if text.strip().lower() == "none":
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"--fill must be a number, 'nan' or 'none', got {text!r}") from None


def _add_progress(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-progress", action="store_true", help="no progress bar (off anyway if not a TTY)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ceaz",
        description="Error-bounded lossy compression of float32/float64 arrays.",
        epilog="Exit status: 0 ok, 1 verify failed, 2 error, 130 interrupted.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("compress", help="compress a .npy or raw .f32/.f64 file")
    p.add_argument("input", metavar="IN", help=".npy, or raw .f32/.f64 (needs --shape)")
    p.add_argument("output", metavar="OUT", help="compressed file to write")
    bound = p.add_mutually_exclusive_group(required=True)
    bound.add_argument("--abs", metavar="EB", help="absolute error bound")
    bound.add_argument("--rel", metavar="EB", help="bound relative to the finite value range")
    bound.add_argument("--ratio", metavar="R",
                       help="fixed-ratio mode: fit the bound so that input / output is about R")
    bound.add_argument("--bit-rate", metavar="B",
                       help="fixed-rate mode: fit the bound for about B bits per value")
    p.add_argument("--shape", metavar="Z,Y,X", help="shape of a raw input (or to reshape a .npy)")
    p.add_argument("--dtype", metavar="f32|f64", help="value type of a raw input of any suffix")
    p.add_argument("--radius", type=int, default=fmt.DEFAULT_RADIUS, help="symbol radius R")
    p.add_argument(
        "--chunk-values", type=int, default=fmt.DEFAULT_CHUNK_VALUES, help="target values/chunk"
    )
    p.add_argument(
        "--fill", default="nan", metavar="VALUE|none", help="fill value coded as one symbol"
    )
    p.add_argument(
        "--max-line", type=int, default=fmt.DEFAULT_MAX_LINE, metavar="N",
        help="longest chunk row of a 2-D or 3-D field (a card's line buffer)",
    )  # fmt: skip
    p.add_argument(
        "--max-plane", type=int, default=fmt.DEFAULT_MAX_PLANE, metavar="N",
        help="most values in a chunk plane of a 3-D field (a card's plane buffer)",
    )  # fmt: skip
    p.add_argument(
        "--adapt-lag", type=int, choices=(0, 1, 2), default=fmt.DEFAULT_ADAPT_LAG,
        help="chunk k's codebook comes from chunk k-LAG's histogram (0: the offline book "
             "picked for chunk 0, for every chunk); with 2 the card builds the books on chip",
    )  # fmt: skip
    p.add_argument(
        "--backend", choices=BACKENDS, default="model",
        help="what codes the chunks: the CPU model, the simulated card, a PYNQ board, or auto",
    )  # fmt: skip
    _add_progress(p)
    p.set_defaults(run=cmd_compress)

    p = sub.add_parser("decompress", help="decompress to .npy or raw .f32/.f64")
    p.add_argument("input", metavar="IN", help="compressed file")
    p.add_argument("output", metavar="OUT", help=".npy, .f32 or .f64 (must match the stream)")
    _add_progress(p)
    p.set_defaults(run=cmd_decompress)

    p = sub.add_parser("info", help="show the header and the chunk table of a compressed file")
    p.add_argument("input", metavar="IN", help="compressed file")
    p.add_argument("--all", action="store_true", help=f"list every chunk, not {INFO_HEAD} + last")
    p.add_argument("--json", action="store_true", help="machine-readable output (all chunks)")
    p.set_defaults(run=cmd_info)

    p = sub.add_parser("verify", help="check a compressed file against its original")
    p.add_argument("original", metavar="ORIGINAL", help=".npy or raw original")
    p.add_argument("compressed", metavar="COMPRESSED", help="compressed file")
    p.add_argument("--shape", metavar="Z,Y,X", help="shape of a raw original (default: stream's)")
    p.add_argument("--dtype", metavar="f32|f64", help="value type of a raw original")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _add_progress(p)
    p.set_defaults(run=cmd_verify)

    p = sub.add_parser(
        "report", help="rate-distortion beside SZ3/ZFP, error histogram, slices: PNG + HTML"
    )
    p.add_argument("input", metavar="IN", help=".npy, or raw .f32/.f64 (needs --shape)")
    p.add_argument("output", metavar="OUTDIR", help="directory for index.html and the figures")
    p.add_argument("--shape", metavar="Z,Y,X", help="shape of a raw input (or to reshape a .npy)")
    p.add_argument("--dtype", metavar="f32|f64", help="value type of a raw input of any suffix")
    p.add_argument(
        "--rel",
        metavar="EB,EB,...",
        default=",".join(f"{b:g}" for b in report.DEFAULT_BOUNDS),
        help="relative bounds to sweep (default %(default)s)",
    )
    p.add_argument(
        "--detail",
        metavar="EB",
        default=f"{report.DEFAULT_DETAIL:g}",
        help="relative bound of the histogram and slice (default %(default)s)",
    )
    p.add_argument("--no-peers", action="store_true", help="leave out SZ3 and ZFP")
    p.add_argument("--name", help="title of the report (default: the input's file name)")
    p.set_defaults(run=cmd_report)
    return parser


# --- helpers ---------------------------------------------------------------------------------


@contextmanager
def _progress(args: argparse.Namespace, total_bytes: int, desc: str) -> Iterator[tqdm]:
    """A byte-counting bar on stderr, shown only to a person watching a terminal."""
    disable = args.no_progress or not sys.stderr.isatty()
    with tqdm(
        total=total_bytes,
        desc=desc,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        file=sys.stderr,
        disable=disable,
        leave=False,
    ) as bar:
        yield bar


def _every(n_values: int, action: Callable[[], None]) -> Callable[[int], None]:
    """A per-chunk callback that runs action once about n_values have gone by."""
    seen = 0

    def tick(values: int) -> None:
        nonlocal seen
        seen += values
        if seen >= n_values:
            seen = 0
            action()

    return tick


@contextmanager
def _open_stream(path: str) -> Iterator[tuple[Any, codec.StreamReader]]:
    """The compressed file and its parsed header and index; corruption names the file."""
    with open(path, "rb") as f:
        try:
            yield f, codec.StreamReader(f)
        except CorruptStreamError as e:
            raise CorruptStreamError(f"{path}: {e}") from None


def _open_compressed(path: str) -> Any:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such file: {path!r}")
    if not p.is_file():
        raise IsADirectoryError(f"not a regular file: {path!r}")
    return _open_stream(path)


def _shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(str(s) for s in shape)


def _fill_value(h: Header) -> float | None:
    if h.fill_bits is None:
        return None
    uint = np.uint32 if h.dtype.itemsize == 4 else np.uint64
    return float(np.array(h.fill_bits, dtype=uint).view(h.dtype))


def _jsonable(x: Any) -> Any:
    """JSON has no NaN or infinity: write them as the strings 'nan', 'inf', '-inf'."""
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x


def _print_json(obj: Any) -> None:
    print(json.dumps(_jsonable(obj), indent=2, allow_nan=False))


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


# --- compress --------------------------------------------------------------------------------


def cmd_compress(args: argparse.Namespace) -> int:
    target = {"ratio": args.ratio, "bit_rate": args.bit_rate}
    if all(v is None for v in target.values()):
        mode, text = ("abs", args.abs) if args.abs is not None else ("rel", args.rel)
        eb = parse_bound(text)
        target = None
    else:
        target = {k: parse_bound(v, "--" + k.replace("_", "-")) for k, v in target.items()
                  if v is not None}
    fill = parse_fill(args.fill)
    if not 1 <= args.chunk_values <= fmt.MAX_CHUNK_VALUES:
        raise ValueError(
            f"--chunk-values must be in [1, {fmt.MAX_CHUNK_VALUES}], got {args.chunk_values!r}"
        )
    if not 1 <= args.max_line <= args.max_plane:
        raise ValueError(f"need 1 <= --max-line <= --max-plane, got {args.max_line} and "
                         f"{args.max_plane}")
    settings = codec.Settings(radius=args.radius, chunk_values=args.chunk_values, fill_value=fill,
                              adapt_lag=args.adapt_lag, max_line=args.max_line,
                              max_plane=args.max_plane)
    shape = files.parse_shape(args.shape) if args.shape else None
    src = files.open_input(args.input, shape, args.dtype)
    if _same_file(args.input, args.output):
        raise ValueError(f"output {args.output!r} is the input file; choose another name")
    nbytes, itemsize = src.nbytes, src.dtype.itemsize
    with (
        _progress(args, nbytes, "compress") as bar,
        coder_for(args.backend, settings) as coder,
        files.atomic_output(args.output) as f,
    ):
        # The encoder drops input pages every 16 chunks; with big chunks that is most of the
        # file, so drop them after every few million values too.
        release = _every(RELEASE_VALUES, lambda: files.release(src))

        def on_chunk(n: int) -> None:
            bar.update(n * itemsize)
            release(n)

        t0 = time.perf_counter()
        if target is None:
            header = codec.encode_stream(
                src, f, eb, mode, settings, on_chunk=on_chunk, coder=coder)
            asked = f"{mode} {eb:g}"
        else:
            bits = ratecontrol.target_bits(itemsize, **target)
            header, fit = ratecontrol.encode_to_rate(
                src, f, bits, settings, coder=coder, on_chunk=on_chunk, on_pass=bar.reset)
            (name, value), = target.items()
            asked = (f"{name.replace('_', ' ')} {value:g} asked, {len(fit.passes)} pass(es), "
                     f"{fit.miss:+.1%} bits")
        seconds = time.perf_counter() - t0
        size = f.tell()
    print(
        f"{args.input} -> {args.output}: {nbytes / 1e6:.2f} MB -> {size / 1e6:.3f} MB, "
        f"ratio {nbytes / size:.2f}, {8 * size / src.size:.3f} bits/value, "
        f"{nbytes / 1e6 / max(seconds, 1e-9):.1f} MB/s, bound {header.eb_f:.6g} ({asked})"
    )
    return 0


# --- decompress ------------------------------------------------------------------------------


def cmd_decompress(args: argparse.Namespace) -> int:
    files.output_kind(args.output)  # refuse an unknown suffix before decoding anything
    with _open_compressed(args.input) as (f, reader):
        h = reader.header
        if _same_file(args.input, args.output):
            raise ValueError(f"output {args.output!r} is the input file; choose another name")
        nbytes = math.prod(h.shape) * h.dtype.itemsize
        with (
            _progress(args, nbytes, "decompress") as bar,
            files.open_output_array(args.output, h.shape, h.dtype) as out,
        ):
            release = _every(RELEASE_VALUES, out.release)

            def on_chunk(n: int) -> None:
                bar.update(n * h.dtype.itemsize)
                release(n)

            t0 = time.perf_counter()
            codec.decode_stream(f, out.array, on_chunk=on_chunk)
            seconds = time.perf_counter() - t0
    print(
        f"{args.input} -> {args.output}: {h.dtype.name} {_shape_text(h.shape)}, "
        f"{nbytes / 1e6:.2f} MB, {nbytes / 1e6 / max(seconds, 1e-9):.1f} MB/s"
    )
    return 0


# --- info ------------------------------------------------------------------------------------


def header_dict(h: Header) -> dict[str, Any]:
    """The header as plain values, for `info` and `verify` (text and JSON alike)."""
    fill = _fill_value(h)
    return {
        "dtype": h.dtype.name,
        "shape": list(h.shape),
        "shape3": list(h.shape3),
        "mode": _MODE_NAMES[h.eb_mode],
        "eb_user": h.eb_user,
        "eb_f": h.eb_f,
        "step": h.step,
        "radius": h.radius,
        "max_code_len": h.max_code_len,
        "adapt_lag": h.adapt_lag,
        "sync_interval": h.sync_interval,
        "chunk": list(h.chunk),
        "n_chunks": h.n_chunks,
        "fill_value": fill,
        "fill_bits": None if h.fill_bits is None else f"{h.fill_bits:#x}",
        "finite_min": h.finite_min,
        "finite_max": h.finite_max,
    }


def _chunk_row(info) -> dict[str, Any]:
    box = info.payload.box
    return {
        "index": box.index,
        "origin": list(box.origin),
        "shape": list(box.shape),
        "values": box.size,
        "bytes": info.record_size,
        "bits_per_value": 8 * info.record_size / box.size,
        "outliers": info.n_outlier,
        "verbatim": info.n_verbatim,
        "fill": info.n_fill,
    }


def cmd_info(args: argparse.Namespace) -> int:
    with _open_compressed(args.input) as (_, reader):
        h = reader.header
        rows = [_chunk_row(reader.chunk(i)) for i in range(h.n_chunks)]
        size = reader.size
    n_values = math.prod(h.shape)
    original = n_values * h.dtype.itemsize
    summary = {
        "file": args.input,
        "file_bytes": size,
        "original_bytes": original,
        "ratio": original / size,
        "bits_per_value": 8 * size / n_values,
        "outliers": sum(r["outliers"] for r in rows),
        "verbatim": sum(r["verbatim"] for r in rows),
        "fill": sum(r["fill"] for r in rows),
    }
    if args.json:
        _print_json({"header": header_dict(h), "summary": summary, "chunks": rows})
        return 0
    d = header_dict(h)
    fill = "none" if d["fill_value"] is None else f"{d['fill_value']!r} ({d['fill_bits']})"
    folded = "" if len(h.shape) <= 3 else f" (folded to {_shape_text(h.shape3)})"
    lines = [
        ("file", f"{args.input} ({size} bytes)"),
        ("dtype", d["dtype"]),
        ("shape", _shape_text(h.shape) + folded),
        ("mode", d["mode"]),
        ("user bound", f"{h.eb_user:.6g}"),
        ("bound in force", f"eb_f = {h.eb_f!r} (absolute)"),
        ("step S", repr(h.step)),
        ("radius", str(h.radius)),
        ("chunk shape", f"{_shape_text(h.chunk)} ({h.n_chunks} chunks)"),
        ("fill value", fill),
        ("sync interval", f"{h.sync_interval} symbols"),
        ("adapt lag", str(h.adapt_lag)),
        ("finite min/max", f"{h.finite_min!r} / {h.finite_max!r}"),
    ]
    for key, value in lines:
        print(f"{key:<16}{value}")
    print()
    print(
        f"{'chunk':>7}  {'box (z, y, x)':<32} {'values':>10} {'bytes':>10} {'bits/val':>8} "
        f"{'outliers':>9} {'verbatim':>9} {'fill':>9}"
    )
    shown: list[dict[str, Any] | None] = list(rows)
    if not args.all and len(rows) > 2 * INFO_HEAD:
        shown = rows[:INFO_HEAD] + [None] + rows[-INFO_HEAD:]
    for r in shown:
        if r is None:
            print(f"{'...':>7}  ({len(rows) - 2 * INFO_HEAD} more chunks; --all lists them)")
            continue
        box = ", ".join(f"{o}:{o + s}" for o, s in zip(r["origin"], r["shape"], strict=True))
        print(
            f"{r['index']:>7}  {box:<32} {r['values']:>10} {r['bytes']:>10} "
            f"{r['bits_per_value']:>8.3f} {r['outliers']:>9} {r['verbatim']:>9} {r['fill']:>9}"
        )
    print(
        f"{'total':>7}  {'':<32} {n_values:>10} {size:>10} {summary['bits_per_value']:>8.3f} "
        f"{summary['outliers']:>9} {summary['verbatim']:>9} {summary['fill']:>9}"
    )
    print()
    print(f"ratio {summary['ratio']:.3f} ({original} -> {size} bytes)")
    return 0


# --- verify ----------------------------------------------------------------------------------


def _special_mask(x: np.ndarray, fill_bits: int | None) -> np.ndarray:
    special = ~np.isfinite(x)
    if fill_bits is not None:
        special |= x.view(np.uint32 if x.dtype.itemsize == 4 else np.uint64) == fill_bits
    return special


def _violations(original: np.ndarray, decoded: np.ndarray, h: Header) -> int:
    """Values outside the bound, decided exactly (a float64 difference can round either way)."""
    a, b = original.reshape(-1), decoded.reshape(-1)
    keep = ~_special_mask(a, h.fill_bits)
    return int(np.count_nonzero(~within_bound(a[keep], b[keep], h.eb_f)))


def _open_original(args: argparse.Namespace, h: Header) -> np.ndarray:
    """The original as the stream sees it: a raw file defaults to the stream's shape/dtype."""
    path = Path(args.original)
    shape = files.parse_shape(args.shape) if args.shape else None
    is_npy = path.suffix.lower() == ".npy"
    dtype = args.dtype
    if not is_npy and dtype is None and path.suffix.lower() not in files.RAW_SUFFIXES:
        dtype = h.dtype
    orig = files.open_input(path, shape if shape or is_npy else h.shape, dtype)
    if orig.dtype != h.dtype:
        raise ValueError(
            f"{args.original!r} holds {orig.dtype.name} values, the stream holds {h.dtype.name}"
        )
    if orig.shape != h.shape:
        if shape is not None or orig.size != math.prod(h.shape):
            raise ValueError(
                f"{args.original!r} has shape {orig.shape!r}, the stream holds {h.shape!r}"
            )
        orig = orig.reshape(h.shape)  # same values in the same order, e.g. a folded .npy
    return orig


def cmd_verify(args: argparse.Namespace) -> int:
    with _open_compressed(args.compressed) as (_, reader):
        h = reader.header
        orig = _open_original(args, h)
        orig3 = orig.reshape(h.shape3)
        acc = QualityAccumulator(h.fill_bits)
        violations = 0
        with _progress(args, orig.nbytes, "verify") as bar:
            for batch in reader.batches():
                decoded = decode_chunks([c.payload for c in batch], reader.coding)
                for info, v in zip(batch, decoded, strict=True):
                    o = np.asarray(orig3[info.payload.box.slices])
                    acc.add(o, v)
                    violations += _violations(o, v, h)
                    bar.update(v.nbytes)
                files.release(orig)
        size = reader.size
    q = acc.result()
    bound_held = violations == 0
    ok = bound_held and q.special_exact
    report = {
        "original": args.original,
        "compressed": args.compressed,
        "dtype": h.dtype.name,
        "shape": list(h.shape),
        "ratio": orig.nbytes / size,
        "bits_per_value": 8 * size / orig.size,
        "eb_f": h.eb_f,
        **q.as_dict(),
        "n_violations": violations,
        "bound_held": bound_held,
        "ok": ok,
    }
    if args.json:
        _print_json(report)
        return 0 if ok else 1
    held = "held" if bound_held else f"BROKEN by {violations} values"
    special = (
        "all bit-exact" if q.special_exact else "NOT all bit-exact"
    ) if q.n_special else "none"
    print(f"{'original':<14}{args.original} ({h.dtype.name}, {_shape_text(h.shape)})")
    print(
        f"{'compressed':<14}{args.compressed} ({size} bytes, ratio {report['ratio']:.3f}, "
        f"{report['bits_per_value']:.3f} bits/value)"
    )
    print(f"{'max error':<14}{q.max_error:.6g} (bound in force eb_f = {h.eb_f:.6g}: {held})")
    print(f"{'PSNR':<14}{q.psnr_db:.2f} dB (value range {q.value_range:.6g})")
    print(f"{'NRMSE':<14}{q.nrmse:.6g}")
    print(f"{'special':<14}{q.n_special} non-finite/fill values: {special}")
    print(f"{'result':<14}{'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


# --- report ----------------------------------------------------------------------------------


def parse_bounds(text: str) -> list[float]:
    """--rel for `report`: comma-separated relative bounds, each in (0, 1)."""
    bounds = [parse_bound(t) for t in text.split(",") if t.strip()]
    if not bounds:
        raise ValueError(f"--rel needs at least one bound, got {text!r}")
    for b in bounds:
        if b >= 1:
            raise ValueError(f"relative bounds must be below 1, got {b:g}")
    return bounds


def cmd_report(args: argparse.Namespace) -> int:
    bounds = parse_bounds(args.rel)
    detail = parse_bound(args.detail)
    if detail >= 1:
        raise ValueError(f"--detail must be a relative bound below 1, got {args.detail}")
    report.require_matplotlib()
    shape = files.parse_shape(args.shape) if args.shape else None
    src = files.open_input(args.input, shape, args.dtype)
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise ValueError(f"output {args.output!r} exists and is not a directory")
    name = args.name or Path(args.input).name
    t0 = time.perf_counter()
    result = report.make_report(src, out, name, bounds, detail, peers=not args.no_peers)
    codecs = ", ".join(dict.fromkeys(p.codec for p in result.points))
    print(
        f"{args.input} -> {result.html}: {len(result.points)} points ({codecs}), "
        f"{len(result.figures)} figures, {time.perf_counter() - t0:.1f} s"
    )
    for p in result.points:
        if p.rel_eb == detail:
            print(
                f"  {p.codec:<5} at relative bound {detail:g}: {p.bits_per_value:.3f} bits/value, "
                f"PSNR {p.psnr_db:.2f} dB, bound {'held' if p.bound_held else 'BROKEN'}"
            )
    for note in result.notes:
        print(f"  note: {note}")
    return 0


# --- entry point -----------------------------------------------------------------------------


def _describe(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror and e.filename:
        return f"{e.strerror}: {e.filename!r}"
    return str(e) or type(e).__name__


#: Options whose value may be a negative number.
_NUMERIC_OPTIONS = ("--abs", "--rel", "--ratio", "--bit-rate", "--fill")


def _attach_numbers(argv: list[str]) -> list[str]:
    """'--fill -1e34' -> '--fill=-1e34': argparse takes '-1e34' for an option otherwise."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in _NUMERIC_OPTIONS and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            try:
                float(argv[i + 1])
            except ValueError:
                pass
            else:
                out.append(f"{arg}={argv[i + 1]}")
                i += 2
                continue
        out.append(arg)
        i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    """Run one command; errors become `ceaz: error: ...` and exit status 2, never a traceback."""
    parser = build_parser()
    try:
        args = parser.parse_args(_attach_numbers(sys.argv[1:] if argv is None else list(argv)))
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return e.code if isinstance(e.code, int) else 2
    try:
        return args.run(args)
    except KeyboardInterrupt:
        print("ceaz: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `ceaz info big.ceaz | head`
        sys.stdout = open(os.devnull, "w")  # keeps the exit flush quiet
        return 1
    except (CeazError, ValueError, OSError) as e:
        print(f"ceaz: error: {_describe(e)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
