"""A beat's coded fields cut into pieces of at most V bits and compacted, for a narrow packer
front.

Why: a coded field is up to ``max_code_len + 32`` bits (48), because an escape carries its raw
bits after its code, yet a beat averages a few bits a value. A packer front as wide as the
widest beat (``lanes x 48`` bits) was most of the 16-lane packer's logic. Cut into pieces of at
most ``V >= max_code_len`` bits, a field without raw bits is one piece (its code) and an escape
with raw bits ``1 + R`` (``R = ceil(32 / V)``), so the pieces of a beat without escapes form
one *group* of ``lanes`` pieces, and the packer's merge tree and window need only be
``lanes x V`` bits wide. A beat with more pieces passes as two or three groups, on as many
clocks.

Piece 0 of a field is its code (``len`` minus the raw field's width, which the escape class
fixes: ``ceaz_hw.beats.raw_field_bits``), piece ``k = 1 .. R`` the raw field's bits ``(k - 1)V``
to ``kV - 1`` in stream order, each left-aligned and zero below its length; raw pieces exist
only for an escape with raw bits (one of them may be empty). Concatenating the pieces in order
gives the fields in order, so the packer's output does not change. The cuts fall where the
field's parts meet, not every ``V`` bits of the field: no piece needs the field shifted by its
length (a 48-bit shifter a lane was a third of this unit at 16 lanes), only the code by its own.
Stages (every register advances on the parent's enable):

* ``s1``: the input beat, each lane's code length and its *spare* slots: ``P - pieces``
  (``P = 1 + R``), so 0 or ``R``.
* ``s2``: each lane's pieces, left-aligned, in slots ``P j .. P j + P - 1``, and each lane's
  displacement ``D_j``, the spare slots of the lanes before it (a parallel prefix sum).
* compaction: every piece moves ``D_j`` slots towards slot 0, one bit of ``D_j`` per step
  (least significant first), two steps per registered stage; bits that are zero in every
  multiple of ``R`` take no step. Displacements never decrease from one piece to the next and
  the targets are distinct, so no two pieces ever meet in a slot (a monotone route through a
  logarithmic shifter).

Output: the slots (pieces ``0 .. T - 1`` of the beat in slots ``0 .. T - 1``, empty slots
after), ``extra`` = groups after the first (``(T - 1) // lanes``), and the beat's ``last``,
``count`` and escape counts. ``next_valid`` and ``next_extra`` are those of the beat the last
stage takes when it next advances, so the parent can plan a clock ahead.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ceaz import format as fmt

from .beats import LANE_COUNTS, RAW_BITS, Coded, Escape, beat, raw_field_bits

__all__ = ["ESCAPE_COUNTS", "Pieces", "count_escapes", "escape_counts", "geometry", "lane_field",
           "latency", "registered", "used_length"]

#: The escape classes a chunk's trailer counts, in the order of its fields.
ESCAPE_COUNTS = (Escape.OUTLIER, Escape.VERBATIM, Escape.FILL)


def escape_counts(lanes: int) -> data.StructLayout:
    """A beat's count of each escape class (lanes at or above ``count`` not counted)."""
    return data.StructLayout({e.name.lower(): range(lanes + 1) for e in ESCAPE_COUNTS})


def count_escapes(m: Module, x, lanes: int, name: str, domain: str = "sync"):
    """Registered escape counts of beat ``x`` (a ``beat(Coded, lanes)`` value)."""
    counts = Signal(escape_counts(lanes), name=name)
    for e in ESCAPE_COUNTS:
        used = [(j < x.count) & (x.lanes[j].esc == e) for j in range(lanes)]
        m.d[domain] += getattr(counts, e.name.lower()).eq(sum(used))
    return counts


def used_length(x, j: int):
    """Lane ``j``'s field length in beat ``x``; a lane at or above ``count`` is empty."""
    return Mux(j < x.count, x.lanes[j].len, 0)


def lane_field(bits, length, field: int):
    """A lane's ``bits`` as a field left-aligned in ``field`` bits (zero below ``length``,
    whatever ``bits`` holds above it). Hand-written for the packer's bit-exact concatenation,
    whole fields or pieces alike. The callers register ``length`` (:func:`used_length`) a
    stage ahead: with the count comparison in front of the shift, it was the four-lane core's
    worst path at 52761dd (10.2 ns)."""
    return (Cat(Const(0, field), bits) >> length)[:field]


