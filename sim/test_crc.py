"""cocotb bench: the RTL CRC-32 (ceaz_hw.crc.StreamCRC) against zlib.crc32.

Random byte strings of random lengths (0..200 bytes) go through back to back, with random
gaps in ``valid`` (and none at all in one test, so streams also follow each other with no idle
cycle), empty beats anywhere, and a partial final beat zero-padded (the unit's contract). A
cycle-accurate model checks ``crc_valid`` and ``crc`` on every clock, and every finished
stream's CRC is compared with zlib's. Each test prints how many bytes it checked.
"""

from __future__ import annotations

import os
import random
import zlib

import cocotb
import pytest
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge
from runner import bench_params, run_bench

from ceaz_hw.crc import StreamCRC, beat_layout

PERIOD_NS = 10
SEED = int(os.environ.get("CEAZ_SIM_SEED", "1"))
MAX_LEN = 200


class CRCBench:
    """Clock, reset, a beat driver with random valid gaps, and a monitor that checks the
    outputs against a model on every falling edge (inputs change on rising edges)."""

    def __init__(self, dut, seed: int):
        self.dut = dut
        self.width = int(bench_params()["width"])
        self.granule = int(bench_params().get("granule", 1))
        self.rng = random.Random(seed)
        layout = beat_layout(self.width)
        self.n_bytes_shift = layout["n_bytes"].offset
        self.last_shift = layout["last"].offset
        self.n_bytes_mask = (1 << layout["n_bytes"].width) - 1
        self.expected: list[bytes] = []  # streams sent and not yet finished
        self.bytes_checked = 0
        self.streams_checked = 0
        # Model state, as the DUT should hold it after the last rising edge, and the CRC and
        # flag it shows (registered: the model's of a clock earlier).
        self._collected = bytearray()
        self._done = False
        self._crc = 0
        self._shown = (False, 0)
        cocotb.start_soon(Clock(dut.clk, PERIOD_NS, unit="ns").start())
        self._idle_inputs()

    def _idle_inputs(self) -> None:
        self.dut.i__valid.value = 0
        self.dut.i__payload.value = self.rng.getrandbits(len(self.dut.i__payload))

    async def reset(self) -> None:
        self.dut.rst.value = 1
        self._idle_inputs()
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst.value = 0
        self._collected.clear()
        self._done = False
        self._crc = 0
        self._shown = (False, 0)
        self.expected.clear()
        cocotb.start_soon(self._monitor())

    def _beats(self, message: bytes, ragged: bool) -> list[tuple[bytes, bool]]:
        """Split into beats of ``width`` bytes (the last one partial); with ``ragged``, empty
        beats anywhere as well. An empty message is one empty ``last`` beat."""
        beats, pos = [], 0
        while pos < len(message):
            if ragged and self.rng.random() < 0.3:
                beats.append(b"")
                continue
            beats.append(message[pos : pos + self.width])
            pos += self.width
        if not beats or (ragged and self.rng.random() < 0.2):
            beats.append(b"")
        return [(beat, k == len(beats) - 1) for k, beat in enumerate(beats)]

    async def send(self, message: bytes, *, gaps: float = 0.3, ragged: bool = False) -> None:
        """Drive one stream; ``gaps`` is the chance of an idle cycle before each beat."""
        self.expected.append(message)
        for beat, last in self._beats(message, ragged):
            while self.rng.random() < gaps:
                self._idle_inputs()
                await RisingEdge(self.dut.clk)
            # Bytes beyond n_bytes are zero (the contract: the final beat is zero-padded).
            payload = int.from_bytes(beat, "little")  # byte 0 = first byte, in bits 0..7
            payload |= len(beat) << self.n_bytes_shift | int(last) << self.last_shift
            self.dut.i__payload.value = payload
            self.dut.i__valid.value = 1
            await RisingEdge(self.dut.clk)
        self._idle_inputs()

    async def _monitor(self) -> None:
        dut = self.dut
        while True:
            await FallingEdge(dut.clk)
            if dut.rst.value:
                return
            assert int(dut.i__ready.value) == 1, "ready must always be asserted"
            shown_done, shown_crc = self._shown
            assert int(dut.crc_valid.value) == int(shown_done), (
                f"crc_valid is {dut.crc_valid.value}, model says {int(shown_done)}"
            )
            if shown_done:
                assert int(dut.crc.value) == shown_crc, (
                    f"crc {int(dut.crc.value):08x}, expected {shown_crc:08x}"
                )
            self._shown = (self._done, self._crc)
            if not int(dut.i__valid.value):
                continue
            # A beat is accepted at the next rising edge: advance the model.
            payload = int(dut.i__payload.value)
            n_bytes = (payload >> self.n_bytes_shift) & self.n_bytes_mask
            last = bool(payload >> self.last_shift & 1)
            if self._done:
                self._collected.clear()
            lanes = (payload & ((1 << 8 * self.width) - 1)).to_bytes(self.width, "little")
            self._collected += lanes[: min(n_bytes, self.width)]
            self._done = last
            if last:
                message = bytes(self._collected)
                assert self.expected, "a stream ended that was never sent"
                assert message == self.expected.pop(0), "bytes seen differ from bytes sent"
                self._crc = zlib.crc32(message)
                self.bytes_checked += len(message)
                self.streams_checked += 1

    async def drain(self) -> None:
        await ClockCycles(self.dut.clk, 4)
        assert not self.expected, f"{len(self.expected)} streams never finished"

    def report(self, test: str) -> None:
        self.dut._log.info(
            "%s: width %d, %d streams, %d bytes checked against zlib.crc32",
            test, self.width, self.streams_checked, self.bytes_checked,
        )
        print(f"{test}: width {self.width}: {self.bytes_checked} bytes in "
              f"{self.streams_checked} streams checked against zlib.crc32")


