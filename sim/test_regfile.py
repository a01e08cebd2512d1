"""cocotb bench: the AXI4-Lite register file (ceaz_hw.regfile.RegisterFile) on ceaz.regmap.

An AxiLiteMaster (cocotbext-axi) talks to the component, with random stalls on all five
channels (so ``aw`` and ``w`` arrive in either order), against a model of the map:

* RW registers read back what was written, with byte strobes (partial writes at byte
  offsets); RW and WO writes show one ``strobe`` with the new ``value``; WO reads are 0;
* RO registers read what the bench drives; ``CYCLES_LO``/``_HI`` are driven by a 64-bit
  counter whose high word the bench latches on the ``_LO`` read strobe, as the top level does,
  and every low-then-high pair must be a value the counter really had; ``HIST_DATA`` follows
  ``HIST_ADDR`` with a delay of ``read_wait`` clocks, as a histogram read port does;
* configuration writes while ``busy`` are ignored and flagged, others land and flag
  ``config_written``;
* unmapped addresses answer SLVERR and flag ``bad_address``; RO writes are ignored;
* a reset in the middle of traffic clears the RW registers.
"""

from __future__ import annotations

import os
import random
from collections import deque

import cocotb
import pytest
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp
from runner import bench_params, run_bench
from streams import random_stalls

from ceaz import regmap
from ceaz_hw.regfile import RegisterFile

PERIOD_NS = 10
SEED = int(os.environ.get("CEAZ_SIM_SEED", "1"))
MASK = (1 << 32) - 1
#: Counter step: the low word wraps every few clocks, so a badly timed _HI latch shows.
COUNTER_STEP = 0x4000_0001
#: Registers the bench drives every clock (the others of the RO kind hold random constants).
CLOCKED = ("CYCLES_LO", "CYCLES_HI", "HIST_DATA")
RW = [r for r in regmap.REGISTERS if r.access == "RW"]
WO = [r for r in regmap.REGISTERS if r.access == "WO"]
RO = [r for r in regmap.REGISTERS if r.access == "RO"]


def hist_count(symbol: int) -> int:
    """What the fake histogram read port shows for a symbol."""
    return (symbol * 0x9E37_79B1 + 0x1234_5678) & MASK


def unmapped_addresses(rng: random.Random, n: int) -> list[int]:
    mapped = {r.address for r in regmap.REGISTERS}
    free = [a for a in range(0, 1 << regmap.ADDRESS_BITS, 4) if a not in mapped]
    return [0x02C, 0x03C, 0x0F0, 0xFFC] + rng.sample(free, n)


