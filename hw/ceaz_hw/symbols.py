"""The symbol stage: Lorenzo residuals and value kinds mapped to the alphabet (docs/format.md,
section 6), as ``ceaz.symbols.encode`` and the raw fields of ``ceaz.chunk.chunk_symbols``.

With radius R the alphabet has ``2R + 2`` symbols. Per value:

=========================  ===========  ==========================  ============  ==========
kind / delta               symbol       raw field                   ``raw_len``   escape
=========================  ===========  ==========================  ============  ==========
fill                       ``2R + 1``   none                        0             FILL
verbatim                   ``2R``       the IEEE bits (``raw``)     32            VERBATIM
normal, ``|delta| < R``    ``R+delta``  none                        0             NONE
normal, ``|delta| >= R``   0            ``delta mod 2**31``         31            OUTLIER
=========================  ===========  ==========================  ============  ==========

A raw field is right-aligned in ``raw`` and every bit above ``raw_len`` is zero, so the
Huffman lanes can OR it under the code. The stage is two register stages (the band
comparison, then the mapping) and a two-entry :class:`~ceaz_hw.elastic.PointerBuffer`, its
registers gated by the buffer's ``i.ready``. The buffer is the pointer kind because its
consumer is the top level's fork (Huffman lanes, histogram, adaptation gate): with an
:class:`~ceaz_hw.elastic.ElasticBuffer` the fork's ready selected what every payload register
loads, and those sat by the Huffman lanes, far from the gate (the four-lane worst path at
ffdd04b, 12.0 ns).
"""

from __future__ import annotations

from amaranth.hdl import Const, EnableInserter, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ceaz import format as fmt

from .beats import DELTA_BITS, Escape, Kind, Residual, Symbol, beat, symbol_bits
from .elastic import PointerBuffer

__all__ = ["SymbolStage"]


def _check_radius(radius) -> int:
    if not (isinstance(radius, int) and fmt.MIN_RADIUS <= radius <= fmt.MAX_RADIUS):
        raise ValueError(
            f"radius must be an integer in [{fmt.MIN_RADIUS}, {fmt.MAX_RADIUS}], not {radius!r}"
        )
    return radius


def _at_least(value, bound: int):
    """``value >= bound`` for an unsigned value and a constant, as plain logic: a comparison
    with a constant needs no carry chain, which yosys would otherwise build for it."""
    width = len(value)
    if bound <= 0:
        return Const(1)
    if bound >= 1 << width:
        return Const(0)
    top = 1 << (width - 1)
    if bound & top:
        return value[width - 1] & _at_least(value[: width - 1], bound - top)
    return value[width - 1] | _at_least(value[: width - 1], bound)


def _in_band(delta, radius: int):
    """``|delta| < radius``: the bits above the radius's are a sign extension, and the low
    bits compare with a constant (two 31-bit comparisons were most of the stage's logic)."""
    k = radius.bit_length()
    low, high = delta[:k], delta[k:]
    positive = (high == 0) & ~_at_least(low, radius)  # 0 <= delta < R
    ones = (1 << len(high)) - 1
    negative = (high == ones) & _at_least(low, (1 << k) - radius + 1)  # -R < delta = low - 2**k
    return positive | negative


