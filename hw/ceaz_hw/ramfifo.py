"""A block RAM FIFO whose read data meet nothing but a register.

Why not ``amaranth.lib.fifo.SyncFIFOBuffered``: it hands out its RAM's read data as ``r_data``,
so whatever takes them (a select, an enable) sits right after the RAM's clock-to-out: on
ECP5, 5.8 ns without the RAM's own output register and 1 ns with it (nextpnr's timing).
Here the read data go into a reset-less register with no enable and nothing else, which
``bitstreams/outreg.py`` moves into the RAM (``REGMODE`` ``OUTREG``). Two
reads are thus in flight at any time; a small ``SyncFIFOBuffered`` behind them (registered
output) receives them, and reads are issued only while it has room for everything in flight,
so it never overflows and the consumer's ``ready`` reaches no RAM control.

Capacity: ``depth`` entries in the RAM, and four more that the in-flight reads and the queue
always hold once the RAM has more than one entry (a read is issued every clock while they hold
fewer than five, and the RAM only grows while they hold five). ``i.ready`` is low only while
the RAM is full, so a writer may push ``depth + 4`` entries beyond what it has read, and no
more, without looking at ``i.ready``.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["BlockRAMFIFO"]

#: Entries of the output queue. At one word per clock, two reads are in flight and two words
#: are in the queue (a word counts in its level for two clocks), so a fifth lets reads go on.
_QUEUE = 5


class BlockRAMFIFO(wiring.Component):
    """First-in first-out: a block RAM of ``depth`` entries and a five-entry queue after it.

    Parameters
    ----------
    width : int
        Bits per entry.
    depth : int
        Entries of the RAM (at least 2).

    Members
    -------
    i : ``In(stream.Signature(unsigned(width)))``
        ``i.ready`` is low only while the RAM is full (see the module docstring).
    o : ``Out(stream.Signature(unsigned(width)))``
        ``o.valid`` and ``o.payload`` come from registers. An entry written at clock ``t``
        can be read at ``t + 4`` at the earliest; then one entry per clock.
    """

    def __init__(self, width: int, depth: int):
        if not isinstance(width, int) or width < 1:
            raise ValueError(f"width must be a positive int, not {width!r}")
        if not isinstance(depth, int) or depth < 2:
            raise ValueError(f"depth must be an int of at least 2, not {depth!r}")
        self.width, self.depth = width, depth
        super().__init__({
            "i": In(stream.Signature(unsigned(width))),
            "o": Out(stream.Signature(unsigned(width))),
        })

    @property
    def capacity(self) -> int:
        """Entries a writer may hold unread without looking at ``i.ready``."""
        return self.depth + _QUEUE - 1

    def elaborate(self, platform):
        m = Module()
        # no_rw_check: a read never meets a write to its address (a read needs an entry
        # stored before this clock, a write a free one), so Yosys's read-during-write bypass,
        # a select between the RAM and `held`, would only cost the register its move.
        m.submodules.storage = storage = Memory(shape=unsigned(self.width), depth=self.depth,
                                                init=[], attrs={"no_rw_check": 1})
        write, read = storage.write_port(), storage.read_port(transparent_for=())
        m.submodules.queue = queue = SyncFIFOBuffered(width=self.width, depth=_QUEUE)

        produce = Signal(range(self.depth))
        consume = Signal(range(self.depth))
        stored = Signal(range(self.depth + 1))  # entries in the RAM
        reading = Signal()  # a read was issued last clock: its data leave the RAM now
        arriving = Signal()  # ... two clocks ago: its data are in `held`
        # Entries past the RAM (reading + arriving + the queue's level), counted on its own so
        # that the read enable is one comparison of a register, not a sum of three.
        outstanding = Signal(range(_QUEUE + 1))
        held = Signal(self.width, reset_less=True)  # the register that outreg.py moves

        push = Signal()
        issue = Signal()
        m.d.comb += [
            self.i.ready.eq(stored != self.depth),
            push.eq(self.i.valid & self.i.ready),
            write.addr.eq(produce),
            write.data.eq(self.i.payload),
            write.en.eq(push),
            # Room in the queue for this read and the two in flight, judged from registers
            # before this clock's pop, so the consumer's ready stays off the RAM's controls.
            issue.eq((stored != 0) & (outstanding != _QUEUE)),
            read.addr.eq(consume),
            read.en.eq(issue),
            queue.w_en.eq(arriving),
            queue.w_data.eq(held),
            self.o.valid.eq(queue.r_rdy),
            self.o.payload.eq(queue.r_data),
            queue.r_en.eq(self.o.ready),
        ]
        m.d.sync += [
            held.eq(read.data),
            reading.eq(issue),
            arriving.eq(reading),
            stored.eq(stored + push - issue),
            outstanding.eq(outstanding + issue - (self.o.valid & self.o.ready)),
        ]
        with m.If(push):
            m.d.sync += produce.eq(Mux(produce == self.depth - 1, 0, produce + 1))
        with m.If(issue):
            m.d.sync += consume.eq(Mux(consume == self.depth - 1, 0, consume + 1))
        return m
