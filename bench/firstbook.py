"""The first chunk's book: what a family of offline books buys over the one trained book.

    python bench/firstbook.py

For every real field and relative bound (default settings), chunk 0's symbol histogram comes
from the codec's own encoder, as `ceaz.codec.first_book` takes it. Each candidate set of
offline books codes it with its cheapest member (the pick rule of docs/format.md, section 7);
the cost is hist . lengths, the Huffman part of chunk 0's payload, as % over the chunk's own
entropy. *own book* is the book built from the chunk's own histogram (the encoder holds that
histogram after its extra pass, so this is the bound a family can approach). Writes
bench/firstbook.md.
"""

from __future__ import annotations

import datetime
import importlib.util
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if importlib.util.find_spec("ceaz") is None:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT / "sw"))

from ceaz import codec, datasets, huffman, tiling  # noqa: E402
from ceaz.chunk import Coding, code_chunk  # noqa: E402

REL_BOUNDS = (1e-2, 1e-3, 1e-4)
_GEO = range(1 + huffman.WIDENED, huffman.n_offline_books())

#: name -> the family indices a candidate may pick from.
CANDIDATES = {
    "trained only": [0],
    "trained + geometric": [0, *_GEO],
    "trained + widened": list(range(1 + huffman.WIDENED)),
    "geometric, every other": [0, *_GEO[::2]],
    "full family": list(range(huffman.n_offline_books())),
}


def first_histogram(x: np.ndarray, eb_rel: float) -> np.ndarray:
    """Chunk 0's symbol counts, from the codec's own encoder (as `codec.first_book`)."""
    header = codec.make_header(x, eb_rel, "rel", codec.Settings())
    coding = Coding(header.qparams, header.radius, header.sync_interval)
    box = next(iter(tiling.boxes(header.shape3, header.chunk)))
    values = np.ascontiguousarray(x.reshape(header.shape3)[box.slices], dtype=header.dtype)
    return code_chunk(values, box, coding, huffman.offline_lengths(header.radius)).hist


def costs(hist: np.ndarray, radius: int) -> dict[str, float]:
    """Huffman bits of the chunk under each candidate's pick, the own book, and the entropy."""
    hist = hist.astype(np.int64)
    family = np.stack([huffman.offline_book(radius, i) for i in range(huffman.n_offline_books())])
    bits = family.astype(np.int64) @ hist
    out = {name: float(bits[idx].min()) for name, idx in CANDIDATES.items()}
    own = huffman.code_lengths(huffman.weights_from_histogram(hist)).astype(np.int64)
    out["own book"] = float(own @ hist)
    out["entropy"] = huffman.entropy_bits(hist)
    out["pick"] = huffman.pick_offline_book(hist, radius)
    out["values"] = int(hist.sum())
    return out


def main() -> int:
    if not datasets.available():
        print("iris-sample-data is not installed", file=sys.stderr)
        return 2
    cols = [*CANDIDATES, "own book"]
    rows, total = [], dict.fromkeys([*cols, "entropy"], 0.0)
    for name in sorted(datasets.REAL_FIELDS):
        x = datasets.load(name)
        for eb in REL_BOUNDS:
            c = costs(first_histogram(x, eb), codec.Settings().radius)
            rows.append((name, eb, c))
            for k in total:
                total[k] += c[k]

    def pct(c: dict, k: str) -> str:
        return f"{100 * (c[k] / c['entropy'] - 1):.2f}"

    stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    lines = [
        "# The first chunk's book", "",
        f"{stamp}. Command: `python bench/firstbook.py`. " + __doc__.split("\n\n")[2].replace(
            "\n", " "), "",
        f"Books: trained = 0, widened = 1..{huffman.WIDENED}, geometric = "
        f"{_GEO.start}..{_GEO.stop - 1} (docs/format.md, section 7).", "",
        "| field | bound | H bits/value | picked | " + " | ".join(cols) + " |",
        "| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in cols) + " |",
    ]
    for name, eb, c in rows:
        lines.append(f"| {name} | {eb:g} | {c['entropy'] / c['values']:.3f} | {c['pick']} | "
                     + " | ".join(pct(c, k) for k in cols) + " |")
    lines.append("| **all** | | | | " + " | ".join(f"**{pct(total, k)}**" for k in cols) + " |")
    (Path(__file__).resolve().parent / "firstbook.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
