"""`ceaz report`: what a bound buys on one field, as PNG figures and an HTML page.

A bound alone does not tell a user what to pick, so the report sweeps relative bounds and
shows, beside SZ3 (pysz) and ZFP (zfpy, accuracy mode) when they are installed:
the rate-distortion curve (bits per value against PSNR), the error histogram in units of the
bound, and a 2-D slice (original, decompressed, error) at one chosen bound. The peers get the
same absolute bound (relative bound times the finite value range) on the same folded 3-D
array. Figures are drawn with matplotlib's Agg canvas, never a window.
"""

from __future__ import annotations

import html
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import codec, tiling
from .codec import StreamReader
from .errors import CeazError
from .metrics import quality
from .quantizer import within_bound

#: Relative bounds of the default sweep.
DEFAULT_BOUNDS: tuple[float, ...] = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)
#: The bound of the histogram and slice figures, unless chosen.
DEFAULT_DETAIL = 1e-3
FIGURES = ("rate_distortion.png", "error_histogram.png", "slice.png")


@dataclass(frozen=True)
class Point:
    """One codec at one bound."""

    codec: str
    rel_eb: float
    abs_eb: float  #: the absolute bound the codec was held to
    bits_per_value: float
    psnr_db: float
    max_error: float
    bound_held: bool
    mb_per_s: float  #: compression throughput (uncompressed MB per second)


@dataclass
class Report:
    html: Path
    figures: list[Path]
    points: list[Point]
    notes: list[str] = field(default_factory=list)


