# amaranth: UnusedElaboratable=no
# (the bad-parameter tests make components whose constructor raised, never to be elaborated)
"""``ceaz_hw.delay.DelayLine`` against the register chain it replaces, under a random enable.

Amaranth's simulator runs the line and a chain of ``stages`` registers side by side, both
gated by the same enable (as ``advance_on`` gates a stalled pipeline); after the first
``stages`` enabled clocks their outputs must agree in every clock.
"""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import EnableInserter, Module, Signal
from amaranth.sim import Simulator

from ceaz_hw.delay import DelayLine


def _bench(width: int, stages: int):
    m = Module()
    m.submodules.line = line = DelayLine(width, stages)
    chain = [Signal(width, name=f"r{k}") for k in range(stages)]
    m.d.sync += chain[0].eq(line.i)
    m.d.sync += [b.eq(a) for a, b in zip(chain, chain[1:], strict=False)]
    enable = Signal()
    return EnableInserter({"sync": enable})(m), line, chain[-1], enable


@pytest.mark.parametrize("stages", [3, 4, 16])
def test_delay_line_equals_the_register_chain_under_a_random_enable(stages):
    top, line, reference, enable = _bench(32, stages)
    sim = Simulator(top)
    sim.add_clock(1e-8)
    rng = random.Random(stages)
    checked = 0

    async def bench(ctx):
        nonlocal checked
        taken = 0
        for _ in range(400):
            ctx.set(line.i, rng.getrandbits(32))
            go = rng.random() < 0.6
            ctx.set(enable, go)
            await ctx.tick()
            taken += go
            if taken >= stages:
                assert ctx.get(line.o) == ctx.get(reference)
                checked += 1

    sim.add_testbench(bench)
    sim.run()
    assert checked > 200


@pytest.mark.parametrize(("width", "stages", "message"), [
    (0, 16, "width must be a positive integer"),
    (32, 2, "stages must be an integer of at least 3"),
    (32, 4.0, "stages must be an integer of at least 3"),
])
def test_bad_parameters_are_named(width, stages, message):
    with pytest.raises(ValueError, match=message):
        DelayLine(width, stages)