class _SymbolLanes(wiring.Component):
    """The registered datapath: two register stages for every lane, ``last``, ``count`` and
    the valid line. Every register advances every clock; the parent gates it with an enable.

    The first stage registers the input and each lane's band comparison, the second maps: the
    comparisons' carry chains and the Mux fan-out over the 32-bit raw field do not share a
    clock (together they were the smoke core's worst path)."""

    def __init__(self, lanes, radius):
        self._lanes, self._radius = lanes, radius
        super().__init__({
            "i": In(beat(Residual, lanes)),
            "i_valid": In(1),
            "o": Out(beat(Symbol(radius), lanes)),
            "o_valid": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        r = self._radius
        s1 = Signal.like(self.i, name="s1")
        s1_valid = Signal()
        m.d.sync += [s1.eq(self.i), s1_valid.eq(self.i_valid)]
        m.d.sync += [
            self.o.last.eq(s1.last),
            self.o.count.eq(s1.count),
            self.o_valid.eq(s1_valid),
        ]
        for lane in range(self._lanes):
            src, dst = s1.lanes[lane], self.o.lanes[lane]
            delta = src.delta
            # Bit-exact with ceaz.symbols.encode: in band iff kind normal and |delta| < R.
            in_band = Signal(name=f"s1_in_band{lane}")
            given = self.i.lanes[lane]
            m.d.sync += in_band.eq((given.kind == Kind.NORMAL) & _in_band(given.delta, r))
            # ceaz.chunk.chunk_symbols: the outlier field is delta & (2**31 - 1); the delta
            # port is exactly OUTLIER_BITS wide, so that is its two's-complement pattern.
            assert DELTA_BITS == fmt.OUTLIER_BITS
            with m.Switch(src.kind):
                with m.Case(Kind.FILL):
                    m.d.sync += [
                        dst.sym.eq(fmt.sym_fill(r)),
                        dst.raw.eq(0),
                        dst.raw_len.eq(0),
                        dst.esc.eq(Escape.FILL),
                    ]
                with m.Case(Kind.VERBATIM):
                    m.d.sync += [
                        dst.sym.eq(fmt.sym_verbatim(r)),
                        dst.raw.eq(src.raw),
                        dst.raw_len.eq(32),
                        dst.esc.eq(Escape.VERBATIM),
                    ]
                with m.Default():
                    m.d.sync += [
                        dst.sym.eq(Mux(in_band, (delta + r)[: symbol_bits(r)], fmt.SYM_OUTLIER)),
                        dst.raw.eq(Mux(in_band, 0, delta.as_unsigned())),
                        dst.raw_len.eq(Mux(in_band, 0, fmt.OUTLIER_BITS)),
                        dst.esc.eq(Mux(in_band, Escape.NONE, Escape.OUTLIER)),
                    ]
        return m


class SymbolStage(wiring.Component):
    """Residual beats to symbol beats, one beat per clock.

    Parameters
    ----------
    lanes : int
        Values per beat, one of ``ceaz_hw.beats.LANE_COUNTS``.
    radius : int
        The alphabet's radius R (``2R + 2`` symbols), fixed at build time.
    ready_copies : int
        How many register copies of ``i.ready`` to provide in :attr:`ready_copies`.

    Members
    -------
    i : ``In(stream.Signature(beat(Residual, lanes)))``
    o : ``Out(stream.Signature(beat(Symbol(radius), lanes)))``
        ``last`` and ``count`` pass through; lanes at or above ``count`` carry don't-care.
    """

    #: Clocks from an accepted input beat to its output beat with the output always ready.
    LATENCY = 3

    def __init__(self, lanes=1, radius=fmt.DEFAULT_RADIUS, *, ready_copies=0):
        self._radius = _check_radius(radius)
        self._in_layout = beat(Residual, lanes)  # checks lanes
        self._out_layout = beat(Symbol(radius), lanes)
        self._lanes = lanes
        self._buffer = PointerBuffer(self._out_layout, ready_copies=ready_copies)
        #: Registers equal to ``i.ready`` in every clock (the buffer's
        #: :attr:`~ceaz_hw.elastic.PointerBuffer.ready_copies`), for a producer far away.
        self.ready_copies = self._buffer.ready_copies
        super().__init__({
            "i": In(stream.Signature(self._in_layout)),
            "o": Out(stream.Signature(self._out_layout)),
        })

    @property
    def lanes(self):
        return self._lanes

    @property
    def radius(self):
        return self._radius

    def elaborate(self, platform):
        m = Module()
        m.submodules.buffer = buffer = self._buffer
        enable = buffer.i.ready
        m.submodules.datapath = datapath = EnableInserter(enable)(
            _SymbolLanes(self._lanes, self._radius))
        m.d.comb += [
            datapath.i.eq(self.i.payload),
            datapath.i_valid.eq(self.i.valid),
            self.i.ready.eq(enable),
            buffer.i.payload.eq(datapath.o),
            buffer.i.valid.eq(datapath.o_valid),
        ]
        wiring.connect(m, buffer.o, wiring.flipped(self.o))
        return m
