"""The float32 prequantizer with its exact error-bound check (docs/format.md, sections 3 and 4).

Per value ``x`` it computes ``q = RNE(|x| * Cm * 2**Ce)`` with the sign of ``x``, rebuilds the
decoder's ``x' = fl32(q * S)`` and accepts ``q`` only if ``|x - x'| <= eb_f`` holds exactly;
otherwise the value is sent verbatim. The result must equal ``ceaz.quantizer.prequantize`` bit
for bit, so every step below is integer arithmetic on the IEEE fields.

Exact bound check
-----------------
All three of ``A = |x|``, ``B = |x'|`` and ``E = eb_f`` are non-negative float32 values, written
``M * 2**(e - 150)`` with a 24-bit integer ``M`` and ``e = max(biased exponent, 1)``. Such
patterns order like unsigned integers, so one 31-bit compare names the larger of A and B
("big", with exponent ``eb``) and the smaller ("small", ``es``); ``d = eb - es``.

If either is zero, ``|A - B|`` is the other: ``Dm = Mbig``, ``d = 0``. Otherwise ``q != 0``, and
``q = RNE(x / S)`` with ``|q| >= 1`` puts ``x' = fl32(q S)`` between 2/3 and 2.0000002 times
``x``, so ``d <= 2`` and ``|A - B| = Dm * 2**(eb - d - 150)`` with
``Dm = (Mbig << d) - Msmall`` exact in 26 bits. (A larger ``d`` needs constants that
``quant_params`` never makes; the value then goes verbatim, which holds the bound.)

``E`` is normalised once per chunk, ``E = Me' * 2**(ee' - 150)`` with ``Me'`` in
``[2**23, 2**24)`` (or 0). With ``k = ee' - (eb - d)``, ``|A - B| <= E`` becomes
``Dm <= floor(Me' * 2**k)`` because ``Dm`` is an integer. If ``k >= 3`` then
``Me' * 2**k >= 2**26 > Dm``: accept. Otherwise ``floor(Me' * 2**k) = (Me' << 2) >> (2 - k)``,
zero from a shift of 26 on. Nothing is wider than 26 bits and no shift exceeds 26 places.

Reconstruction ``x' = fl32(q * S)``: ``P = |q| * Ms`` (51 bits) is normalised to bit 50 by a
left shift of ``min(clz(P), lim)`` with ``lim = eS + 26``; the limit stops at the subnormal
range, where the product is exactly representable and nothing is rounded. The top 24 bits are
rounded RNE with the guard and sticky bits below them, and adding the rounded significand to
``(lim - shift) << 23`` carries a rounding overflow into the exponent. A result of 255 or more
in the exponent field is infinity, which never meets a finite bound.

The hardware splits that shift between the factors, which are narrower than the product: ``Ms``
is normalised once per chunk (``ls`` places), ``|q|`` by ``sq = min(clz(|q|), lim - ls)``
before the multipliers, and the product, whose top bit is then at 49 or 50, by one more place
if bit 50 is clear and ``sq + ls < lim``. The sum is ``min(clz(P), lim)``: if the limit does
not bind within ``sq``, the last place finishes the normalisation; if it does, ``|q| << sq``
still has clear bits above it, ``clz(P) > lim``, and the shift is ``lim`` already.

Pipeline
--------
One beat of N values enters per clock. All datapath registers share one clock enable, taken
from the ``i.ready`` of a two-entry :class:`~ceaz_hw.elastic.PointerBuffer` at the output
(each lane from a register copy of it, as the lanes spread over the die), so
neither ``o.ready`` nor any combinational path reaches the datapath. The pointer kind, because
its consumer's ready comes from far away: with an ``ElasticBuffer`` it selected what every
payload register loads, and those sat across the die from the consumer's level (the four-lane
worst path at 1597876, 11.6 ns). Products are split into
partial products of at most 16x14 bits (one ECP5 18x18 multiplier each) and summed over two
further stages; shifters are split into coarse and fine stages.

The configuration ports must be held for :data:`CONFIG_LATENCY` clocks before the first beat
of a chunk and kept constant during it; they are decoded once into registers (four stages:
the normalisation of ``Ms`` and ``eb_f``, the exponent arithmetic, then copies for the
lanes).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, DomainRenamer, Module, Mux, Signal, signed, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

# Kind, Prequantized, Q_BITS and LANE_COUNTS are re-exported for the quantizer's users.
from .beats import LANE_COUNTS, Q_BITS, Kind, Prequantized, beat
from .delay import DelayLine
from .elastic import PointerBuffer, advance_on

__all__ = [
    "CONFIG_LATENCY",
    "LANE_COUNTS",
    "Q_BITS",
    "ConfigSignature",
    "Kind",
    "Prequantized",
    "Quantizer",
]

#: Clocks from a change of the configuration ports until it is used.
CONFIG_LATENCY = 4

#: The lowest product bit the q shifters see: p = 54 fits iff sh' - 1 >= 54 - Q_BITS (_Lane).
WINDOW = 54 - Q_BITS

#: Prequantizer constants from ``ceaz.quantizer.quant_params`` (seen from the driver's side).
#: ``recip_exp`` spans -159..118 for float32 bounds from 1e-45 to 3.4e38 and lossless steps.
ConfigSignature = wiring.Signature({
    "recip_mant": Out(32),  # Cm, in [2**31, 2**32)
    "recip_exp": Out(signed(9)),  # Ce
    "step": Out(32),  # float32 bits of S
    "eb": Out(32),  # float32 bits of eb_f
    "fill_bits": Out(32),
    "fill_enable": Out(1),
})


#: The configuration after decoding, as the lanes use it (registered once per design).
_Decoded = wiring.Signature({
    "cm": Out(32),  # Cm
    # The shift is sh = 150 - Ce - max(e, 1); its clip to 1..63 needs sh - 1 and two
    # comparisons, made on max(e, 1) against constants so that they run beside the subtraction
    "sh_m1": Out(signed(11)),  # 149 - Ce: sh - 1 = sh_m1 - max(e, 1)
    "sh_w": Out(signed(11)),  # sh_m1 - WINDOW: sh - 1 - WINDOW, the q shifter's (see _Lane)
    "sh_m63": Out(signed(11)),  # 87 - Ce: sh >= 63 iff max(e, 1) <= sh_m63
    # The three comparisons for e = 0 (max(e, 1) = 1), so that the lanes compare e itself:
    "e0_low": Out(1),  # sh <= 1
    "e0_high": Out(1),  # sh >= 63
    "e0_big": Out(1),  # sh <= 0
    # The reconstruction's normalisation, split between |q| and S (see _Lane): with Ms the
    # significand of S, lim = max(biased exponent of S, 1) + 26 the largest shift of the
    # product |q| Ms that the format allows, and ls' = clz(Ms) in 24 bits:
    "ms_n": Out(24),  # Ms << ls', its top bit at 23
    "lim_n": Out(9),  # lim - ls' (at least 4: lim >= 27), what is left for |q| and after
    "lim_q": Out(5),  # min(lim_n, 31): |q| (Q_BITS bits) never shifts further
    # The bound E = eb_f = Me 2**(ee - 150), ee = max(biased exponent, 1), normalised like S:
    # Me' = Me << le (le = clz(Me) in 24 bits), ee' = ee - le.
    "me_n": Out(24),  # Me'
    "c2": Out(signed(11)),  # 2 - ee'
    "fill_bits": Out(32),
    "fill_enable": Out(1),
})


def _mant_exp(bits):
    """(24-bit significand, max(biased exponent, 1)) of a float32 pattern, sign ignored."""
    e = bits[23:31]
    return Cat(bits[0:23], e != 0), Mux(e == 0, 1, e)


def _clz(m, value):
    """Leading zeros of ``value`` (at most 32 bits) within its width, as a registered-stage
    expression: a tree of (all zero, count) pairs, log2 levels deep rather than a chain."""
    width = len(value)
    assert width <= 32
    pad = (1 << (width - 1).bit_length()) - width
    bits = Cat(Const((1 << pad) - 1, pad), value)  # ones below: a zero value counts `width`
    # (all zero, count) per pair of bits; a count is only used where its part is not zero.
    pairs = [(~bits[i] & ~bits[i + 1], ~bits[i + 1]) for i in range(0, len(bits), 2)]
    while len(pairs) > 1:
        pairs = [(lo_zero & hi_zero, Cat(Mux(hi_zero, lo_count, hi_count), hi_zero))
                 for (lo_zero, lo_count), (hi_zero, hi_count) in zip(pairs[::2], pairs[1::2],
                                                                      strict=True)]
    return _widen(m, pairs[0][1], unsigned(max(len(bits).bit_length() - 1, 1)))


def _normalise(m, mant, name):
    """A 24-bit significand's leading zeros in a register, and the significand shifted up by
    them from a register: its top bit at 23 a stage later (0 stays 0, with 24 zeros)."""
    held = Signal(24, name=f"decoded_{name}")
    zeros = Signal(5, name=f"decoded_{name}_zeros")
    m.d.sync += [held.eq(mant), zeros.eq(_clz(m, mant))]
    return (held << zeros)[:24], zeros


def _widen(m, value, shape):
    """``value`` as a signal of ``shape`` (zero- or sign-extended), for arithmetic that must
    not wrap at the operands' own width."""
    sig = Signal(shape)
    m.d.comb += sig.eq(value)
    return sig


