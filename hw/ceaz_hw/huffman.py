"""The Huffman lanes: every lane looks up its symbol's canonical code and length and puts the
raw field under it (docs/format.md, section 7; docs/hardware.md, "Huffman lanes").

Per lane and value: ``code = code[sym]``, ``raw`` and ``len = L[sym] + raw_len``, the field
being exactly ``ceaz.huffman.canonical_codes(lengths)[sym]`` followed by the raw field of
``ceaz.chunk.chunk_symbols`` (``ceaz_hw.beats.Coded``). Lanes at or above ``count`` give
``len = 0`` and escape NONE, so nothing downstream needs ``count`` to ignore them.

Codebook banks
--------------
Every lane has its own copy of the codebook RAM, so N lookups per clock need no multi-port
memory: ``2 x 2R`` entries of ``code | length << max_code_len``, bank ``b`` of symbol ``s <
2R`` at address ``b 2R + s``. The two escape symbols ``2R`` (verbatim) and ``2R + 1`` (fill)
live in registers beside it, one pair per bank shared by all lanes: at the default R = 512
the RAM is then 2048 entries, which block RAMs hold side by side (2048 x 9 each) instead of
one after another, so no select follows their slow outputs. One bank is *active* (read by the
lookups), the other is *next* (written by the host through ``cb_*``; all copies are written
together).

``cb_commit`` sets ``cb_pending``. The first beat of a chunk (the first beat after reset or
after a beat with ``last``) that is taken into the lookup stage while ``cb_pending`` is set
reads the next bank and swaps the banks in the same clock, clearing ``cb_pending``; beats
taken earlier have read their codes already. A commit therefore applies to the first chunk
whose first beat arrives at least one clock after it, also when no chunk is in flight. A write
while ``cb_pending`` is set would overwrite the committed book: it is dropped and
``cb_busy_error`` pulses in the same clock. Writes and lookups never touch the same bank in
the same clock (a write needs ``cb_pending`` low, a lookup reads the next bank only when it is
high), so no read-during-write behaviour of the RAM is relied on.

Pipeline
--------
Stage 1 is the RAM's own address register (a synchronous read port, gated by the pipeline
enable) beside registers for the escape symbol's entry (read from its bank in the same clock
as the RAM), the raw field, escape, ``last``, ``count`` and valid; stage 2 registers the read
data as it is (block RAM output is slow, so nothing follows it in the same clock) and the
beat beside it; stage 3 picks the RAM's or the escape's entry and forms ``len``;
a two-entry :class:`~ceaz_hw.elastic.ElasticBuffer` follows, whose ``i.ready`` is the enable
of every pipeline register and of the read ports.
"""

from __future__ import annotations

from amaranth.hdl import EnableInserter, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ceaz import format as fmt

from .beats import Coded, Escape, Symbol, beat, symbol_bits
from .elastic import ElasticBuffer
from .symbols import _check_radius

__all__ = ["HuffmanLanes", "LENGTH_BITS"]

#: Width of a code length in a codebook entry (the format's; `ceaz.huffman.entry_words`).
LENGTH_BITS = fmt.CODE_LENGTH_BITS


def _entry_layout(max_code_len):
    return data.StructLayout({"code": max_code_len, "length": LENGTH_BITS})


