"""The edge benchmark (`tools/bench_edge.py`, issue #37) runs end to end with tiny settings:
both forms, every phase, the floor beside the service, wrk as the load. No figure is
asserted (the machine is shared): only that it ran and printed a table row for each phase of
each form, and that every record a server acknowledged was stored (a correctness check)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.kit.paths import ROOT
from tests.kit.systools import ensure_tool

WRK = Path("/usr/bin/wrk")
PHASES = ("healthz", "roots", "proof", "record", "writes")


def test_bench_edge_runs_and_prints_its_table(tmp_path: Path) -> None:
    ensure_tool(WRK, "wrk", "wrk", timeout=600)
    argv = [sys.executable, str(ROOT / "tools" / "bench_edge.py"), "--records", "300"]
    argv += ["--duration", "1", "--rounds", "1", "--dir", str(tmp_path / "data")]
    run = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"^phase +form +round +req/s +floor req/s +ratio", run.stdout, re.M)
    for form in ("serve", "workers2"):
        for phase in PHASES:
            row = rf"^{phase} +{form} +r1 +[\d,]+ +[\d,]+ +[\d.]+x +>= [\d.]+x +(ok|MISSED) "
            assert re.search(row, run.stdout, re.M), (phase, form, run.stdout)
        stored = rf"^writes {form} r1: .*tree grew ([\d,]+) for ([\d,]+) acknowledged, (\d+)/(\d+) "
        found = re.search(stored, run.stdout, re.M)
        assert found is not None, run.stdout
        grew, acked, seen, sampled = (int(g.replace(",", "")) for g in found.groups())
        assert grew >= acked and seen == sampled, found.group(0)
    assert (tmp_path / "data" / "log.sqlite3").exists(), "--dir keeps the log"
