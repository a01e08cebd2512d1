"""The Verilated card's C API (harness.cpp) as a Python object, through ctypes.

Every call that takes time on the card advances the one clock the card has: an AXI4-Lite
access takes the few clocks of its handshakes, `run` as many as asked. Buffers cross as raw
pointers, so the caller keeps the numpy arrays alive while an engine uses them.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from .build import CardLibrary

__all__ = ["AXILiteError", "Counters", "SimCore"]

MM2S, S2MM = 0, 1
_u32, _u64, _int = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int
_p = ctypes.c_void_p


class AXILiteError(RuntimeError):
    """An AXI4-Lite access got no response, or a SLVERR/DECERR one."""


@dataclass(frozen=True)
class Counters:
    cycles: int      # clocks since reset
    in_beats: int    # s_axis beats accepted
    out_beats: int   # m_axis words taken
    irq: bool


_SIGNATURES = {
    "simcard_lanes": ([], _int),
    "simcard_word_bits": ([], _int),
    "simcard_create": ([], _p),
    "simcard_destroy": ([_p], None),
    "simcard_reset": ([_p, _int], None),
    "simcard_set_backpressure": ([_p, _u64, ctypes.c_double, ctypes.c_double], None),
    "simcard_axil_write": ([_p, _u32, _u32, _u32, ctypes.POINTER(_u32), _u64], _int),
    "simcard_axil_read": ([_p, _u32, ctypes.POINTER(_u32), ctypes.POINTER(_u32), _u64], _int),
    "simcard_mm2s_start": ([_p, _p, _u64], None),
    "simcard_s2mm_start": ([_p, _p, _u64], None),
    "simcard_dma_halt": ([_p, _int], None),
    "simcard_dma_status": ([_p, _int, ctypes.POINTER(_int), ctypes.POINTER(_u64),
                            ctypes.POINTER(_u32)], None),
    "simcard_run": ([_p, _u64, _int, _u64], _u64),
    "simcard_counters": ([_p, ctypes.POINTER(_u64), ctypes.POINTER(_u64), ctypes.POINTER(_u64),
                          ctypes.POINTER(_int)], None),
}


def _load(path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    for name, (args, result) in _SIGNATURES.items():
        function = getattr(lib, name)
        function.argtypes = args
        function.restype = result
    return lib


class SimCore:
    """One instance of the Verilated card: RTL, AXI4-Lite master and two DMA engines."""

    #: Clocks an AXI4-Lite access may take before it is reported as hung.
    AXIL_TIMEOUT = 10_000

    def __init__(self, library: CardLibrary):
        self.library = library
        self._lib = _load(library.path)
        if (self._lib.simcard_lanes(), self._lib.simcard_word_bits()) != (
                library.lanes, library.word_bits):
            raise RuntimeError(f"{library.path} was not built for {library}")
        self.lanes, self.word_bits = library.lanes, library.word_bits
        self._card = self._lib.simcard_create()
        self.reset()

    def close(self) -> None:
        if self._card:
            self._lib.simcard_destroy(self._card)
            self._card = None

    def __del__(self):
        self.close()

    def reset(self, cycles: int = 8) -> None:
        """Hold the RTL in reset for ``cycles`` clocks; idle the engines; zero the counters."""
        self._lib.simcard_reset(self._card, cycles)

    def set_backpressure(self, seed: int = 0, p_in: float = 0.0, p_out: float = 0.0) -> None:
        """Random stalls on both streams (seeded, reproducible); ``seed=0`` turns them off."""
        for name, p in [("p_in", p_in), ("p_out", p_out)]:
            if not 0.0 <= p < 1.0:
                raise ValueError(f"{name} must be in [0, 1), not {p!r}")
        self._lib.simcard_set_backpressure(self._card, seed, p_in, p_out)

    def axil_write(self, address: int, value: int, strobe: int = 0xF) -> int:
        """Write a register; returns BRESP (0 OKAY, 2 SLVERR, 3 DECERR)."""
        resp = _u32()
        if self._lib.simcard_axil_write(self._card, address, value & 0xFFFFFFFF, strobe,
                                        ctypes.byref(resp), self.AXIL_TIMEOUT):
            raise AXILiteError(f"AXI4-Lite write to 0x{address:03x} got no response")
        return resp.value

    def axil_read(self, address: int) -> tuple[int, int]:
        """Read a register; returns (RDATA, RRESP)."""
        data, resp = _u32(), _u32()
        if self._lib.simcard_axil_read(self._card, address, ctypes.byref(data),
                                       ctypes.byref(resp), self.AXIL_TIMEOUT):
            raise AXILiteError(f"AXI4-Lite read of 0x{address:03x} got no response")
        return data.value, resp.value

    def mm2s_start(self, pointer: int, nbytes: int) -> None:
        """Stream ``nbytes`` from host address ``pointer`` into s_axis as one packet."""
        self._lib.simcard_mm2s_start(self._card, pointer, nbytes)

    def s2mm_start(self, pointer: int, capacity: int) -> None:
        """Take one m_axis packet (to TLAST) into host address ``pointer``."""
        self._lib.simcard_s2mm_start(self._card, pointer, capacity)

    def halt(self, channel: int) -> None:
        self._lib.simcard_dma_halt(self._card, channel)

    def status(self, channel: int) -> tuple[bool, int, int]:
        """(busy, bytes moved, DMASR error bits) of MM2S (0) or S2MM (1)."""
        busy, nbytes, error = _int(), _u64(), _u32()
        self._lib.simcard_dma_status(self._card, channel, ctypes.byref(busy),
                                     ctypes.byref(nbytes), ctypes.byref(error))
        return bool(busy.value), nbytes.value, error.value

    def run(self, cycles: int, wait_mask: int = 0, stall_limit: int = 0) -> int:
        """Clock the card up to ``cycles`` times; stop early once the channels in
        ``wait_mask`` (1 MM2S, 2 S2MM) are idle or nothing moved for ``stall_limit`` clocks."""
        return self._lib.simcard_run(self._card, cycles, wait_mask, stall_limit)

    def counters(self) -> Counters:
        c, i, o, irq = _u64(), _u64(), _u64(), _int()
        self._lib.simcard_counters(self._card, ctypes.byref(c), ctypes.byref(i),
                                   ctypes.byref(o), ctypes.byref(irq))
        return Counters(c.value, i.value, o.value, bool(irq.value))

    def stream(self, data: np.ndarray, out: np.ndarray, max_cycles: int = 1 << 40) -> int:
        """Send ``data`` as one packet and receive one packet into ``out`` (no pynq needed);
        returns the bytes received. Both arrays must be C-contiguous."""
        for name, array in [("data", data), ("out", out)]:
            if not array.flags.c_contiguous:
                raise ValueError(f"{name} must be C-contiguous")
        self.s2mm_start(out.ctypes.data, out.nbytes)
        self.mm2s_start(data.ctypes.data, data.nbytes)
        self.run(max_cycles, wait_mask=3, stall_limit=1 << 20)
        busy_in, _, _ = self.status(MM2S)
        busy_out, received, error = self.status(S2MM)
        if busy_in or busy_out or error:
            raise RuntimeError(f"stream did not finish (MM2S busy {busy_in}, S2MM busy "
                               f"{busy_out}, error 0x{error:x})")
        return received
