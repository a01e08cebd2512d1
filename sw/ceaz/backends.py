"""Which engine codes the chunks: the software model, the simulated card or a board.

All backends produce identical bytes (the card is bit-exact with the model, and the host
builds the same container around its output), so the choice is only about where the work
runs:

* ``model``: the numpy/numba reference codec on the CPU.
* ``sim``: the compressor RTL under Verilator behind pynq (`ceaz.simcard`), driven by the
  unmodified PYNQ driver (`ceaz.driver`). Built once per configuration and cached.
* ``pynq``: a board with the ceaz overlay (``CEAZ_OVERLAY`` names its .bit/.hwh).
* ``auto``: a board when pynq finds one, the simulated card otherwise.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator

from .errors import DeviceError

__all__ = ["BACKENDS", "SIM_LANES", "coder_for"]

BACKENDS = ("auto", "model", "sim", "pynq")
#: Lanes of the simulated card: what the main job builds (fast to compile, N values/clock).
SIM_LANES = int(os.environ.get("CEAZ_SIM_LANES", "4"))


def _import_pynq():
    """pynq, without the pkg_resources deprecation warning its pynqutils raises on import
    (not ours to fix, and it would only clutter every run's output)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "pkg_resources is deprecated", UserWarning)
        import pynq
    return pynq


def _board_present() -> bool:
    try:
        pynq = _import_pynq()
    except ImportError:
        return False
    try:
        return any(type(d).__module__ != "ceaz.simcard.device" for d in pynq.Device.devices)
    except Exception:  # pynq raises assorted errors when it finds no device at all
        return False


@contextlib.contextmanager
def coder_for(backend: str, settings, timeout: float | None = None) -> Iterator[object]:
    """A chunk coder for `ceaz.codec.encode_stream`, or None for the software model."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    if backend == "model":
        yield None
        return
    if backend == "auto":
        backend = "pynq" if _board_present() else "sim"
    try:
        pynq = _import_pynq()

        from . import driver
    except ImportError as exc:
        raise DeviceError(f"backend {backend!r} needs pynq ({exc}); see the README") from exc
    options = {} if timeout is None else {"timeout": timeout}
    if backend == "pynq":
        overlay = os.environ.get("CEAZ_OVERLAY")
        if not overlay:
            raise DeviceError("backend 'pynq' needs CEAZ_OVERLAY=<the ceaz overlay's .bit>")
        yield driver.CardCoder(pynq.Overlay(overlay), **options)
        return
    from . import simcard

    card = simcard.activate(simulated_card(settings))
    try:
        yield driver.CardCoder(pynq.Overlay(str(card.hwh_path), download=False), **options)
    finally:
        simcard.deactivate(card)


def simulated_card(settings, lanes: int = SIM_LANES):
    """The simulated card built for these settings (radius and buffer sizes), from the cache."""
    from . import simcard

    return simcard.SimulatedCard(simcard.build_compressor(
        lanes, radius=settings.radius, max_line=settings.max_line, max_plane=settings.max_plane))
