"""docs/dask.md: its example runs as documented (small array, two worker processes), and the
listing in the page is the file that runs."""

from __future__ import annotations

import re
import runpy
import warnings
from pathlib import Path

import pytest

pytest.importorskip("distributed")
pytest.importorskip("zarr")

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docs" / "examples" / "dask_to_zarr.py"
PAGE = ROOT / "docs" / "dask.md"


def test_page_lists_the_example_verbatim():
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert SCRIPT.read_text() in blocks


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_example_compresses_a_dask_array_on_a_local_cluster(tmp_path, zarr_format):
    # run_path: the example's functions are not importable by name, so Dask ships them to
    # the worker processes by value, as it does for a script run as __main__.
    example = runpy.run_path(str(SCRIPT), run_name="dask_example")
    args = [str(tmp_path / "field.zarr"), "--shape", "32,64,64", "--chunks", "8,64,64"]
    args += ["--eb", "1e-3", "--workers", "2", "--zarr-format", str(zarr_format)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Zarr 3: numcodecs codecs are outside its spec
        result = example["main"](args)
    assert result["n_chunks"] == 4
    assert result["max_error"] <= 1e-3
    assert result["stored_mb"] < result["raw_mb"] / 2
