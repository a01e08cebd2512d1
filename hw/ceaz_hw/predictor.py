"""The Lorenzo predictor as three first differences (docs/format.md section 5,
docs/hardware.md "Predictor").

The model (``ceaz.predictor.residuals``) computes ``delta = Dz(Dy(Dx(q)))``. The three masked
first differences are linear and commute (each mask depends on one coordinate only, and a
step along one axis keeps the others), so the hardware applies them as ``Dx(Dy(Dz(q)))``:
the large plane buffer then stores ``q`` (``Q_BITS + 1`` bits) rather than a wider difference,
and the line buffer stores ``Dz(q)`` (``Q_BITS + 2`` bits). The result is the same integer.

Delays
------
A difference at distance ``d`` (``cx`` for a row, ``cy * cx`` for a plane) needs value
``i - d`` for value ``i``. With ``d = a N + b`` (N lanes), lane ``j`` of beat ``k`` takes lane
``j - b`` of beat ``k - a`` if ``j >= b``, else lane ``j - b + N`` of beat ``k - a - 1``: lane
``j`` of beat ``k - a`` or of beat ``k - a - 1``, each rotated by ``b`` lanes. Beat ``k - a - 1``
is the one the previous beat got, so one rotator per delay serves both: its result is kept for
the next beat, and the pick per lane (``j >= b``, a flag per lane set up with the chunk) shares
a LUT with the position mask in front of the subtraction.

Beats go into a memory of ``floor(max / N)`` beats (``max`` = ``max_line`` or ``max_plane``)
and are read back ``a`` beats later. The read for beat ``k`` is issued one stage before beat
``k`` is written, so it only meets the write of beat ``k - 1`` (another address when
``a >= 2``) and ``a`` addresses suffice: a power-of-two ``max`` gives a power-of-two depth.
When ``a < 2`` the beat comes from registers holding the current beat and the one before it.
Reads of positions before the chunk start return stale data, which the position masks drop.

The memory is built as banks of at most 1024 beats (one block RAM deep), every bank's read
data goes into a register (two when there are banks to select from: the first, which has no
reset, becomes the block RAM's output register in the synthesis flow, and at full size the
RAMs sit across the whole die) and a tree of registered 8:1 selects picks the bank: no block
RAM output drives logic before a register (ECP5 block RAM data arrives late in the clock).
Yosys is told (``no_rw_check``) not to put its bypass behind the ports, which would return old
data when a write hits the address read (amaranth asks that of all ports; here no read whose
data is used does that). The beat read for ``k`` thus arrives :func:`read_stages` stages
after the read (2 for one bank, 4 for up to 8, 5 for up to 64) and the datapath waits for it;
the write stays one stage after the read, so the bookkeeping above does not change.

Positions
---------
``x > 0`` iff ``i mod cx != 0``, ``y > 0`` iff ``(i mod cy cx) >= cx`` and ``z > 0`` iff
``i >= cy cx``. A beat's lanes are ``i + j``, ``j < N``, with ``i`` its first position. When the
modulus is at least N, a beat crosses at most one line (or plane) start, and counters per beat
suffice: ``L = cx - i mod cx`` (in ``1 .. cx``) puts the start in lane ``L`` (and in lane 0 if
``i`` is one); ``P = cy cx - i mod cy cx`` puts lanes ``j >= P`` in the next plane, where
``y > 0`` iff ``j >= P + cx``, while before it ``y > 0`` iff ``j >= P - (cy cx - cx)``; and
``z > 0`` iff ``i >= cy cx`` or ``j >= P``. Each distance shrinks by N a beat and grows by the
modulus when a start is passed, and each lane compares it with the constant ``j`` in
``log2(N)`` bits (beside one shared test of the bits above). A box with ``cx < N`` (or
``cy cx < N``) has several starts in a beat: then each lane counts ``i mod cx`` (and
``i mod cy cx``) itself, advancing by ``N mod cx`` a beat with one conditional subtraction,
in ``log2(N)`` bits, as the modulus is below N. (Full-width counters in every lane were 2.6 k
LUT4 at 16 lanes.) At a chunk's first beat the predictor stalls its input for
:data:`INIT_CLOCKS` clocks while a short register chain derives the constants from the
configuration ports (a product and small remainders), then loads the counters.

Pipeline
--------
As in the quantizer, every register (and the memories' ports) shares one clock enable: the
level-only ``i.ready`` of the :class:`~ceaz_hw.elastic.ElasticBuffer` at the output, which
gives each memory bank a register copy of it. A beat
passes six register stages, the two delays' read stages and the buffer: :func:`latency`
clocks, 11 with two single-bank delays (``Predictor.LATENCY``)."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .beats import LANE_COUNTS, Q_BITS, Kind, Prequantized, Residual, beat
from .elastic import ElasticBuffer, advance_on

__all__ = ["INIT_CLOCKS", "Predictor", "delay_depth", "latency", "read_stages"]

#: Box extents and their product are at most 2**24 (docs/format.md section 2).
BOX_BITS = 25
#: Register stages between the configuration ports and the constants the counters load.
_CHAIN = 4
#: Input stall at the start of every chunk, in clocks: the chain plus the counter load.
INIT_CLOCKS = _CHAIN + 1
#: Beats per bank of a delay memory: one DP16KD deep (1024 x 18), so yosys never cascades.
_BANK = 1024
#: Banks (then groups) one registered select level chooses from: a few LUT levels.
_FAN_IN = 8
#: Register stages of the datapath besides the two delay memories' reads.
_OTHER_STAGES = 6


def delay_depth(max_delay: int, lanes: int) -> int:
    """Beats a delay memory holds: ``a = d // lanes <= max_delay // lanes`` beats back. The
    read of beat ``k - a`` is issued while beat ``k - 1`` is written, so ``a`` addresses do;
    delays of fewer than two beats come from registers (at least 2 keeps the pointers
    non-trivial)."""
    return max(max_delay // lanes, 2)


def _reg(m, value, name, shape=None, reset_less=False, domain="sync"):
    """A register holding ``value`` (advancing with the parent's enable)."""
    sig = Signal(shape if shape is not None else value.shape(), name=name, reset_less=reset_less)
    m.d[domain] += sig.eq(value)
    return sig


def _regs(m, values, name, shape=None):
    return [_reg(m, v, f"{name}{j}", shape) for j, v in enumerate(values)]


def _small_mod(value, lanes, j):
    """``j mod value`` for a constant ``0 <= j <= lanes`` and ``value >= 1``.

    Only ``value < lanes`` (at most 15, a few low bits) needs a table: otherwise the result is
    ``j`` (or 0 when ``value == j``).
    """
    if j == 0:
        return Const(0)
    exact = Mux(value == j, 0, j)  # value >= j: j itself, or 0 when they are equal
    if lanes == 1:
        return exact
    width = (lanes - 1).bit_length()
    table = Array(Const(j % v if v else 0, width + 1) for v in range(lanes))
    return Mux(value < j, table[value[:width]], exact)  # then value < j <= lanes


def _rotate(values, b, lanes):
    """Lane ``j`` of the result is lane ``(j - b) mod N`` of ``values``: a logarithmic shifter,
    log2(N) two-way selects per lane."""
    for k in range((lanes - 1).bit_length()):
        step = 1 << k
        values = [Mux(b[k], values[(i - step) % lanes], values[i]) for i in range(lanes)]
    return values


def _bank_domains(name: str, depth: int) -> list[str]:
    """One clock domain per bank of a delay memory (renamed to ``sync`` by the parent), for
    its ports and the registers at its ports: the parent gates each with its own copy of the
    enable, next to that bank (one enable net to the block RAMs across the die was the
    two-lane worst path at 90432ca, 10.5 ns)."""
    return [f"{name}_bank{b}" for b in range(-(-depth // _BANK))]


def _bank_levels(depth: int) -> int:
    """Registered :data:`_FAN_IN`:1 select levels behind the banks of a ``depth``-beat delay."""
    banks, levels = -(-depth // _BANK), 0
    while banks > 1:
        banks, levels = -(-banks // _FAN_IN), levels + 1
    return levels


def read_stages(depth: int) -> int:
    """Clocks from a delay memory's read address to its selected beat in a register: the
    block RAM, the bank output register (two of them when there is a select), then the select
    levels."""
    levels = _bank_levels(depth)
    return 2 + levels + (1 if levels else 0)


def _stages(line_depth: int, plane_depth: int) -> int:
    """Register stages of the datapath, s0 to the output register: the delay of the side band."""
    return _OTHER_STAGES + read_stages(plane_depth) + read_stages(line_depth)


def latency(lanes: int, max_line: int, max_plane: int) -> int:
    """Clocks from an accepted input beat to its output beat with the output always ready: the
    datapath stages and the output buffer. Deeper delays add select levels."""
    return _stages(delay_depth(max_line, lanes), delay_depth(max_plane, lanes)) + 1


class _Delay:
    """A beat-delay memory in banks of at most :data:`_BANK` beats, and its registers.

    ``read_stage`` issues the read of beat ``k - a`` at beat ``k``'s stage ``r``; the banked
    read returns it in a register :func:`read_stages` stages later, where ``rotate_stage``
    forms the pair ``(lo, hi)`` = beats ``k - a - 1`` and ``k - a`` for :func:`_rotate`.
    ``write_stage`` stores beat ``k`` at stage ``r + 1``. The read of beat ``k - a`` thus meets
    at most the write of beat ``k - 1``, a different address for ``2 <= a <= depth``; ``a`` of
    0 or 1 uses the beats ``k - 1`` and ``k - 2`` registered at the rotate stage instead.

    Every bank's read data goes straight into a register and each select level is
    registered: no path runs from a block RAM output through logic (ECP5 block RAM data
    arrives late in the clock, and yosys would otherwise cascade one deep memory with its
    select tree after the outputs).
    """

    def __init__(self, m, name, lanes, width, depth):
        self.m, self.name, self.lanes, self.width, self.depth = m, name, lanes, width, depth
        self.domains = _bank_domains(name, depth)
        self.banks = len(self.domains)
        self.layout = data.ArrayLayout(signed(width), lanes)
        self.mems = []
        for b in range(self.banks):
            # A read whose data is used never meets a write to its address (the class
            # docstring: a delay of 0 or 1 beats reads registers instead), so yosys need not
            # emulate the old-data read: without its bypass LUT, the first register after a
            # block RAM has no other input and the placer can keep it beside the RAM.
            mem = Memory(shape=self.layout, depth=min(_BANK, depth - b * _BANK), init=[],
                         attrs={"no_rw_check": 1})
            m.submodules[f"{name}_mem{b}"] = mem
            self.mems.append(mem)
        # Data arrives with the next stage.
        self.rds = [mem.read_port(domain=d) for mem, d in zip(self.mems, self.domains, strict=True)]

    def _next(self, addr):
        return Mux(addr == self.depth - 1, 0, addr + 1)

    def _lanes(self, name):
        return [Signal(signed(self.width), name=f"{self.name}_{name}{j}")
                for j in range(self.lanes)]

    def _split(self, addr):
        """(bank, address in the bank) of a beat address."""
        if self.banks == 1:
            return Const(0), addr
        bits = (_BANK - 1).bit_length()
        return addr[bits:], addr[:bits]

    def read_stage(self, valid, first, read_init):
        """Read the beat ``a`` back for this stage's beat (``read_init`` is the address for a
        chunk's first beat, ``(depth - a) mod depth``). Pointers restart at every chunk. The
        selected beat is :attr:`read`, :func:`read_stages` stages later."""
        m = self.m
        read_ptr = Signal(range(self.depth), name=f"{self.name}_read_ptr")
        read_addr = Mux(first, read_init, read_ptr)
        bank, local = self._split(read_addr)
        m.d.comb += [rd.addr.eq(local) for rd in self.rds]
        with m.If(valid):
            m.d.sync += read_ptr.eq(self._next(read_addr))
        # The block RAM stage, then registers per bank (two before a select, the first one
        # next to its block RAM): the bank number follows. The first has no reset, so the
        # synthesis flow makes it the block RAM's own output register (bitstreams/outreg.py).
        beats = [_reg(m, rd.data, f"{self.name}_bank{b}", self.layout, reset_less=True, domain=d)
                 for b, (rd, d) in enumerate(zip(self.rds, self.domains, strict=True))]
        if self.banks > 1:
            sel = _reg(m, bank, f"{self.name}_sel_ram")
            for stage in ("near", "bank"):
                sel = _reg(m, sel, f"{self.name}_sel_{stage}")
            beats = [_reg(m, beat, f"{self.name}_bank{b}_far", self.layout)
                     for b, beat in enumerate(beats)]
        bits = (_FAN_IN - 1).bit_length()
        level = 0
        while len(beats) > 1:
            groups = [beats[g:g + _FAN_IN] for g in range(0, len(beats), _FAN_IN)]
            beats = [_reg(m, Array(group)[sel[:bits]] if len(group) > 1 else group[0],
                          f"{self.name}_sel{level}_{g}", self.layout)
                     for g, group in enumerate(groups)]
            level += 1
            if len(beats) > 1:
                sel = _reg(m, sel[bits:], f"{self.name}_sel{level}")
        self.read = [beats[0][j] for j in range(self.lanes)]

    def write_stage(self, values, valid, ahead_valid, ahead_first):
        """Store this stage's beat at its write address: 0 for a chunk's first beat, else the
        one after the last valid beat's. The address and every bank's write enable are
        registers, set a stage ahead from the beat behind this one (``ahead_valid``,
        ``ahead_first``): at full size the write side fans out to block RAMs across the die."""
        m = self.m
        write_addr = Signal(range(self.depth), name=f"{self.name}_write_addr")  # this beat's
        upcoming = Mux(ahead_first, 0, Mux(valid, self._next(write_addr), write_addr))
        m.d.sync += write_addr.eq(upcoming)
        bank_ahead, _ = self._split(upcoming)
        _, local = self._split(write_addr)
        for b, (mem, domain) in enumerate(zip(self.mems, self.domains, strict=True)):
            wr = mem.write_port(domain=domain)
            enable = Signal(name=f"{self.name}_write_en{b}")
            m.d[domain] += enable.eq(ahead_valid & (bank_ahead == b))
            m.d.comb += [wr.addr.eq(local), wr.data.eq(Cat(values)), wr.en.eq(enable)]

    def rotate_stage(self, values, valid, near, one_back, rot):
        """Beat ``k - a`` for this stage's beat ``values`` (``near``: ``a < 2``, ``one_back``:
        ``a = 1``), rotated by ``rot`` lanes, and the same for the previous valid beat (beat
        ``k - a - 1``): the pair ``(earlier, later)``."""
        m = self.m
        prev, earlier = self._lanes("prev"), self._lanes("earlier")
        later = _rotate([Mux(near, Mux(one_back, p, v), r)
                         for v, p, r in zip(values, prev, self.read, strict=True)],
                        rot, self.lanes)
        with m.If(valid):
            m.d.sync += [r.eq(v) for r, v in zip(prev, values, strict=True)]
            m.d.sync += [r.eq(v) for r, v in zip(earlier, later, strict=True)]
        return earlier, later


#: What the configuration chain hands to a delay: a < 2, a = 1, b, which lanes take the later
#: beat (``j >= b``) and the first read address.
def _delay_layout(lanes, depth):
    return data.StructLayout({
        "near": 1,
        "one_back": 1,
        "rot": range(max(lanes, 2)),  # 1 bit even for one lane: no zero-width wires
        "later": lanes,
        "read_init": range(depth),
    })


class _Core(wiring.Component):
    """Counters, configuration chain and datapath; every register advances every clock (the
    parent gates them with one enable, through a copy of it for each of :attr:`bank_domains`)."""

    def __init__(self, lanes, line_depth, plane_depth):
        self._lanes = lanes
        self._line_depth = line_depth
        self._plane_depth = plane_depth
        self.bank_domains = [*_bank_domains("plane", plane_depth),
                             *_bank_domains("line", line_depth)]
        super().__init__({
            "cx": In(BOX_BITS),
            "cy": In(BOX_BITS),
            "payload": In(beat(Prequantized, lanes)),
            "offered": In(1),  # i.valid
            "taken": In(1),  # i.valid & accepting: taken when the core advances
            "accepting": Out(1),  # counters are set up for the next beat
            "out": Out(beat(Residual, lanes)),
            "out_valid": Out(1),
        })

    def _delay_config(self, m, extent, depth, name):
        """Registered delay configuration for a delay of ``extent`` values."""
        n = self._lanes
        shift = (n - 1).bit_length()
        beats = Signal(BOX_BITS, name=f"{name}_beats")
        m.d.comb += beats.eq(extent >> shift)
        # Delays beyond the memory only occur when the difference is masked everywhere
        # (cy == 1 or cz == 1); any in-range address then does.
        clamped = Mux(beats >= depth, depth, beats)
        cfg = Signal(_delay_layout(n, depth), name=f"{name}_cfg")
        m.d.sync += [
            cfg.near.eq(beats < 2),
            cfg.one_back.eq(beats == 1),
            cfg.rot.eq(extent[:shift] if shift else 0),
            # Lane N - 1 always takes the later beat (b < N).
            cfg.later.eq(Cat(*(extent[:shift] <= j for j in range(n - 1)), Const(1))),
            cfg.read_init.eq(Mux(clamped == depth, 0, depth - clamped)),
        ]
        return cfg

    def elaborate(self, platform):
        m = Module()
        n = self._lanes
        lanes = range(n)

        # -- configuration chain: ports -> chunk constants, _CHAIN registers ----------------
        cx1 = _reg(m, self.cx, "cfg_cx1")
        cy1 = _reg(m, self.cy, "cfg_cy1")
        # cx * cy < 2**25 (at most 2**24): split 13 + 12 bits, the high x high product only
        # reaches bits >= 26 and drops out.
        # The partial products' registers have no reset (the chain recomputes them every
        # clock), so that they can become the multipliers' output registers (outreg.py).
        pp_ll = _reg(m, cx1[:13] * cy1[:13], "cfg_pp_ll", reset_less=True)
        pp_hl = _reg(m, cx1[13:] * cy1[:13], "cfg_pp_hl", reset_less=True)
        pp_lh = _reg(m, cx1[:13] * cy1[13:], "cfg_pp_lh", reset_less=True)
        cx2 = _reg(m, cx1, "cfg_cx2")
        # The per-lane counters of a box smaller than a beat count modulo cx or cy cx < N,
        # so in log2(N) bits (see "Positions").
        sw = max((n - 1).bit_length(), 1)
        x_start = _regs(m, [_small_mod(cx2, n, j) for j in lanes], "cfg_x_start", sw)
        x_step = _reg(m, _small_mod(cx2, n, n), "cfg_x_step", sw)  # N mod cx
        cx3 = _reg(m, cx2, "cfg_cx3")
        plane3 = _reg(m, (pp_ll + ((pp_hl + pp_lh) << 13))[:BOX_BITS], "cfg_plane3")
        cx = _reg(m, cx3, "cfg_cx")
        x_wrap = _reg(m, cx3 - x_step, "cfg_x_wrap", sw)  # xm + step >= cx iff xm >= this
        p_start = _regs(m, [_small_mod(plane3, n, j) for j in lanes], "cfg_p_start", sw)
        p_stepc = _small_mod(plane3, n, n)
        p_step = _reg(m, p_stepc, "cfg_p_step", sw)  # N mod cy cx
        p_wrap = _reg(m, plane3 - p_stepc, "cfg_p_wrap", sw)
        # The beat counters' constants (signed: a difference may be negative).
        wide = signed(BOX_BITS + 2)
        plane = _reg(m, plane3, "cfg_plane", wide)
        cx_wide = _reg(m, cx3, "cfg_cx_wide", wide)
        cx_step = _reg(m, cx3 - n, "cfg_cx_step", wide)  # cx - N
        plane_step = _reg(m, plane3 - n, "cfg_plane_step", wide)  # cy cx - N
        beyond_start = _reg(m, plane3 + cx3, "cfg_beyond_start", wide)
        line_left_start = _reg(m, cx3 - (n + 1), "cfg_line_left_start", wide)
        plane_left_start = _reg(m, plane3 - (n + 1), "cfg_plane_left_start", wide)
        small_x = _reg(m, cx3 < n, "cfg_small_x")
        small_p = _reg(m, plane3 < n, "cfg_small_p")
        line_cfg = self._delay_config(m, cx3, self._line_depth, "line")
        plane_cfg = self._delay_config(m, plane3, self._plane_depth, "plane")

        # -- chunk start: wait for the chain, load the counters -----------------------------
        need_init = Signal(init=1)
        at_start = Signal(init=1)  # the next beat taken is a chunk's first
        wait = Signal(range(_CHAIN + 1))
        # Per lane, for a box smaller than a beat: i mod cx and i mod cy cx.
        x_mod = [Signal(sw, name=f"x_mod{j}") for j in lanes]
        p_mod = [Signal(sw, name=f"p_mod{j}") for j in lanes]
        # Per beat, i its first position: to the next line start (cx - i mod cx, in 1 .. cx)
        # and whether i starts a line; to the next plane start (cy cx - i mod cy cx), the same
        # less cy cx - cx (the first lane past the plane's first line) and plus cx (the first
        # lane past the next plane's first line); whether i >= cy cx.
        to_line, line_start = Signal(wide), Signal()
        to_plane, to_rest, to_beyond = Signal(wide), Signal(wide), Signal(wide)
        past_plane = Signal()
        # The distances less N + 1, whose signs say whether this beat passes a start: from a
        # register, not from a comparison in front of the adders (the four-lane worst path
        # at a285d8a, 12.4 ns, with the comparison).
        line_left, plane_left = Signal(wide), Signal(wide)
        m.d.comb += self.accepting.eq(~need_init)
        with m.If(need_init & self.offered):
            m.d.sync += wait.eq(wait + 1)
            with m.If(wait == _CHAIN):
                m.d.sync += [wait.eq(0), need_init.eq(0)]
                m.d.sync += [r.eq(v) for r, v in zip(x_mod, x_start, strict=True)]
                m.d.sync += [r.eq(v) for r, v in zip(p_mod, p_start, strict=True)]
                m.d.sync += [to_line.eq(cx_wide), line_start.eq(1), to_plane.eq(plane),
                             to_rest.eq(cx_wide), to_beyond.eq(beyond_start),
                             past_plane.eq(0), line_left.eq(line_left_start),
                             plane_left.eq(plane_left_start)]
        with m.If(self.taken):
            m.d.sync += at_start.eq(self.payload.last)
            with m.If(self.payload.last):
                m.d.sync += need_init.eq(1)
            # Advance by N: r + step wraps iff r >= modulus - step; then subtract once.
            for j in lanes:
                x_wrapped = x_mod[j] >= x_wrap
                p_wrapped = p_mod[j] >= p_wrap
                m.d.sync += [
                    x_mod[j].eq(Mux(x_wrapped, x_mod[j] - x_wrap, x_mod[j] + x_step)),
                    p_mod[j].eq(Mux(p_wrapped, p_mod[j] - p_wrap, p_mod[j] + p_step)),
                ]
            # The distances shrink by N, and grow by the modulus when a start is passed.
            line_passed, plane_passed = line_left < 0, plane_left < 0  # to_* <= N
            line_delta = Mux(line_passed, cx_step, -n)
            plane_delta = Mux(plane_passed, plane_step, -n)
            m.d.sync += [
                to_line.eq(to_line + line_delta),
                line_left.eq(line_left + line_delta),
                line_start.eq(to_line == n),
                to_plane.eq(to_plane + plane_delta),
                plane_left.eq(plane_left + plane_delta),
                to_rest.eq(to_rest + plane_delta),
                to_beyond.eq(to_beyond + plane_delta),
                past_plane.eq(past_plane | plane_passed),
            ]

        low = (n - 1).bit_length()  # bits of a lane number

        def at_most(value, j):
            """value <= j for a lane number j: the comparison of log2(N) bits, since value is
            negative or at least N when its bits from log2(N) up are not all zero."""
            if low == 0:
                return value <= j
            below = (value[low:] == 0) & (value[:low] <= j) if j < n - 1 else value[low:] == 0
            return (value < 0) | below

        def equal(value, j):
            return value == j if low == 0 else (value[low:] == 0) & (value[:low] == j)

        # The position flags of lane j (j < N); see "Positions".
        x_flags, y_flags, z_flags = [], [], []
        for j in lanes:
            line_here = equal(to_line, j) | (line_start if j == 0 else 0)
            x_flags.append(Mux(small_x, x_mod[j] != 0, ~line_here))
            in_next_plane = at_most(to_plane, j)
            y_flags.append(Mux(small_p, p_mod[j] >= cx[:sw],
                               Mux(in_next_plane, at_most(to_beyond, j), at_most(to_rest, j))))
            z_flags.append(past_plane | in_next_plane)

        # -- s0: the input register, with each lane's position flags ------------------------
        # The side band (kind, raw, last, count) only waits for the datapath: a circular
        # memory of one entry per stage, written every clock, returns it at the last stage
        # instead of a register copy per stage.
        side_layout = data.StructLayout({
            "kind": data.ArrayLayout(Kind, n),
            "raw": data.ArrayLayout(unsigned(32), n),
            "last": 1,
            "count": range(n + 1),
        })
        payload = self.payload
        side_in = Signal(side_layout, name="side_in")
        m.d.comb += [
            side_in.last.eq(payload.last),
            side_in.count.eq(payload.count),
            *(side_in.kind[j].eq(payload.lanes[j].kind) for j in lanes),
            *(side_in.raw[j].eq(payload.lanes[j].raw) for j in lanes),
        ]
        side_delay = _stages(self._line_depth, self._plane_depth)
        m.submodules.side_mem = side_mem = Memory(shape=side_layout, depth=side_delay, init=[])
        side_ptr = Signal(range(side_delay))
        side_next = Mux(side_ptr == side_delay - 1, 0, side_ptr + 1)
        side_wr = side_mem.write_port()
        side_rd = side_mem.read_port()
        m.d.sync += side_ptr.eq(side_next)
        # Written while the beat enters s0, read side_delay - 1 clocks later into the last.
        m.d.comb += [
            side_wr.addr.eq(side_ptr),
            side_wr.data.eq(side_in),
            side_wr.en.eq(1),
            side_rd.addr.eq(side_next),  # the entry written side_delay - 1 clocks ago
        ]
        valid = _reg(m, self.taken, "s0_valid")
        first = _reg(m, self.taken & at_start, "s0_first")
        # A value sent verbatim or filled counts as q = 0 (its lane holds its bits instead).
        q0 = _regs(m, [Mux(payload.lanes[j].kind == Kind.NORMAL, payload.lanes[j].q, 0)
                       for j in lanes], "s0_q", signed(Q_BITS + 1))
        xf = _regs(m, x_flags, "s0_x")
        yf = _regs(m, y_flags, "s0_y")
        zf = _regs(m, z_flags, "s0_z")
        lc = _reg(m, line_cfg, "s0_line_cfg")
        pc = _reg(m, plane_cfg, "s0_plane_cfg")

        stage = 0

        def step(**values):
            """Advance the valid bit and ``values`` (lists) by one stage."""
            nonlocal valid, stage
            stage += 1
            name = f"s{stage}"
            valid = _reg(m, valid, f"{name}_valid")
            return {k: (_regs(m, v, f"{name}_{k}") if isinstance(v, list)
                        else _reg(m, v, f"{name}_{k}")) for k, v in values.items()}

        def delay(mem, s, key, cfg, carry):
            """Read at this stage, write at the next, rotate when the read arrives and
            register the beats back; ``carry`` (with ``key``, ``cfg`` and ``first``) follows."""
            mem.read_stage(valid, s["first"], s[cfg].read_init)
            ahead_valid, ahead_first = valid, s["first"]
            keep = (key, cfg, "first", *carry)
            s = step(**{k: s[k] for k in keep})
            mem.write_stage(s[key], valid, ahead_valid, ahead_first)
            for _ in range(read_stages(mem.depth) - 1):
                s = step(**{k: s[k] for k in keep})
            earlier, later = mem.rotate_stage(s[key], valid, s[cfg].near, s[cfg].one_back,
                                              s[cfg].rot)
            return step(earlier=earlier, later=later, **{k: s[k] for k in keep})

        def back(s, cfg, mask):
            """Each lane's value ``d`` back, or 0 where ``mask`` is clear: with the pick between
            the two rotated beats, one LUT in front of the subtraction."""
            return [Mux(f, Mux(s[cfg].later[j], s["later"][j], s["earlier"][j]), 0)
                    for j, f in enumerate(s[mask])]

        # -- Dz: plane delay of q, read at s0, written at s1, subtracted after the rotation
        plane_mem = _Delay(m, "plane", n, Q_BITS + 1, self._plane_depth)
        s = {"q": q0, "x": xf, "y": yf, "z": zf, "lc": lc, "pc": pc, "first": first}
        s = delay(plane_mem, s, "q", "pc", ("x", "y", "z", "lc"))
        dz = [q - b for q, b in zip(s["q"], back(s, "pc", "z"), strict=True)]
        s = step(d=dz, **{k: s[k] for k in ("x", "y", "lc", "first")})
        dz_reg = [Signal(signed(Q_BITS + 2), name=f"s{stage}_dz{j}") for j in lanes]
        m.d.comb += [w.eq(v) for w, v in zip(dz_reg, s["d"], strict=True)]

        # -- Dy: line delay of Dz(q), read at that stage, written at the next, subtracted
        # after the rotation
        line_mem = _Delay(m, "line", n, Q_BITS + 2, self._line_depth)
        s = delay(line_mem, {**s, "d": dz_reg}, "d", "lc", ("x", "y"))
        dy = [d - b for d, b in zip(s["d"], back(s, "lc", "y"), strict=True)]
        s = step(d=dy, x=s["x"])
        d6 = [Signal(signed(Q_BITS + 3), name=f"s{stage}_dy{j}") for j in lanes]
        m.d.comb += [w.eq(v) for w, v in zip(d6, s["d"], strict=True)]

        # -- Dx: the previous value is the lane before, or the last lane of the last beat ------
        prev_last = Signal(signed(Q_BITS + 3), name=f"s{stage}_prev_last")
        with m.If(valid):
            m.d.sync += prev_last.eq(d6[n - 1])
        before = [prev_last, *d6[:-1]]
        dx = [d - Mux(x, b, 0) for d, x, b in zip(d6, s["x"], before, strict=True)]
        s = step(d=dx)
        assert stage == side_delay - 1  # the side band's delay matches
        side = side_rd.data

        for j in lanes:
            m.d.comb += [
                # The delta of a normal value, the bits of the others (beats.Residual).
                self.out.lanes[j].raw.eq(Mux(side.kind[j] == Kind.NORMAL,
                                             s["d"][j].as_unsigned(), side.raw[j])),
                self.out.lanes[j].kind.eq(side.kind[j]),
            ]
        m.d.comb += [
            self.out.last.eq(side.last),
            self.out.count.eq(side.count),
            self.out_valid.eq(valid),
        ]
        return m


class Predictor(wiring.Component):
    """The Lorenzo predictor, N values per clock.

    Parameters
    ----------
    lanes : int
        Values per beat, one of ``LANE_COUNTS``.
    max_line : int
        Largest ``cx`` of a box with ``cy > 1`` (line buffer depth in values).
    max_plane : int
        Largest ``cy * cx`` of a box with ``cz > 1`` (plane buffer depth in values).

    Members
    -------
    cx, cy, cz : ``In(25)``
        The box shape of the chunk, each at least 1, product at most 2**24; read at a chunk's
        first beat (the input stalls :data:`INIT_CLOCKS` clocks for it) and held during it.
        ``cz`` is not needed: a chunk ends with ``last``.
    i : ``In(stream.Signature(beat(Prequantized, lanes)))``
    o : ``Out(stream.Signature(beat(Residual, lanes)))``
        ``delta`` per lane for a normal value, its ``raw`` bits otherwise; ``kind``, ``last``
        and ``count`` pass through.
    """

    def __init__(self, lanes, max_line=4096, max_plane=65536):
        if lanes not in LANE_COUNTS:
            raise ValueError(f"lanes must be one of {LANE_COUNTS}, not {lanes!r}")
        for name, value in (("max_line", max_line), ("max_plane", max_plane)):
            if not isinstance(value, int) or not 1 <= value <= 1 << 24:
                raise ValueError(f"{name} must be an integer in [1, 2**24], not {value!r}")
        self._lanes = lanes
        self.max_line = max_line
        self.max_plane = max_plane
        self.line_depth = delay_depth(max_line, lanes)
        self.plane_depth = delay_depth(max_plane, lanes)
        #: See :func:`latency`.
        self.LATENCY = latency(lanes, max_line, max_plane)
        super().__init__({
            "cx": In(BOX_BITS),
            "cy": In(BOX_BITS),
            "cz": In(BOX_BITS),
            "i": In(stream.Signature(beat(Prequantized, lanes))),
            "o": Out(stream.Signature(beat(Residual, lanes))),
        })

    @property
    def lanes(self):
        return self._lanes

    def elaborate(self, platform):
        m = Module()
        core = _Core(self._lanes, self.line_depth, self.plane_depth)
        domains = core.bank_domains
        m.submodules.buffer = buffer = ElasticBuffer(beat(Residual, self._lanes),
                                                     ready_copies=len(domains))
        enable = buffer.i.ready
        core = advance_on(core, {"sync": enable,
                                 **dict(zip(domains, buffer.ready_copies, strict=True))})
        m.submodules.core = core
        ready = Signal()
        m.d.comb += [
            ready.eq(enable & core.accepting),
            self.i.ready.eq(ready),
            core.cx.eq(self.cx),
            core.cy.eq(self.cy),
            core.payload.eq(self.i.payload),
            core.offered.eq(self.i.valid),
            # Not `& enable`: every register of the core advances on it anyway, and through
            # `taken` it ran into the core's logic (the one-lane worst path at 20e037b).
            core.taken.eq(self.i.valid & core.accepting),
            buffer.i.payload.eq(core.out),
            buffer.i.valid.eq(core.out_valid),
        ]
        wiring.connect(m, buffer.o, wiring.flipped(self.o))
        return m
