"""A PYNQ overlay of the compressor for Zynq boards: IP-XACT package, block design, bitstream.

    python bitstreams/vivado.py --board pynq-z2|zcu104|kv260 [--lanes 4] [--out build/vivado]

writes ``<out>/<board>-lanes<N>/``:

- ``ip/``: the compressor as a Vivado IP (``component.xml``, VLNV ``ceaz.dev:ceaz:compressor:1.0``,
  the one the PYNQ driver binds to) over ``hdl/ceaz_compressor.v`` (Amaranth's Verilog) and
  ``hdl/ceaz_compressor_axi.v`` (a wrapper with the port names Vivado expects: ``aclk``,
  active-low ``aresetn``, ``s_axis_*``, ``m_axis_*``, ``s_axil_*``, ``irq``);
- ``build.tcl``: the block design (PS, AXI DMA in simple mode, the compressor, SmartConnects,
  interrupts), synthesis, implementation and the overlay ``overlay/ceaz.{bit,hwh}``.

It then runs ``vivado -mode batch -source build.tcl`` if Vivado is on PATH; otherwise it says
how to. Register addresses come from the simulated card's handoff (ceaz.simcard.hwh) on
Zynq-7000, so the real and the simulated card agree; an MPSoC's M_AXI_HPM0_FPD window starts at
0xA0000000, so there the DMA sits at 0xA0000000 and the compressor at 0xA0010000 (PYNQ reads
the addresses from the .hwh, so the driver works on both).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import shutil
import subprocess
import sys
from pathlib import Path
from xml.sax.saxutils import escape

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# Runnable from a plain checkout: the model (sw/) and the RTL (hw/) need not be installed.
for _path in (ROOT / "hw", ROOT / "sw", HERE):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import configs  # noqa: E402

from ceaz import regmap  # noqa: E402
from ceaz.simcard.hwh import CEAZ_VLNV, BlockDesign  # noqa: E402

__all__ = ["BOARDS", "Board", "Port", "core_ports", "core_verilog", "emit", "main", "write_ip",
           "write_tcl"]

#: Body of build.tcl; the generated header sets its variables.
TCL_BODY = HERE / "vivado" / "overlay.tcl"
#: Module names: Amaranth's core and the Vivado-facing wrapper (the IP's top).
CORE_MODULE = "ceaz_compressor"
WRAPPER_MODULE = "ceaz_compressor_axi"
#: Base name of the PYNQ overlay files (ceaz.bit, ceaz.hwh).
OVERLAY_NAME = "ceaz"
CLOCK_MHZ = 100
#: Zynq UltraScale+ MPSoC: the PL window of M_AXI_HPM0_FPD starts at 0xA0000000.
MPSOC_DMA_BASE = 0xA000_0000
MPSOC_CEAZ_BASE = 0xA001_0000


@dataclasses.dataclass(frozen=True)
class Board:
    """A PYNQ board: its part, its processing system and where the PL registers sit."""

    name: str
    part: str
    #: "ps7" (Zynq-7000, processing_system7) or "psu" (MPSoC, zynq_ultra_ps_e).
    ps: str
    #: get_board_parts pattern of the board files (optional: the PS preset comes from them).
    board_pattern: str
    dma_base: int
    ceaz_base: int
    #: DMA address width: the MPSoC's DDR reaches above 4 GiB.
    dma_addr_bits: int = 32
    #: Kria SOMs need their carrier card named.
    board_connections: str = ""


_SIM = BlockDesign(lanes=1, word_bits=64)  # only its addresses and ranges are used

BOARDS: dict[str, Board] = {
    "pynq-z2": Board("pynq-z2", "xc7z020clg400-1", "ps7", "*:pynq-z2:*",
                     dma_base=_SIM.dma_base, ceaz_base=_SIM.ceaz_base),
    "zcu104": Board("zcu104", "xczu7ev-ffvc1156-2-e", "psu", "*:zcu104:*",
                    dma_base=MPSOC_DMA_BASE, ceaz_base=MPSOC_CEAZ_BASE, dma_addr_bits=64),
    "kv260": Board("kv260", "xck26-sfvc784-2LV-c", "psu", "*:kv260_som:*",
                   dma_base=MPSOC_DMA_BASE, ceaz_base=MPSOC_CEAZ_BASE, dma_addr_bits=64,
                   board_connections="som240_1_connector "
                                     "xilinx.com:kv260_carrier:som240_1_connector:1.3"),
}


@dataclasses.dataclass(frozen=True)
class Port:
    """One port of the compressor: Amaranth's name (``s_axis__tdata``) and the wrapper's."""

    core_name: str
    direction: str  # "in" or "out"
    width: int

    @property
    def name(self) -> str:
        return self.core_name.replace("__", "_")


def core_verilog(lanes: int) -> str:
    """Amaranth's Verilog of the compressor (some seconds: the whole pipeline elaborates)."""
    from amaranth.back import verilog

    component = configs.build(configs.get(f"lanes{lanes}"))
    return verilog.convert(component, name=CORE_MODULE)


