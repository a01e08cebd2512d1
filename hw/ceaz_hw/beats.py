"""The beat layouts that flow between the pipeline stages (docs/hardware.md, "Stages").

Every stage moves one beat of N lanes per clock through an ``amaranth.lib.stream``. A beat is
``{"lanes": N x <lane layout>, "last": 1, "count": 0..N}``: value ``j`` of the beat is lane
``j``, ``last`` marks the final beat of a chunk, and ``count`` says how many lanes (always
lanes ``0 .. count-1``) hold values. Only a chunk's last beat may have ``count < N``; lanes at
or above ``count`` carry don't-care data that no stage may count, code or emit.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Mux, signed, unsigned
from amaranth.lib import data, enum

from ceaz import format as fmt

__all__ = [
    "LANE_COUNTS",
    "Coded",
    "coded_field",
    "Escape",
    "Kind",
    "Prequantized",
    "Q_BITS",
    "RAW_BITS",
    "Residual",
    "Symbol",
    "beat",
    "code_field_bits",
    "raw_field_bits",
]

#: Lane counts the pipeline is built for.
LANE_COUNTS = (1, 2, 4, 8, 16)
#: |q| < 2**Q_BITS, otherwise the value goes verbatim (format.Q_LIMIT).
Q_BITS = fmt.Q_LIMIT.bit_length() - 1
#: |delta| < 2**(Q_BITS + 3): three first differences of q.
DELTA_BITS = Q_BITS + 4


class Kind(enum.Enum, shape=2):
    """Value kinds, as ``ceaz.quantizer.KIND_*``."""

    NORMAL = 0
    VERBATIM = 1
    FILL = 2


class Escape(enum.Enum, shape=2):
    """Which escape a coded value is, for the chunk trailer's counts."""

    NONE = 0
    OUTLIER = 1
    VERBATIM = 2
    FILL = 3


def beat(lane_layout, lanes: int) -> data.StructLayout:
    """One beat of ``lanes`` values, each of ``lane_layout``, with ``last`` and ``count``."""
    if lanes not in LANE_COUNTS:
        raise ValueError(f"lanes must be one of {LANE_COUNTS}, not {lanes!r}")
    return data.StructLayout({
        "lanes": data.ArrayLayout(lane_layout, lanes),
        "last": 1,
        "count": range(lanes + 1),
    })


def _value_or_bits(name: str, shape) -> data.FlexibleLayout:
    """A lane that holds ``name`` (of ``shape``) for a normal value and the value's IEEE bits
    (``raw``) for the other kinds, in the same 32 bits, then its kind. A value is either
    quantized or sent as its bits, never both: sharing the bits halves what every register,
    buffer and pipeline stage from the quantizer to the symbol stage holds per lane."""
    return data.FlexibleLayout(34, {
        name: data.Field(shape, 0),
        "raw": data.Field(unsigned(32), 0),
        "kind": data.Field(Kind, 32),
    })


#: After the prequantizer: ``q`` of a normal value, the input bits of the others.
Prequantized = _value_or_bits("q", signed(Q_BITS + 1))

#: After the Lorenzo predictor: the residual replaces ``q``.
Residual = _value_or_bits("delta", signed(DELTA_BITS))


def symbol_bits(radius: int) -> int:
    """Width of a symbol index for ``2 * radius + 2`` symbols."""
    return (fmt.n_symbols(radius) - 1).bit_length()


def Symbol(radius: int) -> data.StructLayout:  # noqa: N802 -- a layout, named like one
    """After the symbol stage: the symbol, its raw field (right-aligned) and that field's
    width (0, ``OUTLIER_BITS`` or 32)."""
    return data.StructLayout({
        "sym": unsigned(symbol_bits(radius)),
        "raw": unsigned(32),
        "raw_len": range(33),
        "esc": Escape,
    })


#: Width of a verbatim value's raw field (its IEEE bits); an outlier's is fmt.OUTLIER_BITS.
RAW_BITS = 32


def raw_field_bits(esc):
    """Width of the raw field after a code of escape class ``esc`` (``ceaz_hw.symbols``):
    ``RAW_BITS`` for a verbatim value, ``OUTLIER_BITS`` for an outlier, none otherwise."""
    return Mux(esc == Escape.VERBATIM, RAW_BITS, Mux(esc == Escape.OUTLIER, fmt.OUTLIER_BITS, 0))


def code_field_bits(max_code_len: int) -> int:
    """Width of a coded value: the longest code followed by the longest raw field."""
    return max_code_len + RAW_BITS


def Coded(max_code_len: int) -> data.StructLayout:  # noqa: N802
    """After the Huffman lanes: a field of ``len`` bits, sent MSB first, which is the code
    (right-aligned in ``code``, ``len - raw_field_bits(esc)`` bits) followed by the raw field
    (right-aligned in ``raw``, ``raw_field_bits(esc)`` bits), and the escape class. Bits above
    either part's width are ignored. The two parts travel apart, not concatenated: the pieces
    front takes them apart again, and the concatenation and its undoing were a 48-bit and a
    16-bit select a lane (1.4 k LUT4 at 16 lanes)."""
    width = code_field_bits(max_code_len)
    return data.StructLayout({
        "code": unsigned(max_code_len),
        "raw": unsigned(RAW_BITS),
        "len": range(width + 1),
        "esc": Escape,
    })


def coded_field(lane):
    """A ``Coded`` lane's field right-aligned in ``code_field_bits`` bits: the code, then the
    raw field's bits (anything above ``len`` is left for the caller to drop)."""
    ob = fmt.OUTLIER_BITS
    return Mux(lane.esc == Escape.VERBATIM, Cat(lane.raw, lane.code),
               Mux(lane.esc == Escape.OUTLIER, Cat(lane.raw[:ob], lane.code), lane.code))
