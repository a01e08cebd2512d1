"""The main job: compress real scientific fields, decompress them and report the quality.

    python -m ceaz.demo [--backend sim|model|pynq|auto] [--rel 1e-3] [--adapt-lag 2]
                        [--field NAME ...]

Fields come from the Met Office sample data (iris-sample-data, installed from PyPI). By default
they are compressed through the simulated card (the compressor RTL under Verilator, driven by
the PYNQ driver) and decompressed on the CPU. For each field this prints the ratio, the bit
rate, the PSNR and the largest error beside the bound, and fails (exit status 1) if the bound
did not hold or a special value did not come back exactly. With a card it also prints the
clock cycles the card took and the throughput those cycles give at the synthesised clock.
By default codebooks adapt with lag 2, which a card does on chip (its codebook builder);
``--adapt-lag 1`` makes the host build them instead.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

from . import codec, datasets
from .backends import BACKENDS, coder_for
from .metrics import quality

#: Synthesis results (nox -s synth), for the clock a card's cycle count is converted at.
SYNTH_REPORT = Path(__file__).resolve().parents[2] / "bitstreams" / "reports" / "synth.json"


def synthesised_mhz(lanes: int) -> float | None:
    """Fmax of the compressor with this many lanes from the committed synthesis report."""
    try:
        rows = json.loads(SYNTH_REPORT.read_text())["rows"]
    except (OSError, ValueError, KeyError):
        return None
    for row in rows:
        if row.get("design") == "top" and row.get("lanes") == lanes and row.get("fmax_mhz"):
            return float(row["fmax_mhz"])
    return None


def run(names: list[str], eb_rel: float, backend: str = "sim", adapt_lag: int = 2) -> bool:
    ok = True
    settings = codec.Settings(adapt_lag=adapt_lag)
    print(f"relative bound {eb_rel:g} (absolute bound = {eb_rel:g} x value range)")
    with coder_for(backend, settings) as coder:
        where = "the CPU model" if coder is None else f"the {backend} card, {coder.lanes} lanes"
        print(f"compressing on {where}; decompressing on the CPU")
        books = {0: "the offline book picked for chunk 0",
                 1: "built by the host from the previous chunk",
                 2: "built from the chunk two back" + (", on the card" if coder else "")}
        print(f"codebooks: {books[adapt_lag]} (adapt lag {adapt_lag})\n")
        ok = _fields(names, eb_rel, settings, coder)
    return ok


def _fields(names, eb_rel, settings, coder) -> bool:
    ok = True
    head = f"{'field':<30} {'shape':<18} {'ratio':>7} {'bits/val':>8} {'PSNR dB':>8}"
    print(f"{head} {'max error':>10} {'bound':>10} {'held':>5}")
    cycles = clocks = values = 0
    seconds = 0.0
    for name in names:
        x = datasets.load(name)
        buf = io.BytesIO()
        before = (coder.ip.counter("ACTIVE"), coder.ip.counter("CYCLES")) if coder else None
        started = time.perf_counter()
        codec.encode_stream(x, buf, eb_rel, "rel", settings, coder=coder)
        seconds += time.perf_counter() - started
        if coder:
            cycles += coder.ip.counter("ACTIVE") - before[0]
            clocks += coder.ip.counter("CYCLES") - before[1]
        values += x.size
        data = buf.getvalue()
        y = codec.decompress(data)
        header = codec.StreamReader.from_bytes(data).header
        q = quality(x, y, header.fill_bits)
        held = q.max_error <= header.eb_f and q.special_exact
        ok &= held
        shape = "x".join(map(str, x.shape))
        print(
            f"{name:<30} {shape:<18} {x.nbytes / len(data):7.2f} {8 * len(data) / x.size:8.3f}"
            f" {q.psnr_db:8.2f} {q.max_error:10.3e} {header.eb_f:10.3e}"
            f" {'yes' if held else 'NO':>5}"
        )
    where = f"the {coder.lanes}-lane card, driver included" if coder else "the CPU model"
    print(f"\ncompressing took {seconds:.1f} s of wall clock on {where}: "
          f"{values / seconds / 1e6:.2f} M values/s on this machine")
    if coder:
        print(f"card: {values} values in {cycles} clock cycles while busy "
              f"({values / max(cycles, 1):.2f} values per cycle), of {clocks} clocks in all "
              f"({1 - cycles / max(clocks, 1):.0%} idle: the host's register traffic)")
        mhz = synthesised_mhz(coder.lanes)
        if mhz:
            rate = 4 * values / cycles * mhz / 1e3
            print(f"at the synthesised {mhz:.1f} MHz (ECP5, nox -s synth) that is {rate:.2f} GB/s")
        else:
            print("no synthesis result for this configuration yet (nox -s synth)")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rel", type=float, default=1e-3, help="relative error bound")
    parser.add_argument("--field", action="append", choices=sorted(datasets.REAL_FIELDS))
    parser.add_argument("--adapt-lag", type=int, choices=(0, 1, 2), default=2,
                        help="codebook of chunk k from chunk k-LAG (2: on the card's builder)")
    parser.add_argument("--backend", choices=BACKENDS, default="sim",
                        help="what compresses: the simulated card (default), the model, a board")
    args = parser.parse_args(argv)
    if not datasets.available():
        print("iris-sample-data is not installed: pip install iris-sample-data", file=sys.stderr)
        return 2
    fields = args.field or sorted(datasets.REAL_FIELDS)
    return 0 if run(fields, args.rel, args.backend, args.adapt_lag) else 1


if __name__ == "__main__":
    sys.exit(main())
