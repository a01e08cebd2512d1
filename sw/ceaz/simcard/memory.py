"""Host memory that the simulated DMA reaches by device address.

On a board `pynq.allocate` returns physically contiguous buffers whose `device_address` the
DMA is programmed with. Here each allocation is an ordinary numpy array with a device address
handed out first-fit from a window below the register windows; the DMA model turns an address
back into a host pointer. An address range returns to the pool when the last view of its
buffer is garbage collected, as pynq's own buffers do.
"""

from __future__ import annotations

import bisect
import weakref

import numpy as np

__all__ = ["SimMemory", "sim_buffer_class"]


def sim_buffer_class():
    """`pynq.buffer.PynqBuffer`, made to work under numpy 2.

    numpy 2 gave ndarray a read-only ``device`` attribute (the array API's), and pynq 4.0's
    PynqBuffer assigns ``self.device``; a plain class attribute in a subclass shadows numpy's
    descriptor, so the assignment lands in the instance dict again. Under numpy 1 this is
    PynqBuffer with one extra class attribute.
    """
    global _SimBuffer
    if _SimBuffer is None:
        from pynq.buffer import PynqBuffer

        class SimBuffer(PynqBuffer):
            device = None

        _SimBuffer = SimBuffer
    return _SimBuffer


_SimBuffer = None


class SimMemory:
    """A first-fit allocator of device addresses over host numpy memory (pynq's
    ``default_memory`` of the simulated card)."""

    BASE = 0x1000_0000
    LIMIT = 0x4000_0000  # below the PL register windows at 0x4000_0000 and up
    ALIGN = 4096

    def __init__(self, device):
        self._device = device
        self._starts: list[int] = []              # sorted device addresses of live blocks
        self._blocks: dict[int, tuple[int, weakref.ref]] = {}

    def allocate(self, shape, dtype="u4", **kwargs):
        """A `pynq.buffer.PynqBuffer` with a device address (pynq.allocate lands here).

        pynq's keyword arguments (``cacheable``, ``target``...) are accepted and ignored:
        simulated memory is always coherent.
        """
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        if count < 0:
            raise ValueError(f"shape must not be negative, not {shape!r}")
        nbytes = count * dtype.itemsize
        size = max(self.ALIGN, -(-nbytes // self.ALIGN) * self.ALIGN)
        address = self._find_gap(size)
        backing = np.zeros(size, dtype=np.uint8)
        buffer = sim_buffer_class()(shape, dtype, buffer=backing, device_address=address,
                            device=self._device, coherent=True)
        index = bisect.bisect_left(self._starts, address)
        self._starts.insert(index, address)
        self._blocks[address] = (size, weakref.ref(backing))
        weakref.finalize(backing, self._release, address)
        return buffer

    def resolve(self, address: int, nbytes: int) -> tuple[int, np.ndarray]:
        """Host pointer for ``nbytes`` at device ``address``, and the array that owns it (keep
        it alive while the DMA uses the pointer). Raises ValueError if the range is not inside
        one live buffer, which the DMA model reports as a decode error."""
        index = bisect.bisect_right(self._starts, address) - 1
        if index >= 0:
            start = self._starts[index]
            size, ref = self._blocks[start]
            backing = ref()
            if backing is not None and address + nbytes <= start + size:
                return backing.ctypes.data + (address - start), backing
        raise ValueError(f"0x{address:x}+{nbytes} is not inside an allocated buffer")

    @property
    def allocated(self) -> int:
        """Bytes held by live buffers (rounded up to whole pages)."""
        return sum(size for size, _ in self._blocks.values())

    def _find_gap(self, size: int) -> int:
        cursor = self.BASE
        for start in self._starts:
            if start - cursor >= size:
                return cursor
            cursor = max(cursor, start + self._blocks[start][0])
        if self.LIMIT - cursor >= size:
            return cursor
        raise MemoryError(f"simulated card memory exhausted: no {size} free bytes")

    def _release(self, address: int) -> None:
        if self._blocks.pop(address, None) is not None:
            self._starts.remove(address)

    # pynq calls these for buffers that are not coherent; ours always are.
    def flush(self, *args) -> None:
        pass

    def invalidate(self, *args) -> None:
        pass
