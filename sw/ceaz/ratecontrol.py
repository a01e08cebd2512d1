"""Fixed-ratio mode: the error bound that makes a field compress to a requested size.

The size of a ceaz stream falls as the bound grows, but how fast depends on the data. So the
host fits the bound in two steps:

1. **Rate model from a sample.** A few whole chunk boxes, spread evenly through the array
   (``sample_values`` values in all), are coded by the real chunk coder at candidate bounds,
   with the same codebook adaptation as the stream. Their bits per value, plus the stream's
   fixed overhead, predict the whole stream's; a bisection on log(bound) finds the bound whose
   prediction meets the target.
2. **Feedback.** The whole array is compressed at that bound. If the achieved size misses the
   target by more than ``tolerance``, the miss corrects the model (the ratio of achieved to
   predicted bits) and the bound is fitted and the array compressed again, never outside the
   bracket the earlier passes proved, at most ``max_passes`` times in all; the closest pass
   is kept.

The stream itself is an ordinary ceaz stream with an absolute bound: its header records the
bound every value was held to, and the decoder needs nothing new.

A Huffman code spends at least one bit per value, so ratios above about 30 for float32 (60
for float64) are out of reach; asking for one gives an error naming the reachable ratio. At
the other end, a field may compress better than asked even at the tightest bound (a field of
mostly zeros): then the tightest bound is used and `RateFit.miss` says by how much.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import BinaryIO

import numpy as np

from . import format as fmt
from . import tiling
from .chunk import Coding, code_chunk, store_if_larger
from .container import index_size, pack_chunk
from .quantizer import quant_params

__all__ = ["RateFit", "encode_to_rate", "fit_bound", "target_bits"]

#: Values coded per candidate bound: enough chunks to see the field, few enough to be quick.
DEFAULT_SAMPLE_VALUES = 1 << 20
#: Relative miss of the achieved size that triggers a corrected pass.
DEFAULT_TOLERANCE = 0.03
#: Bisection steps on log2(bound): the bracket spans 45 octaves, 45 / 2**24 of one is left.
_BISECTIONS = 24


def target_bits(itemsize: int, ratio: float | None = None,
                bit_rate: float | None = None) -> float:
    """Bits per value for a requested ratio (input bytes over stream bytes) or bit rate."""
    if (ratio is None) == (bit_rate is None):
        raise ValueError("give exactly one of ratio and bit_rate")
    name, value = ("ratio", ratio) if ratio is not None else ("bit_rate", bit_rate)
    if not (isinstance(value, int | float | np.floating) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    bits = 8 * itemsize / ratio if ratio is not None else float(bit_rate)
    if bits >= 8 * itemsize:
        raise ValueError(f"{name} {value:g} asks for at least {8 * itemsize} bits per value: "
                         f"that is no compression; store the data raw instead")
    return bits


@dataclasses.dataclass(frozen=True)
class RateFit:
    """How the bound was found: what was asked, what each pass achieved."""

    target_bits: float        # bits per value asked for
    eb: float                 # absolute bound of the kept pass
    achieved_bits: float      # bits per value of the kept pass
    passes: tuple[tuple[float, float], ...]  # (bound, achieved bits/value) of each pass
    sample_values: int        # values coded per candidate bound

    @property
    def miss(self) -> float:
        """Relative miss of the kept pass: achieved / target - 1."""
        return self.achieved_bits / self.target_bits - 1


class _SampleModel:
    """Bits per value of the whole stream, predicted by coding a sample of its chunk boxes."""

    def __init__(self, src3: np.ndarray, header, sample_values: int, use_jit: bool):
        from .codec import CodebookSchedule  # codec imports this module

        self.header = header
        self.use_jit = use_jit
        self.schedule = lambda: CodebookSchedule(header.radius, header.adapt_lag, use_jit)
        boxes = list(tiling.boxes(header.shape3, header.chunk))
        per_box = max(1, math.prod(header.chunk))
        want = max(1, min(len(boxes), sample_values // per_box))
        picks = np.unique(np.linspace(0, len(boxes) - 1, want).round().astype(int))
        self.boxes = [boxes[i] for i in picks]
        self.values = [np.ascontiguousarray(src3[b.slices], dtype=header.dtype)
                       for b in self.boxes]
        self.n_sample = sum(v.size for v in self.values)
        n_total = math.prod(header.shape)
        fixed = fmt.HEADER_SIZE + index_size(header.n_chunks) + fmt.TRAILER.size
        self.overhead_bits = 8 * fixed / n_total

    def bits(self, eb: float) -> float:
        """Predicted bits per value of the stream at absolute bound ``eb``."""
        h = self.header
        qp = quant_params(eb, h.dtype, max(abs(h.finite_min), abs(h.finite_max)))
        h = dataclasses.replace(h, eb_user=eb, eb_f=qp.eb_f, step=qp.step)  # as make_header
        coding = Coding(h.qparams, h.radius, h.sync_interval)
        schedule = self.schedule()
        size = 0
        for box, values in zip(self.boxes, self.values, strict=True):
            enc = store_if_larger(
                code_chunk(values, box, coding, schedule.next_lengths(values, box, coding),
                           self.use_jit), values)
            schedule.observe(enc.hist)
            size += len(pack_chunk(enc))
        return 8 * size / self.n_sample + self.overhead_bits


def _bisect(model: _SampleModel, want_bits: float, lo: float, hi: float) -> float:
    """The bound in [lo, hi] where the predicted bits cross ``want_bits`` (they fall as the
    bound grows), by bisection on its logarithm."""
    for _ in range(_BISECTIONS):
        mid = math.sqrt(lo * hi)
        if model.bits(mid) > want_bits:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def fit_bound(src: np.ndarray, bits: float, encode: Callable[[float], int],
              settings=None, *, sample_values: int = DEFAULT_SAMPLE_VALUES,
              tolerance: float = DEFAULT_TOLERANCE, max_passes: int = 6,
              use_jit: bool = True) -> RateFit:
    """Fit the absolute bound for ``bits`` per value and compress with it.

    ``encode(eb)`` compresses the whole array with absolute bound ``eb`` (replacing any
    earlier pass) and returns the stream's size in bytes. After the call the output holds the
    kept pass: the last one, or the closest if the last missed by more than the best.
    """
    from .codec import Settings, _check_array, make_header

    if not (math.isfinite(bits) and bits > 0):
        raise ValueError(f"bits per value must be positive, got {bits!r}")
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance must be in (0, 1), got {tolerance!r}")
    if max_passes < 1:
        raise ValueError(f"max_passes must be at least 1, got {max_passes!r}")
    src = _check_array(src)
    settings = settings or Settings()
    header = make_header(src, 1.0, "abs", settings, use_jit)
    spread = max(header.finite_max - header.finite_min,
                 abs(header.finite_max), abs(header.finite_min))
    n_values = math.prod(header.shape)
    if spread == 0 or not math.isfinite(spread):
        # Constant (or non-finite) data: every bound codes alike; take one that keeps it.
        size = encode(1.0)
        achieved = 8 * size / n_values
        return RateFit(bits, 1.0, achieved, ((1.0, achieved),), 0)

    model = _SampleModel(src.reshape(header.shape3), header, sample_values, use_jit)
    lo, hi = spread * 2.0**-40, spread * 2.0**5
    floor = model.bits(hi)
    if floor > bits * (1 + tolerance):
        itemsize = np.dtype(header.dtype).itemsize
        raise ValueError(
            f"{bits:.3g} bits per value (ratio {8 * itemsize / bits:.3g}) is out of reach: "
            f"even the loosest bound needs about {floor:.3g} bits per value here (ratio "
            f"{8 * itemsize / floor:.3g}), {model.overhead_bits:.2g} of them for the stream's "
            f"header and index; ceaz's Huffman code spends at least 1 bit per value")

    passes: list[tuple[float, float]] = []
    correction = 1.0  # achieved bits / predicted bits, learnt from the passes
    for _ in range(max_passes):
        eb = _bisect(model, bits / correction, lo, hi)
        # Passes over the whole array bracket the answer for certain; stay inside it.
        above = [e for e, b in passes if b > bits]  # bounds too tight: too many bits
        below = [e for e, b in passes if b <= bits]
        lo_true, hi_true = max(above, default=lo), min(below, default=hi)
        if not lo_true < eb < hi_true:
            eb = math.sqrt(lo_true * hi_true)
        if any(math.isclose(eb, e, rel_tol=1e-9) for e, _ in passes):
            break
        predicted = model.bits(eb)
        achieved = 8 * encode(eb) / n_values
        passes.append((eb, achieved))
        if abs(achieved / bits - 1) <= tolerance:
            break
        correction = achieved / predicted
    best = min(passes, key=lambda p: abs(p[1] / bits - 1))
    if best is not passes[-1]:
        encode(best[0])
    return RateFit(bits, best[0], best[1], tuple(passes), model.n_sample)


def encode_to_rate(src: np.ndarray, out: BinaryIO, bits: float, settings=None, *,
                   use_jit: bool = True, coder=None, on_chunk: Callable[[int], None] | None = None,
                   on_pass: Callable[[], None] | None = None, **fit_options):
    """`ceaz.codec.encode_stream` for ``bits`` per value: each pass of `fit_bound` rewrites
    the seekable ``out`` from where it stood, so ``out`` ends with the kept pass.
    ``on_pass`` is called before each pass (e.g. to reset a progress bar). Returns the kept
    pass's header and the fit."""
    from .codec import encode_stream

    start = out.tell()
    header = None

    def encode(eb: float) -> int:
        nonlocal header
        out.seek(start)
        out.truncate()
        if on_pass is not None:
            on_pass()
        header = encode_stream(src, out, eb, "abs", settings, use_jit, on_chunk=on_chunk,
                               coder=coder)
        return out.tell() - start

    fit = fit_bound(src, bits, encode, settings, use_jit=use_jit, **fit_options)
    return header, fit