class TB:
    """Clock, master, the RO drivers and a per-clock monitor of strobes and pulses."""

    def __init__(self, dut, seed: int, stalls: bool = True):
        self.dut = dut
        self.rng = random.Random(seed)
        self.read_wait = int(bench_params()["read_wait"])
        self.fields = {r.name: (getattr(dut, f"{r.name.lower()}__value"),
                                getattr(dut, f"{r.name.lower()}__strobe"))
                       for r in regmap.REGISTERS}
        cocotb.start_soon(Clock(dut.clk, PERIOD_NS, unit="ns").start())
        dut.rst.value = 1
        dut.busy.value = 0
        bus = AxiLiteBus.from_prefix(dut, "axi", bus_separator="__")
        self.axi = AxiLiteMaster(bus, dut.clk, dut.rst)
        if stalls:
            channels = [self.axi.write_if.aw_channel, self.axi.write_if.w_channel,
                        self.axi.write_if.b_channel, self.axi.read_if.ar_channel,
                        self.axi.read_if.r_channel]
            for k, channel in enumerate(channels):
                channel.set_pause_generator(random_stalls(seed * 10 + k, busy=0.4))
        self.events: list[tuple] = []
        self.order = {"aw first": 0, "w first": 0, "together": 0}
        self.checked = 0
        self._reset_model()
        cocotb.start_soon(self._clock_process())

    def _reset_model(self) -> None:
        self.rw = {r.name: 0 for r in RW}
        self.wo = {r.name: 0 for r in WO}
        self.ro = {r.name: self.rng.getrandbits(32) for r in RO if r.name not in CLOCKED}
        for name, value in self.ro.items():
            self.fields[name][0].value = value
        self.counter = self.rng.getrandbits(64)
        self.counter_seen: set[int] = set()
        self.hi_latched = 0
        self.hist_addr = deque([0] * (self.read_wait + 1), maxlen=self.read_wait + 1)
        self.events.clear()
        self._aw_at = self._w_at = None

    async def reset(self, clocks: int = 3) -> None:
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, clocks)
        self._reset_model()
        self.dut.rst.value = 0
        await RisingEdge(self.dut.clk)

    async def _clock_process(self) -> None:
        """Drive the clocked RO inputs after each edge; watch the settled outputs."""
        dut = self.dut
        lo, lo_strobe = self.fields["CYCLES_LO"]
        hi, _ = self.fields["CYCLES_HI"]
        hist, _ = self.fields["HIST_DATA"]
        hist_addr, _ = self.fields["HIST_ADDR"]
        bus = dut
        cycle = 0
        while True:
            await RisingEdge(dut.clk)
            cycle += 1
            self.counter = (self.counter + COUNTER_STEP) & ((1 << 64) - 1)
            self.counter_seen.add(self.counter)
            lo.value = self.counter & MASK
            hi.value = self.hi_latched
            # The address of read_wait clocks ago: a read port with that latency.
            hist.value = hist_count(self.hist_addr[0])
            await ReadOnly()
            self.hist_addr.append(int(hist_addr.value))
            if int(dut.rst.value):
                continue
            if int(lo_strobe.value):
                self.hi_latched = self.counter >> 32  # what the top level does
            for reg in regmap.REGISTERS:
                value, strobe = self.fields[reg.name]
                if int(strobe.value):
                    if reg.access == "RO":
                        self.events.append(("read", reg.name))
                    else:
                        self.events.append(("write", reg.name, int(value.value)))
            for pulse in ("config_while_busy", "config_written", "bad_address"):
                if int(getattr(dut, pulse).value):
                    self.events.append((pulse,))
            # Which of aw and w the slave took first (both handshake at the next edge).
            if int(bus.axi__awvalid.value) and int(bus.axi__awready.value):
                self._aw_at = cycle
            if int(bus.axi__wvalid.value) and int(bus.axi__wready.value):
                self._w_at = cycle
            if self._aw_at is not None and self._w_at is not None:
                key = ("together" if self._aw_at == self._w_at
                       else "aw first" if self._aw_at < self._w_at else "w first")
                self.order[key] += 1
                self._aw_at = self._w_at = None

    def take_events(self) -> list[tuple]:
        events, self.events = self.events, []
        return events

    # -- bus operations checked against the model ----------------------------------------

    async def write(self, reg: regmap.Register, value: int, offset: int = 0,
                    size: int = 4) -> None:
        """Write bytes ``offset .. offset+size-1`` of ``value`` (byte strobes) and check the
        response, the strobe and the pulses against the model."""
        data = value.to_bytes(4, "little")[offset: offset + size]
        resp = await self.axi.write(reg.address + offset, data)
        assert resp.resp == AxiResp.OKAY, f"write {reg.name}: {resp.resp!r}"
        lanes = ((1 << 8 * size) - 1) << 8 * offset
        expected = []
        busy = bool(int(self.dut.busy.value))
        if reg.config and busy:
            expected = [("config_while_busy",)]
        elif reg.access == "RW":
            self.rw[reg.name] = (self.rw[reg.name] & ~lanes) | (value & lanes)
            expected = [("write", reg.name, self.rw[reg.name])]
            if reg.config:
                expected.append(("config_written",))
        elif reg.access == "WO":
            self.wo[reg.name] = value & lanes
            expected = [("write", reg.name, self.wo[reg.name])]
        got = self.take_events()
        assert sorted(got) == sorted(expected), f"write {reg.name}: events {got}, expected " \
                                                f"{expected}"
        self.checked += 1

    async def read(self, reg: regmap.Register) -> int:
        resp = await self.axi.read(reg.address, 4)
        assert resp.resp == AxiResp.OKAY, f"read {reg.name}: {resp.resp!r}"
        value = int.from_bytes(resp.data, "little")
        events = self.take_events()
        if reg.access == "RO":
            assert events == [("read", reg.name)], f"read {reg.name}: events {events}"
        else:
            assert events == [], f"read {reg.name}: events {events}"
        if reg.access == "RW":
            assert value == self.rw[reg.name], \
                f"{reg.name} reads {value:#010x}, expected {self.rw[reg.name]:#010x}"
        elif reg.access == "WO":
            assert value == 0, f"WO register {reg.name} reads {value:#x}, not 0"
        elif reg.name == "HIST_DATA":
            expected = hist_count(self.rw["HIST_ADDR"])
            assert value == expected, f"HIST_DATA reads {value:#x}, expected {expected:#x}"
        elif reg.name not in CLOCKED:
            assert value == self.ro[reg.name], \
                f"{reg.name} reads {value:#010x}, expected {self.ro[reg.name]:#010x}"
        self.checked += 1
        return value

    async def random_write(self, reg: regmap.Register) -> None:
        offset = self.rng.choice([0, 0, 0, 1, 2, 3])
        size = self.rng.randint(1, 4 - offset) if offset or self.rng.random() < 0.4 else 4
        await self.write(reg, self.rng.getrandbits(32), offset, size)

    def report(self, test: str) -> None:
        message = (f"{test}: read_wait {self.read_wait}: {self.checked} transactions checked "
                   f"against ceaz.regmap; aw/w order {self.order}")
        self.dut._log.info(message)
        print(message)


