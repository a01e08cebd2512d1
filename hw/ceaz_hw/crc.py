"""CRC-32 (zlib's CRC-32/ISO-HDLC) of a byte stream that arrives ``width`` bytes per beat.

Why it exists: every chunk record of a ceaz file ends with the CRC32 of everything above it in
the record, and the file header, index and trailer carry one too (docs/format.md, section 8:
"CRC32 is the ISO-HDLC CRC-32 of zlib"). The compressor pipeline computes the chunk trailer's
CRC on the fly, on the bytes it emits, so that the host only has to append it (or check it).

The arithmetic comes from :mod:`amaranth.lib.crc`: the algorithm is its catalog entry
``CRC32_ISO_HDLC``, and the parallel update matrices are derived at elaboration time by running
:meth:`amaranth.lib.crc.Parameters.compute` (its public bit-serial reference model) on unit
vectors. A single :class:`amaranth.lib.crc.Processor` cannot be used directly, because the
final beat of a stream may hold fewer than ``width`` bytes. Here one network updates the
register with a whole beat, zeros included, and a final beat of ``n`` bytes is undone at the
output: appending ``k`` zero bytes multiplies the register by an invertible matrix ``A_k``, so
the CRC of the ``n`` bytes is ``A_k^-1`` applied to the register (``k = width - n``, one
32 x 32 matrix per multiple of ``granule``). One network per valid byte count instead, selected
by ``n_bytes``, was three quarters of this unit at 32 bytes a beat (3.6 k LUT4 with four
networks), and the correction sits after the register, not in the loop. So only a stream's
final non-empty beat may be partial, and its bytes from ``n_bytes`` on must be zero (the
packer pads its payload with zeros to 8-byte groups, ``granule``).

Interface (``clk``/``rst`` synchronous, active high; ports ``i__payload``, ``i__valid``,
``i__ready``, ``crc``, ``crc_valid`` in Verilog):

* ``i``: a :mod:`amaranth.lib.stream` of :func:`beat_layout` beats. ``data`` holds byte ``k``
  of the beat in bits ``8k .. 8k+7``; **byte 0 (the least significant byte) is the first byte
  of the stream** -- little-endian, as on an AXI-Stream ``tdata`` bus. ``n_bytes`` (0 to
  ``width``) counts the valid bytes, which are always bytes ``0 .. n_bytes-1``; the others must
  be zero. Beats are full or empty (``n_bytes = 0``, anywhere), except the stream's final
  non-empty beat, which may hold any multiple of ``granule`` bytes; an ``n_bytes`` above
  ``width`` or not a multiple of ``granule`` counts as ``width``. ``last`` ends the stream.
  An empty stream is one beat with ``n_bytes = 0`` and ``last = 1`` (its CRC is 0).
* ``i.ready`` is always 1: one beat is accepted on every clock with ``i.valid`` (no
  backpressure). Producers should still honour ``ready``, so that a later version may stall.
* ``crc`` is the CRC of the stream, valid while ``crc_valid`` is 1. Both are registers:
  ``crc_valid`` rises two clocks after the ``last`` beat is accepted and stays high, with
  ``crc`` held, until the clock after the first beat of the next stream is accepted. If that
  beat follows the ``last`` beat directly, ``crc_valid`` is a single-cycle pulse, so a consumer
  must capture ``crc`` in the cycle where ``crc_valid`` is 1. A new stream always starts from
  the initial value; there is no need to reset between streams.

The critical path is the CRC register through one XOR network (at most 32 + 8 * ``width``
inputs per bit) and a three-way select (update, hold, restart) back into the register.
"""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.crc import Algorithm, catalog
from amaranth.lib.wiring import In, Out

__all__ = ["StreamCRC", "beat_layout", "gf2_inverse", "update_matrices"]

#: zlib's CRC-32 (reflected polynomial 0xEDB88320, initial value and final XOR 0xFFFFFFFF).
CRC32 = catalog.CRC32_ISO_HDLC


def beat_layout(width: int) -> data.StructLayout:
    """One beat of the input stream for ``width`` bytes per beat: ``data`` (``8 * width``
    bits, byte 0 in bits 0..7 and first in the stream), ``n_bytes`` (valid bytes, 0 to
    ``width``) and ``last`` (the beat ends the stream), packed in that order from bit 0."""
    return data.StructLayout({
        "data": unsigned(8 * width),
        "n_bytes": range(width + 1),
        "last": unsigned(1),
    })


def _reflect(value: int, nbits: int) -> int:
    return int(f"{value:0{nbits}b}"[::-1], 2)


def _step(algorithm: Algorithm, state: int, payload: bytes) -> int:
    """The state after ``payload`` starting from ``state``, without the final XOR, by
    :meth:`amaranth.lib.crc.Parameters.compute`.

    The state is kept in the output's bit order (for a reflected CRC such as zlib's, the
    register as zlib holds it), so the final CRC is simply ``state ^ xor_output``.
    """
    nbits = algorithm.crc_width
    init = _reflect(state, nbits) if algorithm.reflect_output else state
    raw = Algorithm(
        crc_width=nbits,
        polynomial=algorithm.polynomial,
        initial_crc=init,
        reflect_input=algorithm.reflect_input,
        reflect_output=algorithm.reflect_output,
        xor_output=0,
    )
    return raw(8).compute(payload)


def initial_state(algorithm: Algorithm = CRC32) -> int:
    """The state register's value at the start of a stream."""
    init = algorithm.initial_crc
    return _reflect(init, algorithm.crc_width) if algorithm.reflect_output else init


