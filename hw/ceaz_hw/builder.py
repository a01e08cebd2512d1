"""The on-chip codebook builder: a chunk's histogram in, the next codebook out, no host
(docs/hardware.md, "Codebook builder").

It builds exactly ``huffman.code_lengths(huffman.weights_from_histogram(hist))`` and
``huffman.canonical_codes(lengths)`` (docs/format.md, "Codebook construction"), one phase
after another, each phase a short pipeline that handles one item per clock:

``load``
    Counts arrive in symbol order (``i``, one per clock). Each is stored as (symbol,
    weight = count + 1) and counted into every radix digit's buckets at once.
``prefix``, then ``scatter`` once per 10-bit digit the largest weight has
    A stable LSD radix sort into (weight descending, symbol ascending) order: bucket counts
    become start offsets, then every element moves to its bucket's next slot. Sorting on the
    complemented digit gives the descending order, which is the *hand-out* order of the
    lengths; read backwards it is ascending by weight, which is all the Huffman merge needs
    (the multiset of leaf depths depends on the weights alone, not on which of two equal
    weights comes first). So one sort serves both, with no second sort and no group walk.
``merge``
    The two-queue Huffman merge, one take per two clocks: the next leaf (ascending) against
    the oldest unused internal node, a leaf winning ties. Both heads are read ahead into
    registers; the node just made comes from a bypass. Every take records its parent.
``depth``
    Backwards over the internal nodes' parents (a parent always comes after its children):
    depth = parent's depth + 1, internal nodes counted per depth; the leaves per depth
    follow, as every internal node has two children.
``limit``
    JPEG Annex K.3 on the depth counters, one move per clock; the nearest non-empty
    shorter level is searched (candidates, then a tree priority encoder: two clocks) only
    when it is not simply the level above the last one.
``cumulate``
    Per length: the first canonical code, and how many symbols get that length or less.
``hand-out``
    The r-th symbol of the sorted order gets the length whose cumulative count first
    exceeds r, written into a length table by symbol.
``codes``
    Symbols in order: ``code = next_code[length]++``, each one written to the codebook bank
    exactly like a host ``CB_DATA`` write (``cb_*``), then one commit. This phase waits until
    no earlier commit is pending.

Every table is read at an address held in a register (see "read addresses"), and
read-modify-write pipelines register every table output; the bucket counters forward the
three items ahead of them from registers, and the depth pass the three ahead of it. No other
table's read that is used meets a write in the same clock. Hand-written because it must be
bit-exact with ``ceaz.huffman``; ``tests/test_builder_dataflow.py`` checks the same phases in
Python and ``sim/test_builder.py`` checks this RTL against the model.

The counts must sum to at most ``max_count`` (the histogram's chunk limit): that bounds the
Huffman depth (a tree of depth d needs a total weight of at least Fibonacci(d + 2)), hence
the number of depth counters.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ceaz import format as fmt

from .huffman import LENGTH_BITS

__all__ = ["CodebookBuilder", "max_huffman_depth"]

#: Radix digit of the sort: 1024 buckets, one block RAM of counters per digit.
DIGIT_BITS = 10


def highest_set(bits):
    """(any bit set, index of the highest set bit) by a tree of 2:1 choices, log2(width)
    levels deep: a priority chain over the K.3 depth counters was too slow a path."""
    level = [(bits[k], k) for k in range(len(bits))]
    while len(level) > 1:
        if len(level) % 2:
            level.append((0, 0))
        level = [(lo_v | hi_v, Mux(hi_v, hi_k, lo_k))
                 for (lo_v, lo_k), (hi_v, hi_k) in zip(level[::2], level[1::2], strict=True)]
    return level[0]


def highest_bit(bits):
    """The highest set bit of ``bits`` alone (one-hot), or 0."""
    return Cat(bits[k] & ~bits[k + 1:].any() for k in range(len(bits)))


#: An ECP5 block RAM is 1024 deep at 18 bits wide and 2048 deep at 9 bits.
BRAM_DEEP_18, BRAM_WIDTH_2K = 1024, 9


def _sliced_memory(m, name, width, depth, attrs, reads):
    """A table deeper than 1024 entries as 9-bit slices, each one block RAM 2048 deep.

    Left whole, yosys cascades such a table two RAMs deep (R = 512 has 1026 symbols) and
    selects after the RAMs' 5.8 ns output, which was the builder's slowest path; the slices
    take as many RAMs and need no select. Returns ``reads`` read ports and the write port,
    with the same names as a Memory's (``addr``, ``data``, ``en``)."""
    read = [SimpleNamespace(addr=Signal(range(depth), name=f"{name}_raddr{r}"),
                            data=Signal(width, name=f"{name}_rdata{r}")) for r in range(reads)]
    write = SimpleNamespace(addr=Signal(range(depth), name=f"{name}_waddr"),
                            data=Signal(width, name=f"{name}_wdata"), en=Signal(name=f"{name}_we"))
    for k, lo in enumerate(range(0, width, BRAM_WIDTH_2K)):
        bits = min(BRAM_WIDTH_2K, width - lo)
        mem = Memory(shape=unsigned(bits), depth=depth, init=[], attrs=attrs)
        m.submodules[f"{name}_{k}"] = mem
        wp = mem.write_port()
        m.d.comb += [wp.addr.eq(write.addr), wp.data.eq(write.data[lo:lo + bits]),
                     wp.en.eq(write.en)]
        for port in read:
            rp = mem.read_port()
            m.d.comb += [rp.addr.eq(port.addr), port.data[lo:lo + bits].eq(rp.data)]
    return *read, write


def max_huffman_depth(total_weight: int, n_symbols: int) -> int:
    """The deepest leaf a Huffman tree can have when its weights (all >= 1) sum to at most
    ``total_weight``: depth d needs a total of at least Fibonacci(d + 2)."""
    fib = [0, 1, 1]  # fib[k] = Fibonacci(k)
    depth = 0
    while True:
        while len(fib) <= depth + 3:
            fib.append(fib[-1] + fib[-2])
        if fib[depth + 3] > total_weight or depth + 1 > n_symbols - 1:
            return depth
        depth += 1


