"""`ceaz report`: figures and an HTML page for a real field, through the command line."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from ceaz import cli, datasets, report  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def theta_npy(tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "theta.npy"
    np.save(path, np.asarray(datasets.load("colpex_theta")))
    return path


def test_report_writes_figures_and_page(theta_npy, tmp_path, capsys):
    out = tmp_path / "rep"
    args = ["report", theta_npy, out, "--rel", "1e-2,1e-3,1e-4", "--name", "colpex theta"]
    assert cli.main([str(a) for a in args]) == 0
    page = (out / "index.html").read_text()
    for name in report.FIGURES:
        assert (out / name).read_bytes()[:8] == PNG_MAGIC
        assert f'src="{name}"' in page
    rows = re.findall(r"<tr><td>(\w+)</td><td>([0-9e.+-]+)</td>", page)
    codecs = {c for c, _ in rows}
    assert "ceaz" in codecs and len(rows) == 3 * len(codecs)
    assert "<b>NO</b>" not in page  # every codec held every bound
    assert "colpex theta" in page
    printed = capsys.readouterr().out
    assert "index.html" in printed and "ceaz  at relative bound 0.001" in printed
    if set(report.available_peers()) == {"SZ3", "ZFP"}:
        assert codecs == {"ceaz", "SZ3", "ZFP"}


def test_report_of_a_field_with_nan_leaves_out_the_peers(tmp_path):
    x = np.sin(np.arange(3000) / 30.0)
    x[10] = np.nan
    result = report.make_report(x, tmp_path, "line", bounds=[1e-2], detail=1e-2)
    assert {p.codec for p in result.points} == {"ceaz"}
    assert all(p.bound_held for p in result.points)
    assert all(f.exists() for f in result.figures)
    if report.available_peers():
        assert any("NaN" in n for n in result.notes)


@pytest.mark.parametrize(("option", "value"), [("--rel", "1e-2,2"), ("--detail", "0")])
def test_report_refuses_bad_bounds(theta_npy, tmp_path, capsys, option, value):
    assert cli.main(["report", str(theta_npy), str(tmp_path / "r"), option, value]) == 2
    assert "ceaz: error:" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
