"""The write benchmark (`tools/bench_writes.py`, issues #23 and #37) runs end to end with tiny
settings: the library against the SPEC floor, both servers, every phase, wrk as the load. No
figure is asserted (the machine is shared); only that it ran, printed a verdict for every
goal, and that every record a server acknowledged was stored (a correctness check, not a
timed one)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.kit.paths import ROOT
from tests.kit.systools import ensure_tool

WRK = Path("/usr/bin/wrk")
GOALS = (
    "accepted writes/s >= 0.5x healthz",
    "no 503 at 8 connections",
    "write p99 <= 250 ms",
    "every acknowledged record stored",
    "ack to head p99 <= 2 s",
    "GET /proof p99 <= 10 ms at 500/s, writes at 200 records/s",
)
PAIR_GOALS = ("batches uvicorn x2 / serve >= 1.0x",)


def test_bench_writes_runs_and_prints_every_goal(tmp_path: Path) -> None:
    ensure_tool(WRK, "wrk", "wrk", timeout=600)
    argv = [sys.executable, str(ROOT / "tools" / "bench_writes.py")]
    argv += ["--duration", "2", "--connections", "8", "--seed", "200", "--dir", str(tmp_path)]
    argv += ["--library-records", "2000"]
    run = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    verdicts = dict(re.findall(r"^goal: (.+?): .* (MET|MISSED)$", run.stdout, re.MULTILINE))
    expected = [f"{form} r1 {goal}" for form in ("serve", "uvicorn x2") for goal in GOALS]
    expected += [f"round 1 {goal}" for goal in PAIR_GOALS]
    expected += ["serve r1 batches / SPEC floor >= 0.8x"]
    expected += ["library r1 batched append / SPEC floor >= 0.9x"]
    assert sorted(verdicts) == sorted(expected), run.stdout
    for form in ("serve", "uvicorn x2"):
        assert verdicts[f"{form} r1 every acknowledged record stored"] == "MET", run.stdout
    assert not list(tmp_path.iterdir()), "the benchmark removes its temp dir"
