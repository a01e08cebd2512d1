"""Per-chunk symbol histogram: per-lane counters in block RAM, three banks rotating per chunk
(docs/hardware.md, "Histogram").

The histogram of a chunk is ``np.bincount(sym, minlength=n_symbols)`` over its values, as in
``ceaz.chunk._encode_reference``. The host needs it to build the next codebook, so it must be
readable while the following chunk is already being counted, and the bank of the chunk before
that must be zeroed in the meantime: three banks. Chunk ``k`` counts into bank ``k mod 3``;
when its last beat has been counted the read port shows bank ``k mod 3`` and the bank of chunk
``k - 1`` (the previously shown one) is cleared in the background, one entry per clock in all
lanes' memories at once (``n_symbols`` clocks). A chunk that finds its bank still clearing
waits with ``i.ready`` low.

Why one memory per lane and bank
--------------------------------
At any clock a bank is counting (one read and one write per lane), shown to the host (one
read) or clearing (one write), and at a chunk boundary two banks can be written at once (the
last counts of one chunk, the clearing of another). Separate memories per bank keep every
memory at one read port and one write port, the shape block RAM has, with the port addresses
multiplexed by role.

Counting pipeline (per lane, one beat per clock, never stalls)
--------------------------------------------------------------
``A``: the accepted beat is registered; its symbol addresses the bank's read port. ``B``: the
counter reads of all banks arrive and are registered as they are (block RAM output is slow, so
nothing follows it in this clock; the synthesis flow makes these registers the RAMs' own).
``S``: the beat's bank is selected into a register (the RAMs may be placed far from the
counting logic), and the beat is compared with the four beats ahead of it. ``C``: the new
count is the newest pending value of the same symbol (the beat in ``D``, whose write lands at
the end of this clock, else the one in ``E``, ``F`` or ``G``, written since the read was
taken) or else the memory's, plus one. ``D``: the new count is written. The only
loop, ``D`` -> ``C`` -> ``D``, is one multiplexer and one incrementer long, which is what a
run of one symbol needs.

Read side
---------
``rd_addr`` is registered, read from every lane's memory of the shown bank (through the
registers of ``B``), and the lanes are summed by a pipelined adder tree (a register after
every two adder levels) into a registered ``rd_data``, valid :attr:`Histogram.READ_LATENCY`
clocks after ``rd_addr`` changes.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .beats import LANE_COUNTS, beat

__all__ = ["Histogram"]

#: Banks rotating at chunk boundaries: counting, shown to the host, clearing.
BANKS = 3


class Histogram(wiring.Component):
    """Counts the symbols of each chunk; the host reads the last completed chunk's counts.

    Parameters
    ----------
    lanes : int
        Values per beat (one of ``ceaz_hw.beats.LANE_COUNTS``).
    n_symbols : int
        Alphabet size (``2R + 2``); symbols are ``0 .. n_symbols - 1``.
    max_count : int
        The most values one chunk may hold. A lane's counters hold up to its share,
        ``ceil(max_count / lanes)`` (:attr:`lane_count_width` bits), the merged ones up to
        ``max_count`` (``max_count.bit_length()`` bits).

    Members
    -------
    i : ``In(stream.Signature(beat(unsigned(symbol_width), lanes)))``
        Symbols; lanes ``0 .. count-1`` are counted, ``last`` ends the chunk. ``i.ready``
        comes from registers only: high unless the bank the next beat needs is not clear yet
        (after reset, or after a chunk shorter than the clear).
    rd_addr : ``In(unsigned(symbol_width))``
    rd_data : ``Out(unsigned(count_width))``
        The merged count of symbol ``rd_addr`` in the last completed chunk (0 if none has
        completed since reset), valid once ``rd_addr`` has been held :attr:`READ_LATENCY`
        clocks. It is a pure pipeline, so a new address per clock also works.
    chunks : ``Out(32)``
        Chunks completed (last beat counted) since reset.
    clearing : ``Out(1)``
        A bank is being cleared.

    Attributes
    ----------
    READ_LATENCY : int
        Clocks from ``rd_addr`` to ``rd_data``: 4, plus one per two levels of the lane adder
        tree (4, 5, 5, 6, 6 for 1, 2, 4, 8, 16 lanes).
    lane_count_width : int
        Bits of a lane's counter: a lane sees at most ``ceil(max_count / lanes)`` values of a
        chunk (each value of a beat has its own lane).
    memory_bits_per_lane : int
        Block RAM bits per lane (three banks of ``n_symbols`` counters).
    """

    def __init__(self, lanes: int, n_symbols: int, max_count: int = 2**24):
        if lanes not in LANE_COUNTS:
            raise ValueError(f"lanes must be one of {LANE_COUNTS}, not {lanes!r}")
        if not isinstance(n_symbols, int) or n_symbols < 2:
            raise ValueError(f"n_symbols must be an integer of at least 2, not {n_symbols!r}")
        if not isinstance(max_count, int) or max_count < 1:
            raise ValueError(f"max_count must be a positive integer, not {max_count!r}")
        self.lanes = lanes
        self.n_symbols = n_symbols
        self.max_count = max_count
        self.symbol_width = (n_symbols - 1).bit_length()
        self.count_width = max_count.bit_length()
        self.tree_levels = (lanes - 1).bit_length()
        self.READ_LATENCY = 4 + (self.tree_levels + 1) // 2
        self.lane_count_width = (-(-max_count // lanes)).bit_length()
        self.memory_bits_per_lane = BANKS * n_symbols * self.lane_count_width
        super().__init__({
            "i": In(stream.Signature(beat(unsigned(self.symbol_width), lanes))),
            "rd_addr": In(unsigned(self.symbol_width)),
            "rd_data": Out(unsigned(self.count_width)),
            "chunks": Out(32),
            "clearing": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n_lanes, n_sym, sw = self.lanes, self.n_symbols, self.symbol_width
        cw = self.lane_count_width  # the per-lane counters; the merged sum has count_width

        # -- bank rotation ----------------------------------------------------------------------
        count_bank = Signal(range(BANKS))  # the bank the next accepted beat counts into
        shown_bank = Signal(range(BANKS), init=BANKS - 1)  # the bank rd_data shows
        have_chunk = Signal()  # a chunk has completed since reset
        clean = Signal(BANKS)  # cleared and not yet holding a finished chunk
        clearing = Signal(BANKS, init=(1 << BANKS) - 1)  # after reset all banks clear at once
        clear_addr = [Signal(range(n_sym), name=f"clear_addr{b}") for b in range(BANKS)]

        ready = Signal()
        m.d.comb += [
            ready.eq(clean.bit_select(count_bank, 1)),
            self.i.ready.eq(ready),
            self.clearing.eq(clearing.any()),
        ]
        accept = self.i.valid & ready
        with m.If(accept & self.i.payload.last):
            m.d.sync += count_bank.eq(Mux(count_bank == BANKS - 1, 0, count_bank + 1))
            for b in range(BANKS):
                with m.If(count_bank == b):
                    m.d.sync += clean[b].eq(0)
        for b in range(BANKS):
            with m.If(clearing[b]):
                m.d.sync += clear_addr[b].eq(clear_addr[b] + 1)
                with m.If(clear_addr[b] == n_sym - 1):
                    m.d.sync += [clear_addr[b].eq(0), clearing[b].eq(0), clean[b].eq(1)]

        # -- memories ---------------------------------------------------------------------------
        read_ports, write_ports = [], []
        for j in range(n_lanes):
            rps, wps = [], []
            for b in range(BANKS):
                # A read whose data is used never meets a write to its address: a count's
                # read meets the write of the beat four ahead (G), whose value is forwarded
                # instead; the shown bank is neither counted into nor cleared. So yosys need
                # not emulate the old-data read (its bypass would sit between the block RAM
                # and the held register).
                mem = Memory(shape=unsigned(cw), depth=n_sym, init=[],
                             attrs={"no_rw_check": 1})
                m.submodules[f"lane{j}_bank{b}"] = mem
                rps.append(mem.read_port())
                wps.append(mem.write_port())
            read_ports.append(rps)
            write_ports.append(wps)

        # -- counting pipeline: A (read), B (read data registered), S (bank selected),
        # C (add with forwarding), D (write), E, F and G (written) ---------------------------
        def stage_regs(prefix):
            return {
                "active": Signal(name=f"{prefix}_active"),
                "last": Signal(name=f"{prefix}_last"),
                "bank": Signal(range(BANKS), name=f"{prefix}_bank"),
                "sym": [Signal(sw, name=f"{prefix}_sym{j}") for j in range(n_lanes)],
                "v": [Signal(name=f"{prefix}_v{j}") for j in range(n_lanes)],
            }

        a, b_, s_, c, d, e, f = (stage_regs(p) for p in "abscdef")
        m.d.sync += [
            a["active"].eq(accept),
            a["last"].eq(self.i.payload.last),
            a["bank"].eq(count_bank),
        ]
        for j in range(n_lanes):
            m.d.sync += [
                a["sym"][j].eq(self.i.payload.lanes[j]),
                a["v"][j].eq(accept & (j < self.i.payload.count)),
            ]
        for src, dst in ((a, b_), (b_, s_), (s_, c), (c, d), (d, e), (e, f)):
            m.d.sync += [dst["active"].eq(src["active"]), dst["last"].eq(src["last"]),
                         dst["bank"].eq(src["bank"])]
            for j in range(n_lanes):
                m.d.sync += [dst["sym"][j].eq(src["sym"][j]), dst["v"][j].eq(src["v"][j])]

        # B: every bank's read data is registered as it comes, for the count (C) and the host
        # (read side) alike. Nothing else loads a block RAM output, and these registers have
        # no reset, so the synthesis flow makes them the RAMs' output registers
        # (bitstreams/outreg.py).
        held = [[Signal(cw, name=f"held{j}_{bank}", reset_less=True) for bank in range(BANKS)]
                for j in range(n_lanes)]
        for j in range(n_lanes):
            m.d.sync += [held[j][bank].eq(read_ports[j][bank].data) for bank in range(BANKS)]

        d_val = [Signal(cw, name=f"d_val{j}") for j in range(n_lanes)]
        e_val = [Signal(cw, name=f"e_val{j}") for j in range(n_lanes)]
        f_val = [Signal(cw, name=f"f_val{j}") for j in range(n_lanes)]
        g_val = [Signal(cw, name=f"g_val{j}") for j in range(n_lanes)]
        host_addr = Signal(sw)
        m.d.sync += host_addr.eq(self.rd_addr)
        for j in range(n_lanes):
            # In S: will the beats now in C, D, E and F be in D, E, F and G when this one is
            # in C?
            same = {}
            for name, ahead in (("d", c), ("e", d), ("f", e), ("g", f)):
                same[name] = Signal(name=f"c_same_as_{name}{j}")
                m.d.sync += same[name].eq(ahead["v"][j] & (ahead["bank"] == s_["bank"])
                                          & (ahead["sym"][j] == s_["sym"][j]))
            # S: the beat's bank, registered, so that the block RAMs (wherever the placer
            # puts them) reach only a select and a register, not the increment.
            stored = Signal(cw, name=f"c_stored{j}", reset_less=True)
            with m.Switch(s_["bank"]):
                for bank in range(BANKS):
                    with m.Case(bank):
                        m.d.sync += stored.eq(held[j][bank])
            # The newest pending count, then one incrementer: an incrementer per source
            # before the select cost five times the adders (3.7 k LUT4 at 16 lanes).
            newest = Mux(same["d"], d_val[j], Mux(same["e"], e_val[j],
                                                  Mux(same["f"], f_val[j],
                                                      Mux(same["g"], g_val[j], stored))))
            m.d.sync += d_val[j].eq(newest + 1)
            m.d.sync += [e_val[j].eq(d_val[j]), f_val[j].eq(e_val[j]), g_val[j].eq(f_val[j])]

            for bank in range(BANKS):
                rp, wp = read_ports[j][bank], write_ports[j][bank]
                # The shown bank never counts: a bank is shown only after its chunk is done,
                # and counts again only after it has been cleared, which waits for it to be
                # shown no longer.
                m.d.comb += rp.addr.eq(Mux(shown_bank == bank, host_addr, a["sym"][j]))
                # A bank clears only while it is neither counting nor shown.
                with m.If(clearing[bank]):
                    m.d.comb += [wp.addr.eq(clear_addr[bank]), wp.data.eq(0), wp.en.eq(1)]
                with m.Else():
                    m.d.comb += [
                        wp.addr.eq(d["sym"][j]),
                        wp.data.eq(d_val[j]),
                        wp.en.eq(d["v"][j] & (d["bank"] == bank)),
                    ]

        # A chunk completes as its last beat's counts are written: show its bank and clear
        # the bank shown so far (that of the chunk before; after reset there is none).
        with m.If(d["active"] & d["last"]):
            m.d.sync += [
                shown_bank.eq(d["bank"]),
                have_chunk.eq(1),
                self.chunks.eq(self.chunks + 1),
            ]
            with m.If(have_chunk):
                for bank in range(BANKS):
                    with m.If(shown_bank == bank):
                        m.d.sync += clearing[bank].eq(1)

        # -- read side: select the shown bank, sum the lanes ---------------------------------
        # The data of host_addr is held two clocks after it (the synchronous read port, then
        # the held registers).
        level = []
        for j in range(n_lanes):
            lane = Signal(self.count_width, name=f"rd_lane{j}")
            shown = Signal(cw, name=f"rd_shown{j}")
            with m.Switch(shown_bank):
                for bank in range(BANKS):
                    with m.Case(bank):
                        m.d.comb += shown.eq(held[j][bank])
            m.d.sync += lane.eq(Mux(have_chunk, shown, 0))
            level.append(lane)
        # A chunk holds at most max_count values, so no partial sum exceeds count_width.
        total = self.count_width
        for depth in range(self.tree_levels):
            sums = [(level[k] + level[k + 1])[:total] for k in range(0, len(level), 2)]
            if depth % 2 == 1 or depth == self.tree_levels - 1:
                regs = [Signal(total, name=f"rd_sum{depth}_{k}") for k in range(len(sums))]
                m.d.sync += [r.eq(s) for r, s in zip(regs, sums, strict=True)]
                sums = regs
            level = sums
        m.d.comb += self.rd_data.eq(level[0])
        return m
