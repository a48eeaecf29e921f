#!/usr/bin/env python3
"""verify-proof start-up and offline verification timings (issue: verify-proof). Goals, not
test assertions.

    .venv/bin/python tools/bench_verify.py [--runs 10]

Builds a small log with the library in a temporary folder (one sealed day, a signed
resolver-2 record, an export), then times the real console script in fresh processes:
  1. `verify-proof --help` (goal: median <= 150 ms);
  2. a full offline verification with --roots (goal: median <= 250 ms).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchdoc
from capability_anchor.export.days import export
from capability_anchor.log import Log

VERIFY_PROOF = Path(sys.executable).parent / "verify-proof"


def _at(day: str, seconds: int) -> float:
    start = dt.datetime.combine(dt.date.fromisoformat(day), dt.time(), dt.UTC)
    return start.timestamp() + seconds


def build(root: Path) -> tuple[Path, Path, int]:
    t = [_at("2026-03-01", 3600)]
    with Log.init(root / "data", iss="https://resolver.example", clock=lambda: t[0]) as log:
        log.append(
            [
                {
                    "v": "0.2",
                    "iss": "https://resolver.example",
                    "sub": f"example:s{n}",
                    "url": f"https://s{n}.example",
                    "status": "ok",
                    "checked_at": "2026-03-01T01:00:00Z",
                    "evidence": {"n": n},
                }
                for n in range(1000)
            ]
        )
        t[0] = _at("2026-03-02", 60)
        log.seal()
        record = log.record(sub="s500")
        export(log, root / "export")
    path = root / "record.json"
    path.write_text(json.dumps(record))
    return path, root / "export", int(t[0])


def median_ms(args: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(args, check=False, capture_output=True)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        record, folder, when = build(Path(tmp))
        full = [str(VERIFY_PROOF), str(record), "--roots", str(folder), "--at", str(when)]
        check = subprocess.run(full, check=False, capture_output=True, text=True)
        if check.returncode != 0:
            sys.exit(f"verification did not pass:\n{check.stdout}{check.stderr}")
        help_ms = median_ms([str(VERIFY_PROOF), "--help"], runs)
        full_ms = median_ms(full, runs)
    print(f"verify-proof --help: median {help_ms:.1f} ms of {runs} (goal <= 150 ms)")
    print(f"offline verification: median {full_ms:.1f} ms of {runs} (goal <= 250 ms)")


if __name__ == "__main__":
    sys.exit(benchdoc.run("verify", main))