#: Wrapper port order: the interfaces in the order of the component's signature.
_PORT_GROUPS = ("s_axis__", "m_axis__", "s_axil__")


def core_ports(verilog_text: str) -> list[Port]:
    """The data ports (not clk/rst) of the core module, read from its Verilog.

    Reading them from the text (not the signature) makes the wrapper fit the Verilog that is
    packaged, whatever the core's ports become.
    """
    header = re.search(rf"^module {CORE_MODULE}\s*\((.*?)\);", verilog_text, re.S | re.M)
    if header is None:
        raise ValueError(f"no module {CORE_MODULE} in the core's Verilog")
    names = {name.strip() for name in header.group(1).split(",")} - {"clk", "rst"}
    body = verilog_text[header.end():verilog_text.index("endmodule", header.end())]
    ports = []
    for match in re.finditer(r"^\s*(input|output)\s+(?:wire\s+|reg\s+)?(?:\[(\d+):0\]\s*)?"
                             r"(\w+)\s*;", body, re.M):
        direction, msb, name = match.groups()
        if name in names:
            width = int(msb) + 1 if msb is not None else 1
            ports.append(Port(name, "in" if direction == "input" else "out", width))
    if {p.core_name for p in ports} != names:
        raise ValueError(f"ports of {CORE_MODULE} without a declaration: "
                         f"{sorted(names - {p.core_name for p in ports})}")

    def group(port):
        prefixes = [i for i, p in enumerate(_PORT_GROUPS) if port.core_name.startswith(p)]
        return prefixes[0] if prefixes else len(_PORT_GROUPS)

    return sorted(ports, key=group)


def wrapper_verilog(ports: list[Port]) -> str:
    """The IP's top: AXI port names Vivado infers interfaces from, active-low reset."""
    decls = ["    input  wire aclk", "    input  wire aresetn"]
    for port in ports:
        vector = f"[{port.width - 1}:0] " if port.width > 1 else ""
        decls.append(f"    {port.direction + 'put':<6} wire {vector}{port.name}")
    conns = ["        .clk(aclk)", "        .rst(~aresetn)"]
    conns += [f"        .{port.core_name}({port.name})" for port in ports]
    return (
        "// Generated by bitstreams/vivado.py: the ceaz compressor with Vivado's AXI names.\n"
        "// aresetn is synchronous to aclk (proc_sys_reset), as the core's rst must be.\n"
        "`default_nettype none\n"
        f"module {WRAPPER_MODULE} (\n" + ",\n".join(decls) + "\n);\n"
        f"    {CORE_MODULE} core (\n" + ",\n".join(conns) + "\n    );\n"
        "endmodule\n"
        "`default_nettype wire\n"
    )


# -- IP-XACT -------------------------------------------------------------------------------------

_NS = ('xmlns:xilinx="http://www.xilinx.com" '
       'xmlns:spirit="http://www.spiritconsortium.org/XMLSchema/SPIRIT/1685-2009" '
       'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"')
_SYNTH_VIEW = "xilinx_verilogsynthesis"
_SIM_VIEW = "xilinx_verilogbehavioralsimulation"
_FILESET = "xilinx_verilogsynthesis_view_fileset"
_SIM_FILESET = "xilinx_verilogbehavioralsimulation_view_fileset"
_REGISTER_BLOCK = "reg0"  # the address block name the simulated card's .hwh uses too


def _vlnv_attrs(vlnv: str) -> str:
    vendor, library, name, version = vlnv.split(":")
    return (f'spirit:vendor="{vendor}" spirit:library="{library}" spirit:name="{name}" '
            f'spirit:version="{version}"')