def require_matplotlib() -> None:
    """Fail before the sweep, not after it, when the figures cannot be drawn."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise CeazError("ceaz report needs matplotlib: pip install 'ceaz[report]'") from None


# --- the codecs ---------------------------------------------------------------------------


def _sz3(x3: np.ndarray, eb: float) -> tuple[int, np.ndarray]:
    from pysz import sz, szConfig, szErrorBoundMode

    conf = szConfig()
    conf.errorBoundMode = szErrorBoundMode.ABS
    conf.absErrorBound = eb
    comp, _ = sz.compress(x3, conf)
    dec, _ = sz.decompress(comp, x3.dtype, x3.shape)
    return comp.nbytes, np.asarray(dec).reshape(x3.shape)


def _zfp(x3: np.ndarray, eb: float) -> tuple[int, np.ndarray]:
    import zfpy

    comp = zfpy.compress_numpy(x3, tolerance=eb)
    return len(comp), zfpy.decompress_numpy(comp).reshape(x3.shape)


def available_peers() -> dict[str, Callable[[np.ndarray, float], tuple[int, np.ndarray]]]:
    """The peer codecs that import here (SZ3 via pysz, ZFP via zfpy)."""
    peers = {}
    for name, module, run in (("SZ3", "pysz", _sz3), ("ZFP", "zfpy", _zfp)):
        try:
            __import__(module)
        except ImportError:
            continue
        peers[name] = run
    return peers


def _check_bounds(bounds: Sequence[float]) -> list[float]:
    out = []
    for b in bounds:
        if not (isinstance(b, int | float) and math.isfinite(b) and 0 < b < 1):
            raise ValueError(f"relative bounds must be in (0, 1), got {b!r}")
        out.append(float(b))
    if not out:
        raise ValueError("need at least one relative bound")
    return sorted(set(out), reverse=True)


# --- the sweep ----------------------------------------------------------------------------


def sweep(
    x: np.ndarray, bounds: Sequence[float], detail: float, peers: bool = True
) -> tuple[list[Point], dict[str, tuple[np.ndarray, float]], float, list[str]]:
    """Points for every codec and bound; per codec, the decoded array at `detail` and the
    absolute bound it was held to; the finite value range; notes for the page."""
    x = np.ascontiguousarray(x)
    x3 = x.reshape(tiling.fold_to_3d(x.shape))
    mb = x.nbytes / 1e6
    points, detail_out, notes = [], {}, []
    value_range = 0.0
    codec.compress(x.reshape(-1)[:4096].copy(), 1.0)  # compile or load the kernels untimed
    for rel in sorted(set([*bounds, detail]), reverse=True):
        t0 = time.perf_counter()
        data = codec.compress(x, rel, "rel")
        seconds = time.perf_counter() - t0
        h = StreamReader.from_bytes(data).header
        value_range = h.finite_max - h.finite_min
        y = codec.decompress(data)
        if rel == detail:
            detail_out["ceaz"] = (y, h.eb_f)
        if rel in bounds:
            points.append(_point("ceaz", rel, h.eb_f, len(data), x, y, seconds, mb, h.fill_bits))
    runners = available_peers() if peers else {}
    if peers and not runners:
        notes.append("SZ3 and ZFP are not installed (pip install pysz zfpy==1.0.1).")
    if runners and not np.isfinite(x).all():
        notes.append("SZ3 and ZFP skipped: the field holds NaN or infinite values.")
        runners = {}
    if runners and value_range == 0:
        notes.append("SZ3 and ZFP skipped: the field is constant.")
        runners = {}
    for name, run in runners.items():
        for rel in sorted(set([*bounds, detail]), reverse=True):
            eb = rel * value_range
            t0 = time.perf_counter()
            try:
                nbytes, y3 = run(x3, eb)
            except Exception as e:  # a peer's failure is a note in the report, not a crash
                notes.append(f"{name} failed at relative bound {rel:g}: {e}")
                continue
            seconds = time.perf_counter() - t0  # includes decompression for the peers
            y = y3.reshape(x.shape).astype(x.dtype, copy=False)
            if rel == detail:
                detail_out[name] = (y, eb)
            if rel in bounds:
                points.append(_point(name, rel, eb, nbytes, x, y, seconds, mb, None))
    if runners:
        notes.append("Peer throughput includes their decompression (one call each way).")
    return points, detail_out, value_range, notes


def _point(
    name: str,
    rel: float,
    eb: float,
    nbytes: int,
    x: np.ndarray,
    y: np.ndarray,
    seconds: float,
    mb: float,
    fill_bits: int | None,
) -> Point:
    q = quality(x, y, fill_bits)
    finite = np.isfinite(x).reshape(-1)
    held = bool(within_bound(x.reshape(-1)[finite], y.reshape(-1)[finite], eb).all())
    return Point(
        codec=name,
        rel_eb=rel,
        abs_eb=eb,
        bits_per_value=8 * nbytes / x.size,
        psnr_db=q.psnr_db,
        max_error=q.max_error,
        bound_held=held,
        mb_per_s=mb / max(seconds, 1e-9),
    )


# --- figures ------------------------------------------------------------------------------


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def plot_rate_distortion(points: list[Point], title: str, path: Path) -> None:
    fig = _figure(6.4, 4.4)
    ax = fig.add_subplot()
    for name in dict.fromkeys(p.codec for p in points):
        ps = sorted((p for p in points if p.codec == name), key=lambda p: p.bits_per_value)
        ps = [p for p in ps if math.isfinite(p.psnr_db)]
        ax.plot([p.bits_per_value for p in ps], [p.psnr_db for p in ps], "o-", label=name)
    ax.set_xlabel("bit rate (bits per value; lossless points, PSNR = inf, left off)")
    ax.set_ylabel("PSNR (dB)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.savefig(path)


def plot_error_histogram(
    x: np.ndarray, decoded: dict[str, tuple[np.ndarray, float]], title: str, path: Path
) -> None:
    """Errors in units of each codec's absolute bound: all inside [-1, 1] if it held."""
    fig = _figure(6.4, 4.0)
    ax = fig.add_subplot()
    finite = np.isfinite(x)
    bins = np.linspace(-1.05, 1.05, 85)
    for name, (y, eb) in decoded.items():
        eb = max(eb, np.finfo(np.float64).tiny)
        err = (y[finite].astype(np.float64) - x[finite].astype(np.float64)) / eb
        ax.hist(err, bins=bins, histtype="step", density=True, linewidth=1.5, label=name)
    ax.axvline(-1, color="k", linestyle=":", linewidth=1)
    ax.axvline(1, color="k", linestyle=":", linewidth=1)
    ax.set_yscale("log")  # ZFP's narrow peak would flatten the uniform errors of the others
    ax.set_xlabel("error / absolute bound")
    ax.set_ylabel("density (log scale)")
    ax.set_title(title)
    ax.legend()
    fig.savefig(path)


