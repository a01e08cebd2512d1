"""cocotb bench: SymbolStage -> HuffmanLanes against the model's symbols, raw fields and
canonical codes, with codebooks swapped under traffic.

The design is :class:`EncoderPair`, the two stages back to back (defined here: the top level
forks the symbol stream to the histogram, so it wires them itself). Residual beats come from
the model: random walks through ``ceaz.quantizer.prequantize`` and
``ceaz.predictor.residuals`` with fill and verbatim values, plus injected escapes (outliers of
both signs up to +-(2**30 - 1), the band edges +-R and +-(R - 1), verbatim and fill with
arbitrary deltas). Codebooks go in through the write port: the offline book for the first
chunk, then for chunk k the book built from chunk k-1's histogram (adapt_lag 1), each written
during the previous chunk and committed before its first beat. Every lane's (code, raw, len, esc)
is compared with ``canonical_codes(lengths)[sym]`` followed by the raw field of
``ceaz.chunk.chunk_symbols``; lanes beyond ``count`` must give len 0 and escape NONE.
"""

from __future__ import annotations

import os

import cocotb
import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from beats import beats_from_values, fields, values_from_beats
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, with_timeout
from cocotbext.axi import AxiStreamFrame
from runner import bench_params, run_bench
from streams import PERIOD_NS, StreamBench

from ceaz import format as fmt
from ceaz import huffman, predictor, symbols
from ceaz.chunk import Coding, chunk_symbols
from ceaz.quantizer import F32, KIND_FILL, KIND_NORMAL, KIND_VERBATIM, prequantize, quant_params
from ceaz_hw.beats import Coded, Escape, Residual, beat, symbol_bits
from ceaz_hw.huffman import LENGTH_BITS, HuffmanLanes
from ceaz_hw.symbols import SymbolStage

#: Longest wait for one output beat (latency plus stalls); only a hang exceeds it.
RECV_TIMEOUT_NS = 100_000
SEED = int(os.environ.get("CEAZ_SIM_SEED", "1"))
MAX_CODE_LEN = fmt.MAX_CODE_LEN