def _message(tb: CRCBench) -> bytes:
    """Random bytes, 0..MAX_LEN of them in whole granules."""
    return tb.rng.randbytes(tb.rng.randint(0, MAX_LEN // tb.granule) * tb.granule)


@cocotb.test()
async def random_streams_with_gaps(dut):
    """Random lengths 0..200, random idle cycles, full beats and a partial last beat."""
    tb = CRCBench(dut, SEED)
    await tb.reset()
    lengths = [0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 32, 40, 64, 72]  # beat-size corners
    for length in [n for n in lengths if n % tb.granule == 0]:
        await tb.send(tb.rng.randbytes(length))
    for _ in range(120):
        await tb.send(_message(tb))
    await tb.drain()
    tb.report("random_streams_with_gaps")


@cocotb.test()
async def back_to_back_no_gaps(dut):
    """One beat per clock with no idle cycle, also between streams: crc_valid is then a
    one-cycle pulse and the next stream must restart from the initial value."""
    tb = CRCBench(dut, SEED + 1)
    await tb.reset()
    for _ in range(120):
        await tb.send(_message(tb), gaps=0.0)
    await tb.drain()
    tb.report("back_to_back_no_gaps")


@cocotb.test()
async def ragged_beats(dut):
    """Empty beats in the middle of a stream, and empty last beats."""
    tb = CRCBench(dut, SEED + 2)
    await tb.reset()
    for _ in range(100):
        await tb.send(_message(tb), gaps=0.2, ragged=True)
    await tb.drain()
    tb.report("ragged_beats")


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset in the middle of a stream discards it; the next stream is computed afresh."""
    tb = CRCBench(dut, SEED + 3)
    await tb.reset()
    abandoned = cocotb.start_soon(tb.send(tb.rng.randbytes(150), gaps=0.0))
    await ClockCycles(dut.clk, 5)
    abandoned.cancel()
    await tb.reset()  # also forgets the abandoned stream
    await ClockCycles(dut.clk, 1)
    for _ in range(10):
        await tb.send(_message(tb))
    await tb.drain()
    tb.report("reset_mid_stream")


@pytest.mark.parametrize(("width", "granule"), [(1, 1), (4, 1), (8, 1), (8, 8), (32, 8)])
def test_crc(width, granule):
    """Byte-granular CRCs, and the 8-byte-group ones the packer uses (W = 64 and 256)."""
    run_bench(StreamCRC, name="crc", params={"width": width, "granule": granule},
              test_module=__name__)
