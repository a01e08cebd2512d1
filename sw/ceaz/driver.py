"""The PYNQ host driver: stream chunks through the compressor card with an AXI DMA.

The same code drives a board and the simulated card (`ceaz.simcard`): it only uses pynq's
`DefaultIP`, `allocate` and `pynq.lib.dma.DMA`, and the register map in `ceaz.regmap`.
`CardCoder` is a chunk coder for `ceaz.codec.encode_stream`: it writes the chunk's box and
codebook, sends the values, receives the card's output (`ceaz.cardstream`) and reads the
histogram back for the next chunk's codebook (host-side adaptation). Two input buffers
alternate: while the card compresses one chunk, the host copies the next into the other.

A stream with adapt lag 2 adapts on chip instead (the card's ADAPT mode, docs/hardware.md
"Codebook builder"): the host writes only the first book (the family book that the
schedule picked from chunk 0, `ceaz.codec.first_book`), and the card builds chunk k's
book from chunk k-2's histogram itself. The host still reads each histogram back, because
the container records every chunk's code lengths and the host's schedule computes them.
"""

from __future__ import annotations

import time

import numpy as np
from pynq import DefaultIP, allocate

from . import huffman, regmap
from .cardstream import parse_card_output
from .chunk import Coding, EncodedChunk
from .errors import DeviceError
from .quantizer import F32
from .tiling import Box

__all__ = ["VLNV", "CardCoder", "CeazIP"]

#: The IP's identity in a block design; the simulated card's .hwh uses it too.
VLNV = "ceaz.dev:ceaz:compressor:1.0"
#: Default seconds to wait for the card before giving up.
DEFAULT_TIMEOUT = 30.0


def _f32_bits(value: float) -> int:
    return int(np.array(value, dtype=np.float32).view(np.uint32))