class _Combine(wiring.Component):
    """Stage 3 for all lanes: the code, the raw field and ``len``, invalid lanes with length 0.
    Every register advances every clock; the parent gates it with an enable."""

    def __init__(self, lanes, radius, max_code_len):
        self._lanes, self._max_code_len = lanes, max_code_len
        entry = _entry_layout(max_code_len)
        super().__init__({
            "entry": In(data.ArrayLayout(entry, lanes)),  # the RAM's read data (stage 2)
            "esc_entry": In(data.ArrayLayout(entry, lanes)),  # the escape's entry (stage 2)
            "s1": In(beat(Symbol(radius), lanes)),  # stage 2: the beat, sym unused
            "s1_valid": In(1),
            "o": Out(beat(Coded(max_code_len), lanes)),
            "o_valid": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        s1 = self.s1
        m.d.sync += [
            self.o.last.eq(s1.last),
            self.o.count.eq(s1.count),
            self.o_valid.eq(self.s1_valid),
        ]
        for lane in range(self._lanes):
            src, dst = s1.lanes[lane], self.o.lanes[lane]
            from_regs = (src.esc == Escape.VERBATIM) | (src.esc == Escape.FILL)
            entry = Signal.like(self.entry[lane], name=f"entry{lane}")
            m.d.comb += entry.eq(Mux(from_regs, self.esc_entry[lane], self.entry[lane]))
            # The code and the raw field go on side by side (ceaz_hw.beats.Coded).
            used = lane < s1.count
            m.d.sync += [
                dst.code.eq(entry.code),
                dst.raw.eq(src.raw),
                dst.len.eq(Mux(used, entry.length + src.raw_len, 0)),
                dst.esc.eq(Mux(used, src.esc, Escape.NONE)),
            ]
        return m


class HuffmanLanes(wiring.Component):
    """Symbol beats to coded beats through per-lane, double-buffered codebook RAMs.

    Parameters
    ----------
    lanes : int
        Values per beat, one of ``ceaz_hw.beats.LANE_COUNTS``.
    radius : int
        The alphabet's radius R (``2R + 2`` symbols), fixed at build time.
    max_code_len : int
        Longest code, 1..16 (``format.MAX_CODE_LEN``).

    Members
    -------
    i : ``In(stream.Signature(beat(Symbol(radius), lanes)))``
    o : ``Out(stream.Signature(beat(Coded(max_code_len), lanes)))``
    cb_addr : ``In(symbol_bits(radius))``
        Symbol of the entry ``cb_we`` writes; addresses ``>= 2R + 2`` are ignored.
    cb_data : ``In(max_code_len + 5)``
        The entry: code in the low ``max_code_len`` bits, length above.
    cb_we : ``In(1)``
        Writes the next bank, one entry per clock it is high (unless ``cb_pending``).
    cb_commit : ``In(1)``
        A pulse: the next bank becomes active at the next chunk's first beat. It must come at
        least a clock after the last ``cb_we`` (a write reaches the book a clock late).
    cb_pending : ``Out(1)``
        A commit waits for a chunk's first beat.
    cb_busy_error : ``Out(1)``
        Pulses in the clock of a write that was dropped because a commit was pending.
    active_bank : ``Out(1)``
        The bank the lookups read (for debugging).
    """

    #: Clocks from an accepted input beat to its output beat with the output always ready.
    LATENCY = 4

    def __init__(self, lanes=1, radius=fmt.DEFAULT_RADIUS, max_code_len=fmt.MAX_CODE_LEN):
        self._radius = _check_radius(radius)
        if not (isinstance(max_code_len, int) and 1 <= max_code_len <= 16):
            raise ValueError(f"max_code_len must be an integer in [1, 16], not {max_code_len!r}")
        n = fmt.n_symbols(radius)
        if n > 1 << max_code_len:
            raise ValueError(f"{n} symbols need codes longer than max_code_len={max_code_len}")
        self._in_layout = beat(Symbol(radius), lanes)  # checks lanes
        self._out_layout = beat(Coded(max_code_len), lanes)
        self._lanes, self._max_code_len = lanes, max_code_len
        super().__init__({
            "i": In(stream.Signature(self._in_layout)),
            "o": Out(stream.Signature(self._out_layout)),
            "cb_addr": In(symbol_bits(radius)),
            "cb_data": In(max_code_len + LENGTH_BITS),
            "cb_we": In(1),
            "cb_commit": In(1),
            "cb_pending": Out(1),
            "cb_busy_error": Out(1),
            "active_bank": Out(1),
        })

    @property
    def lanes(self):
        return self._lanes

    @property
    def radius(self):
        return self._radius

    @property
    def max_code_len(self):
        return self._max_code_len

    def elaborate(self, platform):
        m = Module()

        n = fmt.n_symbols(self._radius)
        entry = _entry_layout(self._max_code_len)
        m.submodules.buffer = buffer = ElasticBuffer(self._out_layout)
        enable = buffer.i.ready
        take = self.i.valid & enable

        # -- bank control (not gated: commits and writes arrive during stalls too) ----------
        first = Signal(init=1)  # the next beat taken is the first of a chunk
        pending = Signal()
        active = Signal()
        swap = take & first & pending
        with m.If(take):
            m.d.sync += first.eq(self.i.payload.last)
        with m.If(swap):
            m.d.sync += [active.eq(~active), pending.eq(0)]
        with m.If(self.cb_commit):
            m.d.sync += pending.eq(1)
        write = self.cb_we & ~pending & (self.cb_addr < n)
        m.d.comb += [
            self.cb_pending.eq(pending),
            self.cb_busy_error.eq(self.cb_we & pending),
            self.active_bank.eq(active),
        ]
        # The bank the lookup reads: the next one at a chunk's first beat while a commit waits.
        # From registers only, not from ``take``: a clock without a take discards its read,
        # and valid (through the histogram's ready) is late.
        read_bank = active ^ (first & pending)
        in_ram = 2 * self._radius  # symbols below the escapes
        write_base = Mux(active, 0, in_ram)  # the next bank

        # The RAMs' writes come from registers, a clock late: the select between the host's
        # and the builder's writes, the range checks and the bank's base in front of the
        # RAMs' write ports, routed across the die, were the four-lane worst path at
        # a9dff1d with classic ABC (11.3 ns, 5.1 of it routing to a block RAM). A lookup
        # cannot meet a late write: the bank swaps only after a commit, which comes at
        # least a clock after the last write.
        ram_addr = Signal(range(2 * in_ram), name="cb_ram_addr")
        ram_data = Signal(entry, name="cb_ram_data")
        ram_we = Signal(name="cb_ram_we")
        m.d.sync += [ram_addr.eq(write_base + self.cb_addr), ram_data.eq(self.cb_data),
                     ram_we.eq(write & (self.cb_addr < in_ram))]

        # The escapes' entries, [bank][0: verbatim, 1: fill], written like the RAM: a clock
        # late, from registers. The host's and builder's select and the address comparisons
        # in front of these registers' enables were the four-lane worst path at 3796a0d
        # (seed 1, 10.1 ns). ``active`` is the same a clock later: a write needs ``pending``
        # low, so no swap ends its clock.
        esc_we = [Signal(name=f"cb_esc_we{k}") for k in range(2)]
        m.d.sync += [esc_we[k].eq(write & (self.cb_addr == in_ram + k)) for k in range(2)]
        escapes = [[Signal(entry, name=f"esc_entry{b}_{k}") for k in range(2)]
                   for b in range(2)]
        for b in range(2):
            for k in range(2):
                with m.If(esc_we[k] & (active != b)):
                    m.d.sync += escapes[b][k].eq(ram_data)

        # -- stage 1: one RAM per lane, its address register is the pipeline register ------
        entries = Signal(data.ArrayLayout(entry, self._lanes))
        esc_entries = Signal(data.ArrayLayout(entry, self._lanes))
        for lane in range(self._lanes):
            # No lookup meets a write (see the module docstring), so yosys need not emulate
            # the old-data read: without its bypass the RAM output reaches only ``entries2``.
            mem = Memory(shape=entry, depth=2 * in_ram, init=[], attrs={"no_rw_check": 1})
            m.submodules[f"book{lane}"] = mem
            wp = mem.write_port()
            rp = mem.read_port(domain="sync")
            sym = self.i.payload.lanes[lane].sym
            m.d.comb += [
                wp.addr.eq(ram_addr),
                wp.data.eq(ram_data),
                wp.en.eq(ram_we),
                # An escape's address is out of range or another symbol's: stage 3 ignores
                # its data.
                rp.addr.eq(Mux(read_bank, in_ram + sym, sym)),
                rp.en.eq(enable),
                entries[lane].eq(rp.data),
            ]
            # Read in the lookup's clock, as the RAM is: a write into this bank after the swap
            # cannot reach beats already looked up.
            with m.If(enable):
                m.d.sync += esc_entries[lane].eq(
                    Mux(read_bank, Mux(sym[0], escapes[1][1], escapes[1][0]),
                        Mux(sym[0], escapes[0][1], escapes[0][0])))

        s1 = Signal(self._in_layout)
        s1_valid = Signal()
        with m.If(enable):
            m.d.sync += [s1.eq(self.i.payload), s1_valid.eq(self.i.valid)]

        # -- stage 2: the read data registered -----------------------------------------------
        # No reset: the synthesis flow makes this the RAMs' output register (outreg.py).
        entries2 = Signal.like(entries, reset_less=True)
        esc_entries2 = Signal.like(esc_entries)
        s2 = Signal.like(s1)
        s2_valid = Signal()
        with m.If(enable):
            m.d.sync += [entries2.eq(entries), esc_entries2.eq(esc_entries), s2.eq(s1),
                         s2_valid.eq(s1_valid)]

        # -- stage 3 and the output buffer ---------------------------------------------------
        m.submodules.combine = combine = EnableInserter(enable)(
            _Combine(self._lanes, self._radius, self._max_code_len))
        m.d.comb += [
            combine.entry.eq(entries2),
            combine.esc_entry.eq(esc_entries2),
            combine.s1.eq(s2),
            combine.s1_valid.eq(s2_valid),
            self.i.ready.eq(enable),
            buffer.i.payload.eq(combine.o),
            buffer.i.valid.eq(combine.o_valid),
        ]
        wiring.connect(m, buffer.o, wiring.flipped(self.o))
        return m
