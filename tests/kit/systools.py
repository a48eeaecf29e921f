"""System tools some tests need (Debian's faketime, chromium): installed the way
`tools/dev.py test` installs them (as root, with apt-get, quietly), else the test skips
saying why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .paths import ROOT


def ensure_tool(path: Path, command: str, what: str, timeout: float) -> Path:
    """`path` once `tools/dev.py COMMAND` has had its chance to install it."""
    if not path.exists():
        subprocess.run(
            [sys.executable, str(ROOT / "tools" / "dev.py"), command],
            capture_output=True,
            check=False,
            timeout=timeout,
        )
    if not path.exists():
        pytest.skip(
            f"{what} ({path}) is missing and cannot be installed here "
            f"(tools/dev.py installs Debian's {command} only as root, with apt-get)"
        )
    return path