def _bus_interface(name: str, bus: str, mode: str, port_map: dict[str, str],
                   params: dict[str, str] | None = None, mode_body: str = "") -> str:
    """One spirit:busInterface; ``bus`` is the bus definition VLNV (``xilinx.com:...:1.0``)."""
    vendor, library, kind, version = bus.split(":")
    maps = "".join(
        "        <spirit:portMap>\n"
        f"          <spirit:logicalPort><spirit:name>{logical}</spirit:name></spirit:logicalPort>\n"
        f"          <spirit:physicalPort><spirit:name>{physical}</spirit:name>"
        "</spirit:physicalPort>\n"
        "        </spirit:portMap>\n"
        for logical, physical in port_map.items())
    mode_xml = f"<spirit:{mode}>{mode_body}</spirit:{mode}>" if mode_body else f"<spirit:{mode}/>"
    param_xml = ""
    if params:
        param_xml = "      <spirit:parameters>\n" + "".join(
            "        <spirit:parameter>\n"
            f"          <spirit:name>{key}</spirit:name>\n"
            f'          <spirit:value spirit:id="BUSIFPARAM_VALUE.{name.upper()}.{key}">'
            f"{escape(value)}</spirit:value>\n"
            "        </spirit:parameter>\n" for key, value in params.items()
        ) + "      </spirit:parameters>\n"
    return (
        "    <spirit:busInterface>\n"
        f"      <spirit:name>{name}</spirit:name>\n"
        f"      <spirit:busType {_vlnv_attrs(bus)}/>\n"
        f"      <spirit:abstractionType "
        f"{_vlnv_attrs(f'{vendor}:{library}:{kind}_rtl:{version}')}/>\n"
        f"      {mode_xml}\n"
        f"      <spirit:portMaps>\n{maps}      </spirit:portMaps>\n"
        f"{param_xml}"
        "    </spirit:busInterface>\n"
    )


def _port_xml(name: str, direction: str, width: int) -> str:
    vector = ""
    if width > 1:
        vector = ("          <spirit:vector>\n"
                  f'            <spirit:left spirit:format="long">{width - 1}</spirit:left>\n'
                  '            <spirit:right spirit:format="long">0</spirit:right>\n'
                  "          </spirit:vector>\n")
    return (
        "      <spirit:port>\n"
        f"        <spirit:name>{name}</spirit:name>\n"
        "        <spirit:wire>\n"
        f"          <spirit:direction>{direction}</spirit:direction>\n"
        f"{vector}"
        "          <spirit:wireTypeDefs>\n"
        "            <spirit:wireTypeDef>\n"
        "              <spirit:typeName>wire</spirit:typeName>\n"
        f"              <spirit:viewNameRef>{_SYNTH_VIEW}</spirit:viewNameRef>\n"
        f"              <spirit:viewNameRef>{_SIM_VIEW}</spirit:viewNameRef>\n"
        "            </spirit:wireTypeDef>\n"
        "          </spirit:wireTypeDefs>\n"
        "        </spirit:wire>\n"
        "      </spirit:port>\n"
    )


