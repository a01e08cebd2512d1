"""Reproduce the offline codebook data shipped in ceaz/data/offline_histogram.npz.

    python -m ceaz.train [--out PATH]

The trained book is book 0 of the family of offline books that code the first chunks of a
stream, before any histogram exists (the widened books of the family are built from the same
data; docs/format.md, section 7). It is trained like CEAZ's: the residual histograms of
representative real fields (iris-sample-data) at relative bounds 1e-2, 1e-3 and 1e-4, each
normalised to the same weight, averaged, and scaled to 2**24 counts. The codebook itself is
then built by the normal construction.
"""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path

import numpy as np

from . import format as fmt
from . import predictor, quantizer, tiling
from .codec import Settings, make_header
from .quantizer import KIND_FILL, KIND_VERBATIM

TRAINING_BOUNDS = (1e-2, 1e-3, 1e-4)
TOTAL = 1 << 24
H = fmt.MAX_RADIUS


def field_histogram(field: np.ndarray, eb_rel: float) -> np.ndarray:
    """Residual counts -H..H, then beyond, verbatim and fill counts, over one field's chunks."""
    header = make_header(field, eb_rel, "rel", Settings())
    qp = header.qparams
    counts = np.zeros(2 * H + 4, dtype=np.int64)
    src3 = field.reshape(header.shape3)
    for box in tiling.boxes(header.shape3, header.chunk):
        x = np.ascontiguousarray(src3[box.slices]).reshape(-1)
        q, kind = quantizer.prequantize(x, qp)
        delta = predictor.residuals(q.reshape(box.shape)).reshape(-1)
        normal = kind == quantizer.KIND_NORMAL
        d = delta[normal]
        inside = np.abs(d) <= H
        counts[: 2 * H + 1] += np.bincount(d[inside] + H, minlength=2 * H + 1)
        counts[2 * H + 1] += int((~inside).sum())
        counts[2 * H + 2] += int((kind == KIND_VERBATIM).sum())
        counts[2 * H + 3] += int((kind == KIND_FILL).sum())
    return counts


def train(fields: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    total = np.zeros(2 * H + 4)
    for field in fields.values():
        for eb in TRAINING_BOUNDS:
            c = field_histogram(field, eb)
            total += c / c.sum()
    scaled = np.rint(total / total.sum() * TOTAL).astype(np.uint64)
    return {
        "delta_hist": scaled[: 2 * H + 1],
        "beyond": scaled[2 * H + 1],
        "verbatim": scaled[2 * H + 2],
        "fill": scaled[2 * H + 3],
        "fields": np.array(sorted(fields)),
        "bounds": np.array(TRAINING_BOUNDS),
    }


def main(argv: list[str] | None = None) -> None:
    from . import datasets

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = resources.files("ceaz.data").joinpath("offline_histogram.npz")
    parser.add_argument("--out", type=Path, default=Path(str(default)))
    args = parser.parse_args(argv)
    fields = {name: datasets.load(name) for name in datasets.TRAINING_FIELDS}
    np.savez_compressed(args.out, **train(fields))
    print(f"wrote {args.out} from {', '.join(sorted(fields))}")


if __name__ == "__main__":
    main()
