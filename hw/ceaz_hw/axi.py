"""AXI4-Lite and AXI4-Stream interfaces as ``amaranth.lib.wiring`` signatures.

Members carry the AXI signal names and the directions seen from the master (the source for a
stream), so a slave port is ``In(AXI4LiteSignature())`` and a stream input is
``In(AXI4StreamSignature(w))``. Amaranth names a port member ``<port>__<member>`` in Verilog,
e.g. ``s_axil__awaddr``; cocotbext-axi binds to that with ``bus_separator="__"``::

    AxiLiteBus.from_prefix(dut, "s_axil", bus_separator="__")
    AxiStreamBus.from_prefix(dut, "s_axis", bus_separator="__")

Only the signals the compressor needs are present: no ``tuser``, ``tid`` or ``tdest``;
``awprot``/``arprot`` exist (masters drive them) but a slave may ignore them.
"""

from __future__ import annotations

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AXI4LiteSignature", "AXI4StreamSignature", "Resp"]


class Resp:
    """Values of ``bresp``/``rresp``."""

    OKAY = 0
    EXOKAY = 1
    SLVERR = 2
    DECERR = 3


class AXI4LiteSignature(wiring.Signature):
    """An AXI4-Lite port, from the master's side.

    Parameters
    ----------
    addr_width : int
        Width of ``awaddr`` and ``araddr`` (byte addresses).
    data_width : int
        32 or 64 (the widths AXI4-Lite allows); ``wstrb`` has one bit per byte.
    """

    def __init__(self, addr_width: int = 12, data_width: int = 32):
        if not isinstance(addr_width, int) or addr_width < 1:
            raise ValueError(f"addr_width must be a positive integer, not {addr_width!r}")
        if data_width not in (32, 64):
            raise ValueError(f"AXI4-Lite data_width must be 32 or 64, not {data_width!r}")
        self.addr_width = addr_width
        self.data_width = data_width
        super().__init__({
            # write address
            "awaddr": Out(addr_width),
            "awprot": Out(3),
            "awvalid": Out(1),
            "awready": In(1),
            # write data
            "wdata": Out(data_width),
            "wstrb": Out(data_width // 8),
            "wvalid": Out(1),
            "wready": In(1),
            # write response
            "bresp": In(2),
            "bvalid": In(1),
            "bready": Out(1),
            # read address
            "araddr": Out(addr_width),
            "arprot": Out(3),
            "arvalid": Out(1),
            "arready": In(1),
            # read data
            "rdata": In(data_width),
            "rresp": In(2),
            "rvalid": In(1),
            "rready": Out(1),
        })

    def __eq__(self, other):
        return (isinstance(other, AXI4LiteSignature) and other.addr_width == self.addr_width
                and other.data_width == self.data_width)

    def __hash__(self):
        return hash((AXI4LiteSignature, self.addr_width, self.data_width))

    def __repr__(self):
        return f"AXI4LiteSignature({self.addr_width}, {self.data_width})"


class AXI4StreamSignature(wiring.Signature):
    """An AXI4-Stream port with ``tdata``, ``tkeep`` (one bit per byte), ``tlast``,
    ``tvalid`` and ``tready``, from the source's side.

    Parameters
    ----------
    data_width : int
        Width of ``tdata``, a positive multiple of 8.
    """

    def __init__(self, data_width: int):
        if not isinstance(data_width, int) or data_width <= 0 or data_width % 8:
            raise ValueError(f"data_width must be a positive multiple of 8, not {data_width!r}")
        self.data_width = data_width
        super().__init__({
            "tdata": Out(data_width),
            "tkeep": Out(data_width // 8),
            "tlast": Out(1),
            "tvalid": Out(1),
            "tready": In(1),
        })

    def __eq__(self, other):
        return isinstance(other, AXI4StreamSignature) and other.data_width == self.data_width

    def __hash__(self):
        return hash((AXI4StreamSignature, self.data_width))

    def __repr__(self):
        return f"AXI4StreamSignature({self.data_width})"
