"""The on-board self-test wrapper (bitstreams/selftest.py) in Amaranth's simulator.

It proves the parts the board cannot debug for us: the init writer configures the compressor,
the pattern source matches its Python model, and the expected CRCs from the model agree with
what the compressor emits, so ``crc_ok`` lights on the board only if the silicon is right.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("amaranth")
pytest.importorskip("numba")

ROOT = Path(__file__).resolve().parent.parent


def _load():
    spec = importlib.util.spec_from_file_location("_bitstreams_selftest",
                                                  ROOT / "bitstreams" / "selftest.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


selftest = _load()

#: Small enough for the Python simulator: 512 values a chunk, a 130-symbol alphabet.
SMALL = dict(lanes=1, shape=(2, 4, 64), sync_interval=128, radius=64, max_line=64,
             max_plane=256, max_sync=16, counter_shift=0, heartbeat_bit=4)


def test_pattern_model_is_periodic_and_has_escapes():
    shape = SMALL["shape"]
    first = selftest.chunk_values(0, shape)
    assert first.shape == shape
    assert (selftest.chunk_values(selftest.PERIOD, shape) == first).all()
    assert not (selftest.chunk_values(1, shape) == first).all()
    crcs = selftest.expected_crcs(shape, 64, 128, 1)
    assert len(set(crcs)) == selftest.PERIOD


def test_init_writes_end_with_commit():
    writes = selftest.init_writes((2, 32, 256), 512, 4096)
    cb_data = selftest.regmap.by_name("CB_DATA").address
    assert sum(address == cb_data for address, _ in writes) == 2 * 512 + 2
    assert writes[-1] == (selftest.regmap.by_name("CB_COMMIT").address, 1)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="max_plane"):
        selftest.SelfTest(shape=(2, 64, 256), max_plane=1 << 12)
    with pytest.raises(ValueError, match="sync_interval"):
        selftest.SelfTest(lanes=4, sync_interval=6)
    with pytest.raises(ValueError, match="lanes"):
        selftest.SelfTest(lanes=16)


def _simulate(dut, chunks: int) -> dict:
    """Run until ``chunks`` chunks are checked or one fails; the wrapper's outputs then."""
    from amaranth.sim import Simulator

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    result = {}

    async def bench(ctx):
        for _ in range(40_000):
            await ctx.tick()
            if ctx.get(dut.checked) >= chunks or ctx.get(dut.crc_fail):
                break
        result.update(checked=ctx.get(dut.checked), ok=ctx.get(dut.crc_ok),
                      fail=ctx.get(dut.crc_fail), error=ctx.get(dut.error),
                      init=ctx.get(dut.init_done))

    sim.add_testbench(bench)
    sim.run()
    return result


@pytest.mark.parametrize(("lanes", "radius"), [(1, 64), (1, 512), (4, 64)])
def test_two_chunks_match_the_model(lanes, radius):
    """radius 512 is the board's: its 1026-entry codebook goes through the init writer."""
    result = _simulate(selftest.SelfTest(**{**SMALL, "lanes": lanes, "radius": radius}),
                       chunks=2)
    assert result["init"], result
    assert not result["error"], result
    assert not result["fail"], result
    assert result["checked"] >= 2 and result["ok"], result


def test_a_wrong_expected_crc_is_caught():
    """The check can fail: with one expected CRC flipped, crc_fail rises and crc_ok stays low."""
    dut = selftest.SelfTest(**SMALL)
    dut.crcs[1] ^= 1
    result = _simulate(dut, chunks=3)
    assert result["fail"] and not result["ok"], result
    assert result["checked"] == 2, result
