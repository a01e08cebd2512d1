"""The Vivado overlay flow (bitstreams/vivado.py) without Vivado.

The IP package is checked structurally (IP-XACT VLNV, bus interfaces, port maps against the
wrapper Verilog, memory map), and build.tcl is run in a plain ``tclsh`` whose Vivado commands
are stubs that record their arguments: the recorded design must put the DMA and the compressor
at the addresses the simulated card's handoff (and so the PYNQ driver) uses, instantiate the
driver's VLNV and size the DMA streams for the lanes. Vivado itself is not run.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest.importorskip("amaranth")

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bitstreams" / "vivado.py"
LANES = 1
SPIRIT = "{http://www.spiritconsortium.org/XMLSchema/SPIRIT/1685-2009}"


def _load():
    """Import bitstreams/vivado.py (a folder of scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("_bitstreams_vivado", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def vivado():
    return _load()


@pytest.fixture(scope="module")
def core_text(vivado):
    """The core's Verilog, converted once (the slow part, ~8 s)."""
    return vivado.core_verilog(LANES)


@pytest.fixture(scope="module")
def emitted(vivado, core_text, tmp_path_factory):
    """build.tcl of every board."""
    out = tmp_path_factory.mktemp("vivado")
    return {name: vivado.emit(board, LANES, out, core_text)
            for name, board in vivado.BOARDS.items()}


def _driver_vlnv():
    """VLNV the PYNQ driver binds to, read from its source (importing it needs pynq)."""
    tree = ast.parse((ROOT / "sw" / "ceaz" / "driver.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["VLNV"]:
            return ast.literal_eval(node.value)
    raise AssertionError("sw/ceaz/driver.py defines no VLNV")


def _find(node, path):
    return node.findall(path.replace("s:", SPIRIT))


def _text(node, path):
    found = node.find(path.replace("s:", SPIRIT))
    assert found is not None, path
    return found.text


def _module_ports(verilog_text, module):
    """Names in a module's port list (Amaranth writes `module name(a, b, ...);`)."""
    match = re.search(rf"^module {re.escape(module)}\s*\((.*?)\);", verilog_text, re.S | re.M)
    assert match, module
    return {name.strip().split()[-1] for name in match.group(1).split(",")}


def test_boards_are_the_pynq_boards(vivado):
    parts = {name: board.part for name, board in vivado.BOARDS.items()}
    assert parts == {"pynq-z2": "xc7z020clg400-1", "zcu104": "xczu7ev-ffvc1156-2-e",
                     "kv260": "xck26-sfvc784-2LV-c"}


def test_component_xml(vivado, emitted):
    from ceaz import regmap

    ip_dir = emitted["pynq-z2"].parent / "ip"
    root = ET.parse(ip_dir / "component.xml").getroot()
    assert root.tag == f"{SPIRIT}component"
    vlnv = ":".join(_text(root, f"s:{key}") for key in ("vendor", "library", "name", "version"))
    assert vlnv == _driver_vlnv()

    buses = {_text(bus, "s:name"): bus for bus in _find(root, "s:busInterfaces/s:busInterface")}
    assert set(buses) == {"s_axis", "m_axis", "s_axil", "aclk", "aresetn", "irq"}

    def bus_type(name):
        bt = buses[name].find(f"{SPIRIT}busType")
        return ":".join(bt.get(f"{SPIRIT}{k}") for k in ("vendor", "library", "name", "version"))

    def params(name):
        return {_text(p, "s:name"): _text(p, "s:value")
                for p in _find(buses[name], "s:parameters/s:parameter")}

    assert bus_type("s_axis") == bus_type("m_axis") == "xilinx.com:interface:axis:1.0"
    assert bus_type("s_axil") == "xilinx.com:interface:aximm:1.0"
    assert buses["s_axis"].find(f"{SPIRIT}slave") is not None
    assert buses["m_axis"].find(f"{SPIRIT}master") is not None
    ref = buses["s_axil"].find(f"{SPIRIT}slave/{SPIRIT}memoryMapRef")
    assert ref.get(f"{SPIRIT}memoryMapRef") == "s_axil"
    assert params("aclk") == {"ASSOCIATED_BUSIF": "s_axis:m_axis:s_axil",
                              "ASSOCIATED_RESET": "aresetn"}
    assert params("aresetn") == {"POLARITY": "ACTIVE_LOW"}
    assert params("irq") == {"SENSITIVITY": "LEVEL_HIGH"}

    # Every mapped physical port is a port of the model and of the wrapper's module.
    wrapper = (ip_dir / "hdl" / "ceaz_compressor_axi.v").read_text()
    wrapper_ports = _module_ports(wrapper, "ceaz_compressor_axi")
    model_ports = {_text(p, "s:name") for p in _find(root, "s:model/s:ports/s:port")}
    assert model_ports == wrapper_ports
    logical = {}
    for name, bus in buses.items():
        for pm in _find(bus, "s:portMaps/s:portMap"):
            physical = _text(pm, "s:physicalPort/s:name")
            assert physical in wrapper_ports, physical
            logical[(name, _text(pm, "s:logicalPort/s:name"))] = physical
    assert logical[("s_axis", "TDATA")] == "s_axis_tdata"
    assert logical[("m_axis", "TREADY")] == "m_axis_tready"
    assert logical[("s_axil", "AWADDR")] == "s_axil_awaddr"
    assert logical[("s_axil", "RDATA")] == "s_axil_rdata"
    assert len([k for k in logical if k[0] == "s_axil"]) == 19
    # The wrapper drives every port of Amaranth's core, and the core has them all.
    core = (ip_dir / "hdl" / "ceaz_compressor.v").read_text()
    core_ports = _module_ports(core, "ceaz_compressor")
    connected = set(re.findall(r"\.(\w+)\(", wrapper))
    assert connected == core_ports
    assert ".rst(~aresetn)" in wrapper

    (block,) = _find(root, "s:memoryMaps/s:memoryMap/s:addressBlock")
    assert _text(block, "s:name") == "reg0"
    assert int(_text(block, "s:range")) == 1 << regmap.ADDRESS_BITS == 4096
    files = {_text(f, "s:name") for f in _find(root, "s:fileSets/s:fileSet/s:file")}
    assert files == {"hdl/ceaz_compressor.v", "hdl/ceaz_compressor_axi.v"}
    assert all((ip_dir / f).is_file() for f in files)
    views = {_text(v, "s:modelName") for v in _find(root, "s:model/s:views/s:view")}
    assert views == {"ceaz_compressor_axi"}


# Vivado's commands as stubs: each call is recorded; getters return a token naming their
# query so that the arguments of the command that uses them show what was looked up.
STUBS = r"""
set ::calls {}
proc unknown {args} {
    lappend ::calls $args
    return "<[join $args { }]>"
}
proc get_ipdefs {args} {
    return [string map {* 9.9} [lindex $args end]]
}
proc get_property {args} { return "write_bitstream Complete!" }
rename glob _tcl_glob
proc glob {args} { return [list /fake/[file tail [lindex $args end]]] }
rename file _tcl_file
proc file {sub args} {
    if {$sub in {copy mkdir}} {
        lappend ::calls [list file $sub {*}$args]
        return
    }
    return [_tcl_file $sub {*}$args]
}
source [lindex $argv 0]
foreach call $::calls {
    puts "CALL\x1f[join [string map {\n { }} $call] \x1f]"
}
"""


def _run_tcl(tcl: Path, tmp_path: Path) -> list[list[str]]:
    tclsh = shutil.which("tclsh")
    if tclsh is None:
        pytest.skip("tclsh not installed")
    harness = tmp_path / "stubs.tcl"
    harness.write_text(STUBS)
    result = subprocess.run([tclsh, str(harness), str(tcl)], capture_output=True, text=True,
                            timeout=30, check=False)
    assert result.returncode == 0, result.stderr + result.stdout
    return [line.split("\x1f")[1:] for line in result.stdout.splitlines()
            if line.startswith("CALL\x1f")]


def _option(call, name):
    return call[call.index(name) + 1]


def _dict_arg(call):
    """The CONFIG.* settings of `set_property -dict [list ...] <cell>`."""
    items = call[call.index("-dict") + 1].split()
    return dict(zip(items[::2], items[1::2], strict=True))


@pytest.mark.parametrize("board_name", ["pynq-z2", "zcu104", "kv260"])
def test_build_tcl_design(vivado, emitted, board_name, tmp_path):
    from ceaz.simcard.hwh import BlockDesign
    from ceaz_hw.top import word_bits

    board = vivado.BOARDS[board_name]
    calls = _run_tcl(emitted[board_name], tmp_path)
    commands = [call[0] for call in calls]

    (project,) = [c for c in calls if c[0] == "create_project"]
    assert _option(project, "-part") == board.part
    (repo,) = [c for c in calls if c[:2] == ["set_property", "ip_repo_paths"]]
    assert Path(repo[2]) == (emitted[board_name].parent / "ip").resolve()
    assert (Path(repo[2]) / "component.xml").is_file()

    cells = {c[-1]: _option(c, "-vlnv") for c in calls if c[0] == "create_bd_cell"}
    assert cells["ceaz_0"] == "ceaz.dev:ceaz:compressor:1.0"
    assert cells["axi_dma_0"].startswith("xilinx.com:ip:axi_dma:")
    ps_ip = "processing_system7" if board.ps == "ps7" else "zynq_ultra_ps_e"
    assert any(v.startswith(f"xilinx.com:ip:{ps_ip}:") for v in cells.values())

    dma = [c for c in calls if c[0] == "set_property" and "-dict" in c
           and c[-1] == "<create_bd_cell -type ip -vlnv xilinx.com:ip:axi_dma:9.9 axi_dma_0>"]
    (dma_config,) = [_dict_arg(c) for c in dma]
    assert dma_config["CONFIG.c_include_sg"] == "0"
    assert int(dma_config["CONFIG.c_m_axis_mm2s_tdata_width"]) == 32 * LANES
    assert int(dma_config["CONFIG.c_s_axis_s2mm_tdata_width"]) == word_bits(LANES)

    streams = {(c[1], c[2]) for c in calls if c[0] == "connect_bd_intf_net"}
    assert ("<get_bd_intf_pins axi_dma_0/M_AXIS_MM2S>", "<get_bd_intf_pins ceaz_0/s_axis>") \
        in streams
    assert ("<get_bd_intf_pins ceaz_0/m_axis>", "<get_bd_intf_pins axi_dma_0/S_AXIS_S2MM>") \
        in streams

    offsets = {c[-2]: (int(_option(c, "-offset"), 16), int(_option(c, "-range"), 16))
               for c in calls if c[0] == "assign_bd_address" and "-offset" in c}
    sim = BlockDesign(lanes=LANES, word_bits=word_bits(LANES))
    if board.ps == "ps7":  # the simulated card is a Zynq-7000 design: same addresses
        dma_base, ceaz_base = sim.dma_base, sim.ceaz_base
    else:
        dma_base, ceaz_base = 0xA000_0000, 0xA001_0000
    assert offsets == {
        "<get_bd_addr_segs axi_dma_0/S_AXI_LITE/Reg>": (dma_base, sim.dma_range),
        "<get_bd_addr_segs ceaz_0/s_axil/reg0>": (ceaz_base, sim.ceaz_range),
    }
    assert sim.ceaz_range == 4096

    order = ["create_bd_design", "assign_bd_address", "validate_bd_design", "make_wrapper",
             "launch_runs", "wait_on_run"]
    assert [commands.index(name) for name in order] == sorted(commands.index(n) for n in order)
    (launch,) = [c for c in calls if c[0] == "launch_runs"]
    assert _option(launch, "-to_step") == "write_bitstream"
    copies = [c for c in calls if c[:2] == ["file", "copy"]]
    assert [Path(c[-1]).name for c in copies] == ["ceaz.bit", "ceaz.hwh"]
    assert len({Path(c[-1]).parent for c in copies}) == 1  # side by side, as PYNQ wants


def test_cli_without_vivado(tmp_path, monkeypatch, capsys, vivado, core_text):
    if shutil.which("vivado"):
        pytest.skip("Vivado is installed: the CLI would run it")
    monkeypatch.setattr(vivado, "core_verilog", lambda lanes: core_text)
    assert vivado.main(["--board", "kv260", "--lanes", str(LANES), "--out", str(tmp_path)]) == 0
    target = tmp_path / f"kv260-lanes{LANES}"
    message = capsys.readouterr().out
    assert message.startswith(f"Vivado not found: emitted {target}")
    assert f"vivado -mode batch -source {target / 'build.tcl'}" in message
    assert (target / "ip" / "component.xml").is_file()
    with pytest.raises(SystemExit):
        vivado.main(["--board", "zcu102"])
