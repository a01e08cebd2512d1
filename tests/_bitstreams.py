"""Import a module of bitstreams/ (a folder of scripts, not a package) in the tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

FOLDER = Path(__file__).resolve().parent.parent / "bitstreams"


def load(name: str):
    """The module ``bitstreams/<name>.py``, with that folder on the path for its imports."""
    if str(FOLDER) not in sys.path:
        sys.path.insert(0, str(FOLDER))
    spec = importlib.util.spec_from_file_location(f"_bitstreams_{name}", FOLDER / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
