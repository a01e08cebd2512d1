"""Testbench helpers for Amaranth ``lib.stream`` ports: cocotbext-axi bus mapping, stall
generators and a protocol checker."""

from __future__ import annotations

import random
from collections.abc import Iterator

from cocotb.triggers import RisingEdge
from cocotbext.axi import AxiStreamBus

__all__ = ["StreamBus", "StreamChecker", "random_stalls"]


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