class CodebookBuilder(wiring.Component):
    """Builds the canonical, length-limited Huffman codebook of one histogram on chip.

    Parameters
    ----------
    n_symbols : int
        Alphabet size ``2R + 2`` (at least 2, at most ``2**max_code_len``).
    max_count : int
        The largest total of one histogram (the chunk limit, ``format.MAX_CHUNK_VALUES``).
    max_code_len : int
        Longest code (``format.MAX_CODE_LEN``).

    Members
    -------
    i : ``In(stream.Signature(unsigned(count_width)))``
        The counts of symbols ``0 .. n_symbols - 1``, in order; every ``n_symbols`` beats
        start one build. ``i.ready`` is low while a build runs.
    cb_addr, cb_data, cb_we, cb_commit : ``Out``
        To ``HuffmanLanes``: one write per symbol (code in the low ``max_code_len`` bits,
        length above), then a one-clock commit.
    cb_pending : ``In(1)``
        A commit is still pending in ``HuffmanLanes``: the writes wait for it to clear.
    busy : ``Out(1)``
        A build has started (its first count was taken) and has not committed yet.
    builds : ``Out(32)``
        Commits made since reset.
    """

    def __init__(self, n_symbols: int, max_count: int = fmt.MAX_CHUNK_VALUES,
                 max_code_len: int = fmt.MAX_CODE_LEN):
        if not isinstance(max_code_len, int) or not 1 <= max_code_len <= 16:
            raise ValueError(f"max_code_len must be an integer in [1, 16], not {max_code_len!r}")
        if not isinstance(n_symbols, int) or not 2 <= n_symbols <= 1 << max_code_len:
            raise ValueError(f"n_symbols must be an integer in [2, 2**max_code_len], not "
                             f"{n_symbols!r}")
        if not isinstance(max_count, int) or max_count < 1:
            raise ValueError(f"max_count must be a positive integer, not {max_count!r}")
        self.n_symbols, self.max_count, self.max_code_len = n_symbols, max_count, max_code_len
        self.symbol_width = (n_symbols - 1).bit_length()
        self.count_width = max_count.bit_length()
        self.weight_width = (max_count + 1).bit_length()
        self.node_width = (max_count + n_symbols).bit_length()  # the root's weight
        self.digits = -(-self.weight_width // DIGIT_BITS)
        self.max_depth = max_huffman_depth(max_count + n_symbols, n_symbols)
        super().__init__({
            "i": In(stream.Signature(unsigned(self.count_width))),
            "cb_addr": Out(self.symbol_width),
            "cb_data": Out(max_code_len + LENGTH_BITS),
            "cb_we": Out(1),
            "cb_commit": Out(1),
            "cb_pending": In(1),
            "busy": Out(1),
            "builds": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        n, sw, ww = self.n_symbols, self.symbol_width, self.weight_width
        max_len, max_depth = self.max_code_len, self.max_depth
        buckets = 1 << DIGIT_BITS
        pos_width = n.bit_length()  # offsets 0 .. n
        depth_width = max_depth.bit_length()

        def memory(name, shape, depth, reads=1, collides=True):
            """A table's read ports (``reads`` of them) and its write port. Large tables ask
            for block RAM by name: yosys put some in LUT RAM (2300 LUT4 more). A table whose
            used reads never meet a write to their address (``collides=False``) spares
            yosys's old-data bypass after it."""
            attrs = {"ram_style": "block"} if depth >= 256 else {}
            if not collides:
                attrs["no_rw_check"] = 1
            width = shape.width
            if depth > BRAM_DEEP_18 and width > BRAM_WIDTH_2K:
                return _sliced_memory(m, name, width, depth, attrs, reads)
            mem = Memory(shape=shape, depth=depth, init=[], attrs=attrs)
            m.submodules[name] = mem
            wp = mem.write_port()
            return *(mem.read_port() for _ in range(reads)), wp

        # (symbol, weight) in symbol order, then ping-ponged by the radix passes.
        # The last pass's table (order1) has a second read port for the merge (see there).
        # Neither is read (for data that is used) while it is written.
        elem = [memory(f"order{k}", unsigned(sw + ww), n, reads=1 + k, collides=False)
                for k in range(2)]
        # Their write ports are driven by registers alone: the load and the scatter decide a
        # write a clock ahead. The load's payload + 1 straight into the write data, routed
        # to the block RAM, was the four-lane worst path at 7345ca3 with nextpnr seed 3
        # (5.3 ns of routing). A pass's last write lands in the clock its phase ends, before
        # the next phase reads.
        elem_waddr = [Signal(range(n), name=f"order{k}_waddr") for k in range(2)]
        elem_wdata = [Signal(sw + ww, name=f"order{k}_wdata") for k in range(2)]
        elem_we = [Signal(name=f"order{k}_we") for k in range(2)]
        m.d.sync += [we.eq(0) for we in elem_we]
        for (*_, wp), waddr, wdata, we in zip(elem, elem_waddr, elem_wdata, elem_we, strict=True):
            m.d.comb += [wp.addr.eq(waddr), wp.data.eq(wdata), wp.en.eq(we)]
        # Each digit's bucket counters; the top digit may have fewer bits than the others.
        sizes = [1 << min(DIGIT_BITS, ww - d * DIGIT_BITS) for d in range(self.digits)]
        # A count read in the clock its bucket is written is not used (see "bucket counters").
        counters = [memory(f"buckets{d}", unsigned(pos_width), size, collides=False)
                    for d, size in enumerate(sizes)]
        # Internal nodes' weights, parents and depths (the leaves' depths follow from them).
        # The root (node n - 2) is never stored: it is never taken, has no parent, and its
        # depth is known. So R = 512 needs 1024 entries, one block RAM deep, not two.
        inner_nodes = max(n - 2, 2)
        # The merge reads the node queue in capture; a read in the clock its address is
        # written is replaced by the written value (see "Huffman merge"), so a used read never
        # meets a write.
        node_rp, node_next_rp, node_wp = memory("nodes", unsigned(self.node_width), inner_nodes,
                                                reads=2, collides=False)
        # Parents are written in the merge and read in the depth pass only. A depth read that
        # meets the write of its address (up to three items ahead) is replaced by the
        # forwarded value (see "DEPTH"). Without ``no_rw_check``, yosys's old-data bypass sat
        # between the depth table and its register (the four-lane worst path at de08fd1,
        # seed 3: 11.3 ns).
        parent_rp, parent_wp = memory("parents", unsigned(sw), inner_nodes, collides=False)
        depth_rp, depth_wp = memory("depths", unsigned(depth_width), inner_nodes, collides=False)
        # Written in the hand-out only, read in the codes only (after the writes have landed).
        length_rp, length_wp = memory("lengths", unsigned(LENGTH_BITS), n, collides=False)

        def unpack(word):
            return word[:sw], word[sw:]  # symbol, weight

        def bucket(weight, digit):
            return ~weight[digit * DIGIT_BITS:][:DIGIT_BITS] & (buckets - 1)

        # -- shared state -------------------------------------------------------------------
        idx = Signal(range(2 * n + buckets + 4))  # the item a phase issues next
        s1_idx, s2_idx = Signal.like(idx), Signal.like(idx)  # idx one and two clocks ago
        pipe = Signal(8)  # valid bits of a phase's pipeline stages (1 to 8 clocks on)
        issuing = Signal()  # a walk over idx = 0 .. limit - 1 has items left (a register)

        def start_walk(twins=()):
            """The statements that start the next phase's walk (``issue_until``) from idx = 0,
            with its empty pipeline and the registers that walk keeps equal to idx."""
            return [idx.eq(0), issuing.eq(1), pipe.eq(0), *(twin.eq(0) for twin in twins)]

        def issue_until(limit, twins=()):
            """Issue idx = 0 .. limit - 1, one per clock. The flag is a register, so neither
            a comparison nor the increment lies on the path into idx's next-value select.
            ``twins`` (zeroed by ``start_walk``) follow idx: a table read at idx reads at a
            twin, a register of its own (see "read addresses")."""
            with m.If(issuing):
                m.d.sync += [idx.eq(idx + 1), issuing.eq(idx != limit - 1)]
                m.d.sync += [twin.eq(idx + 1) for twin in twins]
            return issuing
        # order1's read addresses: the first port's is idx's twin in the scatter and the
        # hand-out, and the next leaf's in the merge, which reads the one after on the second.
        head_addr, head_addr_next = Signal(sw), Signal(sw)
        weight_or = Signal(ww)  # OR of all weights: its bit length is the largest's
        passes = Signal(range(self.digits + 1))
        digit = Signal(range(self.digits))
        src = Signal()  # the order memory a pass reads (the other is written)
        clearing = Signal(init=1)  # bucket counters are being zeroed (also after reset)
        # The merge's write enables, decided a clock ahead (see "Huffman merge"): low unless
        # that clock sets them.
        node_we, parent_we = Signal(), Signal()
        parent_waddr = Signal(range(inner_nodes))
        m.d.sync += [node_we.eq(0), parent_we.eq(0)]
        clear_addr = Signal(range(buckets))
        # Leaves per depth (bl_count); at least up to max_len, which the codes read.
        bl = [Signal(pos_width, name=f"bl{k}") for k in range(max(max_depth, max_len) + 1)]
        inner = [Signal(pos_width, name=f"inner{k}") for k in range(max_depth)]  # per depth
        cum = [Signal(pos_width, name=f"cum{k}") for k in range(max_len + 1)]
        next_code = [Signal(max_len + 1, name=f"next_code{k}") for k in range(max_len + 1)]

        with m.If(clearing):  # the zeros are written a clock later (see "bucket counters")
            m.d.sync += clear_addr.eq(clear_addr + 1)
            with m.If(clear_addr == buckets - 1):
                m.d.sync += clearing.eq(0)
        # The prefix pass's writes, one per digit, are also written a clock later.
        prefix_write = [Signal(name=f"prefix_write{d}") for d in range(self.digits)]
        running = [Signal(pos_width, name=f"running{d}") for d in range(self.digits)]

        # -- bucket counters: one read-modify-write pipeline per digit -------------------------
        # Read (address), then the table's output into a register, then the count + 1 into a
        # register, then that written back. The output reaches only that register, which has
        # no reset, so the flow makes it the block RAM's output register
        # (bitstreams/outreg.py): with a transparent read port, yosys's bypass sat between
        # them and the table's read, routed across the die, was the full-size worst path. The
        # write comes from a register too: the loop from the output register through the
        # select and the increment into the write data was the one-lane worst path with
        # nextpnr seed 3 (10.9 ns at 014d8fe). So an item takes the counts of the three items
        # ahead from registers: the one just ahead (``forward``), the one two ahead
        # (``forward2``) and the one three ahead (``forward3``: its write lands in the clock of
        # this item's read). ``load`` drives every digit's pipeline at once, ``scatter`` the
        # current digit's.
        #
        # The table's write port is driven by registers alone (``back``, ``back_bucket``,
        # ``written``): the clearing and the prefix pass write through them as well, a clock
        # after they decide to. A select between the three writers in front of the port,
        # decoded from the phase, was the four-lane worst path at d595afa (11.2 ns, 5.2 of it
        # routing to the block RAM). A zero written a clock late meets the first load's read
        # at most, and ``forward3`` hands that read the zero; the prefix pass's late writes
        # have landed before the scatter reads. ``running`` is 0 outside the prefix pass, so
        # it is the clearing's data too.
        # The counters' read addresses, registers set a clock ahead: a loaded weight's bucket,
        # a scattered element's, or idx's twin in the prefix pass.
        bump_bucket = [Signal(DIGIT_BITS, name=f"bump_bucket{d}") for d in range(self.digits)]
        bump = [Signal(name=f"bump{d}") for d in range(self.digits)]
        bump_pos = []  # per digit: the count before the increment, registered
        bump_busy = []  # per digit: items in flight
        bucket_reads = []  # per digit: the table's output register
        for d, (rp, cwp) in enumerate(counters):
            got_bucket, got = Signal(DIGIT_BITS, name=f"got_bucket{d}"), Signal(name=f"got{d}")
            put_bucket, put = Signal(DIGIT_BITS, name=f"put_bucket{d}"), Signal(name=f"put{d}")
            # Written back: the table's address bits (the clearing's addresses wrap on a
            # smaller table, and a zero it writes must be forwarded at the address it lands).
            back_bucket = Signal(range(sizes[d]), name=f"back_bucket{d}")
            back = Signal(name=f"back{d}")
            stored = Signal(pos_width, name=f"stored{d}", reset_less=True)
            forward, written = Signal(name=f"forward{d}"), Signal(pos_width, name=f"written{d}")
            # two ahead: decided as this item is read, its value taken a clock later
            forward2_got, forward2 = Signal(name=f"forward2_got{d}"), Signal(name=f"forward2{d}")
            forward3_got, forward3 = Signal(name=f"forward3_got{d}"), Signal(name=f"forward3{d}")
            written2 = Signal(pos_width, name=f"written2{d}")
            written3 = Signal(pos_width, name=f"written3{d}")
            pos = Signal(pos_width, name=f"pos{d}")
            m.d.comb += [rp.addr.eq(bump_bucket[d]),
                         pos.eq(Mux(forward, written,
                                    Mux(forward2, written2, Mux(forward3, written3, stored))))]
            m.d.sync += [
                got_bucket.eq(bump_bucket[d]), got.eq(bump[d]),
                put_bucket.eq(got_bucket), put.eq(got),
                back_bucket.eq(Mux(put, put_bucket, Mux(clearing, clear_addr, s2_idx))),
                back.eq(put | clearing | prefix_write[d]),
                stored.eq(rp.data),
                forward.eq(put & got & (put_bucket == got_bucket)),
                forward2_got.eq(put & bump[d] & (put_bucket == bump_bucket[d])),
                forward2.eq(forward2_got),
                forward3_got.eq(back & bump[d] & (back_bucket == bump_bucket[d])),
                forward3.eq(forward3_got),
                written3.eq(written2),
                written2.eq(written),
                written.eq(Mux(put, pos + 1, running[d])),
            ]
            m.d.comb += [cwp.addr.eq(back_bucket), cwp.data.eq(written), cwp.en.eq(back)]
            # The element's slot goes through a register too: from the counters' output
            # register through the select into the element table's write address (far
            # across the die) was the two-lane worst path at de8c729 (11.4 ns).
            slot = Signal(pos_width, name=f"slot{d}")
            m.d.sync += slot.eq(pos)
            bump_pos.append(slot)
            bump_busy.append(got | put | back)
            bucket_reads.append(stored)

        # Pipeline registers shared by the phases (each phase uses the ones it needs).
        # Both tables' first read ports, registered on every clock (the scatter, the merge and
        # the hand-out take them from here); no reset, so that the synthesis flow makes them
        # the block RAMs' output registers (bitstreams/outreg.py).
        s1_raw = [Signal(sw + ww, name=f"s1_raw{k}", reset_less=True) for k in range(2)]
        s2_elem, s3_elem, s4_elem, s5_elem = (Signal(sw + ww, name=f"s{k}_elem")
                                              for k in (2, 3, 4, 5))
        # The depth pass's parent, node and root flag in its later stages, and the items
        # whose depths are forwarded. (s2_parent and s4_depth take the tables' reads: no
        # reset, as s1_raw.)
        s2_parent = Signal(sw, reset_less=True)
        s3_parent, s4_parent = (Signal(sw, name=f"s{k}_parent") for k in (3, 4))
        s3_idx, s4_idx, s5_idx = (Signal.like(idx, name=f"s{k}_idx") for k in (3, 4, 5))
        s3_root, s4_root, s5_root = (Signal(name=f"s{k}_root") for k in (3, 4, 5))
        s4_depth = Signal(depth_width, reset_less=True)
        s5_depth = Signal(depth_width)
        # The depths formed 1, 2, 3 and 4 items ahead (see "DEPTH"), with their nodes.
        ahead_idx = [Signal.like(idx, name=f"ahead{k}_idx") for k in range(1, 5)]
        ahead_depth = [Signal(depth_width, name=f"ahead{k}_depth") for k in range(1, 5)]
        # The depth table's write, from registers (a clock after the depth is formed).
        depth_waddr, depth_wdata = Signal(range(inner_nodes)), Signal(depth_width)
        depth_we = Signal()
        # Stage 5's forwarding decisions, compared in stage 4 (see "DEPTH").
        from_ahead = [Signal(name=f"from_ahead{k}") for k in range(1, 5)]
        m.d.sync += [s1_idx.eq(idx), s2_idx.eq(s1_idx)]

        # A loaded weight is counted into the buckets a clock after it is taken, from
        # registers: the input's payload + 1 into the counters' read address, routed to the
        # block RAM, was the four-lane worst path at 98a5e15 with nextpnr seed 3 (10.4 ns, 5.0
        # of it routing). Set in the load only, so the last one is counted in LOADED; the
        # scatter drives its digit's pipeline instead.
        load_take = Signal()
        m.d.sync += load_take.eq(0)
        for d in range(self.digits):
            m.d.comb += bump[d].eq(load_take)

        with m.FSM(name="phase") as phase:
            # -- load -----------------------------------------------------------------------
            with m.State("LOAD"):
                take = self.i.valid & ~clearing
                m.d.comb += self.i.ready.eq(~clearing)
                weight = Signal(ww)
                m.d.comb += weight.eq(self.i.payload + 1)
                for k in range(2):  # both: either may be the first pass's source
                    m.d.sync += [elem_waddr[k].eq(idx), elem_wdata[k].eq(Cat(idx[:sw], weight)),
                                 elem_we[k].eq(take)]
                m.d.sync += [bucket_r.eq(bucket(weight, d))
                             for d, bucket_r in enumerate(bump_bucket)]
                m.d.sync += load_take.eq(take)
                with m.If(take):
                    m.d.sync += [idx.eq(idx + 1), weight_or.eq(Mux(idx == 0, 0, weight_or)
                                                               | weight)]
                    with m.If(idx == n - 1):
                        m.next = "LOADED"

            with m.State("LOADED"):  # the last counts' bucket updates land
                m.d.sync += [*start_walk(twins=bump_bucket), digit.eq(0)]  # the prefix's
                # passes = ceil(bit_length(largest weight) / DIGIT_BITS), at least 1; the
                # first source is chosen so that the last pass always writes ``order1``,
                # which the merge and the hand-out then read without a select.
                m.d.sync += [passes.eq(1), src.eq(0)]
                for p in range(2, self.digits + 1):
                    with m.If((weight_or >> (DIGIT_BITS * (p - 1))) != 0):
                        m.d.sync += [passes.eq(p), src.eq(p % 2 == 0)]
                with m.If(~load_take & ~Cat(*bump_busy).any()):
                    m.next = "PREFIX"

            # -- radix sort: counts to start offsets, then scatter ----------------------------
            with m.State("PREFIX"):  # every digit's counters at once: they are independent
                # 0: read a counter; 1: register it; 2: write the running sum (it lands a
                # clock later, see "bucket counters"), add the count.
                issue = issue_until(buckets, twins=bump_bucket)  # the counters' reads
                for count, run, size, write in zip(bucket_reads, running, sizes, prefix_write,
                                                   strict=True):
                    mine = pipe[1] & (s2_idx < size)  # a smaller table ends earlier
                    m.d.comb += write.eq(mine)
                    with m.If(mine):
                        m.d.sync += run.eq(run + count)
                m.d.sync += pipe.eq(Cat(issue, pipe[0]))
                with m.If(~issue & (pipe[:2] == 0)):
                    m.d.sync += start_walk(twins=[head_addr])
                    m.d.sync += [run.eq(0) for run in running]
                    m.next = "SCATTER"

            with m.State("SCATTER"):
                issue = issue_until(n, twins=[head_addr])  # order1's read (order0's is idx)
                # 0: read the source slot; 1: register it; 2: the source picked, registered;
                # read its bucket's offset; 3: register that; 4: the offset + 1 into a
                # register, the offset into another; 5: the element's write at the offset
                # into registers (it lands a clock later), the offset + 1 written back.
                # Both tables' outputs are registered, then the source picked and registered
                # (with its buckets, the counters' read addresses): neither the select nor
                # the bucket's address is on a block RAM's output path (at full size the
                # tables sit far apart).
                s1_elem = Mux(src, s1_raw[1], s1_raw[0])
                m.d.sync += [s2_elem.eq(s1_elem), s3_elem.eq(s2_elem), s4_elem.eq(s3_elem),
                             s5_elem.eq(s4_elem)]
                _, w1 = unpack(s1_elem)
                m.d.sync += [bucket_r.eq(bucket(w1, d)) for d, bucket_r in enumerate(bump_bucket)]
                with m.Switch(digit):
                    for d in range(self.digits):
                        with m.Case(d):
                            m.d.comb += bump[d].eq(pipe[2])
                            for k in range(2):
                                with m.If(src != k):
                                    m.d.sync += [elem_waddr[k].eq(bump_pos[d]),
                                                 elem_wdata[k].eq(s5_elem),
                                                 elem_we[k].eq(pipe[5])]
                m.d.sync += pipe.eq(Cat(issue, pipe[:5]))
                with m.If(~issue & (pipe == 0)):
                    # head_addr_next: the merge's first leaf, read in MERGE_START
                    m.d.sync += [*start_walk(twins=[head_addr]), head_addr_next.eq(n - 1),
                                 src.eq(~src), digit.eq(digit + 1)]
                    with m.If(digit + 1 == passes):
                        m.d.sync += clearing.eq(1)  # the counters are free: zero them now
                        m.next = "MERGE_START"
                    with m.Else():
                        m.next = "SCATTER"

            # -- Huffman merge --------------------------------------------------------------
            leaf = Signal(range(n + 1))  # leaves taken (ascending order)
            node = Signal(range(n))  # internal nodes taken
            made = Signal(range(n))  # internal nodes made
            second = Signal()  # the next take is the second of its node
            # The depth pass has parents left to read (idx, counting down, has not passed 0),
            # as a register: off the idx decrement.
            reading = Signal()
            first_w = Signal(self.node_width)
            taken_w_r = Signal(self.node_width)
            made_w = first_w + taken_w_r  # the node the last take completes, if second
            capture = Signal()  # the merge's first clock of a take
            decided = Signal()  # a take has been decided and not yet recorded
            leaf_h = Signal(ww)  # the heads of both queues, captured from the read ports
            node_h = Signal(self.node_width)
            leaves_left = Signal()  # registered in capture: leaf < n
            queue_empty = Signal()  # registered in capture: node == made
            # The next leaf's address (n - 1 - leaf) and the two after it, registered in
            # capture; the reads' addresses, set in decide: the next leaf's and the one after.
            leaf_addr, leaf_addr_next, leaf_addr_next2 = (Signal(sw, name=f"leaf_addr{k}")
                                                          for k in range(3))
            # node + 1 as a register of its own, set with node: both node queue reads come
            # from registers, not through a select decoded from the phase (with the address
            # computed in capture, that was the path to the node table with nextpnr seed 3
            # at 9b85eb5, 9.9 ns, 5.2 of it routing).
            node_after = Signal(range(n + 1))
            leaf_next = Signal(range(n + 1))  # leaf + 1 (the take picks counts, adds nothing)
            # The last take was an internal node (cleared for the first heads: the leaf comes
            # from the "next" port, the node from the other).
            node_taken_r = Signal()
            # The last pass's output, both read ports' registers (shared with the scatter and
            # the hand-out: a port's data drives one register only, or the flow cannot make
            # it the block RAM's output register).
            sorted_rp, sorted_next_rp = elem[1][:2]
            sorted_q, sorted_next_q = s1_raw[1], Signal(sw + ww, reset_less=True)
            # The node queue's reads, each into a register of its own (the flow makes them
            # the block RAM's output registers); the value the last node write stored, and
            # whether that write landed in the last capture (the reads then missed it).
            # (Assigned after the FSM.)
            node_q = Signal(self.node_width, reset_less=True)
            node_next_q = Signal(self.node_width, reset_less=True)
            stored_w = Signal(self.node_width)
            stored_now = Signal()

            with m.State("MERGE_START"):
                # The first leaf (ascending, at n - 1) is read now on the "next" port, and
                # reaches its register after MERGE_FILL; no node yet: the first capture finds
                # the node queue empty.
                m.d.sync += [leaf.eq(0), node.eq(0), node_after.eq(1), made.eq(0), second.eq(0),
                             capture.eq(1),
                             decided.eq(0), node_taken_r.eq(0),
                             head_addr.eq(n - 1), head_addr_next.eq(n - 2)]
                # The depth pass's start, set here: the merge's last take then changes the
                # state alone, not 30 counters as well.
                m.d.sync += [idx.eq(n - 3), reading.eq(n != 2), pipe.eq(0)]
                m.d.sync += [inner[0].eq(1)] + [c.eq(0) for c in inner[1:]]
                m.next = "MERGE_FILL"

            with m.State("MERGE_FILL"):
                m.next = "MERGE"

            # Two clocks per take. ``capture`` registers the heads (both from read registers)
            # and records the last take: its parent, and after a node's second take the node.
            # ``decide`` compares the registered heads. Both tables are read in ``capture``,
            # a take ahead, so that each block RAM has its output register (a read reached
            # the head's select 5.8 ns after the clock and set the full-size Fmax, first the
            # node queue's, then the leaves' at ce2c483): the node queue at the head and the
            # one after (``node`` only changes in ``decide``), the leaf table, on its second
            # port, at both outcomes' next leaves, ``leaf`` and ``leaf + 1``, from address
            # registers that ``decide`` sets. The next ``capture`` picks by the registered
            # decision, so a read register reaches only a 2:1 select and a register, and the
            # comparison only registers (when it chose a table's address directly, its select
            # tree was the smoke core's worst path). Two node writes are newer than the node
            # queue's reads, both bypassed: the node the last take completes (it lands in
            # this capture) and the one written in the last capture.
            with m.State("MERGE"):
                m.d.sync += capture.eq(~capture)
                with m.If(capture):
                    _, leaf_w = unpack(Mux(node_taken_r, sorted_q, sorted_next_q))
                    completed = decided & second & (node == made)
                    stored_last = stored_now & (node == made - 1)
                    made_next = made + (decided & second)
                    m.d.sync += [leaf_h.eq(leaf_w),
                                 node_h.eq(Mux(completed, made_w,
                                               Mux(stored_last, stored_w,
                                                   Mux(node_taken_r, node_next_q, node_q)))),
                                 decided.eq(0),
                                 # the decision's flags and both next addresses, ahead of it
                                 leaves_left.eq(leaf < n),
                                 queue_empty.eq(node == made_next),
                                 leaf_addr.eq(n - 1 - leaf),
                                 leaf_addr_next.eq(n - 2 - leaf),
                                 leaf_addr_next2.eq(n - 3 - leaf),
                                 leaf_next.eq(leaf + 1),
                                 stored_now.eq(node_we)]  # the write landing now, next time
                    with m.If(decided):  # the take's writes: after the FSM
                        m.d.sync += [second.eq(~second), first_w.eq(taken_w_r)]
                        with m.If(second):
                            m.d.sync += made.eq(made + 1)
                            with m.If(made == n - 2):
                                m.next = "DEPTH"
                with m.Else():
                    take_leaf = leaves_left & (queue_empty | (leaf_h <= node_h))
                    m.d.sync += [
                        head_addr.eq(Mux(take_leaf, leaf_addr_next, leaf_addr)),
                        head_addr_next.eq(Mux(take_leaf, leaf_addr_next2, leaf_addr_next)),
                        taken_w_r.eq(Mux(take_leaf, leaf_h, node_h)),
                        node_taken_r.eq(~take_leaf),
                        leaf.eq(Mux(take_leaf, leaf_next, leaf)),
                        node.eq(Mux(take_leaf, node, node_after)),
                        node_after.eq(Mux(take_leaf, node_after, node_after + 1)),
                        decided.eq(1),
                        # capture writes the node after its second take (not the root) and
                        # the parent of a node taken
                        node_we.eq(second & (made != n - 2)),
                        parent_we.eq(~take_leaf),
                        parent_waddr.eq(node),  # the node taken, if one was
                    ]

            # -- depths of the internal nodes, backwards over their parents --------------------
            # Every internal node at depth d - 1 has two children at depth d, internal or
            # leaves, so the leaves per depth follow from the internal nodes per depth:
            # bl[d] = 2 inner[d - 1] - inner[d]. Half the items of a pass over all nodes.
            with m.State("DEPTH"):
                # Seven stages, every memory output into a register: (0) read the parent,
                # (1) register it, (2) read the parent's depth, (3) register that (the block
                # RAM's output register), (4) again, in the fabric, (5) add one, (6) write it
                # from registers. Stage 4 is there for the routing: from the depth table's
                # output register straight into the add was the four-lane worst path at
                # 0070bf6 with nextpnr seed 3 (5.3 ns of routing). Neither does the table's
                # data run through the add back into the table (at fa053bd, seed 3, that loop
                # crossed the die twice, 15.4 ns). The four items just ahead write in or
                # after the clock of this item's read, so their depths are forwarded from
                # ``ahead_*`` (nearest first). (A transparent read port instead let yosys drop
                # the register after the table.) Whether to forward is compared a clock ahead,
                # against what ``ahead_idx`` will hold: the comparison then stays off the add
                # (the smoke core's worst path at 398bf66).
                # (The parents are read at idx, the depths at s2_parent: the root's read is
                # ignored. See "read addresses".)
                m.d.sync += [s3_parent.eq(s2_parent), s3_idx.eq(s2_idx),
                             s3_root.eq(s2_parent == n - 2),
                             s4_parent.eq(s3_parent), s4_idx.eq(s3_idx), s4_root.eq(s3_root),
                             s5_idx.eq(s4_idx), s5_root.eq(s4_root), s5_depth.eq(s4_depth)]
                # pipe[j] marks an item in stage j + 1: as this item is in stage 4, the one
                # k + 1 ahead is in stage 5 + k.
                will_hold = [s5_idx, *ahead_idx[:3]]
                m.d.sync += [decide.eq(pipe[4 + k] & (s4_parent == held))
                             for k, (decide, held) in enumerate(zip(from_ahead, will_hold,
                                                                     strict=True))]
                parent_depth = s5_depth
                for decide, held in reversed(list(zip(from_ahead, ahead_depth, strict=True))):
                    parent_depth = Mux(decide, held, parent_depth)
                depth = Signal(depth_width)
                m.d.comb += depth.eq(Mux(s5_root, 1, parent_depth + 1))
                m.d.sync += [depth_waddr.eq(s5_idx), depth_wdata.eq(depth),
                             depth_we.eq(pipe[4])]
                m.d.sync += [ahead_idx[0].eq(s5_idx), ahead_depth[0].eq(depth)]
                m.d.sync += [later.eq(earlier) for later, earlier in
                             zip(ahead_idx[1:] + ahead_depth[1:], ahead_idx[:3] + ahead_depth[:3],
                                 strict=True)]
                # Counted a clock later, from a register: the adder reaches only the write
                # port and a register, not the per-depth counters' decoder.
                with m.If(pipe[5]):
                    with m.Switch(ahead_depth[0]):
                        for k in range(1, len(inner)):
                            with m.Case(k):
                                m.d.sync += inner[k].eq(inner[k] + 1)
                m.d.sync += pipe.eq(Cat(reading, pipe[:7]))
                with m.If(reading):
                    m.d.sync += [idx.eq(idx - 1), reading.eq(idx != 0)]
                with m.If(~reading & (pipe == 0)):
                    m.next = "LEAVES"

            # The K.3 limit's state (set up by LEAVES).
            level = Signal(range(len(bl)), init=max_depth)
            shorter = Signal(range(len(bl)))
            found = Signal()  # ``shorter`` holds the level the next move takes a leaf from
            here = Signal(pos_width)  # bl[level], kept in a register: a move takes 2 from it
            # here == 0 and here <= 2, registered with ``here``: they decide whether ``level``
            # moves, and compared from ``here`` they were part of the cone of ``level``'s
            # enables (with CUMULATE's ``idx`` test, the two-lane worst path with nextpnr
            # seed 3 at d796747, 10.3 ns, 7.0 of it routing).
            here_empty = Signal()
            here_few = Signal()
            stale = Signal()  # ``level`` changed: the next clock picks bl[level] ...
            # ... picks bl[level] within each group of eight counters into these registers, and
            # the clock after that loads the group's pick into ``here``: the wide select is
            # split over two clocks, so neither it nor ``level`` is on ``here``'s path alone.
            groups = [bl[g : g + 8] for g in range(0, len(bl), 8)]
            picked = [Signal(pos_width, name=f"picked{g}") for g in range(len(groups))]
            loading = Signal()
            level_oh = Signal(len(bl), init=1 << max_depth)  # level and shorter, one-hot
            shorter_oh = Signal(len(bl))
            candidates = Signal(len(bl))  # non-empty levels two or more above ``level``
            searched = Signal()  # ``candidates`` are ready

            with m.State("LEAVES"):
                m.d.sync += bl[0].eq(0)
                for k in range(1, len(bl)):
                    pair = inner[k - 1] << 1 if k - 1 < len(inner) else 0
                    m.d.sync += bl[k].eq(pair - (inner[k] if k < len(inner) else 0))
                # ``level`` starts at the deepest level, set here: set in CUMULATE for the next
                # build, it put that state's ``idx`` test on ``level``'s enables.
                m.d.sync += [stale.eq(1), level.eq(max_depth), level_oh.eq(1 << max_depth)]
                m.next = "LIMIT"

            # -- JPEG K.3 limit --------------------------------------------------------------
            with m.State("LIMIT"):
                # A move at (level, shorter) registered by a search clock; after it, the next
                # shorter level is known without a search while the move stays on ``level``
                # and the level above ``shorter`` is still at least two above ``level``.
                with m.If(stale):
                    for group, pick in zip(groups, picked, strict=True):
                        with m.Switch(level[:3]):
                            for k, counter in enumerate(group):
                                with m.Case(k):
                                    m.d.sync += pick.eq(counter)
                    m.d.sync += [stale.eq(0), loading.eq(1)]
                with m.Elif(loading):
                    with m.Switch(level[3:]):
                        for g, pick in enumerate(picked):
                            with m.Case(g):
                                m.d.sync += [here.eq(pick), here_empty.eq(pick == 0),
                                             here_few.eq(pick <= 2)]
                    m.d.sync += loading.eq(0)
                with m.Elif(~found):
                    with m.If(level <= max_len):
                        m.d.sync += [idx.eq(1), cum[0].eq(0), next_code[0].eq(0)]
                        m.next = "CUMULATE"
                    with m.Elif(here_empty):
                        m.d.sync += [level.eq(level - 1), level_oh.eq(level_oh >> 1),
                                     stale.eq(1)]
                    with m.Elif(~searched):  # search: the non-empty levels two or more above
                        m.d.sync += [candidates.eq(Cat((bl[k] != 0) & (k + 2 <= level)
                                                       for k in range(len(bl)))),
                                     searched.eq(1)]
                    with m.Else():  # and the nearest of them, a clock later
                        m.d.sync += [shorter.eq(highest_set(candidates)[1]),
                                     shorter_oh.eq(highest_bit(candidates)), found.eq(1),
                                     searched.eq(0)]
                with m.Else():
                    # One added constant per counter, picked by one-hot registers (shorter
                    # <= level - 2, so at most -2, or +1 and +2 together, apply).
                    def at(onehot, k):
                        return onehot[k] if 0 <= k < len(bl) else 0

                    for k in range(len(bl)):
                        delta = Mux(at(level_oh, k), -2,
                                    Mux(at(level_oh, k + 1), Mux(at(shorter_oh, k - 1), 3, 1),
                                        Mux(at(shorter_oh, k - 1), 2,
                                            Mux(at(shorter_oh, k), -1, 0))))
                        m.d.sync += bl[k].eq(bl[k] + delta)
                    # (here - 2 as it wraps: zero after 2, at most 2 after 2, 3 or 4)
                    m.d.sync += [here.eq(here - 2), here_empty.eq(here == 2),
                                 here_few.eq((here >= 2) & (here <= 4))]
                    with m.If(~here_few):
                        with m.If(shorter + 3 <= level):
                            m.d.sync += [shorter.eq(shorter + 1),
                                         shorter_oh.eq(shorter_oh << 1)]
                        with m.Else():
                            m.d.sync += found.eq(0)
                    with m.Else():
                        m.d.sync += [level.eq(level - 1), level_oh.eq(level_oh >> 1),
                                     found.eq(0), stale.eq(1)]

            # -- first code and cumulative count per length ---------------------------------
            with m.State("CUMULATE"):
                for k in range(1, max_len + 1):
                    with m.If(idx == k):
                        m.d.sync += [
                            next_code[k].eq((next_code[k - 1] + bl[k - 1]) << 1),
                            cum[k].eq(cum[k - 1] + bl[k]),
                        ]
                m.d.sync += idx.eq(idx + 1)
                with m.If(idx == max_len):
                    m.d.sync += start_walk(twins=[head_addr])
                    m.next = "HANDOUT"

            # -- lengths in hand-out order -------------------------------------------------------
            with m.State("HANDOUT"):
                issue = issue_until(n, twins=[head_addr])  # order1's read
                sym_r, _ = unpack(sorted_q)  # the table's output register
                above = Signal(max_len)  # rank >= cum[k], compared a clock ahead
                m.d.sync += above.eq(Cat(idx >= cum[k] for k in range(1, max_len + 1)))
                # Symbol and length registered, then written: the table's output reaches
                # only a register, not the lengths table's address.
                length_r = Signal(LENGTH_BITS)
                m.d.sync += length_r.eq(1 + sum(above[k] for k in range(max_len - 1)))
                m.d.comb += [length_wp.addr.eq(sym_r), length_wp.data.eq(length_r),
                             length_wp.en.eq(pipe[1])]
                m.d.sync += pipe.eq(Cat(issue, pipe[0]))
                with m.If(~issue & (pipe[:2] == 0)):
                    m.d.sync += start_walk()
                    m.next = "WAIT_COMMIT"

            # -- codes, written like host CB_DATA writes, then the commit ------------------
            with m.State("WAIT_COMMIT"):
                with m.If(~self.cb_pending):
                    m.next = "CODES"

            with m.State("CODES"):
                # 0: read the length; 1: register it (the RAM's output register); 2: register
                # it again, next to the code counters; 3: its next code, written out. Neither
                # the table's output nor the route from it (across the die at full size:
                # 5.8 ns at aa1128f) reaches the 16-way select of the code counters.
                issue = issue_until(n)  # the lengths are read at idx
                length_ram = Signal(LENGTH_BITS, reset_less=True)  # the RAM's output register
                length = Signal(LENGTH_BITS, reset_less=True)
                s3_code_idx = Signal.like(idx)
                m.d.sync += [length_ram.eq(length_rp.data), length.eq(length_ram),
                             s3_code_idx.eq(s2_idx)]
                code = Signal(max_len + 1)
                with m.Switch(length):
                    for k in range(1, max_len + 1):
                        with m.Case(k):
                            m.d.comb += code.eq(next_code[k])
                            with m.If(pipe[2]):
                                m.d.sync += next_code[k].eq(next_code[k] + 1)
                m.d.sync += [
                    self.cb_addr.eq(s3_code_idx),
                    self.cb_data.eq(Cat(code[:max_len], length)),
                    self.cb_we.eq(pipe[2]),
                    pipe.eq(Cat(issue, pipe[:2])),
                ]
                with m.If(~issue & (pipe[:3] == 0)):
                    m.d.sync += [self.cb_commit.eq(1), idx.eq(0), pipe.eq(0),
                                 self.builds.eq(self.builds + 1)]
                    m.next = "COMMITTED"

            with m.State("COMMITTED"):
                m.d.sync += [self.cb_commit.eq(0), self.cb_we.eq(0)]
                m.next = "LOAD"

        # The merge's writes of a decided take, in its capture clock. Only the merge writes
        # these tables, and its enables are registers set in decide, so no state decode
        # reaches the tables' ports (across the die at full size).
        m.d.comb += [
            parent_wp.addr.eq(parent_waddr),
            parent_wp.data.eq(made),
            parent_wp.en.eq(parent_we),
            node_wp.addr.eq(made),
            node_wp.data.eq(made_w),
            node_wp.en.eq(node_we),
        ]
        # -- read addresses ------------------------------------------------------------------
        # Every table is read on every clock at an address that is a register alone; a phase
        # uses the reads it needs and the others ignore theirs (the tables' ``no_rw_check``
        # holds for the used reads only). An address chosen by the phase put the phase's
        # decode in front of a block RAM far across the die: the worst path at 20faa57 of one
        # lane and of four (nextpnr seeds 1, 2 and 3: 9.2 to 10.7 ns, 3.1 to 6.0 of it the
        # last route). Where one phase reads a table at idx and another phase elsewhere, a
        # twin register follows idx (``issue_until``): order1's first port (``head_addr``) and
        # the bucket counters (``bump_bucket``, see there). The node queue's reads are used in
        # capture only.
        m.d.comb += [node_rp.addr.eq(node), node_next_rp.addr.eq(node_after),
                     sorted_rp.addr.eq(head_addr), sorted_next_rp.addr.eq(head_addr_next),
                     elem[0][0].addr.eq(idx), parent_rp.addr.eq(idx),
                     depth_rp.addr.eq(s2_parent), length_rp.addr.eq(idx)]
        m.d.sync += [node_q.eq(node_rp.data), node_next_q.eq(node_next_rp.data),
                     sorted_next_q.eq(sorted_next_rp.data)]
        m.d.sync += [raw.eq(elem[k][0].data) for k, raw in enumerate(s1_raw)]
        # The depth pass's table reads, also registered on every clock: assigned in its phase
        # only, s4_depth's enable put a LUT between the depth table and its register, which
        # then could not become the block RAM's output register (the four-lane worst path
        # at 9290163 with nextpnr seed 1: 10.8 ns, 4.6 of it routing).
        m.d.sync += [s2_parent.eq(parent_rp.data), s4_depth.eq(depth_rp.data)]
        m.d.comb += [depth_wp.addr.eq(depth_waddr), depth_wp.data.eq(depth_wdata),
                     depth_wp.en.eq(depth_we)]
        with m.If(node_we):
            m.d.sync += stored_w.eq(made_w)

        # A build runs from its first count to its commit (COMMITTED: the commit is out).
        m.d.comb += self.busy.eq(~(phase.ongoing("LOAD") & (idx == 0))
                                 & ~phase.ongoing("COMMITTED"))
        return m
