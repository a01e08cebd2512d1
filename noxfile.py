"""Every workflow of ceaz as a nox session: tests, lint, the demo, benchmarks and training.

Each session installs what it needs into its own virtualenv, so a fresh machine with Python
3.11 and g++ needs only `pip install nox`.
"""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint"]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

PYTHON = "3.11"
#: pynq and its metadata packages, installed without their dependencies: pynq 4.0 declares
#: numpy<2 but runs on numpy 2 here; the `card` extra lists what it needs at run time.
PYNQ = ["pynq==4.0.0", "pynqmetadata==0.2.0", "pynqutils==0.1.3"]


def install_card(session: nox.Session, extras: str) -> None:
    session.install("-e", f".[{extras},card]")
    session.install("--no-deps", *PYNQ)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The test suite (pytest, hypothesis) on real and adversarial data, the simulated card,
    and the cocotb benches that hold the RTL bit-exact with the model (sim/)."""
    install_card(session, "test")
    session.run("pytest", "-n", "2", "tests", "sim", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff: lint and import order."""
    session.install("ruff>=0.5")
    session.run("ruff", "check", ".")


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """The main job: compress real scientific fields through the simulated card (the RTL under
    Verilator, driven by the PYNQ driver), decompress on the CPU and report quality."""
    install_card(session, "data")
    session.run("python", "-m", "ceaz.demo", *session.posargs)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Ratio, quality and throughput beside SZ3 and ZFP; writes bench/results.{json,md}."""
    session.install("-e", ".[bench]")
    session.run("python", "bench/run.py", *session.posargs)


@nox.session(python=PYTHON)
def fixed_ratio(session: nox.Session) -> None:
    """Fixed-ratio mode on the real fields: asked against achieved (bench/fixed_ratio.md)."""
    session.install("-e", ".[data]")
    session.run("python", "bench/fixed_ratio.py", *session.posargs)


@nox.session(python=PYTHON)
def construction(session: nox.Session) -> None:
    """Codebook construction, full build against rank reassignment, on the real fields
    (bench/construction.md; the decision is in docs/adaptation.md)."""
    session.install("-e", ".[data]")
    session.run("python", "bench/construction.py", *session.posargs)


@nox.session(python=PYTHON)
def train(session: nox.Session) -> None:
    """Rebuild the offline codebook data from the real training fields."""
    session.install("-e", ".[data]")
    session.run("python", "-m", "ceaz.train", *session.posargs)


@nox.session(python=PYTHON)
def verilog(session: nox.Session) -> None:
    """Verilog of the named configurations (bitstreams/flow.py verilog) into build/bitstreams."""
    session.install("-e", ".[synth]")
    session.run("python", "bitstreams/flow.py", "verilog", *session.posargs)


@nox.session(python=PYTHON)
def synth(session: nox.Session) -> None:
    """Out-of-context ECP5 synthesis and place-and-route; writes bitstreams/reports/synth.*.

    e.g. `nox -s synth -- --config lanes1 --config lanes4` (default: every configuration).
    """
    session.install("-e", ".[synth]")
    session.run("python", "bitstreams/flow.py", "synth", *session.posargs)


@nox.session(python=PYTHON)
def bitstream(session: nox.Session) -> None:
    """A self-testing ULX3S-85F bitstream (bitstreams/selftest.py) into build/selftest.

    e.g. `nox -s bitstream -- --lanes 2`. The script runs the YoWASP builds of yosys, nextpnr
    and ecppack unless YOSYS etc. name others, and leaves programming the board to the user.
    """
    session.install("-e", ".[synth]")
    session.run("python", "bitstreams/selftest.py", *session.posargs)


@nox.session(python=PYTHON)
def vivado(session: nox.Session) -> None:
    """PYNQ overlay projects (IP-XACT + block design TCL) for PYNQ-Z2, ZCU104 and KV260.

    Runs Vivado when it is on PATH; otherwise stops after writing build/vivado/ and says so.
    e.g. `nox -s vivado -- --board kv260 --lanes 4` for one board.
    """
    session.install("-e", ".[hw]")
    if session.posargs:
        session.run("python", "bitstreams/vivado.py", *session.posargs)
        return
    for board in ("pynq-z2", "zcu104", "kv260"):
        session.run("python", "bitstreams/vivado.py", "--board", board)


@nox.session(python=PYTHON)
def synth_smoke(session: nox.Session) -> None:
    """CI: synthesis, placement and routing of the whole 1-lane core in its `smoke`
    configuration (pytest -m synth), about five minutes."""
    session.install("-e", ".[synth]")
    session.run("pytest", "-m", "synth", "tests/test_bitstreams.py", "tests/test_outreg.py",
                "tests/test_ccu2c_alu.py", *session.posargs)
