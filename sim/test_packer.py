"""cocotb bench: the packer (ceaz_hw.packer.Packer) against ceaz.packer.pack, byte for byte.

Coded fields are random: uniform lengths 0..48, or realistic ones (mostly 1..4 bits) with
bursts of 48-bit escapes, made what the Huffman lanes send (a code of up to 16 bits, then 31
or 32 raw bits for an escape that has them, ``as_pipeline``); ``code`` and ``raw`` carry garbage
above their widths and the lanes beyond ``count`` of a partial last beat carry garbage too,
which the packer must ignore. Chunks range
from one value to several thousand, with partial last beats and several sync points, and
follow each other back to back under random stalls on both sides. The expected output of a
chunk is built from the model: the payload of ``pack`` (each field split as a code of up to
16 bits and a raw field of 32 bits, as the pipeline forms them), the sync offsets
``starts[K::K]`` and the trailer with ``zlib.crc32``, each zero-padded to whole words; the
output words are compared byte for byte and ``last`` must mark exactly the final word.
A throughput test measures input beats per clock on a realistic stream with no back-pressure.
With ``piece_bits`` (fields cut into pieces, ``lanes`` pieces a clock) the rate is measured
against what the grouping allows: a beat of ``p`` pieces takes ``ceil(p / lanes)`` clocks.
"""

from __future__ import annotations

import os
import struct
import zlib

import cocotb
import numpy as np
import pytest
from amaranth.lib import data
from beats import beats_from_values
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout
from cocotbext.axi import AxiStreamFrame
from runner import bench_params, run_bench
from streams import StreamBench

from ceaz import format as fmt
from ceaz import packer
from ceaz.regmap import TRAILER_MAGIC
from ceaz_hw.beats import Coded, Escape, beat, code_field_bits
from ceaz_hw.packer import Packer, word_bits

RECV_TIMEOUT_NS = 200_000
SEED = int(os.environ.get("CEAZ_SIM_SEED", "1"))
MAX_CODE_LEN = fmt.MAX_CODE_LEN
FIELD = code_field_bits(MAX_CODE_LEN)


# -- the model --------------------------------------------------------------------------------

