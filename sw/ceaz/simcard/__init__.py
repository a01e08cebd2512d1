"""A ceaz card without a board: the compressor RTL, Verilated, behind a `pynq.Device`.

    from ceaz import simcard
    card = simcard.activate(lanes=4)      # builds ceaz_hw.top.Compressor(4) once, then cached
    overlay = pynq.Overlay(str(card.hwh_path), download=False)
    dma = overlay.axi_dma_0                # pynq's own AXI DMA driver
    ...                                    # pynq.allocate, MMIO, register_map: all simulated

`build` (Verilator, cached) and `SimCore` (the C++ clock loop through ctypes) need no pynq;
`SimulatedCard`, `activate` and `deactivate` import it on first use.
"""

from __future__ import annotations

from .build import CardLibrary, build, build_compressor, cache_root
from .core import SimCore
from .hwh import CEAZ_VLNV, DMA_VLNV, BlockDesign, write_hwh

__all__ = [
    "CEAZ_VLNV",
    "DMA_VLNV",
    "BlockDesign",
    "CardLibrary",
    "DMADeadlock",
    "SimCore",
    "SimulatedCard",
    "activate",
    "build",
    "build_compressor",
    "cache_root",
    "deactivate",
    "write_hwh",
]

_DEVICE_NAMES = {"DMADeadlock", "SimulatedCard", "activate", "deactivate"}


def __getattr__(name):
    if name in _DEVICE_NAMES:
        from . import device

        return getattr(device, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
