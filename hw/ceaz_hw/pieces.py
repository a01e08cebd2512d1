"""A beat's coded fields cut into pieces of V bits and compacted, for a narrow packer front.

Why: a coded field is up to ``max_code_len + 32`` bits (48), because an escape carries its raw
bits after its code, yet a beat averages a few bits a value. A packer front as wide as the
widest beat (``lanes x 48`` bits) was most of the 16-lane packer's logic. Cut into pieces of
``V`` bits, a field that fits one piece is one piece and an escape two or three, so the pieces
of a beat without escapes form one *group* of ``lanes`` pieces, and the packer's merge tree
and window need only be ``lanes x V`` bits wide. A beat with more pieces passes as two or
three groups, on as many clocks.

Piece ``k`` of a field is its bits ``kV`` to ``kV + V - 1`` in stream order (left-aligned, zero
below its length); piece 0 always exists (it may be empty), piece ``k > 0`` if the field is
longer than ``kV``. Concatenating the pieces in order gives the fields in order, so the
packer's output does not change. Stages (every register advances on the parent's enable):

* ``s1``: the input beat, and each lane's *spare* slots: ``P - pieces`` (``P`` = pieces of the
  longest field).
* ``s2``: each lane's pieces, left-aligned, in slots ``P j .. P j + P - 1``, and each lane's
  displacement ``D_j``, the spare slots of the lanes before it (a parallel prefix sum).
* compaction: every piece moves ``D_j`` slots towards slot 0, one bit of ``D_j`` per step
  (least significant first), two steps per registered stage. Displacements never decrease
  from one piece to the next and the targets are distinct, so no two pieces ever meet in a
  slot (a monotone route through a logarithmic shifter).

Output: the slots (pieces ``0 .. T - 1`` of the beat in slots ``0 .. T - 1``, empty slots
after), ``extra`` = groups after the first (``(T - 1) // lanes``), and the beat's ``last``,
``count`` and escape counts. ``next_valid`` and ``next_extra`` are those of the beat the last
stage takes when it next advances, so the parent can plan a clock ahead.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .beats import LANE_COUNTS, Coded, Escape, beat, code_field_bits

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


def geometry(lanes: int, max_code_len: int, piece_bits: int) -> tuple[int, int]:
    """(pieces of the longest field, compaction steps), after checking the arguments."""
    if lanes not in LANE_COUNTS or lanes < 2:
        raise ValueError(f"lanes must be one of {LANE_COUNTS[1:]}, not {lanes!r}")
    field = code_field_bits(max_code_len)
    if not isinstance(piece_bits, int) or not 1 <= piece_bits < field:
        raise ValueError(f"piece_bits must be an int in 1..{field - 1}, not {piece_bits!r}")
    per_field = -(-field // piece_bits)
    return per_field, ((per_field - 1) * (lanes - 1)).bit_length()


def latency(lanes: int, max_code_len: int, piece_bits: int) -> int:
    """Registered stages from the input to the output: s1, s2 and the compaction's."""
    return 2 + -(-geometry(lanes, max_code_len, piece_bits)[1] // 2)


class Pieces(wiring.Component):
    """Fields of a beat to compacted pieces of ``piece_bits`` bits (see the module docstring).

    Parameters
    ----------
    lanes : int
        Values per beat: 2, 4, 8 or 16.
    max_code_len : int
        Longest Huffman code; a field holds up to ``max_code_len + 32`` bits.
    piece_bits : int
        V, at least 1 and less than the field width (a field must need two pieces or more).
    """

    def __init__(self, lanes: int, max_code_len: int, piece_bits: int):
        self.lanes, self.field, self.piece_bits = lanes, code_field_bits(max_code_len), piece_bits
        #: Pieces of the longest field, and compaction steps (bits of the largest displacement).
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
        lanes, field, v, per = self.lanes, self.field, self.piece_bits, self.per_field
        padded = per * v

        # s1: the beat, and each lane's spare slots from its length.
        x = Signal.like(self.x)
        valid = Signal()
        spare_width = (per - 1).bit_length()
        spare = [Signal(spare_width, name=f"spare{j}") for j in range(lanes)]
        used = [Signal(range(field + 1), name=f"used{j}") for j in range(lanes)]
        m.d.sync += [x.eq(self.x), valid.eq(self.x_valid)]
        for j in range(lanes):
            length = used_length(self.x, j)
            m.d.sync += [spare[j].eq(sum(length <= k * v for k in range(1, per))),
                         used[j].eq(length)]

        # s2: pieces in their lane's slots, displacements, escape counts.
        disp_width = self.steps
        slots = []
        for j in range(lanes):
            length = used[j]
            aligned = lane_field(x.lanes[j].bits, length, field)
            aligned = Cat(Const(0, padded - field), aligned)  # piece 0 in the top bits
            for k in range(per):
                top = padded - k * v
                bits = Signal(v, name=f"s2_l{j}p{k}_bits")
                size = Signal(range(v + 1), name=f"s2_l{j}p{k}_len")
                here = Signal(name=f"s2_l{j}p{k}_valid")
                m.d.sync += [
                    bits.eq(aligned[top - v : top]),
                    size.eq(Mux(length >= (k + 1) * v, v, Mux(length > k * v, length - k * v, 0))),
                    here.eq(1 if k == 0 else length > k * v),
                ]
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
        for stage, first_step in enumerate(range(0, self.steps, 2)):
            for step in range(first_step, min(first_step + 2, self.steps)):
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