@cocotb.test()
async def rw_and_wo_with_byte_strobes(dut):
    """Random full and partial writes to every RW and WO register, each followed now and
    then by reads of random registers; a final read of every register."""
    tb = TB(dut, SEED)
    await tb.reset()
    writable = RW + WO
    for reg in writable:
        await tb.write(reg, tb.rng.getrandbits(32))
    for _ in range(300):
        await tb.random_write(tb.rng.choice(writable))
        if tb.rng.random() < 0.5:
            await tb.read(tb.rng.choice(regmap.REGISTERS))
    for reg in regmap.REGISTERS:
        await tb.read(reg)
    assert all(tb.order.values()), f"aw/w orders not all seen: {tb.order}"
    tb.report("rw_and_wo_with_byte_strobes")


@cocotb.test()
async def ro_values_and_counter_latch(dut):
    """RO constants read back; CYCLES_LO then CYCLES_HI is a value the counter had (the _HI
    word latched on the _LO read strobe); HIST_DATA settles for HIST_ADDR."""
    tb = TB(dut, SEED + 1)
    await tb.reset()
    pairs = 0
    for _ in range(60):
        lo = await tb.read(regmap.by_name("CYCLES_LO"))
        for _ in range(tb.rng.randint(0, 3)):
            await ClockCycles(dut.clk, tb.rng.randint(1, 5))
        hi = await tb.read(regmap.by_name("CYCLES_HI"))
        assert (hi << 32 | lo) in tb.counter_seen, \
            f"CYCLES_HI:LO = {hi:#x}:{lo:#010x} is no value the counter had"
        pairs += 1
        await tb.random_write(regmap.by_name("HIST_ADDR"))
        await tb.read(regmap.by_name("HIST_DATA"))
        reg = tb.rng.choice(RO)
        if reg.name not in CLOCKED:
            tb.ro[reg.name] = tb.rng.getrandbits(32)
            tb.fields[reg.name][0].value = tb.ro[reg.name]
            await RisingEdge(dut.clk)
        await tb.read(reg)
    tb.report(f"ro_values_and_counter_latch ({pairs} LO/HI pairs)")


@cocotb.test()
async def config_writes_while_busy(dut):
    """With busy high, configuration writes are ignored and flagged; CB_ADDR, HIST_ADDR and
    the WO registers are still written. After busy drops they land again."""
    tb = TB(dut, SEED + 2)
    await tb.reset()
    for reg in RW:
        await tb.write(reg, tb.rng.getrandbits(32))
    refused = 0
    for _ in range(120):
        dut.busy.value = int(tb.rng.random() < 0.6)
        await RisingEdge(dut.clk)
        reg = tb.rng.choice(RW + WO)
        refused += reg.config and bool(int(dut.busy.value))
        await tb.random_write(reg)
        await tb.read(tb.rng.choice(RW))
    dut.busy.value = 0
    for reg in RW:
        await tb.read(reg)
    assert refused > 0
    tb.report(f"config_writes_while_busy ({refused} refused)")


