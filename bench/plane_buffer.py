"""What a smaller plane buffer on the card costs in compression ratio, field by field.

    python bench/plane_buffer.py

The card's plane buffer (``max_plane`` values) bounds the chunks of 3-D fields: a chunk's
planes hold at most ``max_plane`` values (docs/format.md, "Chunks"), so a smaller buffer means
chunks with fewer rows. The synthesis configurations (bitstreams/configs.py) trade the
default 65536 for 16384, which frees some 100 block RAMs. This compresses every field of
bench/run.py at its bounds with the software model (the card gives the same bytes for the same
settings) at ``max_plane`` 65536, 32768 and 16384, everything else default, and reports each
ratio relative to 65536. Writes bench/plane_buffer.md.
"""

from __future__ import annotations

import datetime
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if importlib.util.find_spec("ceaz") is None:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT / "sw"))
sys.path.insert(0, str(ROOT / "bench"))

from run import REL_BOUNDS, field_specs  # noqa: E402

from ceaz import codec  # noqa: E402

#: The buffer sizes compared; the first is the reference (the software default).
PLANES = (1 << 16, 1 << 15, 1 << 14)


def ratios(x: np.ndarray, rel: float) -> list[float]:
    """Compression ratio at each plane buffer size, same absolute bound."""
    finite = x[np.isfinite(x)]
    eb = rel * float(finite.max() - finite.min())
    return [x.nbytes / len(codec.compress(x, eb, "abs", codec.Settings(max_plane=p)))
            for p in PLANES]


def markdown(rows: list[dict], seconds: float) -> str:
    head = " | ".join(f"{p} vs {PLANES[0]}" for p in PLANES[1:])
    lines = [
        "# Compression ratio against the card's plane buffer",
        "",
        f"{datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}, "
        f"`python bench/plane_buffer.py`, {seconds:.0f} s. Ratio at `max_plane` "
        f"{PLANES[0]}, and the change in ratio at the smaller buffers (software model, default "
        "settings otherwise).",
        "",
        f"| field | shape | rel bound | ratio at {PLANES[0]} | {head} |",
        "| --- | --- | ---: | ---: |" + " ---: |" * (len(PLANES) - 1),
    ]
    for r in rows:
        base, *rest = r["ratios"]
        changes = " | ".join(f"{100 * (v / base - 1):+.2f} %" for v in rest)
        lines.append(f"| {r['field']} | {r['shape']} | {r['rel']:g} | {base:.2f} | {changes} |")
    worst = min(v / r["ratios"][0] - 1 for r in rows for v in r["ratios"][1:])
    best = max(v / r["ratios"][0] - 1 for r in rows for v in r["ratios"][1:])
    lines += ["", f"Range of the changes: {100 * worst:+.2f} % to {100 * best:+.2f} %. Fields "
              "whose planes already fit the smaller buffer do not change."]
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
