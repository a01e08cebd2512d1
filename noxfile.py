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


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The test suite (pytest, hypothesis) on real and adversarial data."""
    session.install("-e", ".[test]")
    session.run("pytest", "-n", "2", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff: lint and import order."""
    session.install("ruff>=0.5")
    session.run("ruff", "check", ".")


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """The main job: compress a real scientific field, decompress it and report quality."""
    session.install("-e", ".[data]")
    session.run("python", "-m", "ceaz.demo", *session.posargs)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Ratio, quality and throughput beside SZ3 and ZFP; writes bench/results.{json,md}."""
    session.install("-e", ".[bench]")
    session.run("python", "bench/run.py", *session.posargs)


@nox.session(python=PYTHON)
def train(session: nox.Session) -> None:
    """Rebuild the offline codebook data from the real training fields."""
    session.install("-e", ".[data]")
    session.run("python", "-m", "ceaz.train", *session.posargs)
