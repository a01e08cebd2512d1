"""Pack numpy arrays into pipeline beats (``ceaz_hw.beats.beat`` layouts) and back, for benches.

A beat travels as one integer (the stream payload) through :class:`streams.StreamBus` with
``byte_size`` equal to the payload width, so each AXI "byte" is one whole beat.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from amaranth.hdl import Shape
from amaranth.lib import data

__all__ = ["Field", "beats_from_values", "fields", "values_from_beats"]


class Field:
    """Offset, width and signedness of one field of a flat layout."""

    def __init__(self, offset: int, width: int, signed: bool):
        self.offset, self.width, self.signed = offset, width, signed

    def get(self, word: int) -> int:
        v = (word >> self.offset) & ((1 << self.width) - 1)
        if self.signed and v >> (self.width - 1):
            v -= 1 << self.width
        return v

    def put(self, value: int) -> int:
        return (int(value) & ((1 << self.width) - 1)) << self.offset


def fields(layout) -> dict[str, Field]:
    """Top-level fields of a StructLayout (enums count as unsigned)."""
    out = {}
    for name, f in data.Layout.cast(layout):
        shape = Shape.cast(f.shape)
        out[name] = Field(f.offset, shape.width, shape.signed)
    return out


def _lane_layout(beat_layout):
    lanes = data.Layout.cast(beat_layout)["lanes"]
    array = lanes.shape
    return lanes.offset, array.elem_shape, array.length


def beats_from_values(beat_layout, values: Mapping[str, np.ndarray]) -> list[int]:
    """One chunk's beats: lane fields from ``values`` (name -> flat array, all equally long;
    a layout whose lane is a plain shape takes the name ``""``; fields not named are zero, so
    of fields that share bits, name one), ``last`` on the final beat and ``count`` the valid
    lanes."""
    base, lane, lanes = _lane_layout(beat_layout)
    top = fields(beat_layout)
    arrays = {k: np.asarray(v) for k, v in values.items()}
    n = len(next(iter(arrays.values())))
    if isinstance(lane, data.Layout) or isinstance(lane, data.StructLayout):
        lane_fields = fields(lane)
        lane_size = data.Layout.cast(lane).size
    else:
        lane_fields = {"": Field(0, Shape.cast(lane).width, Shape.cast(lane).signed)}
        lane_size = Shape.cast(lane).width
    words = []
    lists = {k: a.tolist() for k, a in arrays.items()}
    for start in range(0, n, lanes):
        count = min(lanes, n - start)
        word = top["count"].put(count) | top["last"].put(start + lanes >= n)
        for j in range(count):
            off = base + j * lane_size
            for name, f in lane_fields.items():
                if name in lists:
                    word |= f.put(lists[name][start + j]) << off
        words.append(word)
    return words


def values_from_beats(beat_layout, words: list[int]) -> tuple[dict[str, np.ndarray], list[int]]:
    """The valid lanes' fields of ``words``, concatenated, and the indices of beats with
    ``last`` set."""
    base, lane, lanes = _lane_layout(beat_layout)
    top = fields(beat_layout)
    if isinstance(lane, data.Layout):
        lane_fields = fields(lane)
        lane_size = lane.size
    else:
        lane_fields = {"": Field(0, Shape.cast(lane).width, Shape.cast(lane).signed)}
        lane_size = Shape.cast(lane).width
    out = {name: [] for name in lane_fields}
    lasts = []
    for b, word in enumerate(words):
        count = top["count"].get(word)
        if top["last"].get(word):
            lasts.append(b)
        for j in range(count):
            lane_word = word >> (base + j * lane_size)
            for name, f in lane_fields.items():
                out[name].append(f.get(lane_word))
    return {k: np.array(v, dtype=np.int64) for k, v in out.items()}, lasts