def registered(m: Module, values: dict, stage: str, domain: str = "sync") -> dict:
    """Registered copies of ``values`` (name -> value), named after the stage."""
    out = {}
    for name, value in values.items():
        reg = Signal(value.shape(), name=f"{stage}_{name}")
        m.d[domain] += reg.eq(value)
        out[name] = reg
    return out


def geometry(lanes: int, max_code_len: int, piece_bits: int) -> tuple[int, range]:
    """(pieces of the longest field, the compaction's steps: the displacement bits that can
    be set), after checking the arguments."""
    if lanes not in LANE_COUNTS or lanes < 2:
        raise ValueError(f"lanes must be one of {LANE_COUNTS[1:]}, not {lanes!r}")
    if not isinstance(piece_bits, int) or not max_code_len <= piece_bits < RAW_BITS:
        raise ValueError(f"piece_bits must be an int in {max_code_len}..{RAW_BITS - 1} (a "
                         f"code in one piece, raw bits in two or more), not {piece_bits!r}")
    raw_pieces = -(-RAW_BITS // piece_bits)
    # Displacements are multiples of raw_pieces: its trailing zero bits are never set.
    low = (raw_pieces & -raw_pieces).bit_length() - 1
    return 1 + raw_pieces, range(low, (raw_pieces * (lanes - 1)).bit_length())


def latency(lanes: int, max_code_len: int, piece_bits: int) -> int:
    """Registered stages from the input to the output: s1, s2 and the compaction's."""
    return 2 + -(-len(geometry(lanes, max_code_len, piece_bits)[1]) // 2)


class Pieces(wiring.Component):
    """Fields of a beat to compacted pieces of ``piece_bits`` bits (see the module docstring).

    Parameters
    ----------
    lanes : int
        Values per beat: 2, 4, 8 or 16.
    max_code_len : int
        Longest Huffman code; a field holds up to ``max_code_len + 32`` bits.
    piece_bits : int
        V, at least ``max_code_len`` (a code is one piece) and below 32 (raw bits are two
        pieces or more).
    """

    def __init__(self, lanes: int, max_code_len: int, piece_bits: int):
        self.lanes, self.max_code_len, self.piece_bits = lanes, max_code_len, piece_bits
        #: Pieces of the longest field, and the compaction's steps (displacement bits).
        self.per_field, self.steps = geometry(lanes, max_code_len, piece_bits)
        self.slots = self.per_field * lanes
        groups = range(self.per_field)
        piece = data.StructLayout({"bits": piece_bits, "len": range(piece_bits + 1)})
        super().__init__({
            "x": In(beat(Coded(max_code_len), lanes)),
            "x_valid": In(1),
            "valid": Out(1),
            "last": Out(1),
            "count": Out(range(lanes + 1)),
            "escapes": Out(escape_counts(lanes)),
            "pieces": Out(data.ArrayLayout(piece, self.slots)),
            "extra": Out(groups),
            "next_valid": Out(1),
            "next_extra": Out(groups),
        })

    def elaborate(self, platform):
        m = Module()
        lanes, v, per = self.lanes, self.piece_bits, self.per_field

        # s1: the beat, each lane's code length and its spare slots (0 with raw bits, else R).
        x = Signal.like(self.x)
        valid = Signal()
        raw_pieces = per - 1
        spare = [Signal(range(raw_pieces + 1), name=f"spare{j}") for j in range(lanes)]
        has_raw = [Signal(name=f"has_raw{j}") for j in range(lanes)]
        code_len = [Signal(range(self.max_code_len + 1), name=f"code_len{j}")
                    for j in range(lanes)]
        m.d.sync += [x.eq(self.x), valid.eq(self.x_valid)]
        for j in range(lanes):
            lane, used = self.x.lanes[j], j < self.x.count
            raw_len = raw_field_bits(lane.esc)
            with_raw = used & (raw_len != 0)
            m.d.sync += [has_raw[j].eq(with_raw), spare[j].eq(Mux(with_raw, 0, raw_pieces)),
                         code_len[j].eq(Mux(used, lane.len - raw_len, 0))]

        # s2: pieces in their lane's slots, displacements, escape counts. A field is its
        # code and its raw field, side by side (ceaz_hw.beats.Coded).
        disp_width = self.steps.stop
        slots = []
        for j in range(lanes):
            lane = x.lanes[j]
            verbatim = lane.esc == Escape.VERBATIM
            ob = fmt.OUTLIER_BITS
            # The raw field left-aligned in RAW_BITS (an outlier's has zeros below it).
            raw = Mux(verbatim, lane.raw, Cat(Const(0, RAW_BITS - ob), lane.raw[:ob]))
            pieces = [(lane_field(lane.code, code_len[j], v), code_len[j], Const(1))]
            for k in range(1, per):  # the raw field's bits (k - 1)V .. kV - 1, from its top
                top, bottom = RAW_BITS - (k - 1) * v, max(RAW_BITS - k * v, 0)
                width = top - bottom
                out_len = max(min(v, fmt.OUTLIER_BITS - (k - 1) * v), 0)
                pieces.append((Cat(Const(0, v - width), raw[bottom:top]),
                               Mux(has_raw[j], Mux(verbatim, width, out_len), 0), has_raw[j]))
            for k, (bits_k, len_k, valid_k) in enumerate(pieces):
                bits = Signal(v, name=f"s2_l{j}p{k}_bits")
                size = Signal(range(v + 1), name=f"s2_l{j}p{k}_len")
                here = Signal(name=f"s2_l{j}p{k}_valid")
                m.d.sync += [bits.eq(bits_k), size.eq(len_k), here.eq(valid_k)]
                slots.append({"bits": bits, "len": size, "valid": here, "lane": j})
        # Displacements: a Sklansky prefix sum over the lanes' spare slots (log2(lanes) adder
        # levels, not a chain of lanes - 1).
        sums = list(spare)
        span = 1
        while span < lanes:
            sums = [s if (i // span) % 2 == 0 else s + sums[(i // span) * span - 1]
                    for i, s in enumerate(sums)]
            span *= 2
        disp = [Signal(disp_width, name=f"s2_disp{j}") for j in range(lanes)]
        m.d.sync += disp[0].eq(0)
        m.d.sync += [disp[j].eq(sums[j - 1]) for j in range(1, lanes)]
        pieces_total = self.slots - sums[-1]
        extra = Signal(range(per), name="s2_extra")
        m.d.sync += extra.eq((pieces_total - 1) >> (lanes.bit_length() - 1))
        escapes = count_escapes(m, x, lanes, "s2_escapes")
        side = {"valid": valid, "last": x.last, "count": x.count}
        side = registered(m, side, "s2")
        side.update(extra=extra, escapes=escapes)
        for slot in slots:
            slot["disp"] = disp[slot.pop("lane")]

        # Compaction, two steps per registered stage.
        steps = list(self.steps)
        for stage, first in enumerate(range(0, len(steps), 2)):
            for step in steps[first : first + 2]:
                slots = self._step(slots, step)
            slots = [registered(m, s, f"c{stage}_{i}") for i, s in enumerate(slots)]
            previous = side
            side = registered(m, side, f"c{stage}")

        m.d.comb += [
            self.valid.eq(side["valid"]),
            self.last.eq(side["last"]),
            self.count.eq(side["count"]),
            self.escapes.eq(side["escapes"]),
            self.extra.eq(side["extra"]),
            self.next_valid.eq(previous["valid"]),
            self.next_extra.eq(previous["extra"]),
        ]
        for i, s in enumerate(slots):
            m.d.comb += [self.pieces[i].bits.eq(s["bits"]), self.pieces[i].len.eq(s["len"])]
        return m

    @staticmethod
    def _step(slots, step):
        """One compaction step: a piece whose displacement has bit ``step`` set moves
        ``2**step`` slots down; an emptied slot holds an empty piece (zero bits, length 0)."""
        shift = 1 << step
        out = []
        for i, own in enumerate(slots):
            stays = own["valid"] & ~own["disp"][step]
            if i + shift < len(slots):
                other = slots[i + shift]
                moves = other["valid"] & other["disp"][step]
            else:
                other, moves = own, Const(0)
            out.append({
                "bits": Mux(moves, other["bits"], Mux(stays, own["bits"], 0)),
                "len": Mux(moves, other["len"], Mux(stays, own["len"], 0)),
                "valid": moves | stays,
                "disp": Mux(moves, other["disp"], own["disp"]),
            })
        return out
