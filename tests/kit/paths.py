"""Where things are, for tests at any depth below tests/: the repository root, tests/ itself,
and the scripts of tools/ loaded by their file path (tools/ is not a package, and a
`sys.path` insert would leak into every test after it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent


def tool(name: str) -> ModuleType:
    """`tools/<name>.py` as a module, loaded afresh."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