def component_xml(ports: list[Port], lanes: int, files: list[str]) -> str:
    """IP-XACT (IEEE 1685-2009, as Vivado's IP packager writes it) of the wrapper."""
    vendor, library, name, version = CEAZ_VLNV.split(":")

    def members(prefix):
        return {p.name[len(prefix) + 1:].upper(): p.name for p in ports
                if p.name.startswith(prefix + "_")}

    buses = [
        _bus_interface("s_axis", "xilinx.com:interface:axis:1.0", "slave", members("s_axis")),
        _bus_interface("m_axis", "xilinx.com:interface:axis:1.0", "master", members("m_axis")),
        _bus_interface("s_axil", "xilinx.com:interface:aximm:1.0", "slave", members("s_axil"),
                       params={"PROTOCOL": "AXI4LITE"},
                       mode_body='<spirit:memoryMapRef spirit:memoryMapRef="s_axil"/>'),
        _bus_interface("aresetn", "xilinx.com:signal:reset:1.0", "slave", {"RST": "aresetn"},
                       params={"POLARITY": "ACTIVE_LOW"}),
        _bus_interface("aclk", "xilinx.com:signal:clock:1.0", "slave", {"CLK": "aclk"},
                       params={"ASSOCIATED_BUSIF": "s_axis:m_axis:s_axil",
                               "ASSOCIATED_RESET": "aresetn"}),
        _bus_interface("irq", "xilinx.com:signal:interrupt:1.0", "master", {"INTERRUPT": "irq"},
                       params={"SENSITIVITY": "LEVEL_HIGH"}),
    ]
    memory_map = (
        "  <spirit:memoryMaps>\n"
        "    <spirit:memoryMap>\n"
        "      <spirit:name>s_axil</spirit:name>\n"
        "      <spirit:addressBlock>\n"
        f"        <spirit:name>{_REGISTER_BLOCK}</spirit:name>\n"
        '        <spirit:baseAddress spirit:format="bitString" spirit:bitStringLength="32">'
        "0x0</spirit:baseAddress>\n"
        f'        <spirit:range spirit:format="long">{1 << regmap.ADDRESS_BITS}</spirit:range>\n'
        '        <spirit:width spirit:format="long">32</spirit:width>\n'
        "        <spirit:usage>register</spirit:usage>\n"
        "      </spirit:addressBlock>\n"
        "    </spirit:memoryMap>\n"
        "  </spirit:memoryMaps>\n"
    )
    views = "".join(
        "      <spirit:view>\n"
        f"        <spirit:name>{view}</spirit:name>\n"
        f"        <spirit:envIdentifier>verilogSource:vivado.xilinx.com:{env}"
        "</spirit:envIdentifier>\n"
        "        <spirit:language>verilog</spirit:language>\n"
        f"        <spirit:modelName>{WRAPPER_MODULE}</spirit:modelName>\n"
        "        <spirit:fileSetRef>\n"
        f"          <spirit:localName>{fileset}</spirit:localName>\n"
        "        </spirit:fileSetRef>\n"
        "      </spirit:view>\n"
        for view, env, fileset in [(_SYNTH_VIEW, "synthesis", _FILESET),
                                   (_SIM_VIEW, "simulation", _SIM_FILESET)])
    all_ports = [("aclk", "in", 1), ("aresetn", "in", 1)]
    all_ports += [(p.name, p.direction, p.width) for p in ports]
    file_sets = "".join(
        "    <spirit:fileSet>\n"
        f"      <spirit:name>{fileset}</spirit:name>\n" + "".join(
            "      <spirit:file>\n"
            f"        <spirit:name>{path}</spirit:name>\n"
            "        <spirit:fileType>verilogSource</spirit:fileType>\n"
            "      </spirit:file>\n" for path in files)
        + "    </spirit:fileSet>\n"
        for fileset in (_FILESET, _SIM_FILESET))
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<spirit:component {_NS}>\n"
        f"  <spirit:vendor>{vendor}</spirit:vendor>\n"
        f"  <spirit:library>{library}</spirit:library>\n"
        f"  <spirit:name>{name}</spirit:name>\n"
        f"  <spirit:version>{version}</spirit:version>\n"
        "  <spirit:busInterfaces>\n" + "".join(buses) + "  </spirit:busInterfaces>\n"
        + memory_map
        + "  <spirit:model>\n"
        f"    <spirit:views>\n{views}    </spirit:views>\n"
        "    <spirit:ports>\n" + "".join(_port_xml(*p) for p in all_ports)
        + "    </spirit:ports>\n"
        "  </spirit:model>\n"
        f"  <spirit:fileSets>\n{file_sets}  </spirit:fileSets>\n"
        f"  <spirit:description>ceaz error-bounded lossy compressor, {lanes} lanes "
        f"({32 * lanes}-bit float32 stream in)</spirit:description>\n"
        "  <spirit:parameters>\n"
        "    <spirit:parameter>\n"
        "      <spirit:name>Component_Name</spirit:name>\n"
        '      <spirit:value spirit:resolve="user" spirit:id="PARAM_VALUE.Component_Name" '
        'spirit:order="1">ceaz_compressor_v1_0</spirit:value>\n'
        "    </spirit:parameter>\n"
        "  </spirit:parameters>\n"
        "  <spirit:vendorExtensions>\n"
        "    <xilinx:coreExtensions>\n"
        "      <xilinx:supportedFamilies>\n"
        '        <xilinx:family xilinx:lifeCycle="Production">zynq</xilinx:family>\n'
        '        <xilinx:family xilinx:lifeCycle="Production">zynquplus</xilinx:family>\n'
        "      </xilinx:supportedFamilies>\n"
        "      <xilinx:taxonomies>\n"
        "        <xilinx:taxonomy>/UserIP</xilinx:taxonomy>\n"
        "      </xilinx:taxonomies>\n"
        "      <xilinx:displayName>ceaz compressor</xilinx:displayName>\n"
        "      <xilinx:coreRevision>1</xilinx:coreRevision>\n"
        "    </xilinx:coreExtensions>\n"
        "  </spirit:vendorExtensions>\n"
        "</spirit:component>\n"
    )


