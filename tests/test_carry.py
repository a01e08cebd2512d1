"""The netlist step that frees carry-chain ends (bitstreams/carry.py) and the flow's check
that the LUT mapping kept every flip-flop, block RAM and multiplier, on small Yosys JSON
netlists."""

from __future__ import annotations

import json

import pytest
from _bitstreams import load

carry = load("carry")

HEAD = format(0x000A, "016b")  # LUT4 0 (with D = 1), LUT2 = A: the chain's own carry-in
BIT = format(0x96AA, "016b")  # a bit of an adder: its carry out depends on CIN


def _ccu2c(init0, cin, s0, cout, d0="1", inject="NO"):
    ports = ["CIN", "A0", "B0", "C0", "D0", "A1", "B1", "C1", "D1", "S0", "S1", "COUT"]
    outputs = {"S0", "S1", "COUT"}
    return {"type": "CCU2C",
            "parameters": {"INIT0": init0, "INIT1": BIT, "INJECT1_0": inject,
                           "INJECT1_1": "NO"},
            "port_directions": {p: "output" if p in outputs else "input" for p in ports},
            "connections": {"CIN": [cin], "A0": [10], "B0": ["0"], "C0": [11], "D0": [d0],
                            "A1": [12], "B1": [13], "C1": [11], "D1": ["1"], "S0": [s0],
                            "S1": [30], "COUT": [cout]}}


def _lut(a, z):
    return {"type": "LUT4", "parameters": {"INIT": "0000000000000010"},
            "port_directions": {"A": "input", "Z": "output"},
            "connections": {"A": [a], "Z": [z]}}


def _netlist(cells, outputs=(30,)):
    return {"modules": {"top": {"attributes": {"top": 1}, "cells": cells,
                                "ports": {"y": {"direction": "output", "bits": list(outputs)}},
                                "netnames": {}}}}


def _conns(netlist, name):
    return netlist["modules"]["top"]["cells"][name]["connections"]


def test_a_head_and_an_unread_last_carry_are_freed():
    netlist = _netlist({"head": _ccu2c(HEAD, "0", 20, 21), "next": _ccu2c(BIT, 21, 22, 23)})
    assert carry.free_chain_ends(netlist) == {"heads": 1, "tails": 1}
    assert _conns(netlist, "head")["CIN"] == ["x"]
    assert _conns(netlist, "head")["COUT"] == [21]  # read by the next cell
    assert _conns(netlist, "next")["COUT"] == ["x"]
    assert _conns(netlist, "next")["CIN"] == [21]


@pytest.mark.parametrize("why", ["adder bit", "sum read", "routed carry", "inject",
                                 "D0 not tied"])
def test_a_carry_input_that_matters_stays(why):
    init0, cin, d0, inject, extra = HEAD, "1", "1", "NO", {}
    if why == "adder bit":
        init0 = BIT  # its first half propagates CIN
    elif why == "sum read":
        extra = {"reader": _lut(20, 40)}  # S0 = CIN would be read
    elif why == "routed carry":
        cin = 5  # not a constant: only a chain's own carry is left alone
    elif why == "inject":
        inject = "YES"
    elif why == "D0 not tied":
        d0 = 14  # a net: with D0 = 0 the head's LUT4 is A, not 0
    netlist = _netlist({"head": _ccu2c(init0, cin, 20, 21, d0=d0, inject=inject), **extra},
                       outputs=(21,))
    before = json.loads(json.dumps(netlist))
    assert carry.free_chain_ends(netlist) == {"heads": 0, "tails": 0}
    assert netlist == before


def test_a_last_carry_that_is_read_stays():
    netlist = _netlist({"head": _ccu2c(HEAD, "0", 20, 21), "reader": _lut(21, 41)})
    assert carry.free_chain_ends(netlist) == {"heads": 1, "tails": 0}
    assert _conns(netlist, "head")["COUT"] == [21]


def test_the_flow_notices_cells_the_lut_mapping_dropped(tmp_path):
    flow = load("flow")
    # Yosys's `stat -json`, in the shape Yosys 0.70 writes it.
    (tmp_path / flow.KEPT_LOG).write_text(json.dumps({"modules": {"\\top": {
        "num_cells_by_type": {"TRELLIS_FF": 3, "DP16KD": 1, "$_AND_": 9}}}}))
    ff = {"type": "TRELLIS_FF", "connections": {}}
    ram = {"type": "DP16KD", "connections": {}}
    for cells, lost in (({"a": ff, "b": ff, "c": ff, "r": ram}, {}),
                        ({"a": ff, "b": ff, "r": ram}, {"TRELLIS_FF": 1}),
                        ({"a": ff, "b": ff, "c": ff}, {"DP16KD": 1})):
        (tmp_path / "top.json").write_text(json.dumps(_netlist(cells)))
        assert flow._lost_cells(tmp_path, "top", "top.json") == lost