class Chunk:
    """One chunk's coded fields (``bits`` right-aligned in ``length`` bits) and escapes."""

    def __init__(self, bits, length, esc):
        self.bits = np.asarray(bits, dtype=np.uint64)
        self.length = np.asarray(length, dtype=np.int64)
        self.esc = np.asarray(esc, dtype=np.int64)

    def __len__(self):
        return len(self.length)

    def expected(self, k: int, width: int) -> tuple[bytes, int, int]:
        """(output bytes, payload words, sync offsets) of this chunk from the model."""
        # The pipeline's split: a code of up to 16 bits followed by a raw field of 32.
        raw_len = np.where(self.length > 32, 32, 0)
        code_len = self.length - raw_len
        raw = self.bits & np.uint64(0xFFFFFFFF)
        codes = np.where(raw_len > 0, self.bits >> np.uint64(32), self.bits)
        payload, bits, starts = packer.pack(codes, code_len, raw, raw_len)
        assert len(payload) == (bits + 7) // 8
        word = width // 8
        crc_bytes = -(-bits // 64) * 8
        crc = zlib.crc32(payload + bytes(crc_bytes - len(payload)))
        syncs = starts[k::k].astype(np.uint32)
        out = bytearray(payload)
        out += bytes(-len(out) % word)
        payload_words = len(out) // word
        out += syncs.astype("<u4").tobytes()
        out += bytes(-len(out) % word)
        counts = [int(np.sum(self.esc == e.value))
                  for e in (Escape.OUTLIER, Escape.VERBATIM, Escape.FILL)]
        out += struct.pack("<IIQIIII", TRAILER_MAGIC, len(self), bits, crc, *counts)
        out += bytes(-len(out) % word)
        return bytes(out), payload_words, len(syncs)


def random_chunk(rng, n: int, style: str) -> Chunk:
    """``uniform``: lengths 0..48; ``realistic``: 1..4 bits mostly, bursts of 48-bit escapes
    (and some 17..47-bit ones); ``dense``: lengths near 48 everywhere; ``steady``: about 3
    bits per value with isolated 48-bit escapes (a long chunk of a smooth field)."""
    if style == "uniform":
        length = rng.integers(0, FIELD + 1, n)
    elif style == "dense":
        length = rng.integers(FIELD - 8, FIELD + 1, n)
    elif style == "steady":
        length = rng.choice([1, 2, 3, 4, 5, 6], n, p=[0.2, 0.2, 0.2, 0.2, 0.1, 0.1])
        length[rng.random(n) < 0.01] = FIELD
    else:
        length = rng.choice([1, 2, 3, 4], n, p=[0.4, 0.3, 0.2, 0.1])
        n_bursts = rng.integers(0, 1 + n // 300)
        for _ in range(n_bursts):
            at = rng.integers(0, n)
            length[at : at + rng.integers(1, 40)] = FIELD
        odd = rng.random(n) < 0.01
        length[odd] = rng.integers(17, FIELD, int(odd.sum()))
    esc = np.where(length > 32, rng.choice([Escape.OUTLIER.value, Escape.VERBATIM.value], n),
                   Escape.NONE.value)
    fills = rng.random(n) < 0.02
    esc[fills] = Escape.FILL.value
    odd = rng.random(n) < 0.005
    esc[odd] = rng.integers(0, 4, int(odd.sum()))  # any class with any length
    bits = rng.integers(0, 1 << 62, n, dtype=np.uint64) & ((np.uint64(1) << length.astype(
        np.uint64)) - np.uint64(1))
    return Chunk(bits, length, esc)


def as_pipeline(chunk: Chunk, rng) -> Chunk:
    """The chunk's fields as the Huffman lanes form them, which the pieces front relies on: a
    code of at most 16 bits, then 32 raw bits for a verbatim value, 31 for an outlier and none
    for the other classes. A length above 32 becomes such an escape (of the class given, if it
    has raw bits and the code fits), a shorter one a code cut to 16 bits."""
    length, esc = chunk.length.copy(), chunk.esc.copy()
    raw = length > 32
    has_raw = (esc == Escape.OUTLIER.value) | (esc == Escape.VERBATIM.value)
    pick = rng.choice([Escape.OUTLIER.value, Escape.VERBATIM.value], len(esc))
    esc = np.where(raw, np.where(has_raw, esc, pick), np.where(has_raw, 0, esc))
    esc[raw & (length - fmt.OUTLIER_BITS > MAX_CODE_LEN)] = Escape.VERBATIM.value
    length = np.where(raw, length, np.minimum(length, MAX_CODE_LEN))
    bits = chunk.bits & ((np.uint64(1) << length.astype(np.uint64)) - np.uint64(1))
    return Chunk(bits, length, esc)


# -- the bench --------------------------------------------------------------------------------

class TB(StreamBench):
    """Clock, reset, stream models with stalls, and the byte-for-byte output check."""

    def __init__(self, dut):
        params = bench_params()
        self.lanes = int(params["lanes"])
        self.piece_bits = params.get("piece_bits")
        self.width = word_bits(self.lanes)
        self.in_layout = beat(Coded(MAX_CODE_LEN), self.lanes)
        self.rng = np.random.default_rng(SEED)
        super().__init__(dut, data.Layout.cast(self.in_layout).size, self.width + 1)
        self.values_compared = 0
        self.bytes_compared = 0
        self.syncs_compared = 0
        self.chunks_compared = 0
        dut.sync_interval.value = self.lanes

    def as_sent(self, chunk: Chunk) -> Chunk:
        """The chunk as this bench sends it: as the pipeline forms fields (``as_pipeline``),
        a code and the raw field its class gives."""
        return as_pipeline(chunk, self.rng)

    def ideal_rate(self, chunk: Chunk) -> float:
        """Beats per clock the piece grouping allows for this chunk, output aside: a code is
        one piece, raw bits ``ceil(32 / piece_bits)`` more (ceaz_hw.pieces)."""
        with_raw = (chunk.esc == Escape.OUTLIER.value) | (chunk.esc == Escape.VERBATIM.value)
        pieces = 1 + with_raw * -(-32 // self.piece_bits)
        pieces = np.concatenate([pieces, np.ones(-len(pieces) % self.lanes, np.int64)])
        groups = -(-pieces.reshape(-1, self.lanes).sum(axis=1) // self.lanes)
        return len(groups) / int(groups.sum())

    async def reset(self) -> None:
        await super().reset()
        cocotb.start_soon(self.checker.run())

    def beats_of(self, chunk: Chunk) -> list[int]:
        """Input beats; garbage above each field's ``len`` and in the unused lanes."""
        # The field apart, as the Huffman lanes send it (ceaz_hw.beats.Coded): the raw field's
        # width follows from the class, the code is the rest.
        raw_len = np.select([chunk.esc == Escape.VERBATIM.value, chunk.esc == Escape.OUTLIER.value],
                            [32, fmt.OUTLIER_BITS], 0).astype(np.uint64)
        code_len = chunk.length.astype(np.uint64) - raw_len
        raw = chunk.bits & ((np.uint64(1) << raw_len) - np.uint64(1))
        code = chunk.bits >> raw_len

        def junk(shift, width):
            bits = self.rng.integers(0, 1 << 62, len(chunk), dtype=np.uint64)
            bits[self.rng.random(len(chunk)) < 0.5] = 0
            return (bits << shift) & np.uint64((1 << width) - 1)

        words = beats_from_values(self.in_layout, {
            "code": code | junk(code_len, MAX_CODE_LEN), "raw": raw | junk(raw_len, 32),
            "len": chunk.length, "esc": chunk.esc})
        used = len(chunk) % self.lanes
        if used:
            lanes = data.Layout.cast(self.in_layout)["lanes"]
            lane_size = data.Layout.cast(lanes.shape.elem_shape).size
            lo = lanes.offset + used * lane_size
            width = (self.lanes - used) * lane_size
            garbage = int.from_bytes(self.rng.bytes(-(-width // 8)), "little") % (1 << width)
            words[-1] |= (garbage | 1 << (width - 1)) << lo
        return words

    async def send(self, chunk: Chunk) -> None:
        await self.source.send(AxiStreamFrame(self.beats_of(chunk)))

    async def receive(self, chunk: Chunk, k: int, label: str) -> None:
        """Take the chunk's output words and compare them with the model's bytes."""
        want, payload_words, n_sync = chunk.expected(k, self.width)
        word = self.width // 8
        n_words = len(want) // word
        got = bytearray()
        for w in range(n_words):
            frame = await with_timeout(self.sink.recv(), RECV_TIMEOUT_NS, "ns")
            (value,) = frame.tdata
            last = value >> self.width
            assert last == (w == n_words - 1), (
                f"{label}: last={last} on word {w} of {n_words}")
            got += (value & ((1 << self.width) - 1)).to_bytes(word, "little")
        if bytes(got) != want:
            bad = next(i for i in range(len(want)) if got[i] != want[i])
            part = ("payload" if bad < payload_words * word else
                    "trailer" if bad >= len(want) - 32 - (-32 % word) else "sync offsets")
            raise AssertionError(
                f"{label}: {len(chunk)} values, K={k}: first difference at byte {bad} of "
                f"{len(want)} ({part}): got {got[bad:bad + 8].hex()}, want "
                f"{want[bad:bad + 8].hex()}")
        self.values_compared += len(chunk)
        self.bytes_compared += len(want)
        self.syncs_compared += n_sync
        self.chunks_compared += 1

    async def run_chunks(self, chunks: list[Chunk], k: int, label: str) -> None:
        """Send the chunks back to back with sync interval ``k`` and check every output."""
        self.dut.sync_interval.value = k
        chunks = [self.as_sent(chunk) for chunk in chunks]

        async def receiver():
            for c, chunk in enumerate(chunks):
                await self.receive(chunk, k, f"{label} chunk {c}")

        receiving = cocotb.start_soon(receiver())
        for chunk in chunks:
            await self.send(chunk)
        await receiving
        cocotb.log.info("%s: %d chunks (%s values), K=%d: equal to the model", label,
                        len(chunks), [len(c) for c in chunks], k)

    def report(self, test: str) -> None:
        cocotb.log.info(
            "%s: lanes %d W=%d: %d values in %d chunks packed, %d bytes (%d sync offsets) "
            "compared with ceaz.packer.pack + zlib.crc32", test, self.lanes, self.width,
            self.values_compared, self.chunks_compared, self.bytes_compared,
            self.syncs_compared)


def chunk_sizes(lanes: int) -> list[int]:
    """One value, partial and whole beats, and chunks of a few hundred to thousands."""
    return [1, lanes + 1, 2 * lanes - 1 if lanes > 1 else 2, lanes, 3, 257, 64 * lanes + 3,
            3001, 40, 2048 + lanes // 2]


@cocotb.test()
async def packer_mixed_chunks_under_stalls(dut):
    """Every size and field style, back to back, random stalls on both sides."""
    tb = TB(dut)
    tb.set_stalls(SEED)
    await tb.reset()
    styles = ["realistic", "uniform", "realistic", "dense"]
    for i, k in enumerate([tb.lanes * 64, tb.lanes * 3]):
        chunks = [random_chunk(tb.rng, n, styles[(i + j) % len(styles)])
                  for j, n in enumerate(chunk_sizes(tb.lanes))]
        await tb.run_chunks(chunks, k, f"mixed K={k}")
    tb.report("mixed_chunks_under_stalls")


@cocotb.test()
async def packer_sync_intervals(dut):
    """K from one beat (a sync offset every beat, hundreds per chunk) to more than the chunk
    (none), with chunks ending just before, on and after a sync point."""
    tb = TB(dut)
    tb.set_stalls(SEED + 5)
    await tb.reset()
    for k in (tb.lanes, tb.lanes * 5, tb.lanes * 1000):
        sizes = [k, k + 1, k - 1 if k > 1 else 2, 2 * k + tb.lanes, 900, 1]
        chunks = [random_chunk(tb.rng, n, "uniform" if j % 2 else "realistic")
                  for j, n in enumerate(sizes)]
        await tb.run_chunks(chunks, k, f"sync K={k}")
        await ClockCycles(dut.clk, 5)  # K changes only between chunks
    tb.report("sync_intervals")


async def measure_rate(tb: TB, chunk: Chunk, label: str) -> float:
    """Send one chunk with no stalls; return its input beats per clock (first to last beat)."""
    dut = tb.dut
    chunk = tb.as_sent(chunk)
    beats = -(-len(chunk) // tb.lanes)
    taken, first, last, clock = 0, None, None, 0

    async def meter():
        nonlocal taken, first, last, clock
        while taken < beats:
            await RisingEdge(dut.clk)
            clock += 1
            if int(dut.i__valid.value) and int(dut.i__ready.value):
                taken += 1
                first = clock if first is None else first
                last = clock

    metering = cocotb.start_soon(meter())
    await tb.run_chunks([chunk], tb.lanes * 256, label)
    await metering
    rate = beats / (last - first + 1)
    if tb.piece_bits is not None:  # a beat of p pieces takes ceil(p / lanes) clocks
        rate /= tb.ideal_rate(chunk)
    cocotb.log.info("%s: %d beats of %.2f bits per value (%.1f per beat, W=%d) in %d clocks: "
                    "%.4f beats per clock" + (" of the pieces' ideal" if tb.piece_bits else ""),
                    label, beats, chunk.length.mean(),
                    chunk.length.mean() * tb.lanes, tb.width, last - first + 1, rate)
    return rate


@cocotb.test()
async def packer_throughput(dut):
    """No stalls: a realistic chunk (~3 bits per value) must go in at one beat per clock (with
    pieces: at the grouping's rate); a dense one (about 0.9 W bits per beat) at 0.8 of that."""
    tb = TB(dut)
    tb.set_stalls(None)
    await tb.reset()
    rate = await measure_rate(tb, random_chunk(tb.rng, 4000 * tb.lanes, "steady"),
                              "throughput realistic")
    assert rate > 0.99, f"{rate:.4f} beats per clock on a realistic stream"
    top = min(FIELD, 2 * (tb.width * 9 // 10) // tb.lanes)  # uniform 0..top: 0.9 W per beat
    n = 1000 * tb.lanes
    length = tb.rng.integers(0, top + 1, n)
    bits = tb.rng.integers(0, 1 << 62, n, dtype=np.uint64) & (
        (np.uint64(1) << length.astype(np.uint64)) - np.uint64(1))
    dense = Chunk(bits, length, np.where(length > 32, Escape.OUTLIER.value, 0))
    rate = await measure_rate(tb, dense, "throughput dense")
    assert rate > 0.8, f"{rate:.4f} beats per clock on a dense stream"
    tb.report("throughput")


@pytest.mark.parametrize("params", [
    {"lanes": 1}, {"lanes": 4}, {"lanes": 16},
    {"lanes": 4, "piece_bits": 16}, {"lanes": 8, "piece_bits": 16}, {"lanes": 16, "piece_bits": 16},
], ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_packer(params):
    run_bench(Packer, name="packer", params=params, test_module=__name__)
