"""cocotb bench: the stream queues against a plain queue.

The queues are ceaz_hw.ramfifo.BlockRAMFIFO and the two-entry buffers of ceaz_hw.elastic
(ElasticBuffer and PointerBuffer). Random words go through under random stalls on both sides
and must come out in order; the output obeys the stream rule at every clock. With the reader
stopped, a writer that ignores ``i.ready`` for ``capacity`` words must find it high on each of
them. With no stalls, one word passes per clock. A buffer's copies of ``i.ready`` equal it
in every clock.
"""

from __future__ import annotations

import os
import random

import cocotb
import pytest
from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout
from cocotbext.axi import AxiStreamFrame
from runner import bench_params, run_bench
from streams import StreamBench

from ceaz_hw.elastic import ElasticBuffer, PointerBuffer
from ceaz_hw.ramfifo import BlockRAMFIFO

SEED = int(os.environ.get("CEAZ_SIM_SEED", "1"))
WIDTH = 32
TIMEOUT_NS = 1_000_000


class _CopiesShown(wiring.Component):
    """A two-entry buffer with its ``ready_copies`` as a port, for the bench to compare."""

    def __init__(self, buffer):
        self.buffer = buffer
        self.capacity = buffer.capacity
        super().__init__({
            **buffer.signature.members,
            "ready_copies": Out(len(buffer.ready_copies)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.buffer = self.buffer
        wiring.connect(m, wiring.flipped(self.i), self.buffer.i)
        wiring.connect(m, self.buffer.o, wiring.flipped(self.o))
        m.d.comb += self.ready_copies.eq(Cat(self.buffer.ready_copies))
        return m


def make_queue(queue: str, depth: int | None = None, ready_copies: int = 0):
    """The queue under test, by name (the bench's parameters)."""
    if queue == "ramfifo":
        return BlockRAMFIFO(WIDTH, depth)
    buffer = {"elastic": ElasticBuffer, "pointer": PointerBuffer}[queue](
        WIDTH, ready_copies=ready_copies)
    return _CopiesShown(buffer) if ready_copies else buffer


class TB(StreamBench):
    """Clock, reset, stream models with stalls, and an in-order comparison."""

    def __init__(self, dut):
        super().__init__(dut, WIDTH, WIDTH)
        params = bench_params()
        self.queue = params["queue"]
        self.capacity = make_queue(**params).capacity
        self.ready_copies = params.get("ready_copies", 0)
        self.rng = random.Random(SEED)
        self.words_compared = 0

    async def reset(self) -> None:
        await super().reset()
        cocotb.start_soon(self.checker.run())
        cocotb.start_soon(self.watch_ready())

    async def watch_ready(self) -> None:
        """``i.ready`` may be low only while ``capacity`` words or more are unread, and its
        copies equal it."""
        dut, unread = self.dut, 0
        while True:
            await RisingEdge(dut.clk)
            if self.ready_copies:
                ready = int(dut.i__ready.value)
                copies = int(dut.ready_copies.value)
                assert copies == ready * ((1 << self.ready_copies) - 1), (
                    f"ready copies {copies:#b}, ready {ready}")
            if int(dut.i__valid.value) and not int(dut.i__ready.value):
                assert unread >= self.capacity, f"ready low with {unread} words unread"
            unread += int(dut.i__valid.value) and int(dut.i__ready.value)
            unread -= int(dut.o__valid.value) and int(dut.o__ready.value)

    def words(self, n: int) -> list[int]:
        return [self.rng.getrandbits(WIDTH) for _ in range(n)]

    async def through(self, words: list[int]) -> None:
        """Send ``words`` one per frame and check that they come out in order."""
        async def sender():
            for word in words:
                await self.source.send(AxiStreamFrame([word]))

        sending = cocotb.start_soon(sender())
        for k, want in enumerate(words):
            frame = await with_timeout(self.sink.recv(), TIMEOUT_NS, "ns")
            (got,) = frame.tdata
            assert got == want, f"word {k} of {len(words)}: got {got:#x}, want {want:#x}"
        await sending
        self.words_compared += len(words)


@cocotb.test()
async def queue_order_under_stalls(dut):
    """Random stalls on both sides, with bursts that fill the FIFO and drain it."""
    tb = TB(dut)
    tb.set_stalls(SEED)
    await tb.reset()
    for burst in (1, 3, tb.capacity + 5, 200, 3 * tb.capacity):
        await tb.through(tb.words(burst))
    cocotb.log.info("order_under_stalls: %s: %d words in order", tb.queue,
                    tb.words_compared)


@cocotb.test()
async def queue_capacity(dut):
    """The reader stops; ``capacity`` words are each taken on the clock they are offered."""
    tb = TB(dut)
    tb.set_stalls(None)
    await tb.reset()
    tb.sink.pause = True
    words = tb.words(tb.capacity)
    for word in words:  # watch_ready fails the test if one waits for ready
        await tb.source.send(AxiStreamFrame([word]))
    await tb.source.wait()
    await ClockCycles(dut.clk, 8)
    tb.sink.pause = False
    for k, want in enumerate(words):
        frame = await with_timeout(tb.sink.recv(), TIMEOUT_NS, "ns")
        assert frame.tdata == [want], f"word {k}: got {frame.tdata}, want {want:#x}"
    cocotb.log.info("capacity: %s: %d words held and returned in order", tb.queue,
                    len(words))


@cocotb.test()
async def queue_one_word_per_clock(dut):
    """No stalls: after the first word's latency, one word per clock on both sides."""
    tb = TB(dut)
    tb.set_stalls(None)
    await tb.reset()
    n = 2 * tb.capacity + 50
    clocks, out = 0, 0

    async def count():
        nonlocal clocks, out
        while out < n:
            await RisingEdge(dut.clk)
            clocks += 1 if out else 0
            out += int(dut.o__valid.value) and int(dut.o__ready.value)

    counting = cocotb.start_soon(count())
    await tb.through(tb.words(n))
    await counting
    assert clocks <= n, f"{n} words left in {clocks} clocks after the first"
    cocotb.log.info("one_word_per_clock: %s: %d words in %d clocks after the first", tb.queue, n,
                    clocks)


@pytest.mark.parametrize("params", [
    {"queue": "ramfifo", "depth": 2}, {"queue": "ramfifo", "depth": 7},
    {"queue": "ramfifo", "depth": 1024}, {"queue": "elastic"}, {"queue": "pointer"},
    {"queue": "elastic", "ready_copies": 3},
], ids=lambda p: "-".join(str(v) for v in p.values()))
def test_queue(params):
    run_bench(make_queue, name="queue", params=params, test_module=__name__)
