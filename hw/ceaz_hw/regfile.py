"""The AXI4-Lite register file, generated from the one register map ``ceaz.regmap``.

The map (names, addresses, access, which registers are configuration) is not repeated here:
each :class:`ceaz.regmap.Register` becomes a port of :class:`RegisterFile`, so a register added
to the map appears in the RTL, the driver and the tests at once.

Per register ``NAME`` the component has a member ``name`` (lower case), an interface with
``value`` and ``strobe``; ``regfile.fields["NAME"]`` is the same interface, which reads best
at the top level (``reg = regs.fields; reg["BOX_X"].value``). In Verilog the ports are
``box_x__value`` and ``box_x__strobe``.

==========  ======================  =====================================================
access      ``value``               ``strobe`` (one clock)
==========  ======================  =====================================================
``RW``      ``Out(32)``, reset 0    high as ``bvalid`` rises, ``value`` already new
``WO``      ``Out(32)``, reset 0    same; ``value`` holds the last word written
``RO``      ``In(32)``, the design  high in the clock ``value`` is sampled for a read
==========  ======================  =====================================================

Bus behaviour (one transaction per channel at a time; a write and a read can overlap):

* ``aw`` and ``w`` are taken in either order (``awready``/``wready`` are high while their
  holding register is empty); the write happens the clock after both are held and no
  response is waiting, and ``bvalid`` rises with the new ``value`` and the ``strobe``.
  ``awprot``/``arprot`` are ignored. With both handshakes in clock t, ``bvalid`` is high in t+2.
* Byte strobes: an RW register keeps the bytes whose ``wstrb`` bit is low; a WO register
  shows them as 0. A write with ``wstrb == 0`` writes nothing and pulses no strobe.
* ``config=True`` registers: a write while ``busy`` is high is ignored (OKAY response, no
  strobe) and pulses ``config_while_busy``. A write that lands pulses ``config_written``.
* Writes to RO registers are ignored (OKAY). Reads of WO registers return 0 (OKAY).
* An address outside the map answers SLVERR (``bresp``/``rresp`` = 2), reads 0 and pulses
  ``bad_address``. The low two address bits are ignored (registers are words).
* Reads: after the ``ar`` handshake the slave waits ``read_wait`` clocks, then samples the
  register (an RO register's ``strobe`` is high in that clock) and raises ``rvalid`` on the
  next. So an RO ``value`` has ``read_wait`` clocks to settle after the request (e.g. a
  histogram read port addressed by an RW register), and a ``_HI`` word latched on the
  ``_LO`` word's ``strobe`` is consistent with the ``_LO`` value read: that latching lives
  at the top level, which owns the counters.

``config_while_busy``, ``config_written`` and ``bad_address`` are one-clock pulses in the
clock ``bvalid`` (or, for a bad read, ``rvalid``) rises; two events in one clock give one
pulse.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Mapping

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ceaz.regmap import ADDRESS_BITS, Register

from .axi import AXI4LiteSignature, Resp

__all__ = ["RegisterFile", "register_signature"]

WIDTH = 32
ACCESS = ("RO", "RW", "WO")
_FIXED_MEMBERS = ("axi", "busy", "config_while_busy", "config_written", "bad_address")


def register_signature(access: str) -> wiring.Signature:
    """The per-register interface, seen from the register file (it is an ``Out`` member)."""
    if access not in ACCESS:
        raise ValueError(f"register access must be one of {ACCESS}, not {access!r}")
    value = In(WIDTH) if access == "RO" else Out(WIDTH)
    return wiring.Signature({"value": value, "strobe": Out(1)})


class RegisterFile(wiring.Component):
    """AXI4-Lite slave holding the RW/WO registers of ``registers`` and reading the RO ones.

    Parameters
    ----------
    registers : iterable of ceaz.regmap.Register
        Normally ``ceaz.regmap.REGISTERS``.
    addr_width : int
        Byte address width of the bus; every register address must fit.
    read_wait : int
        Clocks between the ``ar`` handshake and sampling the register (0 or more); a read
        takes ``read_wait + 2`` clocks from ``arvalid`` to ``rvalid``. A master that waits
        for a write's response before reading (as AXI ordering requires) has its read sampled
        at least ``read_wait + 2`` clocks after the written register's ``strobe``, so an RO
        register that follows an RW one through a pipeline (HIST_DATA behind HIST_ADDR, i.e.
        ``Histogram.READ_LATENCY``) is settled if its latency is at most ``read_wait + 2``.

    Members
    -------
    axi : ``In(AXI4LiteSignature(addr_width, 32))``
    busy : ``In(1)``
        Configuration writes are refused while it is high.
    config_while_busy, config_written, bad_address : ``Out(1)``
        One-clock pulses (see the module docstring).
    <name> : ``Out(register_signature(access))``, one per register, ``name`` in lower case.
    """

    def __init__(self, registers: Iterable[Register], *, addr_width: int = ADDRESS_BITS,
                 read_wait: int = 8):
        registers = tuple(registers)
        if not registers:
            raise ValueError("the register map is empty")
        if not isinstance(read_wait, int) or read_wait < 0:
            raise ValueError(f"read_wait must be a non-negative integer, not {read_wait!r}")
        if not isinstance(addr_width, int) or not 3 <= addr_width <= 32:
            raise ValueError(f"addr_width must be in 3..32, not {addr_width!r}")
        names, addresses = set(), set()
        for reg in registers:
            member = reg.name.lower()
            if not member.isidentifier() or member.startswith("_"):
                raise ValueError(f"register name {reg.name!r} cannot name a port")
            if member in _FIXED_MEMBERS:
                raise ValueError(f"register name {reg.name!r} clashes with port {member!r}")
            if member in names:
                raise ValueError(f"register {reg.name!r} appears twice")
            if reg.access not in ACCESS:
                raise ValueError(f"register {reg.name!r}: access {reg.access!r} is not one of "
                                 f"{ACCESS}")
            if reg.address % 4 or not 0 <= reg.address < 1 << addr_width:
                raise ValueError(f"register {reg.name!r}: address {reg.address:#x} is not a "
                                 f"word address below {1 << addr_width:#x}")
            if reg.address in addresses:
                raise ValueError(f"register {reg.name!r}: address {reg.address:#x} is taken")
            names.add(member)
            addresses.add(reg.address)
        self.registers = registers
        self.addr_width = addr_width
        self.read_wait = read_wait
        super().__init__({
            "axi": In(AXI4LiteSignature(addr_width, WIDTH)),
            "busy": In(1),
            "config_while_busy": Out(1),
            "config_written": Out(1),
            "bad_address": Out(1),
            **{reg.name.lower(): Out(register_signature(reg.access)) for reg in registers},
        })

    @property
    def fields(self) -> Mapping[str, wiring.PureInterface]:
        """Register name (as in the map, upper case) -> its ``value``/``strobe`` interface."""
        return {reg.name: getattr(self, reg.name.lower()) for reg in self.registers}

    def elaborate(self, platform):
        m = Module()
        bus = self.axi
        fields = self.fields

        def word(address):
            return address[2:]

        def hits(address, reg):
            return word(address) == reg.address >> 2

        # Pulses: low unless set below in this clock.
        m.d.sync += [self.config_while_busy.eq(0), self.config_written.eq(0),
                     self.bad_address.eq(0)]
        for reg in self.registers:
            if reg.access != "RO":
                m.d.sync += fields[reg.name].strobe.eq(0)

        # -- writes: aw and w held independently, the write happens once both are in --------
        # Both are decoded as they are taken, into a flag per register and "some byte
        # written": a configuration register's clock enable then starts from registers
        # (address compare, strobes and busy in one clock were the four-lane core's worst
        # path at 90432ca, 11.2 ns, to registers across the die).
        aw_full = Signal()
        aw_hits = {reg.name: Signal(name=f"aw_hit_{reg.name.lower()}")
                   for reg in self.registers}
        w_full = Signal()
        w_data = Signal(WIDTH)
        w_strb = Signal(WIDTH // 8)
        w_any = Signal()  # w_strb != 0
        m.d.comb += [
            bus.awready.eq(~aw_full),
            bus.wready.eq(~w_full),
        ]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += aw_full.eq(1)
            m.d.sync += [aw_hits[reg.name].eq(hits(bus.awaddr, reg)) for reg in self.registers]
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += [w_full.eq(1), w_data.eq(bus.wdata), w_strb.eq(bus.wstrb),
                         w_any.eq(bus.wstrb != 0)]
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)

        write = Signal()
        m.d.comb += write.eq(aw_full & w_full & ~bus.bvalid)
        byte_mask = Signal(WIDTH)  # wstrb widened to bits
        m.d.comb += byte_mask.eq(Cat(*(w_strb[b].replicate(8) for b in range(WIDTH // 8))))
        write_mapped = Signal()
        m.d.comb += write_mapped.eq(0)
        with m.If(write):
            m.d.sync += [aw_full.eq(0), w_full.eq(0), bus.bvalid.eq(1)]
            m.d.comb += write_mapped.eq(Cat(aw_hits.values()).any())
            for reg in self.registers:
                with m.If(aw_hits[reg.name]):
                    if reg.access == "RO":
                        continue
                    field = fields[reg.name]
                    if reg.access == "RW":
                        new = (field.value & ~byte_mask) | (w_data & byte_mask)
                    else:
                        new = w_data & byte_mask
                    refused = self.busy if reg.config else 0
                    with m.If(w_any):
                        with m.If(refused):
                            m.d.sync += self.config_while_busy.eq(1)
                        with m.Else():
                            m.d.sync += [field.value.eq(new), field.strobe.eq(1)]
                            if reg.config:
                                m.d.sync += self.config_written.eq(1)
            with m.If(write_mapped):
                m.d.sync += bus.bresp.eq(Resp.OKAY)
            with m.Else():
                m.d.sync += [bus.bresp.eq(Resp.SLVERR), self.bad_address.eq(1)]

        # -- reads: ar held, read_wait clocks, sample, respond --------------------------------
        # The address is decoded as it is taken, into one flag per register: the read data's
        # select then starts from registers (decode and select in one clock were a path of
        # ten LUT levels in the whole core).
        ar_hits = {reg.name: Signal(name=f"ar_hit_{reg.name.lower()}")
                   for reg in self.registers}
        waiting = Signal()
        wait_count = Signal(range(max(self.read_wait, 1) + 1))  # never 0 bits wide
        m.d.comb += bus.arready.eq(~waiting & ~bus.rvalid)
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [waiting.eq(1), wait_count.eq(self.read_wait)]
            m.d.sync += [ar_hits[reg.name].eq(hits(bus.araddr, reg)) for reg in self.registers]
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)

        sample = Signal()
        m.d.comb += sample.eq(waiting & (wait_count == 0))
        with m.If(waiting & (wait_count != 0)):
            m.d.sync += wait_count.eq(wait_count - 1)
        read_mapped = Signal()
        m.d.comb += read_mapped.eq(0)
        with m.If(sample):
            m.d.sync += [waiting.eq(0), bus.rvalid.eq(1)]
            # At most one flag is set: the data is an OR of the selected values.
            m.d.sync += bus.rdata.eq(functools.reduce(operator.or_, (
                Mux(ar_hits[reg.name], fields[reg.name].value, 0)
                for reg in self.registers if reg.access != "WO"), Const(0, WIDTH)))
            m.d.comb += read_mapped.eq(Cat(ar_hits.values()).any())
            for reg in self.registers:
                if reg.access == "RO":
                    m.d.comb += fields[reg.name].strobe.eq(ar_hits[reg.name])
            with m.If(read_mapped):
                m.d.sync += bus.rresp.eq(Resp.OKAY)
            with m.Else():
                m.d.sync += [bus.rresp.eq(Resp.SLVERR), self.bad_address.eq(1)]
        return m
