"""The compressor: AXI4-Stream float32 in, AXI4-Stream chunk records out, AXI4-Lite control.

This is the only module that knows every stage; each stage knows only its neighbours' beat
layouts (``ceaz_hw.beats``). The pipeline order follows docs/hardware.md:

    s_axis -> input framing -> Quantizer -> Predictor -> SymbolStage -+-> HuffmanLanes -> Packer
                                                                      `-> Histogram

The register file (``ceaz.regmap``) holds the configuration; the framing stage checks TLAST
against the box size from the registers, so a misplaced TLAST never desynchronises the chunk
boundaries of the later stages (it is flagged in ERROR and the chunk ends where the box says
or where TLAST came, whichever is first).
"""

from __future__ import annotations

from amaranth.hdl import (
    C,
    Cat,
    ClockDomain,
    ClockSignal,
    DomainRenamer,
    Module,
    Mux,
    Signal,
)
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ceaz import format as fmt
from ceaz import regmap

from .axi import AXI4LiteSignature, AXI4StreamSignature
from .beats import LANE_COUNTS, Escape, symbol_bits
from .builder import CodebookBuilder
from .elastic import ElasticBuffer, PointerBuffer, connect_on_copy
from .histogram import Histogram
from .huffman import HuffmanLanes
from .packer import Packer, word_bits
from .predictor import Predictor
from .quantizer import CONFIG_LATENCY, Quantizer
from .regfile import RegisterFile
from .symbols import SymbolStage

# word_bits (the output stream's width W) is the packer's, re-exported for the top's users.
__all__ = ["Compressor", "word_bits"]


