"""An independent C2SP implementation for interop tests: `aics-tlog` from PyPI, in its own
venv `<repo>/.venv-c2sp` (made once, reused; it works from a clean checkout).

aics-tlog declares Python >= 3.12 but runs on 3.11, so it is installed with
`--ignore-requires-python`; it needs cryptography >= 50.0.2. If it cannot be installed the
test fails with pip's own error: interop is a requirement, not an optional extra.

`run_peer(request)` runs `tests/kit/c2sp_peer.py` in that venv with one JSON request on stdin
and returns its JSON answer; the script uses only aics-tlog and the standard library.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .paths import ROOT

VENV = ROOT / ".venv-c2sp"
PEER = Path(__file__).resolve().parent / "c2sp_peer.py"
REQUIREMENTS = ("aics-tlog", "cryptography>=50.0.2")


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        pytest.fail(
            f"{what} failed (exit {done.returncode}): {' '.join(command)}\n"
            f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}",
            pytrace=False,
        )


def third_party_venv(name: str, requirements: tuple[str, ...], module: str) -> Path:
    """`<repo>/<name>/bin/python` with `requirements` from PyPI installed and `module`
    importable; made under a lock, so parallel test processes install it once. The C2SP
    peers on PyPI declare Python >= 3.12 and run on 3.11: `--ignore-requires-python`."""
    venv = ROOT / name
    python = venv / "bin" / "python"
    marker = venv / f".{module.replace('_', '-')}-installed"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(ROOT / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            if not python.exists():
                _run([sys.executable, "-m", "venv", "--clear", str(venv)], "python3 -m venv")
            pip = [str(python), "-m", "pip", "--disable-pip-version-check", "-q", "install"]
            _run([*pip, "--ignore-requires-python", *requirements], f"pip install {module}")
            _run([str(python), "-c", f"import {module}"], f"import {module}")
            marker.write_text("\n".join(requirements) + "\n")
    return python


def ensure_venv() -> Path:
    """The venv's python, with aics-tlog importable."""
    return third_party_venv(VENV.name, REQUIREMENTS, "aics_tlog")


def run_peer(python: Path, request: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [str(python), str(PEER)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"c2sp_peer.py failed: {done.stderr}")
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer
