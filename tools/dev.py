#!/usr/bin/env python3
"""One entry point for a fresh machine: needs only Python 3.11+ and the package registries.

    python3 tools/dev.py run     # the HTTP service on its embedded default (SQLite in ./data)
    python3 tools/dev.py test    # ruff, mypy --strict on src/, and the whole pytest suite
    python3 tools/dev.py faketime   # install libfaketime (the clock-jump tests need it)

Both create `.venv` beside `pyproject.toml` and install the project into it (with its
test extras) the first time, and again whenever `pyproject.toml` changes. `test` also
installs libfaketime (Debian's `faketime`) when it is missing and this runs as root, quietly;
the clock-jump tests skip, saying why, only where that is impossible. Standard library
only, so it runs before anything is installed.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
STAMP = VENV / ".capability-anchor-installed"
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def _bin(name: str) -> Path:
    sub = "Scripts" if os.name == "nt" else "bin"
    return VENV / sub / name


def _wanted_stamp() -> str:
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    return f"{sys.version_info[:2]} {digest}"


def ensure_env() -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - this script runs before any check
        sys.exit(f"capability-anchor needs Python 3.11 or newer, this is {sys.version.split()[0]}")
    if STAMP.exists() and STAMP.read_text() == _wanted_stamp() and _bin("python").exists():
        return
    if not _bin("python").exists():
        print(f"creating {VENV}", file=sys.stderr)
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    pip = [str(_bin("python")), "-m", "pip", "--disable-pip-version-check", "-q"]
    print("installing capability-anchor and its test dependencies", file=sys.stderr)
    subprocess.run([*pip, "install", "--upgrade", "pip"], check=True)
    subprocess.run([*pip, "install", "-e", f"{ROOT}[test]"], check=True)
    STAMP.write_text(_wanted_stamp())


def ensure_faketime() -> str | None:
    """Install libfaketime when it is missing (as root, with apt-get, quietly). None when it
    is there afterwards, else why it is not (the tests that need it skip with that)."""
    if LIBFAKETIME.exists():
        return None
    if not sys.platform.startswith("linux") or not Path("/usr/bin/apt-get").exists():
        return "libfaketime is missing and there is no apt-get to install it"
    if os.geteuid() != 0:
        return f"libfaketime is missing ({LIBFAKETIME}); as root: apt-get install faketime"
    print("installing libfaketime (apt-get install faketime)", file=sys.stderr)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}

    def quietly(argv: list[str]) -> int:
        out = subprocess.DEVNULL
        return subprocess.run(argv, check=False, stdout=out, stderr=out, env=env).returncode

    install = ["apt-get", "install", "-y", "-qq", "faketime"]
    if quietly(install) != 0:  # the package lists may be missing or stale
        quietly(["apt-get", "update", "-qq"])
        quietly(install)
    if LIBFAKETIME.exists():
        return None
    return f"apt-get install faketime did not provide {LIBFAKETIME}"


def _run(argv: list[str]) -> int:
    print("+ " + " ".join(argv), file=sys.stderr, flush=True)
    return subprocess.run(argv, cwd=ROOT).returncode


def cmd_test(extra: list[str]) -> int:
    py = str(_bin("python"))
    missing = ensure_faketime()
    if missing is not None:
        print(f"note: {missing}; the clock-jump tests will skip", file=sys.stderr)
    for step in (
        [py, "-m", "ruff", "check", "src", "tests", "tools"],
        [py, "-m", "mypy"],
    ):
        rc = _run(step)
        if rc != 0:
            return rc
    # Warnings are errors (pyproject's filterwarnings); exit 5 ("no tests ran") is a failure.
    return _run([py, "-m", "pytest", "-W", "error", *extra])


def cmd_faketime(extra: list[str]) -> int:
    missing = ensure_faketime()
    if missing is not None:
        print(missing, file=sys.stderr)
        return 1
    return 0


def cmd_run(extra: list[str]) -> int:
    return _run([str(_bin("capability-anchor")), "serve", *extra])


def main() -> int:
    commands = {"test": cmd_test, "run": cmd_run, "faketime": cmd_faketime}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        print(__doc__, file=sys.stderr)
        return 2
    if sys.argv[1] != "faketime":  # a system package: no virtualenv needed for it
        ensure_env()
    return commands[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
