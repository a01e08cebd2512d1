"""How many ECP5 logic tiles a netlist's flip-flops need, given their control sets.

Why: the 16-lane core packs at 96 % of the logic cells and nextpnr finds no legal placement
for it. Flip-flops do not pack freely: in an ECP5 logic tile the eight FFs share one clock and
one LSR signal (with their inversions and the reset mode), and the two FFs of a slice share a
clock enable (nextpnr's ``ecp5/arch_place.cc``). So the FFs of each (clock, LSR) class fill
whole tiles of their own, and those of each clock enable whole slices. Counting that gives a
lower bound on the tiles the FFs occupy; set against the ideal, ``FFs / 8``, it says what the
control sets cost, which is no part of the LUT4 count. It also counts the classes too small
to fill one tile: each still claims a tile's FF sites for itself.

The bound is far from what nextpnr's placer meets. Its ECP5 legaliser knows nothing of control
sets, and a LUT with the FF it feeds is a cluster that no other cluster may displace, so at
96 % its greedy legalisation strands free sites in tiles that other classes hold
(docs/timing.md, "Sixteen lanes"). ``--without-lsr`` writes a copy of the netlist with every
FF's LSR unconnected: not the design (its resets are gone), but a placement experiment that
shows what the LSR classes alone cost the placer.

It also counts the FFs that only delay a bit, their D driven straight by another FF's Q:
they are what a delay line in block RAM could take over, by unit (the cell name's prefix).

Usage: ``python bitstreams/tiles.py <yosys netlist.json> [--without-lsr OUT.json]``
(``flow.py synth`` leaves ``top.json`` in its work directory).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

# Importable from the tests as a file, like flow.py: its neighbours need not be on the path.
HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import outreg  # noqa: E402

__all__ = ["DEVICE_TILES", "delay_ffs", "tile_demand", "without_lsr"]

#: Logic tiles of the ECP5-85F: 83640 LUT4s and as many FFs, eight of each a tile.
DEVICE_TILES = 83640 // 8


def _net(cell: dict, port: str):
    """The net bit on ``port``; None when unconnected or tied to a constant (a string)."""
    bits = cell["connections"].get(port)
    return bits[0] if bits and isinstance(bits[0], int) else None


def tile_demand(netlist: dict) -> dict:
    """FFs, their control-set classes, and the tiles they need at least (module docstring)."""
    module = outreg.top_module(netlist)
    # (clock, LSR) class -> clock-enable class -> FFs
    classes: dict[tuple, Counter] = defaultdict(Counter)
    for cell in module["cells"].values():
        if cell["type"] != "TRELLIS_FF":
            continue
        p = cell["parameters"]
        lsr = _net(cell, "LSR") if p.get("LSRMUX", "LSR") != "0" else None
        tile_key = (_net(cell, "CLK"), p.get("CLKMUX") == "INV", lsr,
                    lsr is not None and p.get("LSRMUX") == "INV",
                    lsr is not None and p.get("SRMODE") == "ASYNC")
        slice_key = (_net(cell, "CE"), p.get("CEMUX", "CE"), p.get("GSR"))
        classes[tile_key][slice_key] += 1
    sizes = [sum(ces.values()) for ces in classes.values()]
    ffs = sum(sizes)
    tiles = sum(math.ceil(sum(math.ceil(n / 2) for n in ces.values()) / 4)
                for ces in classes.values())
    small = [n for n in sizes if n < 8]
    return {
        "ffs": ffs,
        "tile_classes": len(classes),
        "small_tile_classes": len(small),
        "ffs_in_small_classes": sum(small),
        "slice_classes": sum(len(ces) for ces in classes.values()),
        "ideal_tiles": math.ceil(ffs / 8),
        "tiles": tiles,
        "device_tiles": DEVICE_TILES,
    }


def delay_ffs(netlist: dict, depth: int = 3) -> Counter:
    """FFs whose D is another FF's Q, per unit: the first ``depth`` dotted parts of the FF's
    name (Yosys names an FF after the register it holds). ``Counter.total()`` sums them."""
    module = outreg.top_module(netlist)
    ff_outputs = {_net(cell, "Q") for cell in module["cells"].values()
                  if cell["type"] == "TRELLIS_FF"}
    ff_outputs.discard(None)
    return Counter(".".join(name.split(".")[:depth])
                   for name, cell in module["cells"].items()
                   if cell["type"] == "TRELLIS_FF" and _net(cell, "DI") in ff_outputs)


def without_lsr(netlist: dict) -> dict:
    """A copy of ``netlist`` in which no FF has an LSR (set or reset) input: every FF then
    shares one clock/LSR class. For a placement experiment only; the copy is not the design."""
    netlist = json.loads(json.dumps(netlist))
    for cell in outreg.top_module(netlist)["cells"].values():
        if cell["type"] == "TRELLIS_FF":
            cell["connections"]["LSR"] = ["0"]
            cell["parameters"]["LSRMUX"] = "LSR"
    return netlist


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("netlist", type=Path, help="Yosys JSON netlist (synth_ecp5 -json)")
    parser.add_argument("--without-lsr", type=Path, metavar="OUT",
                        help="also write a copy with no FF's LSR connected (placement "
                             "experiment only: not the design)")
    args = parser.parse_args(argv)
    try:
        netlist = json.loads(args.netlist.read_text())
    except (OSError, ValueError) as exc:
        print(f"tiles.py: cannot read {args.netlist}: {exc}", file=sys.stderr)
        return 2
    d = tile_demand(netlist)
    print(f"{d['ffs']} FFs in {d['tile_classes']} clock/LSR classes and {d['slice_classes']} "
          f"clock-enable classes; {d['small_tile_classes']} clock/LSR classes hold fewer than "
          f"8 FFs ({d['ffs_in_small_classes']} FFs), each a tile's FF sites")
    print(f"tiles their control sets need: at least {d['tiles']} of {d['device_tiles']} "
          f"({d['tiles'] / d['device_tiles']:.1%}); without control sets {d['ideal_tiles']} "
          f"({d['ideal_tiles'] / d['device_tiles']:.1%})")
    delays = delay_ffs(netlist)
    print(f"FFs whose D is another FF's Q: {delays.total()} of {d['ffs']}; most in "
          + ", ".join(f"{unit} {n}" for unit, n in delays.most_common(4)))
    if args.without_lsr:
        args.without_lsr.write_text(json.dumps(without_lsr(netlist)))
        print(f"wrote {args.without_lsr}: every FF without its LSR (not the design)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