def update_matrices(nbytes: int, algorithm: Algorithm = CRC32) -> list[int]:
    """For each state bit ``i``, a mask of the inputs XORed into it after ``nbytes`` bytes:
    bits ``0 .. crc_width-1`` select old state bits, bit ``crc_width + 8k + b`` selects bit
    ``b`` of byte ``k``. The update is linear over GF(2) once the final XOR is left out,
    so its columns are the responses to unit vectors."""
    nbits = algorithm.crc_width
    columns = [_step(algorithm, 1 << j, bytes(nbytes)) for j in range(nbits)]
    for k in range(nbytes):
        for b in range(8):
            payload = bytearray(nbytes)
            payload[k] = 1 << b
            columns.append(_step(algorithm, 0, bytes(payload)))
    return [
        sum(1 << col for col, response in enumerate(columns) if response >> i & 1)
        for i in range(nbits)
    ]


def gf2_inverse(rows: list[int]) -> list[int]:
    """The inverse of a square matrix over GF(2), row ``i`` given as a mask of its columns
    (Gauss-Jordan elimination); raises ``ValueError`` if it is singular."""
    n = len(rows)
    # Each row with the identity's row beside it, above bit n.
    work = [row | 1 << (n + i) for i, row in enumerate(rows)]
    for col in range(n):
        pivot = next((r for r in range(col, n) if work[r] >> col & 1), None)
        if pivot is None:
            raise ValueError("the matrix is singular over GF(2)")
        work[col], work[pivot] = work[pivot], work[col]
        for r in range(n):
            if r != col and work[r] >> col & 1:
                work[r] ^= work[col]
    return [row >> n for row in work]


class StreamCRC(wiring.Component):
    """CRC of a byte stream, ``width`` bytes per beat, one beat per clock.

    Parameters
    ----------
    width : int
        Bytes per beat: 1, 2, 4, 8, 16, 32 or 64 (default 8), a multiple of ``granule``.
    granule : int
        Beats hold a multiple of this many valid bytes: 1 (default), 2, 4 or 8.
    algorithm : amaranth.lib.crc.Algorithm
        Defaults to zlib's CRC-32 (``catalog.CRC32_ISO_HDLC``); only that one is tested.

    See the module docstring for the ports, the byte order and the timing of ``crc_valid``.
    """

    #: Clocks from accepting a stream's ``last`` beat to its ``crc`` and ``crc_valid``: the
    #: state register, then the output register after the padding's correction.
    LATENCY = 2

    def __init__(self, width: int = 8, granule: int = 1, algorithm: Algorithm = CRC32):
        if granule not in (1, 2, 4, 8):
            raise ValueError(f"granule must be 1, 2, 4 or 8 bytes, not {granule!r}")
        if width not in (1, 2, 4, 8, 16, 32, 64) or width % granule:
            raise ValueError(f"width must be 1, 2, 4, ... 64 bytes and a multiple of granule "
                             f"{granule}, not {width!r}")
        self.width = width
        self.granule = granule
        self.algorithm = algorithm
        super().__init__({
            "i": In(stream.Signature(beat_layout(width))),
            "crc": Out(algorithm.crc_width),
            "crc_valid": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        nbits = self.algorithm.crc_width
        init = Const(initial_state(self.algorithm), nbits)

        state = Signal(nbits, init=init.value)
        done = Signal()  # the last beat has been accepted: `state` holds a finished CRC
        # Zero bytes the stream's final non-empty beat appended to its data (0 if it was full):
        # undone at the output.
        pad = Signal(range(max(self.width, 2)))  # one bit even for one byte a beat
        source = Signal(nbits)
        beat = self.i.payload

        m.d.comb += [
            self.i.ready.eq(1),
            # A beat after `last` (or the first after reset) starts from the initial value.
            source.eq(Mux(done, init, state)),
        ]

        # The state after a whole beat, zeros included.
        state_bits = (1 << nbits) - 1  # a tap mask's state part
        after = Signal(nbits)
        for i, taps in enumerate(update_matrices(self.width, self.algorithm)):
            # Separate state and data taps: the state's reduction stays in one word.
            state_taps = taps & state_bits
            data_taps = taps >> nbits
            m.d.comb += after[i].eq((source & state_taps).xor() ^ (beat.data & data_taps).xor())

        with m.If(self.i.valid & self.i.ready):
            m.d.sync += done.eq(beat.last)
            with m.If(beat.n_bytes == 0):
                m.d.sync += [state.eq(source), pad.eq(Mux(done, 0, pad))]
            with m.Else():
                m.d.sync += [state.eq(after), pad.eq(0)]
                with m.Switch(beat.n_bytes):
                    for n in range(self.granule, self.width, self.granule):
                        with m.Case(n):
                            m.d.sync += pad.eq(self.width - n)

        # The output: the padding's zero bytes undone (A_k^-1), then the final XOR.
        corrected = Signal(nbits)
        with m.Switch(pad):
            with m.Case(0):
                m.d.comb += corrected.eq(state)
            for k in range(self.granule, self.width, self.granule):
                zeros = [taps & state_bits for taps in update_matrices(k, self.algorithm)]
                with m.Case(k):
                    for i, row in enumerate(gf2_inverse(zeros)):
                        m.d.comb += corrected[i].eq((state & row).xor())
        m.d.sync += [self.crc.eq(corrected ^ self.algorithm.xor_output),
                     self.crc_valid.eq(done)]
        return m