class CeazIP(DefaultIP):
    """The compressor IP: configuration, codebooks, histogram and counters by register name."""

    bindto = [VLNV]

    def reg(self, name: str) -> int:
        return self.read(regmap.by_name(name).address)

    def set_reg(self, name: str, value: int) -> None:
        self.write(regmap.by_name(name).address, int(value) & 0xFFFFFFFF)

    def check(self) -> None:
        """Raise DeviceError naming the ERROR bits, if any is set."""
        error = self.reg("ERROR")
        if error:
            raise DeviceError(f"card reports {regmap.ERROR(error)!r}; a soft reset clears it")

    def soft_reset(self) -> None:
        self.set_reg("CTRL", regmap.CTRL.SOFT_RESET)

    def _wait_until(self, done, what: str, timeout: float) -> None:
        """Poll ``done()`` (register reads) until it holds; DeviceError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise DeviceError(f"timed out after {timeout:g} s waiting for {what}")

    def wait_status(self, bit: regmap.STATUS, want: bool, timeout: float) -> None:
        self._wait_until(lambda: bool(self.reg("STATUS") & bit) == want,
                         f"STATUS.{bit.name}", timeout)

    def load_codebook(self, lengths: np.ndarray, timeout: float) -> None:
        """Write a book into the next bank and commit it for the next chunk."""
        self.wait_status(regmap.STATUS.CB_PENDING, False, timeout)
        self.set_reg("CB_ADDR", 0)
        address = regmap.by_name("CB_DATA").address  # each write moves on to the next symbol
        for word in huffman.entry_words(lengths).tolist():
            self.write(address, word)
        self.set_reg("CB_COMMIT", 1)

    def wait_adapt_reads(self, count: int, timeout: float) -> None:
        """Wait until the on-chip builder has read ``count`` histograms: until then it may
        still be reading the one the host wants (they share the histogram's read port)."""
        self._wait_until(lambda: self.reg("ADAPT_READS") >= count,
                         f"the on-chip codebook builder to read histogram {count - 1}", timeout)

    def histogram(self, n_symbols: int) -> np.ndarray:
        """The symbol counts of the last completed chunk."""
        self.set_reg("HIST_ADDR", 0)
        data = regmap.by_name("HIST_DATA").address  # each read moves on to the next symbol
        return np.array([self.read(data) for _ in range(n_symbols)], dtype=np.uint64)

    def counter(self, name: str) -> int:
        low = self.reg(f"{name}_LO")
        return low | self.reg(f"{name}_HI") << 32


class CardCoder:
    """Codes chunks on the card: a `ceaz.codec.ChunkCoder` over an overlay's IP and DMA.

    Double buffering: `encode_stream` announces chunk k+1 with `prefetch` before it asks for
    chunk k, and the coder copies chunk k+1 into its spare input buffer once the card is busy
    with chunk k, so on a board the copy (and the read of a memory-mapped source) overlaps the
    card's work. The rest is a chain by nature: with adapt_lag 1, chunk k+1's codebook is made
    from chunk k's histogram, so the book load, DMA, parse and histogram read-back of
    consecutive chunks cannot overlap. (The simulated card only advances while the host
    waits for it, so there the copy is serial; it is ~0.1 % of a call, see `seconds`.)

    After any error or interruption the coder forgets the configuration, box and book it
    wrote and drops the DMA transfers in flight, so the next chunk rewrites everything; the
    card keeps its ERROR bits for inspection until `ip.soft_reset()` or `reset()`.
    """

    def __init__(self, overlay, timeout: float = DEFAULT_TIMEOUT):
        self.overlay = overlay
        self.ip: CeazIP = overlay.ceaz_0
        self.dma = overlay.axi_dma_0
        self.timeout = timeout
        if self.ip.reg("ID") != regmap.ID_MAGIC:
            raise DeviceError("the overlay's ceaz_0 does not answer with the ceaz ID")
        self.lanes = self.ip.reg("LANES")
        self.radius = self.ip.reg("RADIUS")
        self.word_bits = self.ip.reg("WORD_BITS")
        self.max_line, self.max_plane = self.ip.reg("MAX_LINE"), self.ip.reg("MAX_PLANE")
        self.max_sync = self.ip.reg("MAX_SYNC")
        self._coding = None
        self._box_shape = None
        self._book = None
        self._in: list = [None, None]  # double-buffered input: the card reads one, host fills other
        self._side = 0  # the input buffer of the next chunk
        self._out = None
        self._next: tuple[np.ndarray, Box] | None = None  # announced by `prefetch`, not copied
        self._staged: Box | None = None  # the chunk already copied into self._in[self._side]
        self._in_flight = False
        #: On-chip adaptation (adapt lag 2): chunks coded since the soft reset that started
        #: the stream's numbering on the card, or None when the host adapts.
        self._adapt_chunk: int | None = None
        self._adapting = False  # the stream asked for on-chip adaptation
        #: Host seconds spent per phase of `__call__`, summed: configuration and codebook,
        #: copy into the DMA buffer, card (DMA and compression), parse, histogram read-back.
        self.seconds: dict[str, float] = {}

    def supports(self, coding: Coding, chunk_shape) -> str | None:
        """Why the card cannot code this stream, or None if it can."""
        cz, cy, cx = chunk_shape
        k = coding.sync_interval
        if coding.qp.dtype != F32:
            return "the card codes float32 only"
        if coding.radius != self.radius:
            return f"the card is built for radius {self.radius}, the stream uses {coding.radius}"
        if k % self.lanes:
            return f"sync interval {k} is not a multiple of the card's {self.lanes} lanes"
        # The chunk shape is the stream's (Settings.max_line and max_plane); a card built with
        # smaller buffers needs streams tiled for them.
        if cy > 1 and cx > self.max_line:
            return (f"rows of {cx} values exceed the card's line buffer ({self.max_line}); "
                    f"compress with max_line <= {self.max_line} (--max-line)")
        if cz > 1 and cy * cx > self.max_plane:
            return (f"planes of {cy * cx} values exceed the card's plane buffer "
                    f"({self.max_plane}); compress with max_plane <= {self.max_plane} "
                    "(--max-plane)")
        if -(-cz * cy * cx // k) - 1 > self.max_sync:
            return f"chunks need more than the card's {self.max_sync} sync offsets"
        return None

    def _configure(self, coding: Coding) -> None:
        ip, qp = self.ip, coding.qp
        ip.wait_status(regmap.STATUS.BUSY, False, self.timeout)
        ip.set_reg("RECIP_MANT", qp.recip_mant)
        ip.set_reg("RECIP_EXP", qp.recip_exp)
        ip.set_reg("STEP", _f32_bits(qp.step))
        ip.set_reg("EB", _f32_bits(qp.eb_f))
        ip.set_reg("FILL_BITS", qp.fill_bits or 0)
        ip.set_reg("FILL_ENABLE", qp.fill_bits is not None)
        ip.set_reg("SYNC_INTERVAL", coding.sync_interval)
        self._coding = coding

    def start_stream(self, header) -> None:
        """Called by `encode_stream` before a stream's first chunk. A stream with adapt lag 2
        adapts on chip: a soft reset restarts the card's chunk numbering, ADAPT is set, and
        the first chunk loads the schedule's first book. Other lags adapt on the host."""
        ip = self.ip
        ip.wait_status(regmap.STATUS.BUSY, False, self.timeout)
        self._forget()
        self._adapting = header.adapt_lag == regmap.ADAPT_LAG
        if self._adapting:
            ip.soft_reset()  # also keeps no half-built book from an earlier stream
            ip.set_reg("ADAPT", 1)
            self._adapt_chunk = 0
        elif ip.reg("ADAPT"):
            ip.soft_reset()  # the builder may hold a book for a chunk that will not come
            ip.set_reg("ADAPT", 0)

    def _input(self, side: int, n: int):
        buf = self._in[side]
        if buf is None or buf.shape[0] < n:
            buf = self._in[side] = allocate(shape=(n,), dtype=np.float32)
        return buf

    def _output(self, out_bytes: int):
        if self._out is None or self._out.nbytes < out_bytes:
            self._out = allocate(shape=(out_bytes,), dtype=np.uint8)
        return self._out

    def prefetch(self, values: np.ndarray, box: Box) -> None:
        """Announce the chunk after the next call's: it is copied while the card works."""
        self._next = (values, box)

    def _stage_next(self) -> None:
        """Copy the announced chunk into the spare input buffer (the card is busy meanwhile)."""
        if self._next is None:
            return
        values, box = self._next
        self._next = None
        if np.dtype(values.dtype) != F32:
            return  # the card takes float32 only; `supports` will say so
        spare = 1 - self._side
        np.copyto(self._input(spare, box.size)[: box.size], values.reshape(-1))
        self._staged = box

    def _forget(self) -> None:
        """Drop what the coder believes the card holds, so the next chunk writes it all again.
        On-chip adaptation cannot be resumed mid-stream: its chunk numbering is lost too."""
        self._coding = self._box_shape = self._book = None
        self._next = self._staged = None
        self._adapt_chunk = None

    def _reset_dma(self) -> None:
        """Drop the transfers in flight: a stale MM2S would feed the old chunk to the card."""
        send, recv = self.dma.sendchannel, self.dma.recvchannel
        send._mmio.write(send._offset, 0x4)  # DMACR.Reset resets both channels (PG021)
        send.start()
        recv.start()

    def reset(self) -> None:
        """Bring the card back to idle after an error: DMA reset, IP soft reset, state forgotten."""
        self._forget()
        self._reset_dma()
        self.ip.soft_reset()

    def _wait(self, channel, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        try:
            while not channel.idle:
                if channel.error:
                    break
                # A card that refuses input (ERROR.BAD_CONFIG) never finishes: say why now.
                error = self.ip.reg("ERROR")
                if error:
                    raise DeviceError(
                        f"DMA {what} stopped: card reports {regmap.ERROR(error)!r}")
                if time.monotonic() > deadline:
                    raise DeviceError(f"DMA {what} timed out after {self.timeout:g} s; "
                                      "CardCoder.reset() brings the card back")
            channel.wait()
        except RuntimeError as exc:  # pynq's DMA errors, and the simulated card's DMADeadlock
            if isinstance(exc, DeviceError):
                raise
            raise DeviceError(f"DMA {what} failed: {exc}") from exc

    def __call__(self, values: np.ndarray, box: Box, coding: Coding,
                 lengths: np.ndarray) -> EncodedChunk:
        try:
            return self._code(values, box, coding, lengths)
        except BaseException:
            # After an error or an interruption the card may hold a half-written book or box,
            # or a chunk in flight: trust nothing cached, so the next call rewrites it all,
            # and drop the DMA transfers (the card itself keeps its ERROR bits until
            # `ip.soft_reset()` or `reset()`, so the cause stays readable).
            self._forget()
            if self._in_flight:
                self._in_flight = False
                try:
                    self._reset_dma()
                except Exception:  # noqa: S110 - the original error is the one to report
                    pass
            raise

    def _adapted_book(self, lengths: np.ndarray) -> None:
        """On-chip adaptation: load the schedule's book for chunk 0 (the family book it picked
        from chunk 0's histogram) and keep it for chunk 1; later books are the card's, equal
        to the schedule's ``lengths`` (the builder is bit-exact with the model)."""
        if self._adapt_chunk is None:
            raise DeviceError("on-chip adaptation lost its place after an error; restart "
                              "the stream")
        if self._adapt_chunk == 0:
            self.ip.load_codebook(lengths, self.timeout)
        elif self._adapt_chunk < regmap.ADAPT_LAG and not np.array_equal(lengths, self._book):
            raise DeviceError(f"chunk {self._adapt_chunk} of an on-chip adapted stream must "
                              "use chunk 0's book: the card holds it until it adapts")
        self._book = np.array(lengths, dtype=np.uint8)

    def _clock(self):
        """A stopwatch adding the seconds since its last call to `self.seconds[phase]`."""
        last = time.perf_counter()

        def lap(phase: str) -> None:
            nonlocal last
            now = time.perf_counter()
            self.seconds[phase] = self.seconds.get(phase, 0.0) + now - last
            last = now

        return lap

    def _code(self, values: np.ndarray, box: Box, coding: Coding,
              lengths: np.ndarray) -> EncodedChunk:
        if coding != self._coding:
            why = self.supports(coding, box.shape)
            if why:
                raise DeviceError(why)
            self._configure(coding)
        ip, clock = self.ip, self._clock()
        if box.shape != self._box_shape:
            ip.wait_status(regmap.STATUS.BUSY, False, self.timeout)
            for name, n in zip(("BOX_Z", "BOX_Y", "BOX_X"), box.shape, strict=True):
                ip.set_reg(name, n)
            self._box_shape = box.shape
        if self._adapting:
            self._adapted_book(lengths)
        elif self._book is None or not np.array_equal(self._book, lengths):
            ip.load_codebook(lengths, self.timeout)
            self._book = np.array(lengths, dtype=np.uint8)
        clock("box and codebook")
        n = box.size
        w = self.word_bits // 8
        out_bytes = (n * (16 + 32) // 8 + 4 * (n // coding.sync_interval) + 4 * w + 64)
        out_bytes += -out_bytes % w
        if self._staged != box:  # not prefetched: copy now
            self._input(self._side, n)[:n] = values.reshape(-1)
        self._staged = None
        src, dst = self._in[self._side], self._output(out_bytes)
        clock("copy")
        self._in_flight = True
        try:
            self.dma.recvchannel.transfer(dst, nbytes=out_bytes)
            self.dma.sendchannel.transfer(src, nbytes=4 * n)
        except RuntimeError as exc:
            raise DeviceError(f"DMA refused the chunk: {exc}") from exc
        self._stage_next()
        self._side = 1 - self._side
        clock("copy")
        self._wait(self.dma.sendchannel, "send")
        self._wait(self.dma.recvchannel, "receive")
        self._in_flight = False
        ip.check()
        clock("card")
        got = int(self.dma.recvchannel.transferred)
        card = parse_card_output(bytes(dst[:got]), box, coding.sync_interval, self.word_bits)
        clock("parse")
        if self._adapting:
            ip.wait_adapt_reads(self._adapt_chunk + 1, self.timeout)
            self._adapt_chunk += 1
        hist = ip.histogram(2 * self.radius + 2)
        clock("histogram")
        return EncodedChunk(
            box=box, lengths=self._book, payload=card.payload, payload_bits=card.payload_bits,
            sync=card.sync, hist=hist, n_outlier=card.n_outlier, n_verbatim=card.n_verbatim,
            n_fill=card.n_fill,
        )  # fmt: skip