class _Stages:
    """Registers named values at successive pipeline boundaries and counts them.

    They hold data, which ``_Datapath`` reads only behind the valid flags it delays beside
    them (which do reset), so they need no reset. With ``reset_data`` they take it all the
    same: an ECP5 tile's eight FFs share one reset signal, and at 16 lanes nextpnr places the
    core only if the stages' FFs share one reset class (docs/timing.md, "Sixteen lanes"). The
    reset itself is free, but without it Yosys made ``Mux(c, 0, x)`` a synchronous reset of
    its own (a class of a few FFs); with it that select is logic again, 1.2 k LUT4 at 16
    lanes. The partial products' registers never have a reset, so that they can become the
    multipliers' own output registers (``bitstreams/outreg.py``).
    """

    def __init__(self, m, reset_data=False):
        self.m = m
        self.count = 0
        self._reset_less = not reset_data

    def next(self, products=None, **values):
        """Close a stage: return a dict of registered copies of ``values`` and of
        ``products`` (a dict of multiplier outputs, registered without reset)."""
        self.count += 1
        out = {}
        for reset_less, group in ((self._reset_less, values), (True, products or {})):
            for name, value in group.items():
                reg = Signal(value.shape(), name=f"s{self.count}_{name}",
                             reset_less=reset_less)
                self.m.d.sync += reg.eq(value)
                out[name] = reg
        return out


