"""The packer: coded lanes to W-bit output words, with sync offsets and a trailer per chunk.

What it must produce is fixed by docs/hardware.md ("Packer"): the lanes' fields concatenated
in element order, MSB first, exactly as ``ceaz.packer.pack`` lays them out (the first bit of
the stream is bit 7 of byte 0, byte ``k`` of a word is ``data[8k+7:8k]``), then the sync
offsets (``starts[K::K]`` of the model), then the 32-byte trailer.

Why it is built this way
------------------------
A beat may carry up to ``lanes * (max_code_len + 32)`` bits (768 at 16 lanes) but averages a few
bits per value. One barrel shifter per lane into a wide accumulator would not close timing, so
the beat is first reduced to a single field by a pipelined pairwise merge tree, and only that
field is shifted, once, into a window aligned to the output words:

* ``s1``: the input beat, registered.
* ``s2``: each lane's field left-aligned in ``F = max_code_len + 32`` bits (a small shift per
  lane, which also drops anything above ``len``); lanes at or above ``count`` get length 0.
  The beat's escapes are counted here.
* ``log2(lanes)`` merge levels: ``(a, la), (b, lb) -> (a : b >> la, la + lb)``, left-aligned;
  whole fields take two clocks a level (shifted by ``la`` rounded down to 16, then the rest).
* position stage: the running bit count ``pos`` of the chunk gives the beat's offset in its
  first word (``pos mod W``) and how many words it completes. Sync offsets (``pos`` at the
  start of a beat whose first value index is a non-zero multiple of K) go into a FIFO; the
  chunk's totals for the trailer travel with its last beat.
* two shift stages (coarse, fine) place the field at ``pos mod W`` in a window of ``M`` words.

All of that is gated by one enable, ``~front_valid | room``, where ``room`` is a register
computed a clock ahead from the accumulator's next state. The enable itself is a register per
stage (copies computed a clock ahead), so no single net fans out to the whole front. The
accumulator holds ``D = M + 2`` words and ORs each window in at word ``p`` (the
first word not yet complete), a word-level select instead of a bit-level shift, and emits the
oldest complete word per clock. After a chunk's last beat it refuses input until the
padded payload, the sync offsets and the trailer are out, so each chunk starts on a fresh
word. The output goes through an :class:`~ceaz_hw.elastic.ElasticBuffer`, whose level-only
``i.ready`` keeps ``o.ready`` away from the datapath.

The CRC of the trailer is computed on the payload words as they leave the accumulator, by a
:class:`~ceaz_hw.crc.StreamCRC` that takes whole 8-byte groups (the payload is padded to 64
bits, so no beat ends inside a group).
"""

from __future__ import annotations

from amaranth.hdl import (
    Cat,
    Const,
    DomainRenamer,
    EnableInserter,
    Module,
    Mux,
    Signal,
    unsigned,
)
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ceaz import format as fmt
from ceaz.regmap import TRAILER_MAGIC

from .beats import LANE_COUNTS, Coded, Escape, beat, code_field_bits, coded_field
from .crc import StreamCRC
from .elastic import ElasticBuffer, advance_on
from .pieces import (
    ESCAPE_COUNTS,
    Pieces,
    count_escapes,
    escape_counts,
    geometry,
    lane_field,
    registered,
    used_length,
)
from .pieces import latency as pieces_latency
from .ramfifo import BlockRAMFIFO

__all__ = ["TRAILER_BYTES", "Packer", "output_layout", "word_bits"]

#: Bytes of the chunk trailer before padding to whole words.
TRAILER_BYTES = 32
#: Values per chunk are counted in a u32 (the trailer's ``n``).
_COUNT_BITS = 32


def word_bits(lanes: int) -> int:
    """Output word width W: 16 bits per lane, at least 64."""
    return max(64, 16 * lanes)


def output_layout(width: int) -> data.StructLayout:
    """An output word: ``data`` (byte ``k`` in bits ``8k..8k+7``) and ``last`` (the final word
    of a chunk's trailer)."""
    return data.StructLayout({"data": unsigned(width), "last": 1})


