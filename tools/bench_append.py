#!/usr/bin/env python3
"""`capability-anchor append` on inputs that grow (#23): its peak RSS (the bound: 200 MB for
any input size) and its rate against the SPEC floor (`writefloors.spec_floor`, the same
records), the two run interleaved, size after size, round after round.

    .venv/bin/python tools/bench_append.py                       # 16 MB and 128 MB inputs
    .venv/bin/python tools/bench_append.py --sizes 16,256 --rounds 1

Each run is a real `capability-anchor append FILE` into a fresh log, started by a small
Python parent that reads its child's ru_maxrss (a child of this process would count this
process's pages too, copied up to its exec). The floor runs in this process over the first
--floor-records records of the same input. The machine is shared: read the ratios and the
load average, not the rates alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchdoc
from benchkit import ISS, default_base, loadavg, print_table, record, say
from writefloors import spec_floor

CLI = Path(sys.executable).parent / "capability-anchor"
RSS_BOUND_MB = 200
_MEASURED = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
child.returncode = os.waitstatus_to_exitcode(status)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
sys.exit(child.returncode)
"""


def _write_input(path: Path, megabytes: int) -> int:
    """JSON Lines of `benchkit.record` until `megabytes` MB; returns the record count."""
    size, n = 0, 0
    with open(path, "w") as f:
        while size < megabytes * 1_000_000:
            line = json.dumps(record(n, "a")) + "\n"
            f.write(line)
            size += len(line)
            n += 1
    return n


def _append(path: Path, work: Path) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of one `append` of `path` into a fresh log."""
    data = work / "data"
    shutil.rmtree(data, ignore_errors=True)
    init = [str(CLI), "init", "--iss", ISS, "--data", str(data)]
    subprocess.run(init, check=True, capture_output=True)
    peak = work / "peak"
    command = [str(CLI), "append", "--data", str(data), str(path)]
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED, str(peak), *command], stderr=subprocess.PIPE
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"append failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    return seconds, int(peak.read_text()) / 1024


def _first_records(path: Path, count: int) -> list[object]:
    with open(path, "rb") as f:
        return [json.loads(line) for _, line in zip(range(count), f, strict=False)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="16,128", help="input sizes in MB, comma-separated")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--floor-records", type=int, default=50_000)
    ap.add_argument("--dir", type=Path, help="parent of the temp dir (default: local-disk tmp)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    say(f"load average before: {loadavg()}")
    rows: list[list[str]] = []
    worst = 0.0
    with tempfile.TemporaryDirectory(dir=args.dir or default_base()) as tmp:
        work = Path(tmp)
        inputs = {mb: work / f"in-{mb}.jsonl" for mb in sizes}
        counts = {mb: _write_input(path, mb) for mb, path in inputs.items()}
        for r in range(args.rounds):
            for mb, path in inputs.items():
                floor = spec_floor(_first_records(path, args.floor_records), work)
                seconds, rss = _append(path, work)
                rate = counts[mb] / seconds
                worst = max(worst, rss)
                rows.append(
                    [
                        str(r),
                        f"{path.stat().st_size / 1e6:.0f}",
                        f"{counts[mb]:,}",
                        f"{rss:.0f}",
                        f"{rate:,.0f}",
                        f"{floor:,.0f}",
                        f"{rate / floor:.2f}x",
                        loadavg(sep="/"),
                    ]
                )
    head = ["round", "input MB", "records", "peak RSS MB", "append rec/s", "floor rec/s"]
    print_table([*head, "ratio", "load 1/5/15"], rows)
    say()
    verdict = "within" if worst <= RSS_BOUND_MB else "OVER"
    say(f"peak RSS at most {worst:.0f} MB: {verdict} the {RSS_BOUND_MB} MB bound")
    say(f"load average after: {loadavg()}")
    return 0 if worst <= RSS_BOUND_MB else 1


if __name__ == "__main__":
    for name in [n for n in os.environ if n.startswith("CAPABILITY_ANCHOR_")]:
        del os.environ[name]  # the commands run here see none of an operator's settings
    sys.exit(benchdoc.run("append", main))