def plot_slice(x: np.ndarray, y: np.ndarray, eb: float, title: str, path: Path) -> None:
    """Original, decompressed and error of the middle plane of the folded (z, y, x) array."""
    shape3 = tiling.fold_to_3d(x.shape)
    k = shape3[0] // 2
    a = x.reshape(shape3)[k].astype(np.float64)
    b = y.reshape(shape3)[k].astype(np.float64)
    err = b - a
    fig = _figure(12, 3.8)
    axes = fig.subplots(1, 3)
    if shape3[1] == 1:  # a 1-D field: lines, not images
        axes[0].plot(a[0])
        axes[1].plot(b[0])
        axes[2].plot(err[0])
        if eb > 0:
            axes[2].set_ylim(-1.1 * eb, 1.1 * eb)
    else:
        finite = a[np.isfinite(a)]
        lo, hi = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
        for ax, img in zip(axes[:2], (a, b), strict=True):
            im = ax.imshow(img, vmin=lo, vmax=hi, cmap="viridis", origin="lower")
        fig.colorbar(im, ax=axes[:2], shrink=0.8)
        lim = eb if eb > 0 else max(float(np.nanmax(np.abs(err), initial=0)), 1e-300)
        im = axes[2].imshow(err, vmin=-lim, vmax=lim, cmap="RdBu_r", origin="lower")
        fig.colorbar(im, ax=axes[2], shrink=0.8)
    for ax, label in zip(axes, ("original", "decompressed", "error"), strict=True):
        ax.set_title(label)
    fig.suptitle(f"{title} (plane {k} of {shape3[0]})")
    fig.savefig(path)


# --- the page -----------------------------------------------------------------------------


def _num(v: float, fmt: str) -> str:
    return format(v, fmt) if math.isfinite(v) else str(v)


def write_html(
    path: Path,
    name: str,
    x: np.ndarray,
    value_range: float,
    points: list[Point],
    detail: float,
    notes: list[str],
) -> None:
    rows = "\n".join(
        f"<tr><td>{html.escape(p.codec)}</td><td>{p.rel_eb:.0e}</td><td>{p.abs_eb:.4g}</td>"
        f"<td>{p.bits_per_value:.3f}</td><td>{8 * x.itemsize / p.bits_per_value:.2f}</td>"
        f"<td>{_num(p.psnr_db, '.2f')}</td><td>{p.max_error:.4g}</td>"
        f"<td>{'yes' if p.bound_held else '<b>NO</b>'}</td><td>{p.mb_per_s:.1f}</td></tr>"
        for p in points
    )
    notes_html = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>ceaz report: {html.escape(name)}</title>
<style>
body {{ font-family: sans-serif; max-width: 1250px; margin: 2em auto; }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #ccc; padding: 3px 8px; }}
td {{ text-align: right; }} img {{ max-width: 100%; }}
</style></head><body>
<h1>ceaz report: {html.escape(name)}</h1>
<p>{x.dtype.name}, shape {" x ".join(map(str, x.shape))} ({x.size} values,
{x.nbytes / 1e6:.2f} MB); finite value range {value_range:.6g}.
Relative bounds are relative to that range; every codec gets the same absolute bound.</p>
<h2>Rate and distortion</h2>
<img src="rate_distortion.png" alt="bit rate against PSNR">
<table>
<tr><th>codec</th><th>relative bound</th><th>absolute bound</th><th>bits/value</th>
<th>ratio</th><th>PSNR (dB)</th><th>max error</th><th>bound held</th><th>MB/s</th></tr>
{rows}
</table>
<ul>{notes_html}</ul>
<h2>Errors at relative bound {detail:g}</h2>
<img src="error_histogram.png" alt="error histogram">
<img src="slice.png" alt="original, decompressed and error slice">
</body></html>
"""
    path.write_text(page, encoding="utf-8")


def make_report(
    x: np.ndarray,
    out_dir: str | Path,
    name: str = "field",
    bounds: Sequence[float] = DEFAULT_BOUNDS,
    detail: float = DEFAULT_DETAIL,
    peers: bool = True,
) -> Report:
    """Sweep, draw and write out_dir/index.html with its three PNG figures."""
    require_matplotlib()
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"report output {str(out)!r} exists and is not a directory")
    bounds = _check_bounds(bounds)
    (detail,) = _check_bounds([detail])
    x = np.asarray(x)
    points, decoded, value_range, notes = sweep(x, bounds, detail, peers)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f for f in FIGURES]
    plot_rate_distortion(points, f"{name}: rate-distortion", paths[0])
    plot_error_histogram(x, decoded, f"{name}: errors at relative bound {detail:g}", paths[1])
    y, eb = decoded["ceaz"]
    plot_slice(x, y, eb, f"{name}: ceaz at relative bound {detail:g}", paths[2])
    page = out / "index.html"
    write_html(page, name, x, value_range, points, detail, notes)
    return Report(page, paths, points, notes)
