"""The command line: round trips through files, what info/verify report, exit statuses, and
that outputs are atomic (an interrupted or failed run leaves nothing, and damages nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ceaz import cli, codec
from ceaz.codec import StreamReader
from ceaz.quantizer import within_bound

SW = Path(__file__).resolve().parents[1] / "sw"


def run(*args) -> int:
    return cli.main([str(a) for a in args])


def field(shape: tuple[int, ...], dtype=np.float32, seed: int = 0) -> np.ndarray:
    """A smooth field with a few NaNs and infinities, like real model output."""
    rng = np.random.default_rng(seed)
    x = np.cumsum(rng.standard_normal(shape), axis=-1) + 50 * np.sin(np.arange(shape[-1]) / 7)
    x = x.astype(dtype)
    flat = x.reshape(-1)
    flat[rng.choice(flat.size, size=min(5, flat.size), replace=False)] = np.nan
    flat[flat.size // 2] = np.inf
    return x


def header_of(path: Path):
    with open(path, "rb") as f:
        return StreamReader(f).header


def assert_within(x: np.ndarray, y: np.ndarray, eb_f: float) -> None:
    assert x.shape == y.shape and x.dtype == y.dtype
    special = ~np.isfinite(x)
    np.testing.assert_array_equal(np.isnan(y[special]), np.isnan(x[special]))
    np.testing.assert_array_equal(y[special & ~np.isnan(x)], x[special & ~np.isnan(x)])
    assert within_bound(x[~special], y[~special], eb_f).all()


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".partial"))


# --- round trips ------------------------------------------------------------------------------


def test_npy_round_trip(tmp_path, capsys):
    x = field((12, 20, 30))
    np.save(tmp_path / "x.npy", x)
    assert run("compress", tmp_path / "x.npy", tmp_path / "x.cz", "--rel", "1e-3") == 0
    line = capsys.readouterr().out
    assert "ratio" in line and "bits/value" in line and "MB/s" in line
    assert run("decompress", tmp_path / "x.cz", tmp_path / "y.npy") == 0
    y = np.load(tmp_path / "y.npy")
    h = header_of(tmp_path / "x.cz")
    assert h.eb_f <= 1e-3 * (h.finite_max - h.finite_min)
    assert_within(x, y, h.eb_f)
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "shape", [(1000,), (30, 40), (6, 7, 8), (2, 3, 4, 5)], ids=["1d", "2d", "3d", "4d"]
)
@pytest.mark.parametrize("suffix,dtype", [(".f32", np.float32), (".f64", np.float64)])
def test_raw_round_trip(tmp_path, shape, suffix, dtype):
    x = field(shape, dtype)
    src, cz, out = tmp_path / f"x{suffix}", tmp_path / "x.cz", tmp_path / f"y{suffix}"
    x.tofile(src)
    spec = ",".join(map(str, shape))
    assert run("compress", src, cz, "--abs", "0.01", "--shape", spec, "--chunk-values", "50") == 0
    h = header_of(cz)
    assert h.shape == shape and h.dtype == np.dtype(dtype) and h.n_chunks > 1
    assert run("decompress", cz, out) == 0
    assert_within(x, np.fromfile(out, dtype=dtype).reshape(shape), h.eb_f)
    assert run("decompress", cz, tmp_path / "y.npy") == 0
    assert np.load(tmp_path / "y.npy").shape == shape
    assert run("verify", src, cz, "--no-progress") == 0  # shape defaults to the stream's


def test_compress_options_reach_the_header(tmp_path):
    x = field((40, 50))
    x[0, 0] = -1e34
    np.save(tmp_path / "x.npy", x)
    cz = tmp_path / "x.cz"
    assert run("compress", tmp_path / "x.npy", cz, "--abs", "0.5", "--radius", "64",
               "--chunk-values", "500", "--fill", "-1e34") == 0
    h = header_of(cz)
    assert (h.radius, h.eb_user) == (64, 0.5)
    assert h.fill_bits == int(np.float32(-1e34).view(np.uint32))
    assert h.n_chunks == 4
    assert run("compress", tmp_path / "x.npy", cz, "--abs", "0.5", "--fill", "none") == 0
    assert header_of(cz).fill_bits is None
    assert run("verify", tmp_path / "x.npy", cz) == 0


def test_npy_reshaped_by_shape_and_raw_dtype_override(tmp_path):
    x = field((24, 10), np.float64)
    np.save(tmp_path / "x.npy", x)
    assert run("compress", tmp_path / "x.npy", tmp_path / "a.cz", "--abs", "1e-3",
               "--shape", "2,3,4,10") == 0
    assert header_of(tmp_path / "a.cz").shape == (2, 3, 4, 10)
    assert run("verify", tmp_path / "x.npy", tmp_path / "a.cz") == 0  # same values, same order
    x.tofile(tmp_path / "x.bin")
    assert run("compress", tmp_path / "x.bin", tmp_path / "b.cz", "--abs", "1e-3",
               "--shape", "24,10", "--dtype", "f64") == 0
    assert header_of(tmp_path / "b.cz").dtype == np.float64


# --- info ----------------------------------------------------------------------------------------


@pytest.fixture
def compressed(tmp_path) -> tuple[Path, Path, np.ndarray]:
    x = field((30, 8, 16))
    np.save(tmp_path / "x.npy", x)
    cz = tmp_path / "x.cz"
    assert cli.main(["compress", str(tmp_path / "x.npy"), str(cz), "--rel", "1e-4",
                     "--chunk-values", "128"]) == 0
    return tmp_path / "x.npy", cz, x


def test_info_text_summarises_many_chunks(compressed, capsys):
    _, cz, _ = compressed
    capsys.readouterr()
    assert run("info", cz) == 0
    out = capsys.readouterr().out
    for key in ("float32", "30x8x16", "rel", "eb_f", "step S", "radius", "1x8x16 (30 chunks)",
                "nan (0x7fc00000)", "sync interval", "finite min/max", "ratio"):
        assert key in out, key
    assert "10 more chunks" in out
    assert "\n      9  9:10, 0:8, 0:16 " in out and "\n     29  29:30, 0:8, 0:16 " in out
    assert "\n     15  15:16" not in out
    assert run("info", cz, "--all") == 0
    out = capsys.readouterr().out
    assert "\n     15  15:16, 0:8, 0:16 " in out and "more chunks" not in out


def test_info_json(compressed, capsys):
    _, cz, x = compressed
    capsys.readouterr()
    assert run("info", cz, "--json") == 0
    info = json.loads(capsys.readouterr().out)
    h = info["header"]
    assert h["dtype"] == "float32" and h["shape"] == [30, 8, 16] and h["mode"] == "rel"
    assert h["fill_value"] == "nan" and h["n_chunks"] == 30 == len(info["chunks"])
    s = info["summary"]
    assert s["file_bytes"] == cz.stat().st_size
    assert s["ratio"] == pytest.approx(x.nbytes / cz.stat().st_size)
    assert sum(c["bytes"] for c in info["chunks"]) < s["file_bytes"]
    assert sum(c["values"] for c in info["chunks"]) == x.size
    assert s["fill"] == 5 and s["verbatim"] >= 1  # the NaNs, and the infinity
    assert {"index", "origin", "shape", "bits_per_value", "outliers"} <= set(info["chunks"][0])


# --- verify --------------------------------------------------------------------------------------


def test_verify_reports_quality(compressed, capsys):
    orig, cz, _ = compressed
    capsys.readouterr()
    assert run("verify", orig, cz) == 0
    out = capsys.readouterr().out
    assert "held" in out and "PSNR" in out and "NRMSE" in out and "all bit-exact" in out
    assert run("verify", orig, cz, "--json") == 0
    r = json.loads(capsys.readouterr().out)
    assert r["ok"] and r["bound_held"] and r["special_exact"] and r["n_violations"] == 0
    assert 0 < r["max_error"] <= r["eb_f"] and r["psnr_db"] > 60 and r["n_special"] == 6


def test_verify_fails_when_bound_broken(compressed, tmp_path, capsys):
    _, cz, x = compressed
    h = header_of(cz)
    wrong = x.copy()
    wrong[3, 4, 5] += 3 * h.eb_f
    np.save(tmp_path / "wrong.npy", wrong)
    capsys.readouterr()
    assert run("verify", tmp_path / "wrong.npy", cz, "--json") == 1
    r = json.loads(capsys.readouterr().out)
    assert not r["bound_held"] and r["n_violations"] == 1 and not r["ok"]
    assert r["max_error"] > h.eb_f
    assert run("verify", tmp_path / "wrong.npy", cz) == 1
    assert "BROKEN by 1 values" in capsys.readouterr().out


def test_verify_fails_when_special_value_differs(compressed, tmp_path, capsys):
    _, cz, x = compressed
    wrong = x.copy()
    wrong.reshape(-1)[np.flatnonzero(np.isnan(x))[0]] = -np.inf
    np.save(tmp_path / "wrong.npy", wrong)
    capsys.readouterr()
    assert run("verify", tmp_path / "wrong.npy", cz) == 1
    assert "NOT all bit-exact" in capsys.readouterr().out


def test_verify_shape_mismatch_is_an_error(compressed, tmp_path, capsys):
    _, cz, x = compressed
    np.save(tmp_path / "other.npy", x[:-1])
    assert run("verify", tmp_path / "other.npy", cz) == 2
    assert "the stream holds (30, 8, 16)" in capsys.readouterr().err
    x.tofile(tmp_path / "x.f32")
    assert run("verify", tmp_path / "x.f32", cz, "--shape", "16,8,30") == 2
    x.astype(np.float64).tofile(tmp_path / "x.f64")
    assert run("verify", tmp_path / "x.f64", cz) == 2
    assert "float64" in capsys.readouterr().err


# --- errors: exit status 2, a message, no traceback, no output -------------------------------


@pytest.mark.parametrize(
    "bound,message",
    [("0", "must be positive, got 0"), ("-1", "must be positive, got -1"),
     ("nan", "positive finite number, got nan"), ("inf", "got inf"), ("abc", "'abc'")],
)
def test_bad_bound(tmp_path, capsys, bound, message):
    np.save(tmp_path / "x.npy", field((10,)))
    assert run("compress", tmp_path / "x.npy", tmp_path / "x.cz", "--abs", bound) == 2
    err = capsys.readouterr().err
    assert err.startswith("ceaz: error: error bound") and message in err
    assert not (tmp_path / "x.cz").exists()


def test_bound_flags_are_exclusive_and_required(tmp_path, capsys):
    np.save(tmp_path / "x.npy", field((10,)))
    assert run("compress", tmp_path / "x.npy", tmp_path / "x.cz") == 2
    assert run("compress", tmp_path / "x.npy", tmp_path / "x.cz", "--abs", "1", "--rel", "1") == 2
    assert "--abs" in capsys.readouterr().err


def test_bad_inputs(tmp_path, capsys):
    x = field((10, 10))
    x.tofile(tmp_path / "x.f32")
    out = tmp_path / "x.cz"
    cases = [
        (["--shape", "10,11"], "shape (10, 11) holds 110 values but"),
        (["--shape", "10,x"], "comma-separated integers"),
        (["--shape", "0,100"], "at least 1"),
        ([], "needs a shape"),
        (["--shape", "100", "--dtype", "f64"], "contradicts"),
        (["--shape", "100", "--radius", "1"], "radius must be"),
        (["--shape", "100", "--chunk-values", "0"], "--chunk-values"),
        (["--shape", "100", "--fill", "zero"], "--fill"),
        (["--shape", "100", "--max-line", "0"], "--max-line"),
        (["--shape", "100", "--max-plane", "64", "--max-line", "128"], "--max-plane"),
    ]
    for extra, message in cases:
        assert run("compress", tmp_path / "x.f32", out, "--abs", "1", *extra) == 2, extra
        err = capsys.readouterr().err
        assert err.startswith("ceaz: error: ") and message in err, (extra, err)
    (tmp_path / "odd.f32").write_bytes(b"\0" * 7)
    assert run("compress", tmp_path / "odd.f32", out, "--abs", "1", "--shape", "7") == 2
    assert "7 bytes" in capsys.readouterr().err
    x.tofile(tmp_path / "x.dat")
    assert run("compress", tmp_path / "x.dat", out, "--abs", "1", "--shape", "100") == 2
    assert "--dtype" in capsys.readouterr().err
    for name, arr, message in [
        ("int.npy", np.arange(10), "int64"),
        ("be.npy", field((10,)).astype(">f4"), "big-endian"),
        ("fortran.npy", np.asfortranarray(field((4, 5))), "Fortran"),
    ]:
        np.save(tmp_path / name, arr)
        assert run("compress", tmp_path / name, out, "--abs", "1") == 2
        assert message in capsys.readouterr().err
    assert not out.exists() and leftovers(tmp_path) == []


@pytest.mark.parametrize("command", ["compress", "decompress", "info", "verify"])
def test_missing_file(tmp_path, capsys, command):
    missing = tmp_path / "missing.npy"
    args = {
        "compress": [missing, tmp_path / "o.cz", "--abs", "1"],
        "decompress": [tmp_path / "missing.cz", tmp_path / "o.npy"],
        "info": [tmp_path / "missing.cz"],
        "verify": [missing, tmp_path / "missing.cz"],
    }[command]
    assert run(command, *args) == 2
    err = capsys.readouterr().err
    assert err.startswith("ceaz: error: no such file") and "missing" in err
    assert list(tmp_path.iterdir()) == []


def test_decompress_output_checks(compressed, tmp_path, capsys):
    _, cz, _ = compressed
    assert run("decompress", cz, tmp_path / "y.f64") == 2
    assert "float32" in capsys.readouterr().err
    assert run("decompress", cz, tmp_path / "y.npz") == 2
    assert "use .npy, .f32 or .f64" in capsys.readouterr().err
    assert run("decompress", cz, tmp_path / "nodir" / "y.npy") == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "y.f64").exists() and leftovers(tmp_path) == []


def _damage(cz: Path, how: str) -> None:
    data = bytearray(cz.read_bytes())
    if how == "truncate":
        data = data[: len(data) - 10]
    elif how == "header":
        data[40] ^= 0x01
    elif how == "chunk":
        with open(cz, "rb") as f:
            data[int(StreamReader(f).offsets[-1]) + 100] ^= 0x10  # in its code-length table
    else:
        data = bytearray(b"\x93NUMPY" + bytes(200))
    cz.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "how,message",
    [("truncate", "truncated"), ("header", "header CRC mismatch"),
     ("chunk", "CRC mismatch, the chunk is damaged"), ("other", "not a ceaz stream")],
)
def test_corrupt_stream(compressed, tmp_path, capsys, how, message):
    orig, cz, _ = compressed
    _damage(cz, how)
    out = tmp_path / "y.npy"
    out.write_bytes(b"precious")
    for args in (["decompress", cz, out], ["verify", orig, cz], ["info", cz]):
        assert run(*args) == 2, args
        err = capsys.readouterr().err
        assert err.startswith(f"ceaz: error: {cz}: ") and message in err, err
    assert out.read_bytes() == b"precious" and leftovers(tmp_path) == []


# --- atomic outputs ------------------------------------------------------------------------------


def _interrupt_after(monkeypatch, module, name: str, calls: int) -> None:
    real = getattr(module, name)
    seen = []

    def fake(*args, **kwargs):
        seen.append(1)
        if len(seen) > calls:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, fake)


@pytest.mark.parametrize("existing", [False, True])
def test_interrupted_compress_leaves_nothing(tmp_path, monkeypatch, capsys, existing):
    np.save(tmp_path / "x.npy", field((20, 30)))
    out = tmp_path / "x.cz"
    if existing:
        out.write_bytes(b"old output")
    _interrupt_after(monkeypatch, codec, "code_chunk", 3)
    rc = run("compress", tmp_path / "x.npy", out, "--abs", "0.1", "--chunk-values", "60")
    assert rc == 130 and "interrupted" in capsys.readouterr().err
    assert (out.read_bytes() == b"old output") if existing else not out.exists()
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("suffix", [".npy", ".f32"])
def test_interrupted_decompress_leaves_nothing(compressed, tmp_path, monkeypatch, suffix):
    _, cz, _ = compressed
    out = tmp_path / f"y{suffix}"
    out.write_bytes(b"old output")
    _interrupt_after(monkeypatch, codec, "decode_chunks", 0)
    assert run("decompress", cz, out) == 130
    assert out.read_bytes() == b"old output" and leftovers(tmp_path) == []


def test_failed_compress_keeps_existing_output(tmp_path, monkeypatch):
    np.save(tmp_path / "x.npy", field((20, 30)))
    out = tmp_path / "x.cz"
    out.write_bytes(b"old output")

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(codec, "code_chunk", broken)
    assert run("compress", tmp_path / "x.npy", out, "--abs", "0.1") == 2
    assert out.read_bytes() == b"old output" and leftovers(tmp_path) == []


def test_output_replaces_existing_file_and_refuses_input(tmp_path, capsys):
    np.save(tmp_path / "x.npy", field((20, 30)))
    out = tmp_path / "x.cz"
    out.write_bytes(b"old output")
    assert run("compress", tmp_path / "x.npy", out, "--abs", "0.1") == 0
    assert out.read_bytes()[:4] == b"CEAZ"
    assert run("compress", tmp_path / "x.npy", tmp_path / "x.npy", "--abs", "0.1") == 2
    assert "is the input file" in capsys.readouterr().err
    assert np.load(tmp_path / "x.npy").shape == (20, 30)


# --- as a program --------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SW), env.get("PYTHONPATH")]))
    return env


def test_python_m_ceaz_cli(tmp_path):
    def ceaz(*args):
        return subprocess.run(
            [sys.executable, "-m", "ceaz.cli", *map(str, args)],
            capture_output=True, text=True, env=_env(), timeout=120,
        )

    x = field((16, 16))
    np.save(tmp_path / "x.npy", x)
    r = ceaz("compress", tmp_path / "x.npy", tmp_path / "x.cz", "--rel", "1e-3")
    assert r.returncode == 0 and "ratio" in r.stdout and r.stderr == ""
    r = ceaz("verify", tmp_path / "x.npy", tmp_path / "x.cz")
    assert r.returncode == 0 and "OK" in r.stdout
    _damage(tmp_path / "x.cz", "chunk")
    r = ceaz("decompress", tmp_path / "x.cz", tmp_path / "y.npy")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("ceaz: error: ") and "Traceback" not in r.stderr
    r = ceaz("compress", tmp_path / "x.npy", tmp_path / "z.cz", "--abs", "-1")
    assert (r.returncode, r.stderr) == (2, "ceaz: error: error bound must be positive, got -1\n")
    assert ceaz("--help").returncode == 0 and ceaz("frobnicate").returncode == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.cz", "x.npy"]


# --- memory ------------------------------------------------------------------------------------
# Peak RSS of compress/decompress in a child process on 64 MB and 128 MB raw files: about 5 s.
# Streaming means the peak must not grow with the file (below 64 MB the heap is still warming
# up over the first few 4M-value batches, so smaller files would blur the comparison); the
# absolute limit is over a bare import, which holds the interpreter, numpy and numba (~95 MB).
# The child reads VmHWM from /proc: getrusage's ru_maxrss (SELF or CHILDREN alike) carries the
# parent's high-water mark across fork and exec on Linux, so it would report pytest's own peak.

_RSS_CHILD = """
import sys
try:
    from ceaz.cli import main
    import ceaz._jit  # numba: part of the baseline, not of the streaming cost
    rc = main(sys.argv[1:]) if len(sys.argv) > 1 else 0