def _bytes_reversed(value, width):
    """Internal words keep the stream MSB-first (stream bit ``t`` at bit ``width-1-t``); on the
    bus byte 0 (stream bits 0..7, first bit in bit 7) is the least significant byte."""
    return Cat(value[width - 8 * (k + 1) : width - 8 * k] for k in range(width // 8))


#: A chunk's totals, carried with its last beat to the trailer.
_Totals = data.StructLayout({
    "n": unsigned(_COUNT_BITS),
    "bits": unsigned(64),
    "outliers": unsigned(32),
    "verbatims": unsigned(32),
    "fills": unsigned(32),
    "syncs": unsigned(32),
})


class _Front(wiring.Component):
    """Input register, merge tree, position stage and window shift; every register advances
    every clock and the parent gates them with one enable. Each stage's registers are in a
    clock domain of their own (``stages``, renamed to ``sync`` by the parent), so that the
    parent can drive each stage's enable from its own copy of the enable register. With
    ``piece_bits``, the merge tree takes a group of pieces (:mod:`.pieces`) per clock instead of
    every lane's field."""

    def __init__(self, lanes, max_code_len, width, piece_bits=None):
        self.lanes, self.field, self.width = lanes, code_field_bits(max_code_len), width
        self.max_code_len, self.piece_bits = max_code_len, piece_bits
        #: Bits per lane the merge tree takes: a whole field, or a piece.
        self.unit = self.field if piece_bits is None else piece_bits
        self.beat_bits = lanes * self.unit
        #: Window words: a field starting anywhere in a word fits.
        self.window_words = -(-(width - 1 + self.beat_bits) // width)
        self.pos_bits = (self.field << _COUNT_BITS).bit_length()
        m_words = self.window_words
        # A merge level's registered steps: whole fields shift in two (see ``_coarse``).
        steps = ("c", "") if piece_bits is None else ("",)
        merges = [f"m{k}{step}" for k in range(1, lanes.bit_length()) for step in steps]
        first = ["s1", "s2"] if piece_bits is None else ["pieces", "g"]
        #: The stages' clock domains, input first.
        self.stages = [*first, *merges, "count", "p", "c", "f"]
        super().__init__({
            "x": In(beat(Coded(max_code_len), lanes)),
            "x_valid": In(1),
            "sync_interval": In(32),
            # A register: the pieces hold their beat (more groups to go), so x is not taken.
            "hold": Out(1),
            # Combinational, from the position stage: the parent gates them with the enable.
            "sync_push": Out(1),
            "sync_offset": Out(32),
            # The last stage, and the valid of the stage before it.
            "valid": Out(1),
            "pre_valid": Out(1),
            "window": Out(m_words * width),  # word 0 (the first) in the top bits
            "words": Out(range(m_words + 1)),  # words this beat completes
            "last": Out(1),
            "totals": Out(_Totals),
        })

    def _fields(self, m):
        """s1 and s2: every lane's field left-aligned; a lane beyond ``count`` is empty."""
        lanes, field = self.lanes, self.field
        x = Signal.like(self.x)
        valid = Signal()
        used = [Signal(range(field + 1), name=f"used{j}") for j in range(lanes)]
        m.d.s1 += [x.eq(self.x), valid.eq(self.x_valid)]
        m.d.s1 += [u.eq(used_length(self.x, j)) for j, u in enumerate(used)]
        vals, lens = [], []
        for j in range(lanes):
            aligned = lane_field(coded_field(x.lanes[j]), used[j], field)
            v, n = Signal(field, name=f"lane{j}_v"), Signal(range(field + 1), name=f"lane{j}_l")
            m.d.s2 += [v.eq(aligned), n.eq(used[j])]
            vals.append(v)
            lens.append(n)
        side = registered(m, {"valid": valid, "last": x.last, "count": x.count}, "s2", "s2")
        side["escapes"] = count_escapes(m, x, lanes, "s2_escapes", "s2")
        return vals, lens, side

    def _groups(self, m):
        """The pieces of each beat, ``lanes`` at a time: group ``g`` is slots ``g lanes`` to
        ``g lanes + lanes - 1``. The beat's count and escapes go with its first group, ``last``
        with its final one, and the pieces hold their beat until that group is out."""
        lanes, bits = self.lanes, self.piece_bits
        pieces = Pieces(lanes, self.max_code_len, bits)
        hold = Signal()
        m.submodules.pieces = DomainRenamer("pieces")(EnableInserter(~hold)(pieces))
        m.d.comb += [pieces.x.eq(self.x), pieces.x_valid.eq(self.x_valid), self.hold.eq(hold)]
        group = Signal(range(pieces.per_field))
        # hold is a register, planned a clock ahead from the beat that arrives next.
        with m.If(hold):
            m.d.g += [group.eq(group + 1), hold.eq(group + 1 != pieces.extra)]
        with m.Else():
            m.d.g += [group.eq(0), hold.eq(pieces.next_valid & (pieces.next_extra != 0))]
        vals = [Signal(bits, name=f"g{i}_v") for i in range(lanes)]
        lens = [Signal(range(bits + 1), name=f"g{i}_l") for i in range(lanes)]
        with m.Switch(group):
            for g in range(pieces.per_field):
                with m.Case(g):
                    for i in range(lanes):
                        piece = pieces.pieces[g * lanes + i]
                        m.d.g += [vals[i].eq(piece.bits), lens[i].eq(piece.len)]
        first = group == 0
        side = registered(m, {"valid": pieces.valid, "first": first,
                               "last": pieces.last & (group == pieces.extra),
                               "count": Mux(first, pieces.count, 0)}, "g", "g")
        escapes = Signal(escape_counts(lanes), name="g_escapes")
        m.d.g += escapes.eq(Mux(first, pieces.escapes.as_value(), 0))
        side["escapes"] = escapes
        return vals, lens, side

    @staticmethod
    def _merge(m, a, placed, shift, length, name, domain):
        """A merge level's output for one pair, registered: ``a`` above ``placed >> shift``
        (``placed`` is the second field below a field as wide as ``a``, maybe partly
        shifted already), and the pair's length."""
        bw = len(a)
        v = Signal(2 * bw, name=f"{name}_v")
        n = Signal(range(2 * bw + 1), name=f"{name}_l")
        m.d[domain] += [v.eq(Cat(Const(0, bw), a) | (placed >> shift)), n.eq(length)]
        return v, n

    @staticmethod
    def _coarse(m, a, la, b, lb, name, domain):
        """A merge's first step: the second field shifted by ``la`` less ``la mod 16``,
        registered with ``a``, ``la mod 16`` and the pair's length, for ``_merge`` to finish.
        A shift of a whole field (48 bits by up to 48) in one clock, spread over the die,
        was the four-lane worst path at d595afa (11.3 ns, nextpnr seed 3)."""
        bw = len(a)
        regs = registered(m, {
            "a": a, "fine": la[:4], "length": la + lb,
            "placed": Cat(Const(0, bw), b) >> Cat(Const(0, 4), la[4:]),
        }, name, domain)
        return regs["a"], regs["placed"], regs["fine"], regs["length"]

    def elaborate(self, platform):
        m = Module()
        width = self.width
        if self.piece_bits is None:
            vals, lens, side = self._fields(m)
        else:
            vals, lens, side = self._groups(m)

        # Merge tree, one registered level per halving; with whole fields, each level's shift
        # in two registered steps (see ``_merge``).
        level, bw = 0, self.unit
        while len(vals) > 1:
            level += 1
            pairs = [(vals[k], lens[k], vals[k + 1], lens[k + 1], f"m{level}_{k // 2}")
                     for k in range(0, len(vals), 2)]
            if self.piece_bits is None:
                steps = [(*self._coarse(m, *pair, f"m{level}c"), pair[-1]) for pair in pairs]
                side = registered(m, side, f"m{level}c", f"m{level}c")
            else:
                steps = [(a, Cat(Const(0, bw), b), la, la + lb, name)
                         for a, la, b, lb, name in pairs]
            merged = [self._merge(m, *step, f"m{level}") for step in steps]
            vals, lens, bw = [v for v, _ in merged], [n for _, n in merged], 2 * bw
            side = registered(m, side, f"m{level}", f"m{level}")
        value, length = vals[0], lens[0]

        # Position stage: the chunk's running counts (registers updated per valid beat).
        log_w = width.bit_length() - 1
        pos = Signal(self.pos_bits)
        n_values = Signal(_COUNT_BITS)
        phase = Signal(32)  # n_values mod K
        esc = {e: getattr(side["escapes"], e.name.lower()) for e in ESCAPE_COUNTS}
        totals = {e: Signal(32, name=f"total_{e.name.lower()}") for e in esc}
        n_syncs = Signal(32)

        offset = pos[:log_w]
        end = Signal(range(width + self.beat_bits))
        m.d.comb += end.eq(offset + length)
        # The last beat also completes its partial word (zero-padded).
        words = Mux(side["last"], (end + width - 1) >> log_w, end >> log_w)
        # phase == 0 and n_values != 0 as registers of their own: two 32-bit comparisons in
        # front of the n_syncs adder were the smoke core's worst path.
        phase_zero = Signal(init=1)
        any_values = Signal()
        # A sync point starts a beat: a beat's later groups are not one.
        sync_here = side["valid"] & side.get("first", 1) & phase_zero & any_values
        m.d.comb += [self.sync_push.eq(sync_here), self.sync_offset.eq(pos[:32])]
        next_phase = phase + side["count"]
        wraps = Signal()
        m.d.comb += wraps.eq(next_phase >= self.sync_interval)
        with m.If(side["valid"]):
            with m.If(side["last"]):
                m.d.count += [pos.eq(0), n_values.eq(0), phase.eq(0), n_syncs.eq(0),
                              phase_zero.eq(1), any_values.eq(0)]
                m.d.count += [t.eq(0) for t in totals.values()]
            with m.Else():
                m.d.count += [
                    pos.eq(pos + length),
                    n_values.eq(n_values + side["count"]),
                    phase.eq(Mux(wraps, 0, next_phase)),
                    # The next phase is 0 if it wraps, or if it is 0 and no value comes: no
                    # 32-bit comparison after the wrap's Mux.
                    phase_zero.eq(wraps | (phase_zero & (side["count"] == 0))),
                    any_values.eq(any_values | (side["count"] != 0)),
                    n_syncs.eq(n_syncs + sync_here),
                ]
                m.d.count += [totals[e].eq(totals[e] + esc[e]) for e in esc]
        chunk = Signal(_Totals)
        m.d.comb += [
            chunk.n.eq(n_values + side["count"]),
            chunk.bits.eq(pos + length),
            chunk.outliers.eq(totals[Escape.OUTLIER] + esc[Escape.OUTLIER]),
            chunk.verbatims.eq(totals[Escape.VERBATIM] + esc[Escape.VERBATIM]),
            chunk.fills.eq(totals[Escape.FILL] + esc[Escape.FILL]),
            chunk.syncs.eq(n_syncs + sync_here),
        ]
        s = registered(m, {"valid": side["valid"], "last": side["last"], "totals": chunk,
                            "words": words, "offset": offset, "value": value}, "p", "p")

        # Window shift in two stages: by a multiple of 16, then by 0..15.
        mw = self.window_words * width
        placed = Cat(Const(0, mw - self.beat_bits), s["value"])
        coarse = s["offset"][4:]
        s = registered(m, {**{k: s[k] for k in ("valid", "last", "totals", "words")},
                            "fine": s["offset"][:4], "window": (placed >> (coarse * 16))[:mw]},
                        "c", "c")
        m.d.comb += self.pre_valid.eq(s["valid"])
        s = registered(m, {**{k: s[k] for k in ("valid", "last", "totals", "words")},
                            "window": (s["window"] >> s["fine"])[:mw]}, "f", "f")

        m.d.comb += [
            self.valid.eq(s["valid"]),
            self.window.eq(s["window"]),
            self.words.eq(s["words"]),
            self.last.eq(s["last"]),
            self.totals.eq(s["totals"]),
        ]
        return m


class _Phase(enum.Enum, shape=2):
    PAYLOAD = 0
    SYNC = 1
    TRAILER = 2


class Packer(wiring.Component):
    """Coded beats to the chunk's bitstream, sync offsets and trailer, in W-bit words.

    Parameters
    ----------
    lanes : int
        Values per beat, one of 1, 2, 4, 8 or 16.
    max_code_len : int
        Longest Huffman code; a lane field holds up to ``max_code_len + 32`` bits.
    max_sync : int
        Sync offsets one chunk may hold (the FIFO that keeps them until the payload is out).
        A chunk with more is not supported (the top level refuses such a configuration).
    piece_bits : int or None
        None: the merge tree takes every lane's whole field per clock (``lanes x (max_code_len
        + 32)`` bits), so a beat passes in one clock whatever its fields. V: it takes
        ``lanes`` pieces of V bits per clock (:mod:`.pieces`), a tree and window about a third
        as wide at V = 16; a beat whose fields need ``p`` pieces passes in
        ``ceil(p / lanes)`` clocks (one if no field exceeds V bits, as no code does at
        ``max_code_len <= V``; each escape adds pieces). For wide builds short of logic.

    Members
    -------
    i : ``In(stream.Signature(beat(Coded(max_code_len), lanes)))``
        A field of ``len`` bits per lane, sent MSB first: the code, then the raw field whose
        width ``esc`` gives (``ceaz_hw.beats.Coded``); bits above either part and lanes at or
        above ``count`` are ignored. ``esc`` is counted for the trailer.
        One beat per clock while the beats average at most W bits (with ``piece_bits``:
        while a beat's fields need at most ``lanes`` pieces).
    o : ``Out(stream.Signature(output_layout(W)))``
        Per chunk: ``ceil(payload_bits / W)`` payload words (zero-padded), the sync offsets
        (u32 little-endian, ``W / 32`` per word, zero-padded), the 32-byte trailer
        (zero-padded to whole words) with ``last`` on its final word.
    sync_interval : ``In(unsigned(32))``
        K, a non-zero multiple of ``lanes``; held while a chunk passes the input.

    Latency: a beat that completes a word shows it on ``o`` :meth:`latency` clocks after the
    beat is accepted (output ready). A chunk's tail (its last partial word, the sync offsets
    at one u32 per clock and the trailer) holds the next chunk's input for a few clocks.
    """

    def latency(self) -> int:
        """Input register, lane alignment (or the pieces and their group), merge levels,
        position, two shift stages, the accumulator and the output buffer."""
        lanes, bits = self.lanes, self.piece_bits
        front = 2 if bits is None else pieces_latency(lanes, self.max_code_len, bits) + 1
        merges = (lanes.bit_length() - 1) * (2 if bits is None else 1)
        return front + merges + 3 + 2

    def __init__(self, lanes=1, max_code_len=fmt.MAX_CODE_LEN, max_sync=1024, piece_bits=None):
        if lanes not in LANE_COUNTS:
            raise ValueError(f"lanes must be one of {LANE_COUNTS}, not {lanes!r}")
        if not isinstance(max_code_len, int) or not 1 <= max_code_len <= 32:
            raise ValueError(f"max_code_len must be an int in 1..32, not {max_code_len!r}")
        if not isinstance(max_sync, int) or max_sync < 1:
            raise ValueError(f"max_sync must be a positive int, not {max_sync!r}")
        self.lanes, self.max_code_len, self.max_sync = lanes, max_code_len, max_sync
        self.piece_bits = piece_bits
        if piece_bits is not None:
            geometry(lanes, max_code_len, piece_bits)  # checks them
        self.width = word_bits(lanes)
        super().__init__({
            "i": In(stream.Signature(beat(Coded(max_code_len), lanes))),
            "o": Out(stream.Signature(output_layout(self.width))),
            "sync_interval": In(unsigned(32)),
        })

    #: Front registers after the position stage; the next chunk's beats can push this many
    #: sync offsets while the current chunk's are still in the FIFO.
    _PAST_POSITION = 3

    @staticmethod
    def _merge(m, a, la, b, lb, name, bw, domain):
        """``(a, la), (b, lb) -> (a : b >> la, la + lb)``, registered; ``b`` may come
        pre-shifted (``_coarse``), and then ``la`` is only the rest of its shift."""
        v = Signal(2 * bw, name=f"{name}_v")
        n = Signal(range(2 * bw + 1), name=f"{name}_l")
        m.d[domain] += [v.eq(Cat(Const(0, len(b) - bw), a) | (b >> la)), n.eq(la + lb)]
        return v, n

    @staticmethod
    def _coarse(m, b, la, lb, name, domain):
        """The first step of a merge's shift: ``b`` placed below a ``bw``-bit ``a``, shifted
        by ``la`` less ``la mod 16``, registered with ``la mod 16`` and the pair's length, for
        ``_merge`` to finish. A shift of a whole field (48 bits by up to 48) in one clock,
        spread over the die, was the four-lane worst path at d595afa (11.3 ns, seed 3)."""
        bw = len(b)
        shifted = Signal(2 * bw, name=f"{name}_b")
        fine = Signal(4, name=f"{name}_fine")
        total = Signal(range(2 * bw + 1), name=f"{name}_sum")
        m.d[domain] += [shifted.eq(Cat(Const(0, bw), b) >> Cat(Const(0, 4), la[4:])),
                        fine.eq(la[:4]), total.eq(la + lb)]
        return shifted, fine, total, Const(0, 1)

    def elaborate(self, platform):
        m = Module()
        width = self.width
        front = _Front(self.lanes, self.max_code_len, width, self.piece_bits)
        m_words = front.window_words
        depth = m_words + 2  # accumulator words

        m.submodules.out_buffer = out_buf = ElasticBuffer(output_layout(width))
        # The sync offsets wait in a block RAM FIFO whose read data go straight into a register
        # (the RAM's output register after bitstreams/outreg.py): a select right after the
        # RAM's clock-to-out was the full-size worst path. Writes do not look at its ready:
        # it holds max_sync offsets of one chunk and the next chunk's first few.
        syncs = BlockRAMFIFO(32, max(2, self.max_sync + self._PAST_POSITION - 4))
        assert syncs.capacity >= self.max_sync + self._PAST_POSITION
        m.submodules.syncs = syncs
        m.submodules.crc = crc = StreamCRC(width // 8, granule=8)  # the payload is 8-byte padded

        out_ready = out_buf.i.ready  # level-only
        out_valid = Signal()
        out_data = Signal(width)
        out_last = Signal()
        m.d.comb += [
            out_buf.i.valid.eq(out_valid),
            out_buf.i.payload.data.eq(out_data),
            out_buf.i.payload.last.eq(out_last),
        ]
        wiring.connect(m, out_buf.o, wiring.flipped(self.o))

        # -- accumulator ---------------------------------------------------------------------
        phase = Signal(_Phase)
        buf = [Signal(width, name=f"acc{j}") for j in range(depth)]
        complete = Signal(range(depth + 1))  # p: complete words at the head of `buf`
        ending = Signal()  # the chunk's last beat is in: drain, then sync offsets and trailer
        # PAYLOAD and not ending, a register of its own: decoded from the phase, it was the
        # four-lane worst path with seed 2 at 50d6904 (the phase into the enable copies through
        # `room`, five LUTs and 10.1 ns).
        admitting = Signal(init=1)
        totals = Signal(_Totals)
        no_payload = Signal(init=1)  # totals.bits == 0, registered with totals: it gates out_valid
        last_groups = Signal(range(width // 64 + 1))  # 64-bit groups in the final word

        pop = Signal()
        accept = Signal()
        base = Signal(range(depth + 1))
        # `room`: the accumulator takes a beat this clock (PAYLOAD, not ending, and room for a
        # whole window judged before this clock's pop). It is a register, computed a clock
        # ahead from the next state below. Judging room before the pop holds a beat back a
        # clock only when three complete words wait, rare at a few bits a value.
        room = Signal(init=1)
        room_next = Signal()
        m.d.sync += room.eq(room_next)
        m.d.comb += [
            pop.eq((phase == _Phase.PAYLOAD) & (complete != 0) & out_ready),
            base.eq(complete - pop),
            accept.eq(front.valid & room),
        ]
        # The front's enable is ~front.valid | room. It reaches every front register, and as
        # one net it was the four-lane core's worst path (12.1 ns, 10.9 of it routing, at
        # 6d486b4). So each stage gets its own copy, a register that holds the enable: its next
        # value, ~(front.valid's next value) | room_next, comes from the registers it stands
        # for. Each copy reads its own output, so no synthesis tool sees them as one register.
        copies = {}
        for stage in front.stages:
            copy = Signal(init=1, name=f"enable_{stage}", attrs={"keep": 1})
            m.d.sync += copy.eq(~Mux(copy, front.pre_valid, front.valid) | room_next)
            copies[stage] = copy
        m.submodules.front = advance_on(front, copies)
        enable = copies[front.stages[0]]  # by the input
        m.d.comb += [
            front.x.eq(self.i.payload),
            front.x_valid.eq(self.i.valid),
            front.sync_interval.eq(self.sync_interval),
            self.i.ready.eq(enable & ~front.hold),
            syncs.i.valid.eq(front.sync_push & copies["count"]),
            syncs.i.payload.eq(front.sync_offset),
        ]

        incoming = [Signal(width, name=f"in{j}") for j in range(depth)]
        with m.If(accept):
            with m.Switch(base):
                for b in range(depth - m_words + 1):
                    with m.Case(b):
                        for k in range(m_words):
                            top = (m_words - k) * width
                            m.d.comb += incoming[b + k].eq(front.window[top - width : top])
        for j in range(depth):
            after_pop = Mux(pop, buf[j + 1] if j + 1 < depth else 0, buf[j])
            m.d.sync += buf[j].eq(after_pop | incoming[j])
        arriving = Mux(accept, front.words, 0)  # words the window adds this clock
        next_complete = Signal(range(depth + 1))
        m.d.comb += next_complete.eq(base + arriving)
        m.d.sync += complete.eq(next_complete)
        # `complete <= k` for the few k that `fits` below asks about, registered beside
        # `complete`: compared there, the sum and comparison became a carry chain that was the
        # two-lane worst path at 1f515c6 (10.1 ns into the enable copies).
        slack = depth - m_words  # complete words a whole window leaves room for
        at_most = Signal(slack + 2, init=(1 << (slack + 2)) - 1)  # bit k: complete <= k
        m.d.sync += at_most.eq(Cat(next_complete <= k for k in range(slack + 2)))

        with m.If(accept & front.last):
            bits_in_final = (front.totals.bits - 1)[: width.bit_length() - 1]  # mod W
            m.d.sync += [
                admitting.eq(0),
                totals.eq(front.totals),
                no_payload.eq(front.totals.bits == 0),
                last_groups.eq((bits_in_final >> 6) + 1),
            ]

        # CRC of the payload words (byte 0 first, as on the bus), ended by an empty beat.
        final_word = ending & (complete == 1)
        # to_trailer (ending, all words out: ending holds only in PAYLOAD) is a register,
        # computed a clock ahead from the next ending and complete. Decoded from `complete`, it
        # was the two-lane worst path with seed 2 at a59b6df (10.4 ns, through three LUTs and
        # across the die into the sync phase's enables).
        to_trailer = Signal()
        ending_next = Mux(accept & front.last, 1, ending & ~to_trailer)
        m.d.sync += [
            ending.eq(ending_next),
            to_trailer.eq(ending_next & (next_complete == 0)),
        ]
        m.d.comb += [
            crc.i.valid.eq(pop | to_trailer),
            crc.i.payload.data.eq(_bytes_reversed(buf[0], width)),
            crc.i.payload.n_bytes.eq(Mux(to_trailer, 0,
                                         Mux(final_word, last_groups * 8, width // 8))),
            crc.i.payload.last.eq(to_trailer),
        ]

        # -- sync offsets and trailer -------------------------------------------------------
        per_word = width // 32
        sync_left = Signal(32)
        # sync_left == 0 as a register of its own: the 32-bit comparison sat in front of the
        # staging word's enables.
        sync_none = Signal(init=1)
        gathered = Signal(range(per_word + 1))
        # Whether the sync phase takes an offset the FIFO holds: SYNC, offsets left and room in
        # the staging word, a register kept beside those three. Decoded from them, it enabled
        # sync_left, the FIFO's read and the staging word, and with seed 2 at d796747 that
        # cone crossed the die twice (the four-lane worst path, 10.1 ns).
        pulling = Signal()
        staging = Signal(width)
        trailer_words = -(-TRAILER_BYTES * 8 // width)
        trailer_index = Signal(range(trailer_words + 1))  # at least one bit
        trailer = Cat(
            Const(TRAILER_MAGIC, 32), totals.n, totals.bits,
            Mux(no_payload, 0, crc.crc),  # an empty payload's CRC is 0
            totals.outliers, totals.verbatims, totals.fills,
        )
        trailer = Cat(trailer, Const(0, trailer_words * width - len(trailer)))
        emit_sync = (gathered == per_word) | (sync_none & (gathered != 0))

        with m.Switch(phase):
            with m.Case(_Phase.PAYLOAD):
                m.d.comb += [
                    out_valid.eq(complete != 0),
                    out_data.eq(_bytes_reversed(buf[0], width)),
                ]
                with m.If(to_trailer):
                    m.d.sync += [
                        phase.eq(_Phase.SYNC),
                        sync_left.eq(totals.syncs),
                        sync_none.eq(totals.syncs == 0),
                        pulling.eq(totals.syncs != 0),  # per_word >= 2: gathered 0 has room
                        gathered.eq(0),
                        staging.eq(0),
                    ]
            with m.Case(_Phase.SYNC):
                m.d.comb += [out_valid.eq(emit_sync), out_data.eq(staging)]
                with m.If(emit_sync):
                    with m.If(out_ready):
                        m.d.sync += [gathered.eq(0), staging.eq(0), pulling.eq(~sync_none)]
                with m.Elif(sync_none):
                    m.d.sync += [phase.eq(_Phase.TRAILER), trailer_index.eq(0)]
            with m.Case(_Phase.TRAILER):
                final = trailer_index == trailer_words - 1
                m.d.comb += [
                    out_valid.eq(crc.crc_valid | no_payload),
                    out_last.eq(final),
                ]
                with m.Switch(trailer_index):
                    for k in range(trailer_words):
                        with m.Case(k):
                            m.d.comb += out_data.eq(trailer[k * width : (k + 1) * width])
                with m.If(out_valid & out_ready):
                    m.d.sync += trailer_index.eq(trailer_index + 1)
                    with m.If(final):
                        m.d.sync += [phase.eq(_Phase.PAYLOAD), admitting.eq(1)]
        # (pulling holds only in SYNC, and never with emit_sync)
        m.d.comb += syncs.o.ready.eq(pulling)
        with m.If(pulling & syncs.o.valid):
            m.d.sync += [sync_left.eq(sync_left - 1), sync_none.eq(sync_left == 1),
                         gathered.eq(gathered + 1),
                         pulling.eq((sync_left != 1) & (gathered + 1 != per_word))]
            with m.Switch(gathered):
                for k in range(per_word):
                    with m.Case(k):
                        m.d.sync += staging[32 * k : 32 * k + 32].eq(syncs.o.payload)
        # The next clock's `room`, from this clock's `admitting` and the next complete (ending
        # is set by a last beat; to_trailer needs ending, so it is never in the way).
        # After the trailer's final word the accumulator thus opens a clock later than it
        # could: one clock a chunk. From the trailer's handshake (the output buffer's level,
        # the CRC's valid, the word index) through this logic into the enable copies was the
        # four-lane worst path at 4ae8ef2 (11.3 ns).
        # Whether a window fits is computed from registers for each outcome of this clock's
        # pop and accept, which then only select: the pop comes from the output buffer's
        # level, and through the subtraction, the addition and the comparison it was a smoke
        # core's worst path; the accept through the same chain into the enable copies was the
        # two-lane worst path at 0497928 (10.6 ns).
        # A window fits when complete + words + m_words <= depth + popped, that is when
        # complete <= slack + popped - words: a select of the registered `at_most` bits. (As
        # a Switch: written as a variable bit select, Yosys 0.70's ABC9 died on the two-lane
        # core at 59bace6, every time.)
        def fits_taking_after(popped):
            fit = Signal(name=f"fits_taking{popped}")
            with m.Switch(front.words):
                for w in range(min(slack + popped, m_words) + 1):
                    with m.Case(w):
                        m.d.comb += fit.eq(at_most[slack + popped - w])
            return fit

        fits_taking = Mux(pop, fits_taking_after(1), fits_taking_after(0))
        fits_idle = Mux(pop, at_most[slack + 1], at_most[slack])
        # The next room for either outcome of this clock's accept, so that `room` (through
        # accept) meets only the final select. With `accept & front.last` inside, the path ran
        # from `room` to the accumulator's accept, across to the front's `last` and back into
        # the enable copies: the four-lane worst path at b9d87e6 with seed 2 (10.2 ns, 7.7 of
        # it routing). `keep` holds the two as nets, so the select is not folded into them.
        room_taking = Signal(attrs={"keep": 1})
        room_idle = Signal(attrs={"keep": 1})
        m.d.comb += [
            room_taking.eq(admitting & ~front.last & fits_taking),
            room_idle.eq(admitting & fits_idle),
            room_next.eq(Mux(front.valid & room, room_taking, room_idle)),
        ]
        return m
