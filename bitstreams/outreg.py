"""Hard-block output registers: move the register after an ECP5 block RAM's read port into
the RAM (``REGMODE_A/B = "OUTREG"``), and the register after a multiplier into the multiplier
(``REG_OUTPUT_CLK``), a netlist step between Yosys and nextpnr.

Why: read without its output register, a DP16KD's data leave the RAM about 5.8 ns after the
clock edge (nextpnr's timing data for LFE5U speed grade 6), and nextpnr places the register
that takes them where that register's own loads want it, often across the die: the routing
then adds 6-7 ns, and at full size such paths set Fmax. The RAM's output register has its data
at the RAM's pins with the clock-to-out of a register. Yosys's DP16KD mapping never uses it
(``brams_16kd.txt`` describes no output register), and Vivado's absorption of registers into
block RAM has no counterpart in the open flow, so this module does it on Yosys's JSON netlist.

The move changes no behaviour. A port's register is moved only if every used data output bit
of the port drives exactly one cell, the D input of a ``TRELLIS_FF`` (directly or through a
LUT that only passes it on), and those flip-flops share the RAM port's clock and one clock
enable, and have no set or reset and a power-up value of 0 (taken to be the output
register's after configuration; the RTL reads these registers only behind valid flags): each
flip-flop then does exactly what the output register does, load the RAM's data on every
enabled clock edge. The output register's reset (``RSTA/B``) must be unused, since in the
``OUTREG`` mode it would reset the register, which the flip-flops never were. So the RTL
marks the registers that take block RAM data ``reset_less``. The simulation keeps two
registers, the RAM's read register and the one after it, as the RTL has them; on the device
both are in the RAM. This has been checked on netlists and in nextpnr's timing, not yet on a
board (there is none here).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

__all__ = ["absorb_multiplier_registers", "absorb_output_registers", "net_loads", "top_module"]

#: Constant-bit markers in Yosys JSON connections.
_ZERO, _ONE = "0", "1"


def top_module(netlist: dict) -> dict:
    """The top module of a Yosys JSON netlist."""
    return next(module for module in netlist["modules"].values()
                if module.get("attributes", {}).get("top"))


def net_loads(module: dict) -> dict[int, list[tuple[str, str]]]:
    """For every net bit: the (cell, input port) pairs it drives; top-level outputs count as
    a load named ``None``."""
    loads: dict[int, list[tuple[str | None, str]]] = defaultdict(list)
    for name, cell in module["cells"].items():
        for port, bits in cell["connections"].items():
            if cell["port_directions"].get(port) != "output":
                for bit in bits:
                    if isinstance(bit, int):
                        loads[bit].append((name, port))
    for port, info in module["ports"].items():
        if info["direction"] != "input":
            for bit in info["bits"]:
                if isinstance(bit, int):
                    loads[bit].append((None, port))
    return loads


def _enable(ff: dict) -> list | None:
    """The flip-flop's clock-enable connection (``["1"]`` if always enabled), or None if it
    is inverted or unknown."""
    mux = ff["parameters"].get("CEMUX", "CE").strip()
    if mux == _ONE:
        return [_ONE]
    if mux == "CE":
        return ff["connections"].get("CE", [_ONE])
    return None


def _is_buffer(cell: dict) -> bool:
    """Whether the cell is a LUT4 that passes one net through unchanged. ABC9 leaves such
    buffers between a block RAM and its register in some netlists; removing one changes
    nothing."""
    if cell["type"] != "LUT4":
        return False
    inputs = {pin: cell["connections"].get(pin, [_ZERO])[0] for pin in "ABCD"}
    nets = {bit for bit in inputs.values() if isinstance(bit, int)}
    if len(nets) != 1:
        return False
    init = int(str(cell["parameters"]["INIT"]).strip(), 2)
    for x in (0, 1):
        index = sum((x if isinstance(bit, int) else int(bit)) << k
                    for k, bit in enumerate(inputs.values()))
        if (init >> index) & 1 != x:
            return False
    return True


def _movable(ff: dict, clock: list, clock_mux: str) -> bool:
    """Whether the flip-flop behaves exactly as the RAM port's output register would."""
    params, conns = ff["parameters"], ff["connections"]
    lsr = conns.get("LSR", [_ZERO])
    no_reset = (params.get("LSRMUX", "LSR").strip() == "LSR" and lsr == [_ZERO]) or \
        params.get("LSRMUX", "").strip() == _ZERO
    return (conns.get("CLK") == clock
            and params.get("CLKMUX", "CLK").strip() == ("CLK" if clock_mux == "plain" else "INV")
            and no_reset
            and params.get("REGSET", "RESET").strip() == "RESET"
            and _enable(ff) is not None)


def _sole_registers(outputs: list, loads: dict, cells: dict) -> tuple[list, list] | None:
    """The flip-flops that take ``outputs`` (net bits), one each and nothing else, with the
    pass-through LUTs between; None if any bit has another load or reaches no flip-flop."""
    ffs, buffers = [], []
    for bit in outputs:
        (cell, pin), *more = loads[bit]
        if cell is not None and _is_buffer(cells[cell]) and \
                all(load[0] == cell for load in more):
            buffers.append(cell)
            (cell, pin), *more = loads.get(cells[cell]["connections"]["Z"][0], [(None, "")])
        if more or cell is None or cells[cell]["type"] != "TRELLIS_FF" or pin != "DI":
            return None
        ffs.append(cell)
    return ffs, buffers


def _common_enable(ffs: list, cells: dict) -> list | None:
    """The clock enable all ``ffs`` share, or None if they differ."""
    enables = {tuple(_enable(cells[ff])) for ff in ffs}
    return list(enables.pop()) if len(enables) == 1 else None


