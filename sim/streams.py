"""Testbench helpers for Amaranth ``lib.stream`` ports: cocotbext-axi bus mapping, stall
generators, a protocol checker and the common base of the stream benches."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiStreamBus, AxiStreamSink, AxiStreamSource

__all__ = ["PERIOD_NS", "StreamBench", "StreamBus", "StreamChecker", "random_stalls"]

#: The benches' clock period (the designs have no timing in simulation; 10 ns reads well).
PERIOD_NS = 10


class StreamBus(AxiStreamBus):
    """An Amaranth stream port (``<name>__payload``, ``__valid``, ``__ready``) seen as an AXI
    stream with only ``tdata``, ``tvalid`` and ``tready``, for AxiStreamSource/Sink."""

    _signals = {"tdata": "payload"}
    _optional_signals = {"tvalid": "valid", "tready": "ready"}

    def __init__(self, entity=None, prefix=None, **kwargs):
        kwargs.setdefault("bus_separator", "__")
        super().__init__(entity, prefix, **kwargs)


def random_stalls(seed: int, busy: float = 0.3, longest: int = 12) -> Iterator[bool]:
    """Pause pattern for AxiStreamSource/Sink.set_pause_generator: mostly single-cycle
    stalls with a fraction ``busy`` of stalled cycles, and now and then a burst of up to
    ``longest`` cycles so that every buffer in the design fills up."""
    rng = random.Random(seed)
    while True:
        if rng.random() < 0.05:
            yield from [True] * rng.randint(2, longest)
        yield rng.random() < busy


class StreamChecker:
    """Asserts the stream rule at every clock: a payload offered and not taken is offered
    again, unchanged, on the next clock. Counts transfers and clocks with valid low."""

    def __init__(self, dut, prefix: str):
        self.clk = dut.clk
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self.transfers = 0

    async def run(self) -> None:
        held = None
        while True:
            await RisingEdge(self.clk)
            valid = bool(self.valid.value)
            payload = self.payload.value
            if held is not None:
                assert valid, "valid dropped before the payload was accepted"
                assert payload == held, "payload changed before it was accepted"
            ready = bool(self.ready.value)
            self.transfers += valid and ready
            held = payload if valid and not ready else None


class StreamBench:
    """What every stream bench starts from: a running clock, cocotbext-axi models on the
    design's input and output streams, random stalls and a synchronous reset.

    ``in_bits``/``out_bits`` are the beat widths (one cocotbext "byte" per beat); ``out_bits``
    None means the design has no output stream. The buses default to Amaranth stream ports
    named ``i`` and ``o``; a design with AXI4-Stream ports passes its own. Subclasses add the
    design's other ports and the comparison with the model.
    """

    #: Fraction of clocks the sink refuses a beat under `set_stalls`.
    sink_busy = 0.4
    #: Clocks the reset is held.
    reset_clocks = 2

    def __init__(self, dut, in_bits: int | None, out_bits: int | None, *,
                 source_bus=None, sink_bus=None, with_sink: bool | None = None):
        self.dut = dut
        cocotb.start_soon(Clock(dut.clk, PERIOD_NS, unit="ns").start())
        self.source = AxiStreamSource(source_bus or StreamBus.from_prefix(dut, "i"),
                                      dut.clk, dut.rst, byte_size=in_bits)
        self.sink = self.checker = None
        if with_sink if with_sink is not None else out_bits is not None:
            self.sink = AxiStreamSink(sink_bus or StreamBus.from_prefix(dut, "o"),
                                      dut.clk, dut.rst, byte_size=out_bits)
            if sink_bus is None:
                self.checker = StreamChecker(dut, "o")
        for model in self._models():
            model.log.setLevel(logging.WARNING)  # not a line per beat

    def _models(self) -> list:
        return [m for m in (self.source, self.sink) if m is not None]

    def set_stalls(self, seed: int | None) -> None:
        """Random valid and ready stalls from ``seed``, or none."""
        if seed is None:
            for model in self._models():
                model.clear_pause_generator()
                model.pause = False  # clearing keeps the last pause state, maybe a stall
            return
        self.source.set_pause_generator(random_stalls(seed))
        if self.sink is not None:
            self.sink.set_pause_generator(random_stalls(seed + 1, busy=self.sink_busy))

    async def reset(self) -> None:
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, self.reset_clocks)
        self.dut.rst.value = 0
        await RisingEdge(self.dut.clk)