def _partial_products(a, b, a_lo, b_lo):
    """Split ``a * b`` into four products small enough for one 18x18 multiplier each."""
    ah, al, bh, bl = a[a_lo:], a[:a_lo], b[b_lo:], b[:b_lo]
    return {"hh": ah * bh, "hl": ah * bl, "lh": al * bh, "ll": al * bl}


def _sum_cross_terms(pp, a_lo, b_lo):
    """First adder stage: the cross terms (in units of 2**lo) and hh:ll side by side."""
    lo = min(a_lo, b_lo)
    mid = (pp["hl"] << (a_lo - lo)) + (pp["lh"] << (b_lo - lo))
    hhll = Cat(pp["ll"][: a_lo + b_lo], pp["hh"])  # ll < 2**(a_lo + b_lo): they do not overlap
    return {"mid": mid, "hhll": hhll}, lo


class _Lane(wiring.Component):
    """The datapath of one value, ``LATENCY`` register stages from ``x`` to ``out``.

    Every register advances every clock; the parent gates the whole datapath with an enable.
    With ``raw_in_ram`` the input bits wait for the bound check in a :class:`DelayLine`, and
    the stages before it carry only their sign (``raw`` is then one bit wide there).
    ``reset_data`` as :class:`Quantizer`'s.
    """

    LATENCY = 24

    def __init__(self, raw_in_ram=False, reset_data=False):
        self._raw_in_ram = raw_in_ram
        self._reset_data = reset_data
        super().__init__({
            "x": In(32),
            "cfg": In(_Decoded),
            "out": Out(Prequantized),
        })

    def elaborate(self, platform):
        m = Module()
        st = _Stages(m, self._reset_data)
        cfg = self.cfg
        x = self.x

        def keep(s, *names):
            return {name: s[name] for name in names}

        # -- q = RNE(|x| * Cm * 2**Ce), stages 1-7 -------------------------------------------
        mx, ex = _mant_exp(x)
        # Shift by sh' = clip(sh, 1, 63) in two steps; shifting by sh' - 1 keeps the guard bit.
        # sh <= 1 iff max(e, 1) >= sh_m1, and sh <= 0 iff max(e, 1) > sh_m1. The comparisons
        # take e straight from the input register (for e = 0 the decoded flags answer), so
        # no select of max(e, 1) precedes them.
        #
        # floor(Mx Cm / 2**sh') >= 2**Q_BITS iff the product's top bit p >= Q_BITS + sh'. For a
        # normal x, p is 54 or 55 (Mx >= 2**23, Cm >= 2**31); for a subnormal one no shift
        # from quant_params (Ce <= 118, so sh' >= 31) leaves more than 24 bits. So the two
        # outcomes are flags here: ``under`` (sh' - 1 < WINDOW, too large even for p = 54)
        # and ``over55`` (sh' - 1 <= WINDOW, too large for p = 55). Any q that fits thus has
        # sh' - 1 >= WINDOW, and the shifters below only see the product's bits from WINDOW
        # up (29, not 56), shifted by ``shw`` = sh' - 1 - WINDOW, and form the Q_BITS + 1 bits
        # of such a q (the guard and the floor). Constants outside these premises
        # (quant_params makes none) could only send values verbatim: a missed overflow leaves
        # q wrapped at 2**Q_BITS, which the bound check rejects, and a false one is verbatim
        # itself. The bound holds either way.
        e = x[23:31]
        e0 = e == 0
        low = Mux(e0, cfg.e0_low, e >= cfg.sh_m1)  # sh' - 1 = 0
        high = Mux(e0, cfg.e0_high, e <= cfg.sh_m63)  # sh' - 1 = 62
        big = Mux(e0, cfg.e0_big, e > cfg.sh_m1)
        w = _widen(m, cfg.sh_w - ex, signed(11))  # sh' - 1 - WINDOW between the clips
        s = st.next(
            raw=x[31:] if self._raw_in_ram else x,  # its top bit is the sign either way
            mx=mx,  # registered per lane: the multipliers then start from a register
            fill=cfg.fill_enable & (x == cfg.fill_bits),
            tl=(e == 0xFF) | (big & (mx != 0)),  # NaN, Inf or too large
            e0=e0, low=low, high=high, w=w,
        )
        # The flags and the shift from registers, beside the multipliers: formed in the
        # first stage, the subtraction and both comparisons after the input's route to the
        # lane were the four-lane worst path at 222fe74 (10.4 ns, nextpnr seed 1).
        low, high, w = s["low"], s["high"], s["w"]
        s = st.next(**keep(s, "raw", "fill", "tl"),
                    under=low | (~high & (w < 0)),
                    over55=~s["e0"] & (low | (~high & (w <= 0))),
                    shw=Mux(high, 62 - WINDOW, w)[:6],  # 0 .. 62 - WINDOW unless under
                    products=_partial_products(s["mx"], cfg.cm, 12, 16))

        terms, lo = _sum_cross_terms(s, 12, 16)
        s = st.next(**keep(s, "raw", "fill", "tl", "under", "over55", "shw"), **terms)

        prod = _widen(m, s["hhll"] + (s["mid"] << lo), unsigned(56))  # Mx * Cm < 2**56
        s = st.next(**keep(s, "raw", "fill", "tl", "under", "over55", "shw"), prod=prod)

        # Coarse shift of the product's bits from WINDOW up by a multiple of 8, with the OR
        # of the bits shifted out (all below WINDOW, and the bytes above it); it keeps the
        # Q_BITS + 1 bits and the 7 more that the fine shift may move down.
        prod, coarse = s["prod"], s["shw"][3:6]
        top = prod[WINDOW:]
        byte_nz = Cat(top[8 * i : 8 * i + 8] != 0 for i in range(-(-len(top) // 8)))
        below, above = Signal(), Signal()  # bits shifted out: below WINDOW, and above it
        m.d.comb += below.eq(prod[:WINDOW] != 0)
        for i in range(1, len(byte_nz) + 1):
            with m.If(coarse == i):
                m.d.comb += above.eq(byte_nz[:i] != 0)
        sticky = below | above
        s = st.next(**keep(s, "raw", "fill"), fine=s["shw"][:3],
                    tl=s["tl"] | s["under"] | (prod[55] & s["over55"]),
                    t=_widen(m, top >> (coarse * 8), unsigned(Q_BITS + 8)), sticky=sticky)

        fine, t = s["fine"], s["t"]
        low_nz = Signal()
        for i in range(1, 8):
            with m.If(fine == i):
                m.d.comb += low_nz.eq(t[:i] != 0)
        s = st.next(**keep(s, "raw", "fill", "tl"), t=(t >> fine)[: Q_BITS + 1],
                    sticky=s["sticky"] | low_nz)

        guard, floor = s["t"][0], s["t"][1:]
        mag = _widen(m, floor + (guard & (s["sticky"] | floor[0])), unsigned(Q_BITS + 1))
        too_large = s["tl"] | mag[Q_BITS]
        s = st.next(**keep(s, "raw", "fill"), tl=too_large, mag=Mux(too_large, 0, mag[:Q_BITS]))

        # -- x' = fl32(|q| * S), stages 8-16 -------------------------------------------------
        # |q| is normalised before the product rather than the product after it: shifted up by
        # sq = min(clz(|q|), lim_q) places (its top bit to Q_BITS - 1 unless the subnormal limit
        # binds) and multiplied by the normalised Ms, the product P' = P << (sq + ls') has its
        # top bit at 49 or 50 (ls' = 23 - top bit of Ms, a constant). One more place, if the
        # limit leaves room, gives P << min(clz(P), lim) exactly as the format's normalisation;
        # when the limit binds within sq, that is all the shift there is (see _Decoded).
        q = _widen(m, Mux(s["raw"][-1], -s["mag"], s["mag"]), signed(Q_BITS + 1))
        s = st.next(**keep(s, "raw", "fill", "tl", "mag"), q=q, zero=s["mag"] == 0,
                    clz=_clz(m, s["mag"]))
        sq = _widen(m, Mux(s["clz"] > cfg.lim_q, cfg.lim_q, s["clz"]), unsigned(5))
        s = st.next(**keep(s, "raw", "fill", "tl", "q", "zero", "mag"), sq=sq)

        # Coarse shift by a multiple of 4, then fine: no bit leaves the Q_BITS, as sq <= clz.
        # The multipliers' operand is thus a register of its own, which the placer can put
        # next to them (from a register shared with q, routing to the DSP took 6.7 ns).
        s = st.next(**keep(s, "raw", "fill", "tl", "q", "zero"), fine=s["sq"][:2],
                    nq=(s["mag"] << (s["sq"][2:] * 4))[:Q_BITS],
                    room=(cfg.lim_n - s["sq"])[:9])  # >= 0: sq <= lim_q <= lim_n
        s = st.next(**keep(s, "raw", "fill", "tl", "q", "zero", "room"),
                    nq=(s["nq"] << s["fine"])[:Q_BITS])
        s = st.next(**keep(s, "raw", "fill", "tl", "q", "zero", "room"),
                    products=_partial_products(s["nq"], cfg.ms_n, 13, 12))

        terms, lo = _sum_cross_terms(s, 13, 12)
        s = st.next(**keep(s, "raw", "fill", "tl", "q", "zero", "room"), **terms)

        prod = _widen(m, s["hhll"] + (s["mid"] << lo), unsigned(51))  # nq * Ms' < 2**51
        # The product's bits lo .. 24 on their own (the low bits of the cross terms' sum).
        low_sum = _widen(m, s["hhll"][lo:25] + s["mid"][: 25 - lo], unsigned(25 - lo))
        # The sticky OR of the bits below both guard places is taken here, from the adder's
        # low bits, which settle early: in front of the rounding adders it was the four-lane
        # worst path at 69aa78c (10.6 ns, 94.1 MHz).
        s = st.next(**keep(s, "raw", "fill", "tl", "q", "zero"), norm=prod,
                    sticky25=(s["hhll"][:lo] != 0) | (low_sum[: 25 - lo] != 0),
                    room=s["room"], one=s["room"] != 0)

        # The last place: taken if bit 50 is clear and the limit leaves room. Then the top 24
        # bits, rounded RNE with the guard bit and the sticky OR below it. Both outcomes are
        # rounded side by side and picked a stage later: the place's select in front of the
        # rounding adder was the four-lane worst path at 7dbaec3 (10.6 ns).
        norm, rounded = s["norm"], {}
        for place in (0, 1):  # bits 27..50 (the product's top bit at 50) or 26..49
            top, guard = norm[27 - place : 51 - place], norm[26 - place]
            sticky = s["sticky25"] | (norm[25] if place == 0 else 0)
            rounded[f"sig{place}"] = top + (guard & (sticky | top[0]))  # 2**24 carries on
        s = st.next(**keep(s, "raw", "fill", "tl", "q", "zero", "room"), **rounded,
                    up=~norm[50] & s["one"])

        # The exponent field: lim - the whole shift (room - up, >= 0) plus a rounding carry.
        zero, up, found = s["zero"], s["up"], {}
        for place in (0, 1):
            sig = s[f"sig{place}"]
            exp = _widen(m, s["room"] - place + sig[23:25], unsigned(10))
            found[place] = (Cat(sig[:23], exp[:8]), exp >= 0xFF)
        s = st.next(**keep(s, "raw", "fill", "q"),
                    tl=s["tl"] | (~zero & Mux(up, found[1][1], found[0][1])),  # x' infinite
                    xr=Mux(zero, 0, Mux(up, found[1][0], found[0][0])))
        if self._raw_in_ram:  # the input bits, as the stage registers would have them here
            m.submodules.raw_delay = raw_delay = DelayLine(32, st.count)
            m.d.comb += raw_delay.i.eq(x)
            s["raw"] = raw_delay.o

        # -- |x - x'| <= eb_f, exactly, stages 17-23 -----------------------------------------
        # Which magnitude is larger, a stage of its own: the 31-bit comparison and the
        # selects after it in one stage was the four-lane worst path at 0497928 (10.7 ns).
        s = st.next(**keep(s, "raw", "fill", "tl", "q", "xr"),
                    a_big=s["raw"][:31] >= s["xr"])  # non-negative floats order like their bits
        a_bits, b_bits, a_big = s["raw"][:31], s["xr"], s["a_big"]
        ma, ea = _mant_exp(a_bits)
        mb, eb = _mant_exp(b_bits)
        s = st.next(**keep(s, "raw", "fill", "tl", "q"),
                    m_big=Mux(a_big, ma, mb), m_small=Mux(a_big, mb, ma),
                    small_zero=Mux(a_big, mb == 0, ma == 0),
                    e_big=Mux(a_big, ea, eb), dist=Mux(a_big, ea - eb, eb - ea)[:8])

        # Both nonzero means q != 0, and then x' is within a factor 2.0000002 of x (q = RNE(x/S)
        # with |q| >= 1, x' = fl32(qS)): their exponents differ by d <= 2, and Dm =
        # (Mbig << d) - Msmall has 26 bits. If one is zero, |A - B| = Mbig 2**(e_big - 150):
        # d = 0. A larger d would need constants that quant_params never makes; such a value
        # goes verbatim (`near` clear), which holds the bound.
        # With E = Me' 2**(ee' - 150) (Me' normalised, _Decoded), |A - B| <= E iff
        # Dm <= floor(Me' 2**k), k = ee' - e_big + d. For k >= 3 that holds for any 26-bit Dm;
        # otherwise floor(Me' 2**k) = (Me' << 2) >> r with r = 2 - k = c2 + e_big - d, zero
        # from r = 26 on. (E = 0 has Me' = 0 and le = 24, so r >= 24: only Dm = 0 passes.)
        d = _widen(m, Mux(s["small_zero"], 0, s["dist"][:2]), unsigned(2))
        s = st.next(**keep(s, "raw", "fill", "tl", "q"),
                    near=s["small_zero"] | (s["dist"] <= 2),
                    big=(s["m_big"] << d)[:26], small=s["m_small"],
                    r=_widen(m, cfg.c2 + s["e_big"] - d, signed(11)))

        r = s["r"]
        s = st.next(**keep(s, "raw", "fill", "tl", "q", "near"),
                    dm=(s["big"] - s["small"])[:26],
                    accept=r < 0,  # k >= 3: E exceeds any 26-bit Dm
                    r=Mux(r < 0, 0, Mux(r > 26, 26, r))[:5])

        e_wide = Cat(Const(0, 2), cfg.me_n)
        s = st.next(**keep(s, "raw", "fill", "tl", "q", "near", "dm", "accept"),
                    fine=s["r"][:3], e=(e_wide >> (s["r"][3:5] * 8))[:26])

        s = st.next(**keep(s, "raw", "fill", "tl", "q", "near", "dm", "accept"),
                    e=(s["e"] >> s["fine"])[:26])

        # The comparison gets a stage of its own: with the kind's select and the output
        # buffer's after it, it was the core's slowest path (12.1 ns, 51 bits wide then).
        s = st.next(**keep(s, "raw", "fill", "tl", "q"),
                    within=s["near"] & (s["accept"] | (s["dm"] <= s["e"])))
        kind = Mux(s["fill"], Kind.FILL, Mux(s["tl"] | ~s["within"], Kind.VERBATIM, Kind.NORMAL))
        s = st.next(kind=kind, word=Mux(kind == Kind.NORMAL, s["q"].as_unsigned(), s["raw"]))

        assert st.count == self.LATENCY, st.count
        m.d.comb += [
            self.out.raw.eq(s["word"]),  # q, in the same bits for a normal value
            self.out.kind.eq(s["kind"]),
        ]
        return m


class _Datapath(wiring.Component):
    """Input register, N lanes and the beat's ``valid``, ``last`` and ``count`` delayed
    alongside them: ``1 + _Lane.LATENCY`` stages.

    Every register advances every clock; the parent gates the whole datapath with an enable,
    each lane through a copy of it: lane ``i``'s registers are in clock domain
    ``lane_domains[i]``, which the parent renames to ``sync``.
    """

    def __init__(self, lanes, raw_in_ram=False, reset_data=False):
        self._lanes = lanes
        self._raw_in_ram = raw_in_ram
        self._reset_data = reset_data
        self.lane_domains = [f"lane{i}" for i in range(lanes)]
        super().__init__({
            "x": In(beat(unsigned(32), lanes)),
            "x_valid": In(1),
            "cfg": In(_Decoded),
            "out": Out(beat(Prequantized, lanes)),
            "out_valid": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        x = Signal.like(self.x)
        valid = Signal()
        m.d.sync += [x.eq(self.x), valid.eq(self.x_valid)]
        lanes = [_Lane(self._raw_in_ram, self._reset_data) for _ in range(self._lanes)]
        for i, lane in enumerate(lanes):
            m.submodules[f"lane{i}"] = DomainRenamer(self.lane_domains[i])(lane)
            m.d.comb += [lane.x.eq(x.lanes[i]), self.out.lanes[i].eq(lane.out)]
        wiring.connect(m, wiring.flipped(self.cfg), *(lane.cfg for lane in lanes))
        # Framing travels beside the lanes, one register per lane stage.
        last, count = x.last, x.count
        for stage in range(1, _Lane.LATENCY + 1):
            later_valid = Signal(name=f"valid_{stage}")
            later_last = Signal(name=f"last_{stage}")
            later_count = Signal.like(count, name=f"count_{stage}")
            m.d.sync += [
                later_valid.eq(valid),
                later_last.eq(last),
                later_count.eq(count),
            ]
            valid, last, count = later_valid, later_last, later_count
        m.d.comb += [
            self.out_valid.eq(valid),
            self.out.last.eq(last),
            self.out.count.eq(count),
        ]
        return m


class Quantizer(wiring.Component):
    """Prequantizer with the exact bound check, N float32 values per beat.

    Parameters
    ----------
    lanes : int
        Values per beat, one of 1, 2, 4, 8 or 16.
    raw_in_ram : bool
        Hold each value's input bits for the bound check in block RAM (one
        :class:`~ceaz_hw.delay.DelayLine` per lane) instead of 16 stages of registers: 478
        flip-flops fewer a lane for one DP16KD, the same outputs in every clock.
    reset_data : bool
        Reset the data registers too, not only the valid flags (the multipliers' output
        registers excepted): the same outputs, and every flip-flop of the lanes in the
        stage's reset class, for some logic (``_Stages``).

    Members
    -------
    cfg : ``In(ConfigSignature)``
        Constants from ``quant_params``; set them :data:`CONFIG_LATENCY` clocks before the
        first beat of a chunk and hold them during it.
    i : ``In(stream.Signature(beat(unsigned(32), lanes)))``
        Float32 bit patterns, value ``j`` of a beat in lane ``j``, with ``last`` and
        ``count`` (:func:`ceaz_hw.beats.beat`).
    o : ``Out(stream.Signature(beat(Prequantized, lanes)))``
        The kind of each value, and its ``q`` if normal or else its input bits (``raw``, the
        same bits of the lane), in the same lanes; ``last`` and
        ``count`` pass through unchanged. Lanes at or above ``count`` are computed like the
        others but carry don't-care values.
    """

    def __init__(self, lanes=1, raw_in_ram=False, reset_data=False):
        if lanes not in LANE_COUNTS:
            raise ValueError(f"lanes must be one of {LANE_COUNTS}, not {lanes!r}")
        self._lanes = lanes
        self._raw_in_ram = bool(raw_in_ram)
        self._reset_data = bool(reset_data)
        super().__init__({
            "cfg": In(ConfigSignature),
            "i": In(stream.Signature(beat(unsigned(32), lanes))),
            "o": Out(stream.Signature(beat(Prequantized, lanes))),
        })

    @property
    def lanes(self):
        return self._lanes

    #: Clocks from an accepted input beat to its output beat with the output always ready.
    LATENCY = 1 + _Lane.LATENCY + 1

    def elaborate(self, platform):
        m = Module()

        decoded = _Decoded.create(path=("decoded",))
        ms, es = _mant_exp(self.cfg.step)
        me, ee = _mant_exp(self.cfg.eb)
        m.d.sync += [
            decoded.cm.eq(self.cfg.recip_mant),
            decoded.sh_m1.eq(149 - self.cfg.recip_exp),
            decoded.sh_w.eq(149 - WINDOW - self.cfg.recip_exp),
            decoded.sh_m63.eq(87 - self.cfg.recip_exp),
            decoded.e0_low.eq(self.cfg.recip_exp >= 148),  # 149 - Ce <= 1
            decoded.e0_high.eq(self.cfg.recip_exp <= 86),  # 87 - Ce >= 1
            decoded.e0_big.eq(self.cfg.recip_exp >= 149),  # 149 - Ce < 1
            decoded.fill_bits.eq(self.cfg.fill_bits),
            decoded.fill_enable.eq(self.cfg.fill_enable),
        ]
        # The significands of S and eb_f normalised, a stage later.
        ms_n, ls = _normalise(m, ms, "ms")
        me_n, le = _normalise(m, me, "me")
        lim_reg = Signal(9, name="decoded_lim")
        ee_reg = Signal(8, name="decoded_ee")
        m.d.sync += [lim_reg.eq(es + 26), ee_reg.eq(ee)]
        # The exponent arithmetic in registers of its own, then the clip: from the
        # normalisation's zero count (routed 4.3 ns) through the subtraction, the comparison
        # and the clip was the four-lane worst path at 5e31a49 with seed 1 (10.0 ns).
        lim_n = Signal(9, name="decoded_lim_n_sum")
        c2 = Signal(signed(11), name="decoded_c2_sum")
        m.d.sync += [lim_n.eq(_widen(m, lim_reg - ls, unsigned(9))), c2.eq(2 - ee_reg + le)]
        # Computed into registers of their own, then copied into the ones the lanes read
        # (CONFIG_LATENCY 4): the copies can sit by the lanes and the logic by the decode.
        # From the normalisation's registers through the subtraction and the clip, routed
        # to the lanes, was the four-lane worst path at 4ae8ef2 with seed 3 (10.1 ns).
        late = {"me_n": me_n, "c2": c2, "ms_n": ms_n, "lim_n": lim_n,
                "lim_q": Mux(lim_n > 31, 31, lim_n)}
        for name, value in late.items():
            port = getattr(decoded, name)
            early = Signal.like(port, name=f"decoded_{name}_early")
            m.d.sync += [early.eq(value), port.eq(early)]

        datapath = _Datapath(self._lanes, self._raw_in_ram, self._reset_data)
        domains = datapath.lane_domains
        # A copy per lane, and one for ``i.ready``: the producer's handshake logic sits away
        # from the buffer (the level, routed to the input's ready and on into the top's
        # framing, was the two-lane worst path while building 52761dd, 10.2 ns).
        m.submodules.buffer = buffer = PointerBuffer(beat(Prequantized, self._lanes),
                                                     ready_copies=len(domains) + 1)
        *lane_enables, input_ready = buffer.ready_copies
        enable = buffer.i.ready
        m.submodules.datapath = datapath = advance_on(
            datapath, {"sync": enable, **dict(zip(domains, lane_enables, strict=True))})
        wiring.connect(m, decoded, datapath.cfg)
        m.d.comb += [
            datapath.x.eq(self.i.payload),
            datapath.x_valid.eq(self.i.valid),
            self.i.ready.eq(input_ready),
            buffer.i.payload.eq(datapath.out),
            buffer.i.valid.eq(datapath.out_valid),
        ]
        wiring.connect(m, buffer.o, wiring.flipped(self.o))
        return m
