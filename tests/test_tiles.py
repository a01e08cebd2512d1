"""The control-set tile bound of bitstreams/tiles.py on netlists in miniature."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("_bitstreams_tiles",
                                               ROOT / "bitstreams" / "tiles.py")
tiles = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tiles)

CLK = 2


def _ff(ce=4, lsr="0", **params):
    parameters = {"CEMUX": "CE", "CLKMUX": "CLK", "GSR": "DISABLED", "LSRMUX": "LSR",
                  "SRMODE": "LSR_OVER_CE", **params}
    return {"type": "TRELLIS_FF", "parameters": parameters,
            "connections": {"CLK": [CLK], "CE": [ce], "LSR": [lsr], "DI": [9], "Q": [10]}}


def _netlist(ffs):
    cells = {f"ff{k}": ff for k, ff in enumerate(ffs)}
    cells["lut"] = {"type": "LUT4", "parameters": {}, "connections": {"Z": [9]}}
    return {"modules": {"top": {"attributes": {"top": 1}, "cells": cells}}}


def test_one_class_packs_eight_to_a_tile():
    d = tiles.tile_demand(_netlist([_ff() for _ in range(16)]))
    assert (d["ffs"], d["tile_classes"], d["tiles"], d["ideal_tiles"]) == (16, 1, 2, 2)


def test_each_reset_net_takes_whole_tiles():
    # 9 FFs on one reset, 1 on another, 2 without: 2 + 1 + 1 tiles where 2 would hold them
    ffs = [_ff(lsr=5) for _ in range(9)] + [_ff(lsr=6)] + [_ff(), _ff(lsr="0")]
    d = tiles.tile_demand(_netlist(ffs))
    assert (d["tile_classes"], d["tiles"], d["ideal_tiles"]) == (3, 4, 2)
    # the classes of one FF (reset 6) and of two (no reset) fill no tile
    assert (d["small_tile_classes"], d["ffs_in_small_classes"]) == (2, 3)


def test_without_lsr_leaves_one_class_and_the_input_alone():
    ffs = [_ff(lsr=5) for _ in range(9)] + [_ff(lsr=6, LSRMUX="INV")] + [_ff()]
    netlist = _netlist(ffs)
    stripped = tiles.without_lsr(netlist)
    assert tiles.tile_demand(stripped)["tile_classes"] == 1
    assert tiles.tile_demand(netlist)["tile_classes"] == 3


def test_each_clock_enable_takes_whole_slices():
    # eight enables, one FF each: eight slices, two tiles
    d = tiles.tile_demand(_netlist([_ff(ce=20 + k) for k in range(8)]))
    assert (d["slice_classes"], d["tiles"], d["ideal_tiles"]) == (8, 2, 1)


def test_delay_ffs_counts_ff_to_ff_links_by_unit():
    # a LUT feeds core.q.s0, which feeds s1 and s2 in a row; core.p.x takes s2's Q too
    chain = {"core.q.s0": (9, 11), "core.q.s1": (11, 12), "core.q.s2.bit": (12, 13),
             "core.p.x": (13, 14), "core.p.y": (9, 15)}
    cells = {}
    for name, (di, q) in chain.items():
        cell = _ff()
        cell["connections"].update({"DI": [di], "Q": [q]})
        cells[name] = cell
    cells["lut"] = {"type": "LUT4", "parameters": {}, "connections": {"Z": [9]}}
    netlist = {"modules": {"top": {"attributes": {"top": 1}, "cells": cells}}}
    assert tiles.delay_ffs(netlist) == {"core.q.s1": 1, "core.q.s2": 1, "core.p.x": 1}
    assert tiles.delay_ffs(netlist, depth=2) == {"core.q": 2, "core.p": 1}


def test_cli_reports_the_bound_and_rejects_a_missing_file(tmp_path, capsys):
    path = tmp_path / "top.json"
    path.write_text(json.dumps(_netlist([_ff() for _ in range(3)])))
    assert tiles.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "at least 1 of 10455" in out
    assert "FFs whose D is another FF's Q: 0 of 3" in out
    assert "1 clock/LSR classes hold fewer than 8 FFs (3 FFs)" in out
    out_path = tmp_path / "nolsr.json"
    assert tiles.main([str(path), "--without-lsr", str(out_path)]) == 0
    assert tiles.tile_demand(json.loads(out_path.read_text()))["tile_classes"] == 1
    assert tiles.main([str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
