#!/usr/bin/env python3
"""One entry point for a fresh machine: needs only Python 3.11+, Node 18+ and the package
registries.

    python3 tools/dev.py run     # the HTTP service on its embedded default (SQLite in ./data)
    python3 tools/dev.py test    # ruff, mypy --strict on src/, node --test tests/js/, and pytest
    python3 tools/dev.py test --fast  # the same, but pytest runs unit and integration only

`test` runs pytest on pytest-xdist workers and Hypothesis's `ci` profile; `--fast` its `dev`
profile (tests/kit/hypo.py).
    python3 tools/dev.py faketime   # install libfaketime (the clock-jump tests need it)
    python3 tools/dev.py prometheus # install Prometheus and promtool (the /metrics tests)
    python3 tools/dev.py chromium   # install headless Chromium (the docs-page tests need it)
    python3 tools/dev.py wrk        # install wrk (the write benchmark and its smoke test)
    python3 tools/dev.py postgresql-15  # install PostgreSQL 15 (the per-session test server)
    python3 tools/dev.py nginx      # install nginx (the static read path's tests)
    python3 tools/dev.py tsa        # a local RFC 3161 TSA (OpenSSL) to try stamping with

Both create `.venv` beside `pyproject.toml` and install the project into it (with its
test extras) the first time, and again whenever `pyproject.toml` changes. `test` also
installs libfaketime, Chromium, Prometheus, wrk, PostgreSQL 15 and nginx (Debian's
`faketime`, `chromium`, `prometheus`, `wrk`, `postgresql-15` and `nginx`) when they are
missing and this runs as root, quietly; the tests
that need them skip, saying why, only where that is impossible (`--fast` skips this: only
tests/e2e needs them). Standard library only, so it runs before anything is installed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import venv
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
STAMP = VENV / ".capability-anchor-installed"
# Debian package -> a file it installs: the clock-jump tests need libfaketime, the docs-page
# tests a headless Chromium, the write benchmark wrk.
SYSTEM_PACKAGES = {
    "faketime": Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"),
    "chromium": Path("/usr/bin/chromium"),
    # Debian's `prometheus` gives both /usr/bin/prometheus and /usr/bin/promtool.
    "prometheus": Path("/usr/bin/promtool"),
    "wrk": Path("/usr/bin/wrk"),
    # initdb and pg_ctl for one real server per test session (tests/kit/pgkit.py).
    "postgresql-15": Path("/usr/lib/postgresql/15/bin/pg_ctl"),
    "nginx": Path("/usr/sbin/nginx"),
}
_NEEDED_BY = {
    "faketime": "the clock-jump tests",
    "chromium": "the docs-page browser tests",
    "prometheus": "the /metrics tests (promtool, a real Prometheus)",
    "wrk": "the write benchmark (tools/bench_writes.py)",
    "postgresql-15": "the PostgreSQL tests (a real server per test session)",
    "nginx": "the static read path's tests",
}


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


def ensure_system(*packages: str) -> dict[str, str]:
    """Install the Debian packages of SYSTEM_PACKAGES that are missing (as root, with
    apt-get, quietly; `apt-get update` at most once, only when an install fails: the package
    lists may be missing or stale). Returns why each package still missing is missing (the
    tests that need it skip with that); empty when all are there."""
    missing = [p for p in packages if not SYSTEM_PACKAGES[p].exists()]
    if not missing:
        return {}
    if not sys.platform.startswith("linux") or not Path("/usr/bin/apt-get").exists():
        return {p: f"{p} is missing and there is no apt-get to install it" for p in missing}
    if os.geteuid() != 0:
        return {
            p: f"{SYSTEM_PACKAGES[p]} is missing; as root: apt-get install {p}" for p in missing
        }
    print(f"installing {' '.join(missing)} (apt-get install)", file=sys.stderr)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}

    def quietly(argv: list[str]) -> int:
        out = subprocess.DEVNULL
        return subprocess.run(argv, check=False, stdout=out, stderr=out, env=env).returncode

    install = ["apt-get", "install", "-y", "-qq", *missing]
    if quietly(install) != 0:
        quietly(["apt-get", "update", "-qq"])
        quietly(install)
    return {
        p: f"apt-get install {p} did not provide {SYSTEM_PACKAGES[p]}"
        for p in missing
        if not SYSTEM_PACKAGES[p].exists()
    }


def _run(argv: list[str]) -> int:
    print("+ " + " ".join(argv), file=sys.stderr, flush=True)
    return subprocess.run(argv, cwd=ROOT).returncode


def cmd_test(extra: list[str]) -> int:
    """`--fast` leaves out tests/e2e (real processes, browsers, third-party tools), and with it
    the system packages only e2e needs; any other argument goes to pytest."""
    py = str(_bin("python"))
    fast = "--fast" in extra
    extra = [a for a in extra if a != "--fast"]
    for package, why in ({} if fast else ensure_system(*SYSTEM_PACKAGES)).items():
        print(f"note: {why}; {_NEEDED_BY[package]} will skip", file=sys.stderr)
    for step in (
        [py, "-m", "ruff", "check", "src", "tests", "tools"],
        [py, "-m", "mypy"],
        # The JavaScript verifier's tests (tests/js: vectors, attacks, parity with verify-proof).
        [_node(), "--test", "tests/js/"],
    ):
        rc = _run(step)
        if rc != 0:
            return rc
    # Warnings are errors (pyproject's filterwarnings); exit 5 ("no tests ran") is a failure.
    lane = ["-m", "not e2e"] if fast else []
    os.environ.setdefault("HYPOTHESIS_PROFILE", "dev" if fast else "ci")
    return _run([py, "-m", "pytest", "-W", "error", *lane, *_workers(fast, extra), *extra])


def _node() -> str:
    """Node 18+ (the README's second requirement): the JavaScript verifier's tests need it."""
    node = shutil.which("node")
    if node is None:
        sys.exit("tools/dev.py test needs Node 18 or newer on PATH (tests/js, src/verify-js)")
    return node


def _workers(fast: bool, extra: list[str]) -> list[str]:
    """pytest-xdist's workers, unless the arguments choose (`-n 0` runs in one process):
    one per core for the CPU-bound fast tiers, one and a half per core for the whole suite,
    whose e2e tests often wait on the processes they start (docs/how-to/develop.md)."""
    if any(a.startswith(("-n", "--numprocesses", "--dist")) or a == "no:xdist" for a in extra):
        return []
    cores = os.cpu_count() or 1
    return ["-n", str(cores if fast else max(2, cores * 3 // 2)), "--dist", "load"]


def _cmd_system(package: str) -> Callable[[list[str]], int]:
    def cmd(extra: list[str]) -> int:
        missing = ensure_system(package)
        for why in missing.values():
            print(why, file=sys.stderr)
        return 1 if missing else 0

    return cmd


def _die_with_parent() -> None:
    """In the server, before exec: SIGTERM it if this script dies without forwarding (e.g.
    SIGKILL), so it is never left running as an orphan (Linux's PR_SET_PDEATHSIG)."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def _given_data(extra: list[str]) -> bool:
    return any(a == "--data" or a.startswith("--data=") for a in extra) or bool(
        os.environ.get("CAPABILITY_ANCHOR_DATA")
    )


def run_argv(extra: list[str]) -> list[str]:
    init = [] if _given_data(extra) else ["--init"]
    return [str(_bin("capability-anchor")), "serve", *init, *extra]


def cmd_run(extra: list[str]) -> int:
    """`capability-anchor serve`, with `--init` for the embedded default ./data only (a data
    dir given by --data or env must exist: a typo there must not start a new log).

    The server runs in a process group of its own, so a Ctrl-C at the terminal reaches only
    this script, which forwards SIGINT and SIGTERM to it (exactly once each: a second SIGINT
    would make uvicorn skip its graceful shutdown) and exits with its exit code."""
    argv = run_argv(extra)
    print("+ " + " ".join(argv), file=sys.stderr, flush=True)
    proc = subprocess.Popen(
        argv, cwd=ROOT, stdin=subprocess.DEVNULL, process_group=0, preexec_fn=_die_with_parent
    )

    def forward(signum: int, frame: object) -> None:
        if proc.poll() is None:
            # A hang-up (terminal closed) stops the server gracefully too.
            proc.send_signal(signal.SIGTERM if signum == signal.SIGHUP else signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    code = proc.wait()
    # Killed by a signal: the shell's convention, 128 + its number.
    return 128 - code if code < 0 else code


TSA_PORT = 3161
TSA_DIR = ROOT / "data-tsa"


def cmd_tsa(extra: list[str]) -> int:
    """A throwaway RFC 3161 TSA on loopback, for trying stamps by hand: OpenSSL's own
    `openssl ts -reply` behind a small HTTP server (tests/kit/tsa_server.py, the test TSA,
    which needs nothing but the standard library and the `openssl` command). Its CA and TSA
    certificates (timeStamping EKU) are made in --dir on first use and kept, so stamps made
    before a restart still verify against the same CA. Serves until Ctrl-C."""
    import argparse
    import shutil

    p = argparse.ArgumentParser(
        prog="tools/dev.py tsa", description=(cmd_tsa.__doc__ or "").split("\n\n")[0]
    )
    p.add_argument("--port", type=int, default=TSA_PORT, help=f"default {TSA_PORT}; 0: any free")
    p.add_argument("--dir", type=Path, default=TSA_DIR, help="its CA and keys (default ./data-tsa)")
    p.add_argument("--key", choices=("rsa", "ec"), default="ec", help="key type (default ec)")
    args = p.parse_args(extra)
    sys.path.insert(0, str(ROOT))  # tests.kit: standard library only, like this script
    from tests.kit import tsa_server

    if shutil.which(tsa_server.OPENSSL) is None:
        print(f"{tsa_server.OPENSSL} is missing: the TSA is OpenSSL's (apt-get install openssl)")
        return 1
    folder = args.dir.resolve()
    pki = tsa_server.load_pki(folder, args.key)
    if pki is None:
        print(f"creating a CA and a TSA certificate in {folder}", file=sys.stderr)
        pki = tsa_server.make_pki(folder, args.key, name="capability-anchor dev", days=365)
    try:
        tsa = tsa_server.TestTsa(pki, port=args.port)
    except OSError as exc:
        print(f"port {args.port} on 127.0.0.1 is taken ({exc.strerror}); try --port 0")
        return 2
    # Handlers before the instructions: a Ctrl-C sent as soon as they are read must stop it
    # cleanly, not raise KeyboardInterrupt (exit 130).
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    with tsa:
        print(
            f"RFC 3161 TSA at {tsa.url}\n"
            f"its CA certificate: {pki.ca_cert}\n"
            "stamp with it (the data dir keeps both when given to init):\n"
            f"  capability-anchor init --iss https://resolver.example "
            f"--tsa {tsa.url} --tsa-ca {pki.ca_cert}\n"
            f"  capability-anchor seal --tsa {tsa.url} --tsa-ca {pki.ca_cert}\n"
            f"  capability-anchor timestamp --tsa {tsa.url} --tsa-ca {pki.ca_cert}\n"
            f"  capability-anchor serve --tsa {tsa.url} --tsa-ca {pki.ca_cert}   "
            "(uvicorn: env CAPABILITY_ANCHOR_TSA, CAPABILITY_ANCHOR_TSA_CA)\n"
            "Ctrl-C stops it.",
            flush=True,
        )
        while not stop.wait(3600):
            pass
    print("TSA stopped", file=sys.stderr)
    return 0


def main() -> int:
    commands = {"test": cmd_test, "run": cmd_run, "tsa": cmd_tsa}
    commands.update({package: _cmd_system(package) for package in SYSTEM_PACKAGES})
    if sys.argv[1:2] in (["--help"], ["-h"], ["help"]):
        print(__doc__)
        return 0
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        print(__doc__, file=sys.stderr)
        return 2
    # A system package or the TSA (standard library and openssl): no virtualenv needed.
    if sys.argv[1] not in (*SYSTEM_PACKAGES, "tsa"):
        ensure_env()
    return commands[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C while setting up (pip): no traceback
        sys.exit(130)