class Compressor(wiring.Component):
    """The whole compressor pipeline, N values per clock.

    Parameters
    ----------
    lanes : int
        Values per beat N, one of 1, 2, 4, 8, 16.
    radius : int
        Quantization radius R (the alphabet has 2R + 2 symbols).
    max_code_len, max_line, max_plane, max_sync : int
        See docs/hardware.md, "Parameters".
    piece_bits : int or None
        The packer's front: whole fields per clock (None), or pieces of this many bits
        (:class:`~ceaz_hw.packer.Packer`); it changes the logic and the rate of escape-heavy
        beats, not the bytes.
    raw_in_ram : bool
        The quantizer holds each value's input bits in block RAM rather than in registers
        (:class:`~ceaz_hw.quantizer.Quantizer`): fewer flip-flops, one DP16KD a lane, the
        same bytes.
    shared_reset : bool
        Every stage takes its reset from one register rather than one each, and the
        quantizer's data registers take it too (``reset_data``): all the stages' flip-flops
        then share one reset (LSR) class, which the 16-lane core needs to be placed
        (docs/timing.md, "Sixteen lanes"), at the cost of a reset net that reaches them all.
        The same bytes.

    The reset ``rst`` is registered once before it reaches the pipeline, so the core leaves
    reset on the clock after ``rst`` falls (AXI masters may start one clock after that edge
    anyway). One flop in front of a reset that fans out to every register of the design
    eases its timing on the chip, and it keeps thousands of next-state functions free of a
    primary input, which makes the Verilated simulated card about 1.4 times faster.
    """

    def __init__(self, lanes=4, radius=fmt.DEFAULT_RADIUS, max_code_len=fmt.MAX_CODE_LEN,
                 max_line=fmt.DEFAULT_MAX_LINE, max_plane=fmt.DEFAULT_MAX_PLANE, max_sync=1024,
                 piece_bits=None, raw_in_ram=False, shared_reset=False):
        if lanes not in LANE_COUNTS:
            raise ValueError(f"lanes must be one of {LANE_COUNTS}, not {lanes!r}")
        if not fmt.MIN_RADIUS <= radius <= fmt.MAX_RADIUS:
            raise ValueError(f"radius must be in [{fmt.MIN_RADIUS}, {fmt.MAX_RADIUS}]")
        if max_code_len != fmt.MAX_CODE_LEN:
            raise ValueError(f"max_code_len must be {fmt.MAX_CODE_LEN} (the format's limit)")
        for name, value in [("max_line", max_line), ("max_plane", max_plane)]:
            if value < lanes or value & (value - 1):
                raise ValueError(f"{name} must be a power of two >= lanes, not {value!r}")
        if max_plane < max_line:
            raise ValueError("max_plane must be at least max_line")
        self.lanes, self.radius, self.max_code_len = lanes, radius, max_code_len
        self.max_line, self.max_plane, self.max_sync = max_line, max_plane, max_sync
        self.piece_bits = piece_bits
        self.raw_in_ram = raw_in_ram
        self.shared_reset = shared_reset
        self.word_bits = word_bits(lanes)
        super().__init__({
            "s_axis": In(AXI4StreamSignature(32 * lanes)),
            "m_axis": Out(AXI4StreamSignature(self.word_bits)),
            "s_axil": In(AXI4LiteSignature(regmap.ADDRESS_BITS, 32)),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.domains.core = core = ClockDomain("core", local=True)
        in_reset = Signal(init=1)
        m.d.sync += in_reset.eq(0)  # 1 while rst is high (its init value), then 0
        m.d.comb += [core.clk.eq(ClockSignal("sync")), core.rst.eq(in_reset)]
        m.submodules.core = DomainRenamer("core")(self._pipeline())
        return m

    def _pipeline(self):
        """Every stage, the framing, the registers and the counters, in domain ``sync``."""
        m = Module()
        n_lanes = self.lanes
        # CTRL.SOFT_RESET takes effect a clock after its write: ``soft_reset`` is the decoded
        # write, ``resetting`` the clock after it, when the framing and every stage reset. Each
        # stage takes its reset from a register of its own (``<stage>_reset``, in a clock domain
        # of its own), which replaces both the core's reset and the soft reset there: the
        # decoded write, OR-ed with the core's reset, fanned out to every stage's flops across
        # the die, was the eight-lane worst path at 3426cb9 (11.2 ns, 10.0 ns of it routing).
        # The stages stay in reset a clock after the core's reset too, before any bus write.
        # With ``shared_reset`` one such register resets every stage (the class docstring).
        soft_reset = Signal()
        resetting = Signal(init=1)
        m.d.sync += resetting.eq(soft_reset)

        def reset_register(name):
            stage_reset = Signal(init=1, name=f"{name}_reset", attrs={"keep": 1})
            # Equal to ``resetting`` in every clock, so the last term is always 0; it makes
            # each copy read its own output, so that no tool merges the copies into one flop.
            m.d.sync += stage_reset.eq(soft_reset | (stage_reset & ~resetting))
            return stage_reset

        shared = reset_register("stages") if self.shared_reset else None

        def pipeline(name, component):
            """Stages lose their state (not their memories' contents) on a soft reset."""
            stage_reset = shared if shared is not None else reset_register(name)
            domain = ClockDomain(name, local=True)
            m.domains += domain
            m.d.comb += [domain.clk.eq(ClockSignal("sync")), domain.rst.eq(stage_reset)]
            m.submodules[name] = DomainRenamer(name)(component)
            return component

        quant = pipeline("quantizer", Quantizer(n_lanes, self.raw_in_ram,
                                                reset_data=self.shared_reset))
        pred = pipeline("predictor", Predictor(n_lanes, self.max_line, self.max_plane))
        syms = pipeline("symbols", SymbolStage(n_lanes, self.radius, ready_copies=1))
        huff = pipeline("huffman", HuffmanLanes(n_lanes, self.radius, self.max_code_len))
        hist = pipeline("histogram", Histogram(n_lanes, fmt.n_symbols(self.radius),
                                               fmt.MAX_CHUNK_VALUES))
        pack = pipeline("packer", Packer(n_lanes, self.max_code_len, self.max_sync,
                                         self.piece_bits))
        build = pipeline("builder", CodebookBuilder(fmt.n_symbols(self.radius),
                                                    fmt.MAX_CHUNK_VALUES, self.max_code_len))

        # A register read waits just long enough for HIST_DATA to follow HIST_ADDR (or its own
        # advance after the previous read): the host reads every count of every chunk.
        m.submodules.regs = regs = RegisterFile(regmap.REGISTERS, read_wait=hist.READ_LATENCY)
        wiring.connect(m, wiring.flipped(self.s_axil), regs.axi)
        reg = regs.fields

        # -- configuration ---------------------------------------------------------------
        cx, cy, cz = reg["BOX_X"].value, reg["BOX_Y"].value, reg["BOX_Z"].value
        sync_k = reg["SYNC_INTERVAL"].value
        # The box size, one register per step: every factor is first saturated just above the
        # largest chunk, so the products stay 25 x 25 bits and any box over the limit still
        # reads as too large. Each product takes three clocks (four registered partial
        # products of at most 13 x 13 bits, one block multiplier each, then two registered
        # adds) so that no multiply and no add of its result share a clock. A write reaches
        # bad_config after 9 clocks (sat, 3 x plane, plane_sat, 3 x values, bad_config) and
        # the framing's `remaining` as well (from values); the settle counter below holds the
        # input for 10.
        limit = fmt.MAX_CHUNK_VALUES + 1

        def saturated(value, name):
            sat = Signal(range(limit + 1), name=name)
            m.d.sync += sat.eq(Mux(value > limit, limit, value))
            return sat

        def staged_product(a, b, name):
            """a * b three clocks later: both factors split in halves, the four partial
            products registered, then summed over two registered adds. The partial products'
            registers have no reset (recomputed every clock, inside the settling time), so
            that they can become the multipliers' output registers (outreg.py)."""
            ha, hb = (len(a) + 1) // 2, (len(b) + 1) // 2
            parts = {}
            for i, x in (("l", a[:ha]), ("h", a[ha:])):
                for j, y in (("l", b[:hb]), ("h", b[hb:])):
                    part = Signal(len(x) + len(y), name=f"{name}_{i}{j}", reset_less=True)
                    m.d.sync += part.eq(x * y)
                    parts[i + j] = part
            low = Signal(ha + len(b), name=f"{name}_low")  # a[:ha] * b
            high = Signal(len(a) - ha + len(b), name=f"{name}_high")  # a[ha:] * b
            product = Signal(len(a) + len(b), name=name)
            m.d.sync += [
                low.eq(parts["ll"] + (parts["lh"] << hb)),
                high.eq(parts["hl"] + (parts["hh"] << hb)),
                product.eq(low + (high << ha)),
            ]
            return product

        sx, sy, sz = (saturated(c, f"box_{a}_sat") for c, a in [(cx, "x"), (cy, "y"), (cz, "z")])
        plane = staged_product(sy, sx, "plane")
        plane_sat = saturated(plane, "plane_sat")
        values = staged_product(plane_sat, sz, "values")
        sync_room = staged_product(C(self.max_sync + 1), sync_k, "sync_room")
        bad_config = Signal()
        m.d.sync += bad_config.eq(
            (cx == 0) | (cy == 0) | (cz == 0)
            | (values > fmt.MAX_CHUNK_VALUES)
            | ((cy > 1) & (cx > self.max_line))
            | ((cz > 1) & (plane > self.max_plane))
            | (sync_k == 0) | (sync_k[: (n_lanes - 1).bit_length()] != 0 if n_lanes > 1 else 0)
            | (values > sync_room)
        )
        # A configuration write takes a few clocks to reach bad_config and the stages (the
        # quantizer's decode takes CONFIG_LATENCY of them).
        assert CONFIG_LATENCY < 10
        settle = Signal(range(10), init=9)
        with m.If(regs.config_written):
            m.d.sync += settle.eq(9)
        with m.Elif(settle != 0):
            m.d.sync += settle.eq(settle - 1)

        m.d.comb += [
            quant.cfg.recip_mant.eq(reg["RECIP_MANT"].value),
            quant.cfg.recip_exp.eq(reg["RECIP_EXP"].value),
            quant.cfg.step.eq(reg["STEP"].value),
            quant.cfg.eb.eq(reg["EB"].value),
            quant.cfg.fill_bits.eq(reg["FILL_BITS"].value),
            quant.cfg.fill_enable.eq(reg["FILL_ENABLE"].value[0]),
            pred.cx.eq(cx),
            pred.cy.eq(cy),
            pred.cz.eq(cz),
            pack.sync_interval.eq(sync_k),
        ]

        # -- input framing: TKEEP -> count, TLAST checked against the box ----------------
        s = self.s_axis
        count = Signal(range(n_lanes + 1))
        m.d.comb += count.eq(sum(s.tkeep[4 * j] for j in range(n_lanes)))
        # remaining = the chunk's values not yet in, a register of its own so that no
        # subtraction sits in front of the beat's count, and no Mux in front of its own
        # subtraction (a valid box has at most 2**24 values). Between chunks it follows
        # `values` a clock late, which the settle count covers.
        remaining = Signal(range(fmt.MAX_CHUNK_VALUES + 1))
        at_start = Signal(init=1)  # no value of this chunk is in yet
        ends_here = Signal()
        m.d.comb += ends_here.eq(remaining <= count)
        beat_count = Signal.like(count)
        m.d.comb += beat_count.eq(count)
        with m.If(ends_here):
            m.d.comb += beat_count.eq(remaining)
        in_ready = Signal()
        m.d.comb += [
            in_ready.eq(quant.i.ready & ~bad_config & (settle == 0) & ~soft_reset & ~resetting),
            s.tready.eq(in_ready),
            quant.i.valid.eq(s.tvalid & in_ready),
            quant.i.payload.last.eq(ends_here | s.tlast),
            quant.i.payload.count.eq(beat_count),
        ]
        for j in range(n_lanes):
            m.d.comb += quant.i.payload.lanes[j].eq(s.tdata[32 * j: 32 * j + 32])
        tlast_early = Signal()
        tlast_missing = Signal()
        accepted = s.tvalid & in_ready
        # at_start's next value is also needed by the registered ``busy`` below.
        at_start_next = Signal()
        m.d.comb += at_start_next.eq(at_start)
        m.d.sync += at_start.eq(at_start_next)
        with m.If(accepted):
            with m.If(ends_here | s.tlast):
                m.d.comb += at_start_next.eq(1)
                m.d.sync += remaining.eq(values)
            with m.Else():
                m.d.comb += at_start_next.eq(at_start & (count == 0))
                m.d.sync += remaining.eq(remaining - count)
        with m.Elif(at_start):
            m.d.sync += remaining.eq(values)
        m.d.comb += [
            tlast_early.eq(accepted & s.tlast & ~ends_here),
            tlast_missing.eq(accepted & ends_here & (~s.tlast | (count > remaining))),
        ]

        # -- the stages ----------------------------------------------------------------------
        # The predictor's ready is its enable (its output buffer's level) and its chunk-start
        # wait; straight into the quantizer's output buffer, it crossed the die twice (the
        # 4-lane worst path). A buffer between them takes it with one crossing. With the payload
        # in registers that the ready selects (ElasticBuffer), that select was the two-lane
        # worst path (10.2 ns, 8.4 routing, at 6d486b4): here the ready moves a pointer.
        # The quantizer's buffer takes that ready from a register copy: with the ready itself
        # both buffers shared one LUT for the handshake (each one's level in, the quantizer's
        # pop and this buffer's push out), and from the quantizer's level to that LUT by the
        # predictor and back was the four-lane worst path at f0cbae6 with nextpnr seed 3
        # (10.5 ns, 8.6 of it routing).
        pred_in = pipeline("predictor_input", PointerBuffer(quant.o.payload.shape(),
                                                            ready_copies=1))
        connect_on_copy(m, quant.o, pred_in.i, pred_in.ready_copies[0])
        wiring.connect(m, pred_in.o, pred.i)
        # Likewise the predictor's buffer pops on a register copy of the symbol stage's ready:
        # with the ready itself, from the predictor buffer's level to the handshake LUT by the
        # symbol stage and back into that buffer's payload selects was the four-lane worst path
        # at 8716ff1 with nextpnr seed 1 (10.6 ns, 9.3 of it routing).
        connect_on_copy(m, pred.o, syms.i, syms.ready_copies[0])
        # Fork the symbols to the Huffman lanes and the histogram; both take the beat together.
        # With ADAPT, a beat also waits for the on-chip adaptation (see below). The histogram
        # takes it through a buffer, so that its bank's clean flag is not in the fork's ready
        # and the fork's gate not in the histogram's bank logic. The histogram may only lag:
        # the gate below counts reads of completed histograms, and ``busy`` covers the buffer.
        src = syms.o
        hist_buf = pipeline("hist_buffer", ElasticBuffer(hist.i.payload.shape()))
        wiring.connect(m, hist_buf.o, hist.i)
        adaptation_ok = Signal()
        m.d.comb += [
            huff.i.payload.eq(src.payload),
            huff.i.valid.eq(src.valid & hist_buf.i.ready & adaptation_ok),
            hist_buf.i.valid.eq(src.valid & huff.i.ready & adaptation_ok),
            hist_buf.i.payload.last.eq(src.payload.last),
            hist_buf.i.payload.count.eq(src.payload.count),
            src.ready.eq(huff.i.ready & hist_buf.i.ready & adaptation_ok),
        ]
        for j in range(n_lanes):
            m.d.comb += hist_buf.i.payload.lanes[j].eq(src.payload.lanes[j].sym)
        fork_taken = src.valid & src.ready

        # -- on-chip adaptation (ADAPT, docs/hardware.md "Codebook builder") ---------------
        # Chunk k >= 2 is coded with the book of chunk k-2's histogram, whatever the chunk
        # sizes and the stalls, so that the bytes equal the model's CodebookSchedule(lag=2):
        # * the reader hands chunk k's counts to the builder once it is idle, and chunk k+1
        #   may not complete (its last beat waits) until they are read, because completing it
        #   shows the next bank;
        # * the builder writes book k only after chunk k+1 has started, so the commit cannot
        #   reach chunk k+1, and chunk k+2's first beat waits for that commit.
        # The host loads the first book (the offline book picked from chunk 0) for chunks 0
        # and 1 and restarts the numbering with a soft reset.
        adapt = reg["ADAPT"].value[0]
        n_sym = fmt.n_symbols(self.radius)
        started = Signal(32)  # chunks whose first beat has entered the Huffman lanes
        behind = Signal(init=1)  # started < builds + ADAPT_LAG, a clock late
        pending = Signal(init=1)  # the builder's writes wait: see cb_pending below
        fork_first = Signal(init=1)  # the beat at the fork is a chunk's first
        reads_done = Signal(32)  # histograms handed to the builder completely
        reading = Signal()
        read_addr = Signal(range(n_sym))
        # Counts on their way out of the histogram, then through a register of their own: the
        # histogram's read data fed the builder's count + 1 and bucket select directly, and
        # that was the smoke core's worst path on two seeds.
        in_read = Signal(hist.READ_LATENCY + 1)
        read_last = Signal(hist.READ_LATENCY + 1)
        count_r = Signal.like(hist.rd_data)
        m.d.sync += count_r.eq(hist.rd_data)
        # The gate reads small registers only (it sits in the fork's valid/ready path):
        # ``ahead`` = started - reads_done (0 to 2, as a chunk cannot complete before the
        # histogram before it is read), ``first_two`` = min(started, ADAPT_LAG).
        ahead = Signal(range(4))
        lag = regmap.ADAPT_LAG
        first_two = Signal(range(lag + 1))
        read_done = Signal()
        m.d.comb += adaptation_ok.eq(
            ~adapt
            | ((~fork_first | (first_two != lag) | huff.cb_pending)
               & (~src.payload.last | Mux(fork_first, ahead == 0, ahead <= 1))))
        starts = fork_taken & fork_first
        with m.If(fork_taken):
            m.d.sync += fork_first.eq(src.payload.last)
        with m.If(starts):
            m.d.sync += [started.eq(started + 1),
                         first_two.eq(Mux(first_two == lag, lag, first_two + 1))]
        m.d.sync += ahead.eq(ahead + starts - read_done)
        with m.If(adapt & ~reading & (hist.chunks != reads_done) & build.i.ready
                  & (in_read == 0)):
            m.d.sync += [reading.eq(1), read_addr.eq(0)]
        with m.If(reading):
            m.d.sync += read_addr.eq(read_addr + 1)
            with m.If(read_addr == n_sym - 1):
                m.d.sync += reading.eq(0)
        m.d.sync += [
            in_read.eq(Cat(reading, in_read)),
            read_last.eq(Cat(reading & (read_addr == n_sym - 1), read_last)),
        ]
        m.d.comb += read_done.eq(in_read[-1] & read_last[-1])
        with m.If(read_done):
            m.d.sync += reads_done.eq(reads_done + 1)
        m.d.comb += [
            build.i.payload.eq(count_r),
            build.i.valid.eq(in_read[-1]),
            build.cb_pending.eq(pending),
        ]
        # Without ADAPT the builder never writes (a build under way waits for ever, and the
        # next stream that sets ADAPT starts with a soft reset). The OR is registered: formed
        # in the builder's clock, it ran from the builder's phase through `behind`'s inputs and
        # back into the phase's enable, the one-lane worst path with seed 3 once the elastic
        # buffers had shrunk (10.4 ns, 8.6 of it wire). A clock late is safe both ways: it
        # falls late, and it rises only after the builder's own commit, or a host write while
        # the stream is idle, never in the clock after one.
        m.d.sync += pending.eq(~adapt | huff.cb_pending | behind)
        # The builder's wait for chunk k+1 to start, registered (32-bit adder and comparison
        # into the builder's state were the smoke core's worst path): it only ever ends a clock
        # later, which keeps the order above.
        m.d.sync += behind.eq(started < build.builds + lag)
        with m.If(resetting):
            m.d.sync += [started.eq(0), behind.eq(1), pending.eq(1), fork_first.eq(1),
                         reads_done.eq(0),
                         reading.eq(0), in_read.eq(0), ahead.eq(0), first_two.eq(0)]

        wiring.connect(m, huff.o, pack.i)
        o = self.m_axis
        m.d.comb += [
            o.tdata.eq(pack.o.payload.data),
            o.tkeep.eq(-1),
            o.tlast.eq(pack.o.payload.last),
            o.tvalid.eq(pack.o.valid),
            pack.o.ready.eq(o.tready),
        ]

        # -- codebook and histogram access -------------------------------------------------------
        cb_addr = Signal(symbol_bits(self.radius))
        hist_addr = Signal(symbol_bits(self.radius))
        # The host writes the first book (before chunk 0), the builder every later one.
        m.d.comb += [
            huff.cb_addr.eq(Mux(build.cb_we, build.cb_addr, cb_addr)),
            huff.cb_data.eq(Mux(build.cb_we, build.cb_data, reg["CB_DATA"].value)),
            huff.cb_we.eq(reg["CB_DATA"].strobe | build.cb_we),
            huff.cb_commit.eq((reg["CB_COMMIT"].strobe & reg["CB_COMMIT"].value[0])
                              | build.cb_commit),
            hist.rd_addr.eq(Mux(reading, read_addr, hist_addr)),
            reg["HIST_DATA"].value.eq(hist.rd_data),
            reg["HIST_CHUNKS"].value.eq(hist.chunks),
            reg["ADAPT_READS"].value.eq(reads_done),
        ]
        # CB_DATA writes and HIST_DATA reads walk through the symbols from the last address
        # written, so loading a book or reading a histogram is one bus access per symbol.
        for address, data, walker in [("CB_ADDR", "CB_DATA", cb_addr),
                                      ("HIST_ADDR", "HIST_DATA", hist_addr)]:
            with m.If(reg[address].strobe):
                m.d.sync += walker.eq(reg[address].value)
            with m.Elif(reg[data].strobe):
                m.d.sync += walker.eq(walker + 1)

        # -- status, errors, counters ----------------------------------------------------------
        in_flight = Signal(range(1 << 16))
        # A chunk's last beat is counted a clock later, from a register: the box comparison
        # that ends it then does not also feed the counter's adder. ``chunk_in`` covers that
        # clock in ``busy``, as ``at_start`` is already back to 1.
        chunk_in = Signal()
        chunk_in_next = accepted & quant.i.payload.last
        m.d.sync += chunk_in.eq(chunk_in_next)
        # A chunk's final word is counted a clock later too: the output handshake, into the
        # counter's adder at the other end of the die, was the two-lane worst path at 1597876
        # (10.7 ns). ``in_flight`` then covers that clock in ``busy``.
        chunk_out = Signal()
        m.d.sync += chunk_out.eq(o.tvalid & o.tready & o.tlast)
        m.d.sync += in_flight.eq(in_flight + chunk_in - chunk_out)
        # busy = (in_flight != 0) | ~at_start | chunk_in | beats in the histogram's buffer, as a
        # register computed from the next state of each, cycle for cycle the same value: it
        # gates every configuration register's write enable, and the comparisons in front of
        # that fan-out were the smoke core's worst path.
        in_flight_next_nz = Mux(chunk_in == chunk_out, in_flight != 0,
                                Mux(chunk_in, 1, in_flight != 1))
        # The histogram's buffer holds a beat in the next clock (it takes one, is full, or
        # keeps its one beat): its last beat may still wait there when the chunk is out.
        hist_buf_next = (fork_taken | ~hist_buf.i.ready
                         | (hist_buf.o.valid & ~hist.i.ready))
        busy = Signal()
        m.d.sync += busy.eq(in_flight_next_nz | ~at_start_next | chunk_in_next | hist_buf_next)
        m.d.comb += regs.busy.eq(busy)
        error = Signal(len(regmap.ERROR))
        ctrl = reg["CTRL"]
        m.d.comb += soft_reset.eq(ctrl.strobe & ctrl.value[0])
        clear_error = ctrl.strobe & (ctrl.value[0] | ctrl.value[1])
        events = Signal.like(error)
        m.d.comb += events.eq(Cat(
            tlast_early, tlast_missing, regs.config_while_busy, bad_config & s.tvalid,
            huff.cb_busy_error, regs.bad_address,
        ))
        with m.If(clear_error):
            m.d.sync += error.eq(0)
        with m.Else():
            m.d.sync += error.eq(error | events)
        with m.If(resetting):
            m.d.sync += [in_flight.eq(0), chunk_in.eq(0), chunk_out.eq(0), at_start.eq(1),
                         remaining.eq(values), busy.eq(0)]
        m.d.comb += [
            reg["STATUS"].value.eq(Cat(busy, huff.cb_pending, error != 0, hist.clearing,
                                       build.busy | reading | (in_read != 0))),
            reg["ERROR"].value.eq(error),
            self.irq.eq(error != 0),
        ]

        escapes = Signal(range(n_lanes + 1))
        m.d.comb += escapes.eq(sum(
            (src.payload.lanes[j].esc != Escape.NONE) & (j < src.payload.count)
            for j in range(n_lanes)
        ))
        counters = {
            "CYCLES": 1,
            "BEATS": accepted,
            "VALUES": Mux(accepted, beat_count, 0),
            "STALLS": s.tvalid & ~in_ready,
            "ESCAPES": Mux(fork_taken, escapes, 0),
            "ACTIVE": busy,
        }
        for name, increment in counters.items():
            # The increment is registered: the 64-bit adders stay off the framing's paths, and
            # a counter lags its event by one clock.
            step = Signal(range(n_lanes + 1), name=f"{name.lower()}_step")
            counter = Signal(64, name=name.lower())
            m.d.sync += [step.eq(increment), counter.eq(counter + step)]
            high = Signal(32, name=f"{name.lower()}_hi")
            with m.If(reg[f"{name}_LO"].strobe):
                m.d.sync += high.eq(counter[32:])
            m.d.comb += [reg[f"{name}_LO"].value.eq(counter[:32]), reg[f"{name}_HI"].value.eq(high)]

        constants = {
            "ID": regmap.ID_MAGIC,
            "LANES": n_lanes,
            "RADIUS": self.radius,
            "MAX_CODE_LEN": self.max_code_len,
            "MAX_LINE": self.max_line,
            "MAX_PLANE": self.max_plane,
            "MAX_SYNC": self.max_sync,
            "WORD_BITS": self.word_bits,
        }
        for name, value in constants.items():
            m.d.comb += reg[name].value.eq(value)
        return m
