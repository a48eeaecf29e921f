"""The benchmarks' output step: `--write-doc` puts a run's figures into its own section of
docs/explanation/performance.md, so the published figures are what a tool printed, never
hand-edited. Each tool owns the part between `<!-- bench:<name> begin -->` and
`<!-- bench:<name> end -->`; the rest of the page (goals, how to read the figures) is prose.

    .venv/bin/python tools/bench_kernel.py --write-doc     # run, print, then rewrite its section
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PERFORMANCE = ROOT / "docs" / "explanation" / "performance.md"
FLAG = "--write-doc"


def markers(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name} begin -->", f"<!-- bench:{name} end -->"


def with_section(text: str, name: str, body: str) -> str:
    """`text` with the part between `name`'s markers replaced by `body`, all else unchanged."""
    begin, end = markers(name)
    head, found, rest = text.partition(begin + "\n")
    if not found or end not in rest:
        raise SystemExit(f"{PERFORMANCE.name}: no {begin!r} ... {end!r} section")
    return head + begin + "\n" + body.rstrip("\n") + "\n" + end + rest.split(end, 1)[1]


def entry(command: str, output: str, *, when: str, commit: str, load: str) -> str:
    """What a section holds after a run: when, where and how it ran, then what it printed."""
    return (
        f"Recorded {when}, commit {commit}, load average {load} before the run:\n"
        f"`{command}`\n\n```\n{output.rstrip()}\n```\n"
    )


def _commit() -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


class _Tee(io.TextIOBase):
    """stdout as it was, and a copy of everything written to it."""

    def __init__(self, out: Any) -> None:
        self.out, self.copy = out, io.StringIO()

    def write(self, s: str) -> int:
        self.copy.write(s)
        return int(self.out.write(s))

    def flush(self) -> None:
        self.out.flush()


def run(name: str, main: Callable[[], int | None], path: Path = PERFORMANCE) -> int:
    """Run a benchmark's `main`; with `--write-doc` in argv (removed before `main` parses
    it), its stdout is also written into its section of `path` once it succeeded."""
    if FLAG not in sys.argv:
        return main() or 0
    sys.argv.remove(FLAG)
    command = " ".join([".venv/bin/python", f"tools/{Path(sys.argv[0]).name}", *sys.argv[1:]])
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        code = main() or 0
    if code == 0:
        body = entry(command, tee.copy.getvalue(), when=when, commit=_commit(), load=load)
        path.write_text(with_section(path.read_text(), name, body))
        print(f"{path.relative_to(ROOT)}: the {name} figures are rewritten", file=sys.stderr)
    return code
