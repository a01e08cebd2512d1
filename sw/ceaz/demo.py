"""The main job: compress real scientific fields, decompress them and report the quality.

    python -m ceaz.demo [--rel 1e-3] [--field NAME ...]

Fields come from the Met Office sample data (iris-sample-data, installed from PyPI). For each
one this prints the ratio, the bit rate, the PSNR and the largest error beside the bound, and
fails (exit status 1) if the bound did not hold or a special value did not come back exactly.
"""

from __future__ import annotations

import argparse
import sys

from . import codec, datasets
from .metrics import quality


def run(names: list[str], eb_rel: float) -> bool:
    ok = True
    print(f"relative bound {eb_rel:g} (absolute bound = {eb_rel:g} x value range)\n")
    head = f"{'field':<30} {'shape':<18} {'ratio':>7} {'bits/val':>8} {'PSNR dB':>8}"
    print(f"{head} {'max error':>10} {'bound':>10} {'held':>5}")
    for name in names:
        x = datasets.load(name)
        data = codec.compress(x, eb_rel, "rel")
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
    print("\nThroughput is measured by the benchmark (nox -s bench), not here: the first call")
    print("of each kernel includes its compilation.")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rel", type=float, default=1e-3, help="relative error bound")
    parser.add_argument("--field", action="append", choices=sorted(datasets.REAL_FIELDS))
    args = parser.parse_args(argv)
    if not datasets.available():
        print("iris-sample-data is not installed: pip install iris-sample-data", file=sys.stderr)
        return 2
    return 0 if run(args.field or sorted(datasets.REAL_FIELDS), args.rel) else 1


if __name__ == "__main__":
    sys.exit(main())
