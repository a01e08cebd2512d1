"""How close any Huffman code can come to the entropy target of issue 3, field by field.

    python bench/huffman_floor.py

The target asks for the Huffman payload within 2 % of the entropy of its symbols where that
entropy exceeds 2 bits/value. This measures, over the chunks whose own entropy exceeds 2
bits/value (default settings, the bounds of bench/run.py), the Huffman bits of:

* *free Huffman*: a plain Huffman code built from each chunk's own counts, with no length
  limit, no smoothing and no table stored: the floor of any symbol-by-symbol Huffman code;
  *with tables* adds the code-length table every chunk record stores (``R + 1`` bytes,
  docs/format.md), the floor of any Huffman code that ships its table in this format;
* *own book*: ceaz's construction (add-one weights, 16-bit limit) from the chunk's own counts;
* *ceaz*: the books the stream really used (offline family, then adapted), without and with
  the code-length tables.

All as % over the chunks' entropy (escape payload bits left out on both sides). Writes
bench/huffman_floor.md.
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

from run import ENTROPY_TARGET_MIN_BITS as ENTROPY_FLOOR  # noqa: E402
from run import REL_BOUNDS, field_specs  # noqa: E402

from ceaz import codec, huffman  # noqa: E402
from ceaz import format as fmt  # noqa: E402
from ceaz.chunk import Coding, code_chunk  # noqa: E402


def measure(x: np.ndarray, rel: float) -> dict:
    """Sums over the chunks above the entropy floor, from the stream ceaz writes."""
    eb = rel * float(np.nanmax(x) - np.nanmin(x))
    reader = codec.StreamReader.from_bytes(codec.compress(x, eb, "abs"))
    h = reader.header
    coding = Coding(h.qparams, h.radius, h.sync_interval)
    x3 = x.reshape(h.shape3)
    table_bits = 8 * (fmt.n_symbols(h.radius) // 2)
    sums = dict.fromkeys(("chunks", "values", "entropy", "free", "own", "ceaz", "tables"), 0.0)
    for i, box in enumerate(reader.boxes):
        values = np.ascontiguousarray(x3[box.slices], dtype=h.dtype)
        counts = code_chunk(values, box, coding, huffman.offline_lengths(h.radius)).hist
        counts = counts.astype(np.int64)
        entropy = huffman.entropy_bits(counts)
        if entropy <= ENTROPY_FLOOR * box.size:
            continue
        own = huffman.code_lengths(huffman.weights_from_histogram(counts)).astype(np.int64)
        used = reader.chunk(i).payload.lengths.astype(np.int64)
        for key, value in (("chunks", 1), ("values", box.size), ("entropy", entropy),
                           ("free", huffman.unrestricted_bits(counts)), ("own", counts @ own),
                           ("ceaz", counts @ used), ("tables", table_bits)):
            sums[key] += value
    return sums


def markdown(rows: list[dict], seconds: float) -> str:
    def over(bits: float, entropy: float) -> str:
        return f"{100 * (bits / entropy - 1):.2f}"

    lines = [
        "# Huffman codes against the entropy of their symbols",
        "",
        f"{datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}, "
        f"`python bench/huffman_floor.py`, {seconds:.0f} s. Chunks whose own entropy exceeds "
        f"{ENTROPY_FLOOR:g} bits/value only; % over their entropy (see the module docstring).",
        "",
        "| field | rel bound | chunks | H bits/value | free Huffman % | free Huffman with tables "
        "% | own book % | ceaz % | ceaz with tables % |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        s = r["sums"]
        if not s["chunks"]:
            lines.append(f"| {r['field']} | {r['rel']:g} | 0 | - | - | - | - | - | - |")
            continue
        e = s["entropy"]
        lines.append(
            f"| {r['field']} | {r['rel']:g} | {s['chunks']:.0f} | {e / s['values']:.3f} | "
            f"{over(s['free'], e)} | {over(s['free'] + s['tables'], e)} | "
            f"{over(s['own'], e)} | {over(s['ceaz'], e)} | "
            f"{over(s['ceaz'] + s['tables'], e)} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    start = time.perf_counter()
    rows = []
    for spec in field_specs(quick=False):
        x = spec.make()
        for rel in REL_BOUNDS:
            rows.append({"field": spec.name, "rel": rel, "sums": measure(x, rel)})
            print(spec.name, rel, flush=True)
    out = ROOT / "bench" / "huffman_floor.md"
    out.write_text(markdown(rows, time.perf_counter() - start))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