class EncoderPair(wiring.Component):
    """SymbolStage -> HuffmanLanes with the codebook port brought out, for this bench."""

    def __init__(self, lanes, radius):
        self._lanes, self._radius = lanes, radius
        super().__init__({
            "i": In(stream.Signature(beat(Residual, lanes))),
            "o": Out(stream.Signature(beat(Coded(MAX_CODE_LEN), lanes))),
            "cb_addr": In(symbol_bits(radius)),
            "cb_data": In(MAX_CODE_LEN + LENGTH_BITS),
            "cb_we": In(1),
            "cb_commit": In(1),
            "cb_pending": Out(1),
            "cb_busy_error": Out(1),
            "active_bank": Out(1),
            # The Huffman lanes' input transfers, so that a bench can time a commit against
            # a chunk's first lookup.
            "lookup_take": Out(1),
            "lookup_last": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.symbols = sym = SymbolStage(self._lanes, self._radius)
        m.submodules.huffman = huf = HuffmanLanes(self._lanes, self._radius, MAX_CODE_LEN)
        wiring.connect(m, wiring.flipped(self.i), sym.i)
        wiring.connect(m, sym.o, huf.i)
        wiring.connect(m, huf.o, wiring.flipped(self.o))
        m.d.comb += [
            huf.cb_addr.eq(self.cb_addr),
            huf.cb_data.eq(self.cb_data),
            huf.cb_we.eq(self.cb_we),
            huf.cb_commit.eq(self.cb_commit),
            self.cb_pending.eq(huf.cb_pending),
            self.cb_busy_error.eq(huf.cb_busy_error),
            self.active_bank.eq(huf.active_bank),
            self.lookup_take.eq(huf.i.valid & huf.i.ready),
            self.lookup_last.eq(huf.i.payload.last),
        ]
        return m


# -- the model --------------------------------------------------------------------------------

_OUTLIER_MASK = (1 << fmt.OUTLIER_BITS) - 1


def symbol_fields(delta, kind, raw_bits, radius):
    """Symbols, raw fields and their widths, as ``ceaz.chunk.chunk_symbols`` forms them."""
    sym = symbols.encode(delta, kind, radius)
    raw = np.where(sym == fmt.SYM_OUTLIER, delta & _OUTLIER_MASK, 0).astype(np.uint64)
    verbatim = kind == KIND_VERBATIM
    raw[verbatim] = raw_bits[verbatim]
    return sym, raw, symbols.raw_widths(sym, radius, F32)


def expected_coded(sym, raw, raw_len, lengths, radius):
    """(code, raw, len, esc) per value: the canonical code, then the raw field."""
    codes = huffman.canonical_codes(lengths).astype(np.int64)
    code = codes[sym]
    length = lengths.astype(np.int64)[sym] + raw_len
    esc = np.full(len(sym), Escape.NONE.value, dtype=np.int64)
    esc[sym == fmt.SYM_OUTLIER] = Escape.OUTLIER.value
    esc[sym == fmt.sym_verbatim(radius)] = Escape.VERBATIM.value
    esc[sym == fmt.sym_fill(radius)] = Escape.FILL.value
    return code, raw.astype(np.int64), length, esc


class Chunk:
    """One chunk's residual inputs and everything the model says about it."""

    def __init__(self, delta, kind, raw_bits, radius):
        self.delta = delta.astype(np.int64)
        self.kind = kind.astype(np.int64)
        self.raw_bits = raw_bits.astype(np.int64)
        self.sym, self.raw, self.raw_len = symbol_fields(delta, kind, raw_bits, radius)
        self.hist = np.bincount(self.sym, minlength=fmt.n_symbols(radius))

    def __len__(self):
        return len(self.delta)


FILL_VALUE = np.float32(-1e34)


def field_chunk(rng, shape, radius, eb, inject):
    """A random-walk field through the model's prequantizer and predictor, with NaN, Inf and
    huge values (verbatim) and fill values mixed in; with ``inject``, escapes of every kind
    overwrite about 3% of the residuals."""
    n = int(np.prod(shape))
    x = np.cumsum(rng.normal(0, 1, n)).astype(F32)
    x[rng.integers(0, n, max(1, n // 100))] = FILL_VALUE
    odd = max(1, n // 200)
    x[rng.integers(0, n, odd)] = rng.choice(
        np.array([np.nan, np.inf, -np.inf, 3e38, -1e30], dtype=F32), odd)
    qp = quant_params(eb, F32, float(np.nanmax(np.abs(x[np.isfinite(x)]))),
                      fill_value=float(FILL_VALUE))
    q, kind = prequantize(x, qp)
    delta = predictor.residuals(q.reshape(shape)).reshape(-1)
    raw_bits = x.view(np.uint32).astype(np.int64)
    chunk = Chunk(delta, kind, raw_bits, radius)
    # The helper must agree with the model's own chunk_symbols on model data.
    ref_sym, ref_raw, ref_len = chunk_symbols(x.reshape(shape), Coding(qp, radius, 4096))
    assert np.array_equal(chunk.sym, ref_sym)
    assert np.array_equal(chunk.raw, ref_raw)
    assert np.array_equal(chunk.raw_len, ref_len)
    if not inject:
        return chunk
    big = (1 << 30) - 1
    r = radius
    specials = np.array([big, -big, r, -r, r - 1, -(r - 1), r + 1, -(r + 1), 0, 1, -1])
    at = rng.choice(n, max(len(specials) + 3, n * 3 // 100), replace=False)
    k = len(specials)
    delta, kind = delta.copy(), kind.copy()
    delta[at[:k]] = specials
    kind[at[:k]] = KIND_NORMAL
    rest = at[k:]
    pick = rng.integers(0, 4, len(rest))
    delta[rest] = rng.integers(-big, big + 1, len(rest))  # arbitrary: outliers, or ignored
    kind[rest] = np.array([KIND_NORMAL, KIND_NORMAL, KIND_VERBATIM, KIND_FILL])[pick]
    raw_bits = raw_bits.copy()
    raw_bits[rest] = rng.integers(0, 1 << 32, len(rest))
    return Chunk(delta, kind, raw_bits, radius)


# -- the bench --------------------------------------------------------------------------------

class TB(StreamBench):
    """Clock, reset, the stream models, and a driver for the codebook write port."""

    def __init__(self, dut):
        params = bench_params()
        self.lanes, self.radius = int(params["lanes"]), int(params["radius"])
        self.n_symbols = fmt.n_symbols(self.radius)
        self.in_layout = beat(Residual, self.lanes)
        self.out_layout = beat(Coded(MAX_CODE_LEN), self.lanes)
        self.rng = np.random.default_rng(SEED)
        super().__init__(dut, data.Layout.cast(self.in_layout).size,
                         data.Layout.cast(self.out_layout).size)
        self.values_compared = 0
        self.invalid_lanes_checked = 0
        self._idle_port()

    def _idle_port(self) -> None:
        self.dut.cb_we.value = 0
        self.dut.cb_commit.value = 0
        self.dut.cb_addr.value = 0
        self.dut.cb_data.value = 0

    async def reset(self) -> None:
        self._idle_port()
        await super().reset()
        cocotb.start_soon(self.checker.run())  # after reset, which may drop a held beat

    # -- codebook port --

    async def write_entry(self, addr: int, value: int) -> bool:
        """One write in one clock; returns cb_busy_error as seen in that clock."""
        self.dut.cb_addr.value = addr
        self.dut.cb_data.value = value
        self.dut.cb_we.value = 1
        await ReadOnly()
        busy = bool(self.dut.cb_busy_error.value)
        assert busy == bool(self.dut.cb_pending.value), "cb_busy_error must follow cb_pending"
        await RisingEdge(self.dut.clk)
        self.dut.cb_we.value = 0
        return busy

    async def load_book(self, lengths, gaps: float = 0.2) -> None:
        """Write every entry of ``lengths``' canonical book, in a random order with random
        idle clocks, then commit."""
        assert not int(self.dut.cb_pending.value), "loading a book while a commit is pending"
        entries = huffman.entry_words(lengths)
        for s in self.rng.permutation(self.n_symbols):
            while self.rng.random() < gaps:
                await RisingEdge(self.dut.clk)
            assert not await self.write_entry(int(s), int(entries[s]))
        self.dut.cb_commit.value = 1
        await RisingEdge(self.dut.clk)
        self.dut.cb_commit.value = 0
        await ReadOnly()
        assert int(self.dut.cb_pending.value) == 1, "cb_pending must rise after a commit"
        await RisingEdge(self.dut.clk)

    async def write_while_pending(self, lengths) -> None:
        """A write during a pending commit must pulse cb_busy_error and change nothing: it
        targets the most used symbol with a different entry (the next chunk shows it)."""
        s = self.radius  # delta 0
        entry = int(huffman.entry_words(lengths)[s])
        every_bit = (1 << (MAX_CODE_LEN + LENGTH_BITS)) - 1
        assert await self.write_entry(s, entry ^ every_bit), "cb_busy_error did not pulse"
        await ReadOnly()
        assert not int(self.dut.cb_busy_error.value), "cb_busy_error must be a pulse"
        await RisingEdge(self.dut.clk)

    # -- streams --

    def beats_of(self, chunk: Chunk) -> list[int]:
        """The chunk's input beats; lanes beyond ``count`` of the last beat carry garbage."""
        # A lane holds the delta of a normal value, the bits of the others (beats.Residual).
        words = beats_from_values(self.in_layout, {
            "kind": chunk.kind, "raw": np.where(chunk.kind == 0, chunk.delta, chunk.raw_bits)})
        used = len(chunk) % self.lanes
        if used:
            lanes = data.Layout.cast(self.in_layout)["lanes"]
            lane_size = data.Layout.cast(lanes.shape.elem_shape).size
            lo = lanes.offset + used * lane_size
            hi = lanes.offset + self.lanes * lane_size
            width = hi - lo
            garbage = int.from_bytes(self.rng.bytes(-(-width // 8)), "little") % (1 << width)
            words[-1] |= (garbage | 1 << (width - 1)) << lo  # never all zero
        return words

    async def send(self, chunk: Chunk) -> None:
        await self.source.send(AxiStreamFrame(self.beats_of(chunk)))

    async def receive(self, chunk: Chunk, lengths, label: str) -> list[int]:
        """Take the chunk's output beats and compare them with the model."""
        n_beats = -(-len(chunk) // self.lanes)
        frames = [await with_timeout(self.sink.recv(), RECV_TIMEOUT_NS, "ns")
                  for _ in range(n_beats)]
        words = [word for frame in frames for word in frame.tdata]
        assert len(words) == n_beats
        got, lasts = values_from_beats(self.out_layout, words)
        assert lasts == [n_beats - 1], f"{label}: last on beats {lasts}, expected {n_beats - 1}"
        code, raw, length, esc = expected_coded(chunk.sym, chunk.raw, chunk.raw_len,
                                                np.asarray(lengths), self.radius)
        for name, want in (("code", code), ("raw", raw), ("len", length), ("esc", esc)):
            bad = np.flatnonzero(got[name] != want)
            if len(bad):
                i = bad[0]
                raise AssertionError(
                    f"{label}: {name} differs at {len(bad)} of {len(chunk)} values; first at "
                    f"{i}: delta={chunk.delta[i]} kind={chunk.kind[i]} sym={chunk.sym[i]}: "
                    f"rtl code={got['code'][i]:#x} raw={got['raw'][i]:#x} len={got['len'][i]} "
                    f"esc={got['esc'][i]}, model code={code[i]:#x} raw={raw[i]:#x} "
                    f"len={length[i]} esc={esc[i]}")
        self._check_unused_lanes(words[-1], len(chunk) - (n_beats - 1) * self.lanes, label)
        self.values_compared += len(chunk)
        counts = {name: int(np.sum(esc == e.value)) for name, e in
                  (("outlier", Escape.OUTLIER), ("verbatim", Escape.VERBATIM),
                   ("fill", Escape.FILL))}
        cocotb.log.info("%s: %d values equal (code, raw, len, esc); escapes %s; %d bits coded",
                        label, len(chunk), counts, int(length.sum()))
        return [frame.sim_time_start for frame in frames]

    def _check_unused_lanes(self, word: int, count: int, label: str) -> None:
        lanes = data.Layout.cast(self.out_layout)["lanes"]
        lane_layout = lanes.shape.elem_shape
        lane_size = data.Layout.cast(lane_layout).size
        f = fields(lane_layout)
        for j in range(count, self.lanes):
            lane_word = word >> (lanes.offset + j * lane_size)
            assert f["len"].get(lane_word) == 0, f"{label}: unused lane {j} has len != 0"
            assert f["esc"].get(lane_word) == Escape.NONE.value, f"{label}: lane {j} esc"
            self.invalid_lanes_checked += 1

    def report(self, test: str) -> None:
        cocotb.log.info("%s: lanes %d radius %d: %d values compared with the model "
                        "(code, raw, len, esc), %d unused lanes checked", test, self.lanes,
                        self.radius, self.values_compared, self.invalid_lanes_checked)


def chunk_shapes(lanes, radius, count):
    """Box shapes for ``count`` chunks: long enough for the next book to be written during
    a chunk (at least ~2 beats per entry), with ragged last beats."""
    per_entry = 2 * fmt.n_symbols(radius) * lanes
    shapes = []
    for k in range(count):
        x, y = 23 + 2 * k, 3 + 2 * (k % 2)
        z = max(1, -(-max(per_entry, 600) // (x * y))) | 1
        shapes.append((z, y, x))  # odd sizes: the last beat is partial for any lanes > 1
    return shapes


async def run_books_under_traffic(tb: TB, n_chunks: int, inject: bool, label: str) -> None:
    """Chunks back to back; the book of chunk k+1 is written while chunk k streams and
    committed before its first beat is sent; each commit is followed by a refused write."""
    rng = tb.rng
    shapes = chunk_shapes(tb.lanes, tb.radius, n_chunks)
    bounds = rng.choice([0.05, 0.3, 1.0, 3.0], n_chunks)
    chunks = [field_chunk(rng, shape, tb.radius, eb, inject)
              for shape, eb in zip(shapes, bounds, strict=True)]
    books = [huffman.offline_lengths(tb.radius)]
    for prev in chunks[:-1]:
        books.append(huffman.code_lengths(huffman.weights_from_histogram(prev.hist)))
    assert all(huffman.is_complete(b) for b in books)

    async def receiver():
        for k, (chunk, book) in enumerate(zip(chunks, books, strict=True)):
            await tb.receive(chunk, book, f"{label} chunk {k} ({len(chunk)} values)")

    receiving = cocotb.start_soon(receiver())
    # Book 0 goes in with no chunk in flight: the swap waits for chunk 0's first beat.
    await tb.load_book(books[0])
    await tb.write_while_pending(books[0])
    await ClockCycles(tb.dut.clk, 5)
    assert int(tb.dut.cb_pending.value) == 1, "a commit must wait for a chunk's first beat"
    bank = int(tb.dut.active_bank.value)
    back_to_back = 0
    for k, chunk in enumerate(chunks):
        back_to_back += k > 0 and not tb.source.idle()  # chunk k-1 still streaming in
        await tb.send(chunk)
        while int(tb.dut.cb_pending.value):  # chunk k's first beat has reached the lookup
            await RisingEdge(tb.dut.clk)
        bank ^= 1
        assert int(tb.dut.active_bank.value) == bank, "the banks did not swap"
        if k + 1 < len(chunks):
            await tb.load_book(books[k + 1])
            await tb.write_while_pending(books[k + 1])
    await receiving
    cocotb.log.info("%s: %d of %d chunks followed the previous one back to back, each "
                    "with a book committed during it", label, back_to_back, n_chunks - 1)
    assert back_to_back > 0, "no swap under traffic: chunks too short for the book writes"
    tb.report(label)


@cocotb.test()
async def encoder_books_under_traffic(dut):
    """Model fields with injected escapes; books swapped under random stalls on both sides."""
    tb = TB(dut)
    tb.set_stalls(SEED)
    await tb.reset()
    await run_books_under_traffic(tb, 5, True, "books_under_traffic")


@cocotb.test()
async def encoder_model_fields(dut):
    """Model fields as they are (no injection), other stalls, after a fresh reset."""
    tb = TB(dut)
    tb.set_stalls(SEED + 7)
    await tb.reset()
    await run_books_under_traffic(tb, 3, False, "model_fields")


@cocotb.test()
async def encoder_throughput(dut):
    """No stalls: one beat per clock in and out across two chunks back to back, the second
    one coded with a book committed while the first one is in flight."""
    tb = TB(dut)
    tb.set_stalls(None)
    await tb.reset()
    rng = tb.rng
    shape = (1, 1, 64 * tb.lanes + 1)
    chunks = [field_chunk(rng, shape, tb.radius, 0.3, True) for _ in range(2)]
    books = [huffman.offline_lengths(tb.radius),
             huffman.code_lengths(huffman.weights_from_histogram(chunks[0].hist))]
    await tb.load_book(books[0])
    frame = AxiStreamFrame(tb.beats_of(chunks[0]) + tb.beats_of(chunks[1]))
    await tb.source.send(frame)
    while int(tb.dut.cb_pending.value):
        await RisingEdge(tb.dut.clk)
    # The second book is written and committed while chunk 0 streams (only the small
    # alphabet fits in its 65 clocks; otherwise chunk 1 starts with the book still pending
    # and keeps the active book).
    fits = fmt.n_symbols(tb.radius) + 4 < 64
    if fits:
        await tb.load_book(books[1], gaps=0.0)
    times = await tb.receive(chunks[0], books[0], "throughput chunk 0")
    times += await tb.receive(chunks[1], books[1] if fits else books[0], "throughput chunk 1")
    clocks = (times[-1] - times[0]) / (PERIOD_NS * 1000) + 1  # sim_time is in ps
    assert clocks == len(times), f"{len(times)} beats took {clocks} clocks"
    tb.report("throughput")


def escape_first_chunk(rng, lanes, radius):
    """A short model chunk whose first two values are a fill value and a verbatim one, so
    that the first lookups of the chunk read both escape entries."""
    base = field_chunk(rng, (1, 1, 4 * lanes + 3), radius, 0.3, False)
    kind, raw_bits = base.kind.copy(), base.raw_bits.copy()
    kind[:2] = [KIND_FILL, KIND_VERBATIM]
    raw_bits[:2] = [int(np.float32(FILL_VALUE).view(np.uint32)), 0x7FC00001]
    return Chunk(base.delta, kind, raw_bits, radius)


@cocotb.test()
async def encoder_commit_then_first_lookup(dut):
    """The tightest order the port allows: the escape entries written last, the commit in the
    next clock, and the next chunk's first lookup (a fill and a verbatim value) in the clock
    after that. The lookup must read the new book's escape entries."""
    tb = TB(dut)
    tb.set_stalls(None)
    await tb.reset()
    rng, n_sym, r = tb.rng, tb.n_symbols, tb.radius
    book0 = huffman.offline_lengths(r)
    # Chunk 0 is long enough for the whole book to be written while it streams.
    n_beats0 = n_sym + 6
    chunk0 = field_chunk(rng, (1, 1, n_beats0 * tb.lanes), r, 0.3, True)
    chunk1 = escape_first_chunk(rng, tb.lanes, r)
    # Book 1 gives the escapes short codes, so a stale escape entry cannot pass for it.
    hist = chunk0.hist.copy()
    hist[fmt.sym_fill(r)] += 4 * len(chunk0)
    hist[fmt.sym_verbatim(r)] += 2 * len(chunk0)
    book1 = huffman.code_lengths(huffman.weights_from_histogram(hist))
    for s in (fmt.sym_fill(r), fmt.sym_verbatim(r)):
        assert book1[s] != book0[s], "the books must differ in the escape entries"
    entries1 = huffman.entry_words(book1)
    order = [s for s in rng.permutation(n_sym) if s < 2 * r] + [fmt.sym_verbatim(r),
                                                                fmt.sym_fill(r)]
    writes = [(int(s), int(entries1[s])) for s in order]

    await tb.load_book(book0)
    receiving = cocotb.start_soon(tb.receive(chunk0, book0, "commit_then_first_lookup 0"))
    await tb.send(chunk0)
    await tb.send(chunk1)
    # One coroutine drives the port and watches the lookups clock by clock: chunk 0 flows at a
    # beat per clock (no stalls), so its first lookup fixes the clock of chunk 1's.
    clock, first, firsts, commit_at, schedule = 0, True, [], None, {}
    while len(firsts) < 2:
        await RisingEdge(dut.clk)
        clock += 1
        tb._idle_port()
        if clock in schedule:
            action = schedule[clock]
            if action == "commit":
                dut.cb_commit.value = 1
                commit_at = clock
            else:
                dut.cb_addr.value, dut.cb_data.value = action
                dut.cb_we.value = 1
        await ReadOnly()
        if int(dut.lookup_take.value):
            if first:
                firsts.append(clock)
                if len(firsts) == 1:
                    due = clock + n_beats0  # chunk 1's first lookup
                    start = due - 1 - len(writes)
                    assert start > clock, "chunk 0 is too short for the book"
                    schedule = {start + k: w for k, w in enumerate(writes)}
                    schedule[due - 1] = "commit"
            first = bool(int(dut.lookup_last.value))
    await RisingEdge(dut.clk)
    tb._idle_port()
    assert commit_at is not None and firsts[1] == commit_at + 1, (
        f"chunk 1's first lookup in clock {firsts[1]}, the commit in {commit_at}: the bench "
        "missed the order it tests")
    await receiving
    await tb.receive(chunk1, book1, "commit_then_first_lookup 1")
    tb.report("commit_then_first_lookup")


# -- pytest wrapper ---------------------------------------------------------------------------

@pytest.mark.parametrize(("lanes", "radius"), [(1, 8), (4, 8), (1, 512), (4, 512), (16, 8)])
def test_encoder(lanes, radius):
    run_bench(EncoderPair, name="encoder", params={"lanes": lanes, "radius": radius},
              test_module=__name__)
