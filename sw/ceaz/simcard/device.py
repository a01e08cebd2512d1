"""The simulated card as a `pynq.Device`: pynq's own code runs against Verilated RTL.

`pynq.allocate`, `MMIO`, `Overlay(hwh, download=False)` and the real `pynq.lib.dma.DMA` driver
talk to a device only through `read_registers`, `write_registers` and `default_memory`. This
class answers them from a `SimCore`: register accesses in the compressor's window become
AXI4-Lite transactions on the RTL, and accesses in the AXI DMA's window drive a model of the
DMA's simple-mode registers (PG021) whose two engines stream host buffers through the RTL.

Time: the card's clock only runs when the host touches it. An AXI4-Lite access takes its few
clocks; reading the status register (DMASR) of a busy DMA channel runs the clock until that
channel finishes or nothing has moved for a while, so `transfer()` then `wait()` returns on
the first poll when the transfer can complete, at the full speed of the C++ loop.

The card never registers itself behind a real board's back: pynq only finds it after
`ceaz.simcard.activate()` or with CEAZ_SIMCARD=<lanes> in the environment.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pynq

from .build import CardLibrary, build_compressor
from .core import MM2S, S2MM, SimCore
from .hwh import BlockDesign, write_hwh
from .memory import SimMemory

__all__ = ["DMA_REGISTERS", "DMADeadlock", "SimulatedCard", "activate", "deactivate"]

#: Offsets in the AXI DMA window (PG021, simple mode); S2MM's are MM2S's plus 0x30.
DMA_REGISTERS = {"DMACR": 0x00, "DMASR": 0x04, "SA": 0x18, "SA_MSB": 0x1C, "LENGTH": 0x28}
_S2MM_OFFSET = 0x30

# DMACR and DMASR bits.
_RS, _RESET = 0x1, 0x4
_HALTED, _IDLE = 0x1, 0x2
_DMA_INT_ERR, _DMA_DEC_ERR = 0x10, 0x40
_IRQ_BITS = 0x7000            # IOC_Irq, Dly_Irq, Err_Irq: write 1 to clear
_IOC_IRQ, _ERR_IRQ = 0x1000, 0x4000


class DMADeadlock(RuntimeError):
    """A DMA transfer waited on can never finish (where a board would hang)."""


class _Channel:
    """Register state of one DMA channel; the engine itself lives in the C++ harness."""

    def __init__(self, channel: int):
        self.channel = channel
        self.reset()

    def reset(self) -> None:
        self.control = 0
        self.address = 0
        self.length = 0
        self.moved = 0
        self.errors = 0
        self.irq = 0
        self.busy = False
        self.holder = None      # the host array the engine points into, kept alive
        self.stalled_polls = 0


class SimulatedCard(pynq.Device):
    """A ceaz card made of a Verilated compressor, an AXI DMA model and host memory.

    Parameters
    ----------
    library : CardLibrary
        A build from `ceaz.simcard.build.build`.
    design : BlockDesign
        Register window addresses; defaults to PYNQ's usual ones.
    tag : str
        pynq's device identifier.
    """

    _probe_priority_ = 1000  # after every real device class pynq knows
    capabilities = {"REGISTER_RW": True}

    #: Clocks a DMASR poll may run at most, and the clocks without any stream movement
    #: after which it gives control back to the host (a transfer waiting for the host).
    POLL_CYCLES = 1 << 40
    STALL_CYCLES = 1 << 16
    #: Polls of a busy channel without stream movement before `DMADeadlock` is raised.
    DEADLOCK_POLLS = 64

    @classmethod
    def _probe_(cls):
        lanes = os.environ.get("CEAZ_SIMCARD")
        if not lanes:
            return []
        return [cls.for_compressor(int(lanes))]

    @classmethod
    def for_compressor(cls, lanes: int = 4, **build_options) -> SimulatedCard:
        """Build (or load from the cache) a card around ``ceaz_hw.top.Compressor(lanes)``."""
        return cls(build_compressor(lanes, **build_options))

    def __init__(self, library: CardLibrary, design: BlockDesign | None = None,
                 tag: str = "ceaz-simcard"):
        super().__init__(tag)
        self.name = "ceaz_sim"
        self.library = library
        self.core = SimCore(library)
        self.design = design or BlockDesign(library.lanes, library.word_bits)
        if (self.design.lanes, self.design.word_bits) != (library.lanes, library.word_bits):
            raise ValueError(f"{self.design} does not match {library}")
        self.hwh_path = write_hwh(self.design, Path(library.path).parent / "ceaz_sim.hwh")
        self.default_memory = SimMemory(self)
        self.bitfile_name = None
        self.timestamp = ""
        self._channels = (_Channel(MM2S), _Channel(S2MM))

    def __repr__(self) -> str:
        return (f"SimulatedCard(lanes={self.library.lanes}, word_bits={self.library.word_bits}, "
                f"{self.library.path})")

    # -- pynq.Device ------------------------------------------------------------------------

    def get_bitfile_metadata(self, bitfile_name, partial: bool = False):
        """pynq's runtime view of the .hwh next to ``bitfile_name`` (or of the .hwh itself)."""
        from pynq.pl_server.embedded_device import RuntimeMetadataParser
        from pynqmetadata.frontends import Metadata

        hwh = Path(bitfile_name).with_suffix(".hwh")
        if not hwh.is_file():
            raise RuntimeError(f"no hardware handoff {hwh} for the simulated card")
        return RuntimeMetadataParser(Metadata(input=hwh))

    def read_registers(self, address: int, length: int) -> bytes:
        if length % 4 or address % 4:
            raise ValueError(f"register reads must be whole aligned words: 0x{address:x}+{length}")
        return b"".join(self._read_word(address + i).to_bytes(4, "little")
                        for i in range(0, length, 4))

    def write_registers(self, address: int, data) -> None:
        data = bytes(data)
        if len(data) % 4 or address % 4:
            raise ValueError(f"register writes must be whole aligned words: 0x{address:x}")
        for i in range(0, len(data), 4):
            self._write_word(address + i, int.from_bytes(data[i: i + 4], "little"))

    def flush(self, *args) -> None:
        pass

    def invalidate(self, *args) -> None:
        pass

    # -- the simulation -----------------------------------------------------------------------

    def reset_card(self) -> None:
        """Power-on state: RTL reset, DMA channels halted, clock counters at zero."""
        self.core.reset()
        for channel in self._channels:
            channel.reset()

    def run(self, cycles: int) -> int:
        """Let the card run ``cycles`` clocks with no host access (e.g. to drain a pipeline)."""
        return self.core.run(cycles)

    @property
    def cycles(self) -> int:
        """Clocks since the last reset: the card's notion of time (100 MHz in the .hwh)."""
        return self.core.counters().cycles

    @property
    def irq(self) -> bool:
        return self.core.counters().irq

    def _window(self, address: int) -> tuple[str, int]:
        d = self.design
        if d.ceaz_base <= address < d.ceaz_base + d.ceaz_range:
            return "ceaz", address - d.ceaz_base
        if d.dma_base <= address < d.dma_base + d.dma_range:
            return "dma", address - d.dma_base
        raise ValueError(f"no device at address 0x{address:08x} on the simulated card")

    def _read_word(self, address: int) -> int:
        window, offset = self._window(address)
        if window == "dma":
            return self._dma_read(offset)
        data, resp = self.core.axil_read(offset)
        if resp:
            # On a board this is a bus error (SIGBUS); here it is an exception.
            raise OSError(f"ceaz register read at 0x{offset:03x} answered "
                          f"{'SLVERR' if resp == 2 else 'DECERR'}")
        return data

    def _write_word(self, address: int, value: int) -> None:
        window, offset = self._window(address)
        if window == "dma":
            self._dma_write(offset, value)
            return
        resp = self.core.axil_write(offset, value)
        if resp:
            raise OSError(f"ceaz register write at 0x{offset:03x} answered "
                          f"{'SLVERR' if resp == 2 else 'DECERR'}")

    # -- AXI DMA registers ----------------------------------------------------------------------

    def _dma_channel(self, offset: int) -> tuple[_Channel, int]:
        if offset >= _S2MM_OFFSET:
            return self._channels[S2MM], offset - _S2MM_OFFSET
        return self._channels[MM2S], offset

    def _dma_read(self, offset: int) -> int:
        channel, register = self._dma_channel(offset)
        if register == DMA_REGISTERS["DMACR"]:
            return channel.control
        if register == DMA_REGISTERS["DMASR"]:
            if channel.busy:
                self._advance(channel)
            halted = not channel.control & _RS
            idle = not halted and not channel.busy
            return (_HALTED * halted) | (_IDLE * idle) | channel.errors | channel.irq
        if register == DMA_REGISTERS["SA"]:
            return channel.address & 0xFFFFFFFF
        if register == DMA_REGISTERS["SA_MSB"]:
            return channel.address >> 32
        if register == DMA_REGISTERS["LENGTH"]:
            # S2MM reports the bytes it received once the packet is in.
            if channel.channel == S2MM and not channel.busy:
                return channel.moved
            return channel.length
        return 0

    def _dma_write(self, offset: int, value: int) -> None:
        channel, register = self._dma_channel(offset)
        if register == DMA_REGISTERS["DMACR"]:
            if value & _RESET:
                # The soft reset is shared by both channels.
                for c in self._channels:
                    self.core.halt(c.channel)
                    c.reset()
                return
            channel.control = value & ~_RESET
            if not value & _RS and channel.busy:
                self.core.halt(channel.channel)
                self._sync(channel)
                channel.busy = False
        elif register == DMA_REGISTERS["DMASR"]:
            channel.irq &= ~(value & _IRQ_BITS)
        elif register == DMA_REGISTERS["SA"]:
            channel.address = (channel.address & ~0xFFFFFFFF) | value
        elif register == DMA_REGISTERS["SA_MSB"]:
            channel.address = (channel.address & 0xFFFFFFFF) | (value << 32)
        elif register == DMA_REGISTERS["LENGTH"]:
            self._start(channel, value & ((1 << self.design.length_bits) - 1))

    def _start(self, channel: _Channel, nbytes: int) -> None:
        if not channel.control & _RS or channel.busy:
            return  # as on the real DMA, a LENGTH write to a halted or busy channel is lost
        channel.length, channel.moved = nbytes, 0
        if nbytes == 0:
            self._fail(channel, _DMA_INT_ERR)
            return
        try:
            pointer, holder = self.default_memory.resolve(channel.address, nbytes)
        except ValueError:
            self._fail(channel, _DMA_DEC_ERR)
            return
        channel.holder, channel.busy, channel.stalled_polls = holder, True, 0
        if channel.channel == MM2S:
            self.core.mm2s_start(pointer, nbytes)
        else:
            self.core.s2mm_start(pointer, nbytes)

    def _fail(self, channel: _Channel, error: int) -> None:
        channel.errors |= error
        channel.irq |= _ERR_IRQ
        channel.control &= ~_RS  # the channel halts on an error
        channel.busy = False

    def _advance(self, channel: _Channel) -> None:
        """Run the clock until ``channel`` finishes or the streams stop moving."""
        self.core.run(self.POLL_CYCLES, wait_mask=1 << channel.channel,
                      stall_limit=self.STALL_CYCLES)
        for c in self._channels:
            if c.busy:
                self._sync(c)
        if channel.busy:
            channel.stalled_polls += 1
            if channel.stalled_polls >= self.DEADLOCK_POLLS:
                # A board would hang here forever; a simulation can say why instead.
                name = "MM2S" if channel.channel == MM2S else "S2MM"
                raise DMADeadlock(
                    f"simulated DMA {name} cannot finish: no stream moved for "
                    f"{self.DEADLOCK_POLLS * self.STALL_CYCLES} clocks (is the other channel "
                    "started, with a buffer large enough for the packet?)")

    def _sync(self, channel: _Channel) -> None:
        busy, moved, error = self.core.status(channel.channel)
        channel.moved = moved
        if error:
            self._fail(channel, error)
        elif not busy and channel.busy:
            channel.busy = False
            channel.irq |= _IOC_IRQ
        if not channel.busy:
            channel.holder = None