@cocotb.test()
async def unmapped_addresses_and_ro_writes(dut):
    """Unmapped addresses answer SLVERR, read 0 and pulse bad_address; RO writes change
    nothing and answer OKAY."""
    tb = TB(dut, SEED + 3)
    await tb.reset()
    for reg in RW:
        await tb.write(reg, tb.rng.getrandbits(32))
    for address in unmapped_addresses(tb.rng, 40):
        resp = await tb.axi.write(address, tb.rng.randbytes(4))
        assert resp.resp == AxiResp.SLVERR, f"write {address:#x}: {resp.resp!r}"
        assert tb.take_events() == [("bad_address",)], f"write {address:#x}"
        resp = await tb.axi.read(address, 4)
        assert resp.resp == AxiResp.SLVERR, f"read {address:#x}: {resp.resp!r}"
        assert resp.data == bytes(4), f"read {address:#x} gave {resp.data.hex()}"
        assert tb.take_events() == [("bad_address",)], f"read {address:#x}"
        tb.checked += 2
    for reg in RO:
        await tb.write(reg, tb.rng.getrandbits(32))
        await tb.read(reg)
    for reg in RW:
        await tb.read(reg)
    tb.report("unmapped_addresses_and_ro_writes")


@cocotb.test()
async def reads_overlap_writes(dut):
    """A writer and a reader at once: the read channel must not disturb writes in flight
    (the reader reads only RO constants, whose values do not depend on the writes)."""
    tb = TB(dut, SEED + 4)
    await tb.reset()
    constants = [r for r in RO if r.name not in CLOCKED]
    values = []

    async def reader():
        for _ in range(150):
            reg = tb.rng.choice(constants)
            resp = await tb.axi.read(reg.address, 4)
            assert resp.resp == AxiResp.OKAY
            values.append((reg.name, int.from_bytes(resp.data, "little")))

    async def writer():
        for _ in range(150):
            reg = tb.rng.choice(RW)
            value = tb.rng.getrandbits(32)
            resp = await tb.axi.write(reg.address, value.to_bytes(4, "little"))
            assert resp.resp == AxiResp.OKAY
            tb.rw[reg.name] = value

    read_task = cocotb.start_soon(reader())
    await writer()
    await read_task
    for name, value in values:
        assert value == tb.ro[name], f"{name} read {value:#x}, expected {tb.ro[name]:#x}"
    writes = [e for e in tb.take_events() if e[0] == "write"]
    assert len(writes) == 150, f"{len(writes)} write strobes for 150 writes"
    tb.checked += len(values) + len(writes)
    for reg in RW:
        await tb.read(reg)
    tb.report("reads_overlap_writes")


@cocotb.test()
async def reset_in_the_middle(dut):
    """A reset while writes and reads are in flight returns every RW register to 0 and the
    slave to idle; traffic afterwards works."""
    tb = TB(dut, SEED + 5)
    await tb.reset()
    for reg in RW:
        await tb.write(reg, tb.rng.getrandbits(32) | 1)

    async def traffic():
        while True:
            reg = tb.rng.choice(RW)
            tb.axi.init_write(reg.address, tb.rng.randbytes(4))
            tb.axi.init_read(tb.rng.choice(regmap.REGISTERS).address, 4)
            await ClockCycles(dut.clk, tb.rng.randint(0, 3))

    for _ in range(5):
        task = cocotb.start_soon(traffic())
        await ClockCycles(dut.clk, tb.rng.randint(5, 40))
        task.cancel()
        await tb.reset(tb.rng.randint(1, 4))
        for reg in RW:
            await tb.read(reg)
        for _ in range(20):
            await tb.random_write(tb.rng.choice(RW + WO))
            await tb.read(tb.rng.choice(regmap.REGISTERS))
    tb.report("reset_in_the_middle")


@pytest.mark.parametrize("read_wait", [0, 8])
def test_regfile(read_wait):
    run_bench(lambda read_wait: RegisterFile(regmap.REGISTERS, read_wait=read_wait),
              name="regfile", params={"read_wait": read_wait}, test_module=__name__)
