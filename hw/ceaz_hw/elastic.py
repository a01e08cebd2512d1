"""Two-entry buffers that let a deep pipeline stall on a registered enable.

A pipeline whose every register is gated by ``downstream.ready`` has a combinational path from
the consumer to thousands of flip-flops. Instead, the pipeline advances on ``i.ready`` of a
buffer, which depends only on the buffer's own fill level (a register), and the buffer absorbs
the beat that is already on its way when the consumer stops. With two entries a full-rate
stream passes at one beat per clock.

:class:`ElasticBuffer` hands out its payload straight from a register, so the consumer's
``o.ready`` selects what every payload register loads. :class:`PointerBuffer` writes each beat
into one of two slots and hands out the slot a read pointer names: ``o.ready`` only moves the
pointer and the level, at the cost of a 2:1 select on ``o.payload``. It suits a consumer whose
ready comes from far away while the payload is wide.
"""

from __future__ import annotations

from amaranth.hdl import DomainRenamer, EnableInserter, Module, Mux, Shape, ShapeCastable, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["ElasticBuffer", "PointerBuffer", "advance_on", "connect_on_copy"]


def advance_on(elaboratable, enables):
    """``elaboratable`` with the registers of each clock domain in ``enables`` (name -> enable)
    gated by its enable, and every domain but ``sync`` renamed to ``sync``: parts of one
    pipeline, each in a domain of its own, advance on their own copy of its enable (for
    example a buffer's :attr:`~_TwoEntries.ready_copies`)."""
    return DomainRenamer({d: "sync" for d in enables if d != "sync"})(
        EnableInserter(enables)(elaboratable))


def connect_on_copy(m, source, sink, ready_copy):
    """Connect stream ``source`` to ``sink``, with ``source`` taking ``ready_copy`` (a register
    equal to ``sink.ready`` every clock, one of the sink's ``ready_copies``) as its ready: a
    producer far from its consumer then forms the handshake from registers near it, and
    neither side's level crosses the die and back in one clock."""
    m.d.comb += [
        sink.valid.eq(source.valid),
        sink.payload.eq(source.payload),
        source.ready.eq(ready_copy),
    ]


class _TwoEntries(wiring.Component):
    """The ports and the level of both buffers: ``i.ready`` while an entry is free,
    ``o.valid`` while one is full."""

    #: Beats the buffer holds (as ``BlockRAMFIFO.capacity``).
    capacity = 2

    def __init__(self, shape, *, ready_copies=0):
        if not isinstance(shape, ShapeCastable):
            Shape.cast(shape)  # raises a clear error for anything that is not a shape
        if not isinstance(ready_copies, int) or ready_copies < 0:
            raise ValueError(f"ready_copies must be a non-negative integer, not {ready_copies!r}")
        self._shape = shape
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
        })
        #: Registers equal to ``i.ready`` in every clock, for a producer whose clock enable
        #: reaches parts far apart: each copy can drive one part from nearby.
        self.ready_copies = [Signal(init=1, name=f"ready_copy{k}", attrs={"keep": 1})
                             for k in range(ready_copies)]

    def _level(self, m):
        """The fill level (a register), its next value, and this clock's push and pop."""
        level = Signal(range(3))
        push = self.i.valid & self.i.ready
        pop = self.o.valid & self.o.ready
        m.d.comb += [self.i.ready.eq(level != 2), self.o.valid.eq(level != 0)]
        next_level = level + push - pop
        m.d.sync += level.eq(next_level)
        for copy in self.ready_copies:
            # The next level is not 2, with the push taken from the copy itself (equal to
            # i.ready), so that no tool sees the copies as one register.
            m.d.sync += copy.eq(level + (self.i.valid & copy) - pop != 2)
        return level, next_level, push, pop


class ElasticBuffer(_TwoEntries):
    """Two-entry stream buffer with registered outputs and a level-only ``i.ready``.

    Parameters
    ----------
    shape : shape-like
        Payload shape of both streams.
    ready_copies : int
        How many copies of ``i.ready`` to provide in :attr:`ready_copies`.

    Members
    -------
    i : ``In(stream.Signature(shape))``
        ``i.ready`` is high while an entry is free; it never depends on ``o.ready`` or
        ``i.valid``, so it can drive the clock enable of the producing pipeline.
    o : ``Out(stream.Signature(shape))``
        ``o.valid`` and ``o.payload`` come straight from registers.
    """

    def elaborate(self, platform):
        m = Module()

        head = Signal(self._shape, name="head")
        tail = Signal(self._shape, name="tail")
        level, _, _, _ = self._level(m)
        m.d.comb += self.o.payload.eq(head)
        # Each register loads one fixed choice under one enable, so a payload bit costs one
        # LUT: the tail takes the input whenever an entry is free (a beat that is not pushed
        # leaves the level alone, so what the tail took is never read); the head takes the
        # tail at level 2 and the input otherwise, whenever it is empty or being read. Decoding
        # push and pop into every bit's load, as a first form did, cost 1.8 LUT4 a bit.
        with m.If(self.i.ready):
            m.d.sync += tail.eq(self.i.payload)
        with m.If((level == 0) | self.o.ready):
            m.d.sync += head.eq(Mux(level[1], tail, self.i.payload))
        return m


class PointerBuffer(_TwoEntries):
    """Two-slot stream buffer whose ``o.ready`` reaches three flip-flops, not the payload.

    Parameters and members as :class:`ElasticBuffer`, except that ``o.payload`` is a select
    between the two slots by a registered read pointer (``o.valid`` is still a register's
    function alone).
    """

    def elaborate(self, platform):
        m = Module()

        slots = [Signal(self._shape, name=f"slot{k}") for k in range(2)]
        write = Signal()  # the slot the next push fills
        read = Signal()  # the slot o.payload shows
        _, next_level, push, pop = self._level(m)
        m.d.comb += self.o.payload.eq(Mux(read, slots[1], slots[0]))
        # While an entry is free, the slot `write` names is free: it takes the payload whether
        # or not a beat is offered, and only a push moves `write` on. So the slots' enables
        # come from registers alone, not from the producer's valid (at four lanes, push into
        # the slot enables across the die was a worst path while building 52761dd, 11.4 ns).
        # Each enable is itself a register, i.ready & (write == k) formed a clock ahead from
        # the next level and pointer: decoded from the level after it, the enable was the
        # four-lane worst path at fa053bd with nextpnr seed 1 (4.8 + 4.0 ns of routing).
        loads = [Signal(init=k == 0, name=f"load{k}") for k in range(2)]
        next_write = write ^ push
        for k, (slot, load) in enumerate(zip(slots, loads, strict=True)):
            m.d.sync += load.eq((next_level != 2) & (next_write == k))
            with m.If(load):
                m.d.sync += slot.eq(self.i.payload)
        m.d.sync += write.eq(next_write)
        with m.If(pop):
            m.d.sync += read.eq(~read)
        return m