def write_ip(ip_dir: Path, lanes: int, verilog_text: str | None = None) -> Path:
    """Package the compressor as a Vivado IP in ``ip_dir``; return the component.xml path.

    ``verilog_text`` is the core's Verilog for ``lanes`` (from ``core_verilog``); passing it
    lets callers convert once for several boards.
    """
    if lanes not in (1, 2, 4, 8, 16):
        raise ValueError(f"lanes must be one of 1, 2, 4, 8, 16, not {lanes!r}")
    if verilog_text is None:
        verilog_text = core_verilog(lanes)
    ports = core_ports(verilog_text)
    ip_dir = Path(ip_dir)
    hdl = ip_dir / "hdl"
    hdl.mkdir(parents=True, exist_ok=True)
    files = [f"hdl/{CORE_MODULE}.v", f"hdl/{WRAPPER_MODULE}.v"]
    (ip_dir / files[0]).write_text(verilog_text)
    (ip_dir / files[1]).write_text(wrapper_verilog(ports))
    path = ip_dir / "component.xml"
    path.write_text(component_xml(ports, lanes, files))
    return path


def _tcl_word(value) -> str:
    """A Tcl word in braces (no substitution); the values here hold no braces."""
    text = str(value)
    if any(c in text for c in "{}\\"):
        raise ValueError(f"cannot quote {text!r} for Tcl")
    return "{" + text + "}"


def write_tcl(board: Board, lanes: int, out_dir: Path, ip_dir: Path) -> Path:
    """build.tcl in ``out_dir``: the header for ``board`` followed by vivado/overlay.tcl."""
    from ceaz_hw.top import word_bits

    design = BlockDesign(lanes=lanes, word_bits=word_bits(lanes))
    settings = {
        "board": board.name,
        "part": board.part,
        "ps_kind": board.ps,
        "board_pattern": board.board_pattern,
        "board_connections": board.board_connections,
        "design_name": f"ceaz_{board.name.replace('-', '_')}_lanes{lanes}",
        "bd_name": "ceaz",
        "overlay_name": OVERLAY_NAME,
        "ip_repo": Path(ip_dir).resolve(),
        "ceaz_vlnv": CEAZ_VLNV,
        "lanes": lanes,
        "mm2s_bits": design.mm2s_bits,
        "s2mm_bits": design.s2mm_bits,
        "dma_length_bits": design.length_bits,
        "dma_addr_bits": board.dma_addr_bits,
        "clock_mhz": CLOCK_MHZ,
        "dma_base": f"0x{board.dma_base:08X}",
        "dma_range": f"0x{design.dma_range:X}",
        "ceaz_base": f"0x{board.ceaz_base:08X}",
        "ceaz_range": f"0x{design.ceaz_range:X}",
    }
    header = [
        f"# Generated by bitstreams/vivado.py for {board.name} ({board.part}), {lanes} lanes.",
        "# Build: vivado -mode batch -source build.tcl",
    ]
    header += [f"set {key} {_tcl_word(value)}" for key, value in settings.items()]
    path = Path(out_dir) / "build.tcl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(header) + "\n\n" + TCL_BODY.read_text())
    return path


def emit(board: Board, lanes: int, out: Path, verilog_text: str | None = None) -> Path:
    """IP and build.tcl for ``board`` under ``out/<board>-lanes<N>``; return build.tcl."""
    target = Path(out) / f"{board.name}-lanes{lanes}"
    ip_dir = target / "ip"
    write_ip(ip_dir, lanes, verilog_text)
    return write_tcl(board, lanes, target, ip_dir)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--board", required=True, choices=sorted(BOARDS))
    parser.add_argument("--lanes", type=int, default=4, choices=[1, 2, 4, 8, 16])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "vivado")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    tcl = emit(BOARDS[args.board], args.lanes, args.out)
    vivado = shutil.which("vivado")
    if vivado is None:
        print(f"Vivado not found: emitted {tcl.parent}; run "
              f"vivado -mode batch -source {tcl} to build the overlay")
        return 0
    print(f"running {vivado} -mode batch -source {tcl} (log: {tcl.parent / 'vivado.log'})")
    result = subprocess.run([vivado, "-mode", "batch", "-nojournal", "-log", "vivado.log",
                             "-source", tcl.name], cwd=tcl.parent, check=False)
    if result.returncode != 0:
        print(f"vivado failed (exit {result.returncode}); see {tcl.parent / 'vivado.log'}",
              file=sys.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
