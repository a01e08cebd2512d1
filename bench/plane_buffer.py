"""What a smaller plane buffer on the card costs in compression ratio, field by field.

    python bench/plane_buffer.py

The card's plane buffer (``max_plane`` values) bounds the chunks of 3-D fields: a chunk's
planes hold at most ``max_plane`` values (docs/format.md, "Chunks"), so a smaller buffer means
chunks with fewer rows. The synthesis configurations (bitstreams/configs.py) trade the
default 65536 for 16384 (4096 at 16 lanes), which frees some 100 block RAMs. This compresses
every field of bench/run.py at its bounds with the software model (the card gives the same bytes
for the same settings) at ``max_plane`` 65536, 32768, 16384 and 4096, everything else default,
and reports each ratio relative to 65536.

One more column asks what a card without any plane buffer would cost: its 3-D chunks would
each lie in one plane (``cz = 1``, the rows of a 2-D chunk), so that the predictor never looks a
plane back and needs no plane delay. The format allows any chunk shape; only the reference
encoder's tiling rule is replaced, here and nowhere else. Writes bench/plane_buffer.md.
"""

from __future__ import annotations

import datetime
import importlib.util
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if importlib.util.find_spec("ceaz") is None:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT / "sw"))
sys.path.insert(0, str(ROOT / "bench"))

from run import REL_BOUNDS, field_specs  # noqa: E402

from ceaz import codec, tiling  # noqa: E402

#: The buffer sizes compared; the first is the reference (the software default).
PLANES = (1 << 16, 1 << 15, 1 << 14, 1 << 12)
#: The encoder's own tiling rule, which the last column replaces.
_CHUNK_SHAPE = tiling.chunk_shape


def _one_plane(shape3, ndim, *limits):
    """A chunk box inside one plane: the 2-D rule's band of rows, for any folded field."""
    _, cy, cx = _CHUNK_SHAPE(shape3, min(ndim, 2), *limits)
    return (1, cy, cx)


def ratios(x: np.ndarray, rel: float) -> list[float]:
    """Compression ratio at each plane buffer size, then with chunks of one plane, all at the
    same absolute bound."""
    finite = x[np.isfinite(x)]
    eb = rel * float(finite.max() - finite.min())
    out = [x.nbytes / len(codec.compress(x, eb, "abs", codec.Settings(max_plane=p)))
           for p in PLANES]
    with mock.patch.object(tiling, "chunk_shape", _one_plane):
        out.append(x.nbytes / len(codec.compress(x, eb, "abs")))
    return out


def markdown(rows: list[dict], seconds: float) -> str:
    head = " | ".join([*(f"{p} vs {PLANES[0]}" for p in PLANES[1:]), "one plane a chunk"])
    lines = [
        "# Compression ratio against the card's plane buffer",
        "",
        f"{datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}, "
        f"`python bench/plane_buffer.py`, {seconds:.0f} s. Ratio at `max_plane` "
        f"{PLANES[0]}, and the change in ratio at the smaller buffers and with chunks of one "
        "plane (software model, default settings otherwise).",
        "",
        f"| field | shape | rel bound | ratio at {PLANES[0]} | {head} |",
        "| --- | --- | ---: | ---: |" + " ---: |" * len(PLANES),
    ]
    for r in rows:
        base, *rest = r["ratios"]
        changes = " | ".join(f"{100 * (v / base - 1):+.2f} %" for v in rest)
        lines.append(f"| {r['field']} | {r['shape']} | {r['rel']:g} | {base:.2f} | {changes} |")
    def span(column: slice) -> str:
        changes = [v / r["ratios"][0] - 1 for r in rows for v in r["ratios"][column]]
        return f"{100 * min(changes):+.2f} % to {100 * max(changes):+.2f} %"

    lines += ["", f"Range of the changes with a smaller buffer: {span(slice(1, -1))}. Fields "
              "whose planes already fit the smaller buffer do not change. With one plane a "
              f"chunk (no plane buffer): {span(slice(-1, None))}."]
    return "\n".join(lines) + "\n"


def main() -> int:
    start = time.perf_counter()
    rows = []
    for spec in field_specs(quick=False):
        x = spec.make().astype(np.float32)
        shape = "x".join(map(str, x.shape))
        for rel in REL_BOUNDS:
            rows.append({"field": spec.name, "shape": shape, "rel": rel, "ratios": ratios(x, rel)})
            print(spec.name, rel, flush=True)
    out = ROOT / "bench" / "plane_buffer.md"
    out.write_text(markdown(rows, time.perf_counter() - start))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
