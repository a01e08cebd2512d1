"""Free the ends of the CCU2C carry chains, a netlist step between Yosys and nextpnr.

Why: nextpnr-ecp5 puts a whole CCU2C, two logic cells, before every chain whose first carry
input is connected and after every chain whose last carry output is, whether or not anything
reads it. The flow's carry map (``ccu2c_alu.v``, ``flow.py synth --carry-map``) makes each
chain's carry-in in its first half-cell and its carry-out in a half-cell of its own, so
neither end is needed; but the map ties the first carry input to 0 (left out, ABC9 ties it
itself), and the last carry output keeps a net of its own. On the 16-lane core at cd299eb
those extra cells were 3696 of 80488 logic cells.

The step changes no behaviour. A CCU2C's ``CIN`` is undone only if it is a constant and
nothing the cell computes depends on it: the first half's LUT4 is 0 for every input the
connections allow (so the carry it passes on is its LUT2, not ``CIN``), and its sum ``S0``,
which would be ``CIN``, drives nothing. A ``COUT`` is undone only if its net drives nothing.
Undone means ``"x"``, which nextpnr reads as unconnected.
"""

from __future__ import annotations

from outreg import net_loads, top_module

__all__ = ["free_chain_ends"]

_UNCONNECTED = "x"
_CONSTANTS = ("0", "1")


def _first_lut_is_zero(cell: dict) -> bool:
    """Whether the first half's LUT4 (INIT0; inputs A0, B0, C0, D0 as index bits 0-3) is 0
    for every input pattern its connections allow."""
    init = int(cell["parameters"]["INIT0"], 2)  # Yosys JSON: parameters as binary strings
    fixed = {}
    for bit, port in enumerate(("A0", "B0", "C0", "D0")):
        conn = cell["connections"].get(port, [_UNCONNECTED])
        if conn[0] in _CONSTANTS:
            fixed[bit] = int(conn[0])
    return not any(init >> index & 1 for index in range(16)
                   if all(index >> bit & 1 == value for bit, value in fixed.items()))


def free_chain_ends(netlist: dict) -> dict[str, int]:
    """Undo, in place, the chain-end connections that nextpnr would pay a CCU2C for; return
    how many carry inputs (``heads``) and outputs (``tails``) were undone."""
    module = top_module(netlist)
    loads = net_loads(module)
    heads = tails = 0
    for cell in module["cells"].values():
        if cell["type"] != "CCU2C":
            continue
        conns = cell["connections"]
        cin, s0, cout = conns.get("CIN"), conns.get("S0"), conns.get("COUT")
        inject = cell["parameters"].get("INJECT1_0", "YES").strip()
        if (cin and cin[0] in _CONSTANTS and inject == "NO" and _first_lut_is_zero(cell)
                and not (s0 and isinstance(s0[0], int) and loads.get(s0[0]))):
            conns["CIN"] = [_UNCONNECTED]
            heads += 1
        if cout and isinstance(cout[0], int) and not loads.get(cout[0]):
            conns["COUT"] = [_UNCONNECTED]
            tails += 1
    return {"heads": heads, "tails": tails}