_activated: list[SimulatedCard] = []


def activate(card: SimulatedCard | CardLibrary | None = None, *, lanes: int = 4,
             **build_options) -> SimulatedCard:
    """Make a simulated card pynq's active device and return it.

    ``card`` may be a `SimulatedCard`, a `CardLibrary` (from `build`), or None to build the
    real compressor (``ceaz_hw.top.Compressor(lanes)``; cached after the first time).
    """
    if card is None:
        card = SimulatedCard.for_compressor(lanes, **build_options)
    elif isinstance(card, CardLibrary):
        card = SimulatedCard(card)
    elif not isinstance(card, SimulatedCard):
        raise TypeError(f"expected a SimulatedCard or CardLibrary, not {type(card).__name__}")
    with warnings.catch_warnings():
        # Probe the real devices first, so none is hidden; without any, pynq warns about XRT.
        warnings.filterwarnings("ignore", message="No devices found")
        devices = pynq.Device.devices
    if card not in devices:
        devices.append(card)
    _activated.append(card)
    pynq.Device.active_device = card
    return card


def deactivate(card: SimulatedCard | None = None) -> None:
    """Undo `activate` for ``card`` (default: the last activated one)."""
    if not _activated:
        return
    card = card or _activated[-1]
    if card in _activated:
        _activated.remove(card)
    devices = pynq.Device.devices
    if card in devices:
        devices.remove(card)
    if getattr(pynq.Device, "_active_device", None) is card:
        del pynq.Device._active_device
        if _activated:
            pynq.Device.active_device = _activated[-1]
