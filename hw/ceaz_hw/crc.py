"""CRC-32 (zlib's CRC-32/ISO-HDLC) of a byte stream that arrives ``width`` bytes per beat.

Why it exists: every chunk record of a ceaz file ends with the CRC32 of everything above it in
the record, and the file header, index and trailer carry one too (docs/format.md, section 8:
"CRC32 is the ISO-HDLC CRC-32 of zlib"). The compressor pipeline computes the chunk trailer's
CRC on the fly, on the bytes it emits, so that the host only has to append it (or check it).

The arithmetic comes from :mod:`amaranth.lib.crc`: the algorithm is its catalog entry
``CRC32_ISO_HDLC``, and the parallel update matrices are derived at elaboration time by running
:meth:`amaranth.lib.crc.Parameters.compute` (its public bit-serial reference model) on unit
vectors. A single :class:`amaranth.lib.crc.Processor` cannot be used directly, because it
consumes a fixed number of bits per word, while the last beat of a stream may hold fewer
than ``width`` bytes: here the CRC register feeds one parallel update network per valid byte
count (``granule``, ``2 granule``, ... ``width``), and ``n_bytes`` selects which result is
kept. A producer whose beats only ever end on a coarser boundary (the packer pads its payload
to 8-byte groups) sets ``granule`` to it: every network costs logic on the chip and a full
evaluation on every clock of a Verilator model, so the byte-granular networks it never uses
would be pure waste (they were about a quarter of the simulated card's time).

Interface (``clk``/``rst`` synchronous, active high; ports ``i__payload``, ``i__valid``,
``i__ready``, ``crc``, ``crc_valid`` in Verilog):

* ``i``: a :mod:`amaranth.lib.stream` of :func:`beat_layout` beats. ``data`` holds byte ``k``
  of the beat in bits ``8k .. 8k+7``; **byte 0 (the least significant byte) is the first byte
  of the stream** -- little-endian, as on an AXI-Stream ``tdata`` bus. ``n_bytes`` (0 to
  ``width``) counts the valid bytes, which are always bytes ``0 .. n_bytes-1``; the others are
  ignored. Any beat may be partial, not only the last, in multiples of ``granule`` bytes;
  an ``n_bytes`` above ``width`` or not a multiple of ``granule`` counts as ``width``.
  ``last`` ends the stream. An empty stream is one beat with ``n_bytes = 0`` and ``last = 1``
  (its CRC is 0).
* ``i.ready`` is always 1: one beat is accepted on every clock with ``i.valid`` (no
  backpressure). Producers should still honour ``ready``, so that a later version may stall.
* ``crc`` is the CRC of the stream so far (meaningful once ``crc_valid`` is 1);
  ``crc_valid`` rises on the clock after the ``last`` beat is accepted and stays high, with
  ``crc`` held, until the first beat of the next stream is accepted. If that beat follows the
  ``last`` beat directly, ``crc_valid`` is a single-cycle pulse, so a consumer must capture
  ``crc`` in the cycle where ``crc_valid`` is 1. A new stream always starts from the initial
  value; there is no need to reset between streams.

The critical path is the CRC register through one XOR network (at most 32 + 8 * ``width``
inputs per bit) and a ``width / granule + 1``-way select back into the register.
"""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.crc import Algorithm, catalog
from amaranth.lib.wiring import In, Out

__all__ = ["StreamCRC", "beat_layout", "update_matrices"]

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
        source = Signal(nbits)
        beat = self.i.payload

        m.d.comb += [
            self.i.ready.eq(1),
            # A beat after `last` (or the first after reset) starts from the initial value.
            source.eq(Mux(done, init, state)),
            self.crc.eq(state ^ self.algorithm.xor_output),
            self.crc_valid.eq(done),
        ]

        # One update network per byte count; `nexts[n]` is the state after n more bytes.
        nexts = {0: source}
        for nbytes in range(self.granule, self.width + 1, self.granule):
            payload = beat.data[: 8 * nbytes]
            nxt = Signal(nbits, name=f"after_{nbytes}")
            for i, mask in enumerate(update_matrices(nbytes, self.algorithm)):
                # Separate state and data taps: the state's reduction stays in one word.
                state_taps = mask & ((1 << nbits) - 1)
                data_taps = mask >> nbits
                m.d.comb += nxt[i].eq((source & state_taps).xor() ^ (payload & data_taps).xor())
            nexts[nbytes] = nxt

        with m.If(self.i.valid & self.i.ready):
            m.d.sync += done.eq(beat.last)
            with m.Switch(beat.n_bytes):
                for nbytes, nxt in nexts.items():
                    with m.Case(nbytes):
                        m.d.sync += state.eq(nxt)
                with m.Default():
                    m.d.sync += state.eq(nexts[self.width])

        return m

