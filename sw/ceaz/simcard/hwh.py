"""A hardware handoff (.hwh) for the simulated card's block design.

pynq's Overlay learns what is on a card from the .hwh that Vivado writes next to a bitstream.
The simulated card has no Vivado run, so this writes the smallest .hwh that pynqmetadata
parses into the same ip_dict as the real design: a Zynq-7000 PS whose M_AXI_GP0 reaches an
AXI DMA (``axi_dma_0``, simple mode, no interrupts) and the compressor (``ceaz_0``), with the
compressor's registers from ceaz.regmap so that ``overlay.ceaz_0.register_map`` works.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import quoteattr

from .. import regmap

__all__ = ["CEAZ_VLNV", "DMA_VLNV", "BlockDesign", "write_hwh"]

CEAZ_VLNV = "ceaz.dev:ceaz:compressor:1.0"
DMA_VLNV = "xilinx.com:ip:axi_dma:7.1"
PS_VLNV = "xilinx.com:ip:processing_system7:5.5"
AXIMM_VLNV = "xilinx.com:interface:aximm:1.0"
AXIS_VLNV = "xilinx.com:interface:axis:1.0"


@dataclass(frozen=True)
class BlockDesign:
    """Addresses and widths of the simulated block design (PYNQ's usual addresses)."""

    lanes: int
    word_bits: int
    dma_base: int = 0x4040_0000
    dma_range: int = 0x1_0000
    ceaz_base: int = 0x43C0_0000
    ceaz_range: int = 1 << regmap.ADDRESS_BITS
    #: Width of the DMA's buffer length registers (transfers up to 2**26 - 1 bytes).
    length_bits: int = 26

    @property
    def mm2s_bits(self) -> int:
        return 32 * self.lanes

    @property
    def s2mm_bits(self) -> int:
        return self.word_bits


def _params(params: dict) -> str:
    return "".join(
        f"<PARAMETER NAME={quoteattr(k)} VALUE={quoteattr(str(v))}/>" for k, v in params.items())


def _memrange(instance: str, interface: str, block: str, base: int, size: int) -> str:
    return (
        f'<MEMRANGE ADDRESSBLOCK="{block}" BASENAME="C_BASEADDR" BASEVALUE="0x{base:08X}" '
        f'HIGHNAME="C_HIGHADDR" HIGHVALUE="0x{base + size - 1:08X}" INSTANCE="{instance}" '
        f'IS_DATA="TRUE" IS_INSTRUCTION="TRUE" MASTERBUSINTERFACE="M_AXI_GP0" '
        f'MEMTYPE="REGISTER" SLAVEBUSINTERFACE="{interface}"/>'
    )


def _ceaz_registers() -> str:
    access = {"RO": "read-only", "RW": "read-write", "WO": "write-only"}
    out = []
    for reg in regmap.REGISTERS:
        props = {
            "DESCRIPTION": reg.doc, "ADDRESS_OFFSET": f"0x{reg.address:X}", "SIZE": 32,
            "ACCESS": access[reg.access], "IS_ENABLED": "true",
        }
        prop_xml = "".join(
            f"<PROPERTY NAME={quoteattr(k)} VALUE={quoteattr(str(v))}/>"
            for k, v in props.items())
        out.append(f'<REGISTER NAME="{reg.name}">{prop_xml}</REGISTER>')
    return "".join(out)


def hwh_text(design: BlockDesign) -> str:
    """The .hwh XML of the simulated block design."""
    dma_params = {
        "C_INCLUDE_SG": 0, "C_MICRO_DMA": 0, "C_SG_LENGTH_WIDTH": design.length_bits,
        "C_INCLUDE_MM2S": 1, "C_INCLUDE_S2MM": 1,
        "C_INCLUDE_MM2S_DRE": 0, "C_INCLUDE_S2MM_DRE": 0,
        # The memory side is as wide as the stream side, as on the real design; pynq's driver
        # takes it as the buffer alignment it enforces.
        "C_M_AXI_MM2S_DATA_WIDTH": design.mm2s_bits, "C_M_AXIS_MM2S_TDATA_WIDTH":
            design.mm2s_bits,
        "C_M_AXI_S2MM_DATA_WIDTH": design.s2mm_bits, "C_S_AXIS_S2MM_TDATA_WIDTH":
            design.s2mm_bits,
        "C_MM2S_BURST_SIZE": 16, "C_S2MM_BURST_SIZE": 16, "C_ADDR_WIDTH": 32,
    }
    # Vivado writes the configuration twice, upper case and (the user parameters pynq's DMA
    # driver reads) lower case.
    dma_params |= {name.lower(): value for name, value in dma_params.items()}
    dma_params |= {
        "C_BASEADDR": f"0x{design.dma_base:08X}",
        "C_HIGHADDR": f"0x{design.dma_base + design.dma_range - 1:08X}",
        "Component_Name": "ceaz_sim_axi_dma_0_0", "EDK_IPTYPE": "PERIPHERAL",
    }
    ceaz_params = {
        "LANES": design.lanes, "WORD_BITS": design.word_bits,
        "C_S_AXIL_BASEADDR": f"0x{design.ceaz_base:08X}",
        "C_S_AXIL_HIGHADDR": f"0x{design.ceaz_base + design.ceaz_range - 1:08X}",
        "Component_Name": "ceaz_sim_ceaz_0_0", "EDK_IPTYPE": "PERIPHERAL",
    }
    # FCLK0 at 100 MHz (IO PLL 1000 MHz / 10 / 1); pynq's clock view wants all four clocks.
    ps_params = {}
    for clock in range(4):
        ps_params |= {
            f"PCW_FPGA_FCLK{clock}_ENABLE": int(clock == 0),
            f"PCW_FCLK{clock}_PERIPHERAL_DIVISOR0": 10 if clock == 0 else 1,
            f"PCW_FCLK{clock}_PERIPHERAL_DIVISOR1": 1,
            f"PCW_FCLK{clock}_PERIPHERAL_CLKSRC": "IO PLL",
            f"PCW_FPGA{clock}_PERIPHERAL_FREQMHZ": 100 if clock == 0 else 10,
            f"PCW_ACT_FPGA{clock}_PERIPHERAL_FREQMHZ": 100.0 if clock == 0 else 10.0,
        }
    ps_map = "".join([
        _memrange("axi_dma_0", "S_AXI_LITE", "Reg", design.dma_base, design.dma_range),
        _memrange("ceaz_0", "s_axil", "reg0", design.ceaz_base, design.ceaz_range),
    ])
    ceaz_block = (
        f'<ADDRESSBLOCKS><ADDRESSBLOCK ACCESS="read-write" INTERFACE="s_axil" NAME="reg0" '
        f'RANGE="{design.ceaz_range}" USAGE="register"><REGISTERS>{_ceaz_registers()}'
        "</REGISTERS></ADDRESSBLOCK></ADDRESSBLOCKS>"
    )
    modules = [
        _module("processing_system7_0", PS_VLNV, "PROCESSOR", "processing_system7", ps_params,
                [_bus("M_AXI_GP0", "MASTER", AXIMM_VLNV, "ps7_0_axi_periph")], memory_map=ps_map),
        _module("axi_dma_0", DMA_VLNV, "PERIPHERAL", "axi_dma", dma_params, [
            _bus("S_AXI_LITE", "SLAVE", AXIMM_VLNV, "ps7_0_axi_periph"),
            _bus("M_AXIS_MM2S", "INITIATOR", AXIS_VLNV, "axi_dma_0_M_AXIS_MM2S"),
            _bus("S_AXIS_S2MM", "TARGET", AXIS_VLNV, "ceaz_0_m_axis"),
        ]),
        _module("ceaz_0", CEAZ_VLNV, "PERIPHERAL", "compressor", ceaz_params, [
            _bus("s_axil", "SLAVE", AXIMM_VLNV, "ps7_0_axi_periph"),
            _bus("s_axis", "TARGET", AXIS_VLNV, "axi_dma_0_M_AXIS_MM2S"),
            _bus("m_axis", "INITIATOR", AXIS_VLNV, "ceaz_0_m_axis"),
        ], address_blocks=ceaz_block),
    ]
    return (
        '<?xml version="1.0" encoding="UTF-8" standalone="no" ?>\n'
        '<EDKSYSTEM EDWVERSION="1.2" TIMESTAMP="Thu Jan  1 00:00:00 2026" '
        'VIVADOVERSION="2024.1">\n'
        '  <SYSTEMINFO ARCH="zynq" BOARD="" DEVICE="7z020" NAME="ceaz_sim" PACKAGE="clg400" '
        'SPEEDGRADE="-1"/>\n'
        "  <EXTERNALPORTS/>\n  <EXTERNALINTERFACES/>\n"
        f"  <MODULES>\n{''.join(modules)}  </MODULES>\n"
        "</EDKSYSTEM>\n"
    )


def _bus(name: str, kind: str, vlnv: str, bus: str) -> str:
    """A bus interface without port maps: pynq reads addressing from the memory maps."""
    return (f'<BUSINTERFACE BUSNAME="{bus}" NAME="{name}" TYPE="{kind}" VLNV="{vlnv}">'
            "<PARAMETERS/><PORTMAPS/></BUSINTERFACE>")


def _module(instance: str, vlnv: str, modclass: str, modtype: str, params: dict, buses: list,
            memory_map: str = "", address_blocks: str = "") -> str:
    version = vlnv.rsplit(":", 1)[1]
    return (
        f'    <MODULE COREREVISION="1" FULLNAME="/{instance}" HWVERSION="{version}" '
        f'INSTANCE="{instance}" IPTYPE="PERIPHERAL" IS_ENABLE="1" MODCLASS="{modclass}" '
        f'MODTYPE="{modtype}" VLNV="{vlnv}">\n'
        f"      <DOCUMENTS/><PARAMETERS>{_params(params)}</PARAMETERS>{address_blocks}\n"
        f"      <MEMORYMAP>{memory_map}</MEMORYMAP><PORTS/>\n"
        f"      <BUSINTERFACES>{''.join(buses)}</BUSINTERFACES>\n"
        "    </MODULE>\n"
    )


def write_hwh(design: BlockDesign, path: Path) -> Path:
    """Write the .hwh to ``path`` (only if its text changed) and return the path."""
    path = Path(path)
    text = hwh_text(design)
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path