def _move(outputs: list, ffs: list, buffers: list, conns: dict, cells: dict) -> None:
    """Connect each (port, index, bit) of ``outputs`` to its flip-flop's output and drop the
    flip-flops and buffers: the block's own register now drives their loads."""
    for (port, i, _bit), ff in zip(outputs, ffs, strict=True):
        conns[port][i] = cells[ff]["connections"]["Q"][0]
        del cells[ff]
    for buffer in buffers:
        del cells[buffer]


def _registers_after(conns: dict, prefix: str, loads: dict, cells: dict) -> tuple | None:
    """The used output bits named ``prefix<n>`` as (port, index, net bit), the flip-flops
    that take them (one each, nothing else) and the buffers between; None if there are no
    used outputs or any of them drives something else."""
    outputs = [(port, i, bit) for port, bits in conns.items()
               if port.startswith(prefix) and port[len(prefix):].isdigit()
               for i, bit in enumerate(bits) if isinstance(bit, int) and loads.get(bit)]
    found = _sole_registers([bit for *_, bit in outputs], loads, cells) if outputs else None
    return None if found is None else (outputs, *found)


def absorb_output_registers(netlist: dict) -> list[str]:
    """Move block RAM output registers into the DP16KD cells of ``netlist`` (in place).

    Returns the moved ports as ``"<cell>.<A|B>"``, sorted.
    """
    module = top_module(netlist)
    cells = module["cells"]
    loads = net_loads(module)
    moved = []
    for name in sorted(cells):
        ram = cells.get(name)  # moved flip-flops are gone
        if ram is None or ram["type"] != "DP16KD":
            continue
        params, conns = ram["parameters"], ram["connections"]
        for side in "AB":
            if params.get(f"REGMODE_{side}", "NOREG") != "NOREG":
                continue
            if conns.get(f"RST{side}", [_ZERO]) != [_ZERO] or \
                    params.get(f"RST{side}MUX", f"RST{side}") != f"RST{side}":
                continue
            clock_mux = "plain" if params.get(f"CLK{side}MUX", f"CLK{side}") == f"CLK{side}" \
                else "inverted"
            clock = conns.get(f"CLK{side}")
            found = _registers_after(conns, f"DO{side}", loads, cells)
            if found is None or not all(_movable(cells[ff], clock, clock_mux)
                                        for ff in found[1]):
                continue
            enable = _common_enable(found[1], cells)
            if enable is None:
                continue
            params[f"REGMODE_{side}"] = "OUTREG"
            conns[f"OCE{side}"] = enable
            _move(*found, conns, cells)
            moved.append(f"{name}.{side}")
    return moved


#: The MULT18X18D registers; a multiplier Yosys mapped uses none of them.
_MULT_REGISTERS = ("INPUTA", "INPUTB", "INPUTC", "PIPELINE", "OUTPUT")


def absorb_multiplier_registers(netlist: dict) -> list[str]:
    """Move the register that takes a MULT18X18D's product into the multiplier's output
    register (``REG_OUTPUT_CLK = "CLK0"``), in place; returns the multipliers, sorted.

    Why: an unregistered multiplier's product leaves it about 3.9 ns after its operands
    arrive, and the routing to the register that takes it came on top (the smoke core's worst
    path at commit 8919783 was such a product, 10.3 ns). The output register's data start at
    the multiplier's pins. Yosys maps ``*`` to a combinational MULT18X18D and never uses its
    registers, so this does it, with the same rules as for block RAM: every used product bit
    drives exactly one flip-flop, and those share one clock (not inverted) and one enable, with
    no set or reset and a power-up value of 0. The register's reset ``RST0`` is tied low.
    """
    module = top_module(netlist)
    cells = module["cells"]
    loads = net_loads(module)
    moved = []
    for name in sorted(cells):
        mult = cells.get(name)
        if mult is None or mult["type"] != "MULT18X18D":
            continue
        params, conns = mult["parameters"], mult["connections"]
        if any(str(params.get(f"REG_{reg}_CLK", "NONE")).strip() != "NONE"
               for reg in _MULT_REGISTERS):
            continue
        if any(conns.get(f"{pin}0", [_ZERO]) not in ([_ZERO], ["x"]) for pin in ("CLK", "RST")):
            continue
        found = _registers_after(conns, "P", loads, cells)
        if found is None:
            continue
        ffs = found[1]
        clock = cells[ffs[0]]["connections"].get("CLK")
        enable = _common_enable(ffs, cells)
        if enable is None or not all(_movable(cells[ff], clock, "plain") for ff in ffs):
            continue
        params.update(REG_OUTPUT_CLK="CLK0", REG_OUTPUT_CE="CE0", REG_OUTPUT_RST="RST0",
                      GSR="DISABLED")
        conns.update(CLK0=list(clock), CE0=enable, RST0=[_ZERO])
        for pin in ("CLK0", "CE0", "RST0"):
            mult["port_directions"].setdefault(pin, "input")
        _move(*found, conns, cells)
        moved.append(name)
    return moved


def main(argv: list[str] | None = None) -> int:
    """``python bitstreams/outreg.py NETLIST.json``: rewrite a Yosys netlist in place (the
    board build runs this between Yosys and nextpnr)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("netlist", type=Path, help="Yosys JSON netlist, rewritten in place")
    args = parser.parse_args(argv)
    netlist = json.loads(args.netlist.read_text())
    moved = absorb_output_registers(netlist)
    multipliers = absorb_multiplier_registers(netlist)
    args.netlist.write_text(json.dumps(netlist))
    print(f"{args.netlist}: {len(moved)} block RAM ports use their output register, "
          f"{len(multipliers)} multipliers theirs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
