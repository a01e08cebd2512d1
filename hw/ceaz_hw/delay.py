"""A fixed delay held in block RAM instead of a chain of registers.

Why: a deep pipeline carries some bits unchanged through many stages (the quantizer holds each
value's 32 input bits for 16 stages before it compares them with the reconstruction). As
registers those bits cost a flip-flop per bit per stage, and on the 16-lane core flip-flops
that only pass a bit on are 39.8 k of 75.6 k (``python bitstreams/tiles.py``): the placer,
short of slices, needs them gone. A block RAM written at a pointer and read a lap behind it
does the same with no flip-flops but its output register, which ``bitstreams/outreg.py``
moves into the RAM.

Under an enable (``EnableInserter``, as ``advance_on`` gives a stalled pipeline), the write,
the read and the pointer all hold, so the output still equals the register chain's last stage
in every clock.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Shape, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["DelayLine"]


class DelayLine(wiring.Component):
    """``o`` is ``i`` as it was ``stages`` clocks ago, like the last of ``stages`` registers.

    Parameters
    ----------
    width : int
        Bits delayed.
    stages : int
        Registers the line stands for, at least 3 (a RAM of ``stages - 1`` entries, read one
        clock ahead, and its output register).

    Members
    -------
    i : ``In(width)``
    o : ``Out(width)``
        A register (reset-less, like the data registers it replaces): read it only behind
        the valid flags delayed beside it. Its contents before ``stages`` clocks are unknown.
    """

    def __init__(self, width: int, stages: int):
        if not isinstance(width, int) or width < 1:
            raise ValueError(f"width must be a positive integer, not {width!r}")
        if not isinstance(stages, int) or stages < 3:
            raise ValueError(f"stages must be an integer of at least 3, not {stages!r}")
        self.width, self.stages = width, stages
        super().__init__({"i": In(width), "o": Out(width)})

    def elaborate(self, platform):
        m = Module()
        depth = self.stages - 1
        # Block RAM whatever its size: as LUT RAM it would take the logic cells it is here to
        # spare the placer.
        mem = Memory(shape=Shape.cast(self.width), depth=depth, init=[],
                     attrs={"ram_style": "block"})
        m.submodules.mem = mem
        ptr = Signal(range(depth))
        ptr_next = Mux(ptr == depth - 1, 0, ptr + 1)
        m.d.sync += ptr.eq(ptr_next)
        write, read = mem.write_port(), mem.read_port()
        # Entry ptr + 1 was written depth - 1 clocks ago; the read port's register and `o`
        # add two: stages clocks in all.
        m.d.comb += [
            write.addr.eq(ptr), write.data.eq(self.i), write.en.eq(1),
            read.addr.eq(ptr_next),
        ]
        out = Signal(self.width, reset_less=True, name="out")
        m.d.sync += out.eq(read.data)
        m.d.comb += self.o.eq(out)
        return m