finally:
    with open("/proc/self/status") as f:
        hwm = next(line.split()[1] for line in f if line.startswith("VmHWM:"))
    print("RSS", hwm, file=sys.stderr)
sys.exit(rc)
"""
MB = 1 << 20


def _peak_rss(*args) -> int:
    """Peak RSS in bytes of one ceaz command in a fresh process (VmHWM is in kB)."""
    r = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, *map(str, args)],
        capture_output=True, text=True, env=_env(), timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return int(r.stderr.rsplit("RSS", 1)[1]) * 1024


@pytest.fixture(scope="module")
def rss(tmp_path_factory) -> dict[str, int]:
    if not os.path.exists("/proc/self/status"):
        pytest.skip("needs Linux: VmHWM from /proc, and madvise to drop pages")
    d = tmp_path_factory.mktemp("rss")
    result = {"import": _peak_rss()}
    rng = np.random.default_rng(0)
    for mb in (64, 128):
        with open(d / f"x{mb}.f32", "wb") as f:
            for block in range(mb // 16):  # 16 MB at a time
                t = np.arange(block * 4 * MB, (block + 1) * 4 * MB, dtype=np.float32)
                x = 100 * np.sin(t * np.float32(1e-3)) + rng.standard_normal(t.size, np.float32)
                x.astype(np.float32).tofile(f)
        result[f"compress{mb}"] = _peak_rss(
            "compress", d / f"x{mb}.f32", d / f"x{mb}.cz", "--rel", "1e-4",
            "--shape", f"{mb},256,1024", "--chunk-values", str(1 << 18), "--no-progress",
        )
        result[f"decompress{mb}"] = _peak_rss("decompress", d / f"x{mb}.cz", d / f"y{mb}.f32")
        assert (d / f"y{mb}.f32").stat().st_size == mb * MB
        for name in (f"x{mb}.f32", f"y{mb}.f32"):
            (d / name).unlink()
    print({k: f"{v / MB:.0f} MB" for k, v in result.items()})
    return result


@pytest.mark.parametrize("command", ["compress", "decompress"])
def test_peak_rss_is_bounded(rss, command):
    extra = rss[f"{command}64"] - rss["import"]
    assert extra < 160 * MB, f"{command} of 64 MB used {extra / MB:.0f} MB over a bare import"


def test_decompress_rss_does_not_grow_with_the_file(rss):
    growth = rss["decompress128"] - rss["decompress64"]
    assert growth < 32 * MB, f"64 MB more output cost {growth / MB:.0f} MB more RSS"


def test_compress_rss_does_not_grow_with_the_file(rss):
    growth = rss["compress128"] - rss["compress64"]
    assert growth < 32 * MB, f"64 MB more input cost {growth / MB:.0f} MB more RSS"
