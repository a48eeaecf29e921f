"""Several processes on one data dir: two writers appending at the same time get contiguous
indices, lose nothing and duplicate nothing (SQLite's write lock, taken first)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

from capability_anchor.audit import audit_store
from capability_anchor.log import Log

WRITER = """
import json, sys
from pathlib import Path
from capability_anchor.log import Log
data, tag, batches, size = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with Log.open(data) as log:
    for b in range(batches):
        batch = [
            {
                "v": "0.2",
                "sub": f"example:{tag}-{n}",
                "url": f"https://s{n}.{tag}.example/mcp",
                "status": "ok",
                "checked_at": "2026-10-28T10:05:00Z",
                "evidence": {},
                "writer": tag,
                "n": n,
            }
            for n in range(b * size, (b + 1) * size)
        ]
        for r in log.append(batch):
            print(json.dumps([r.day, r.leaf_index, r.leaf_hash.hex(), r.duplicate]), flush=True)
"""


def test_two_processes_append_concurrently(tmp_path: Path) -> None:
    data = tmp_path / "data"
    Log.init(data, iss="https://resolver.example").close()
    # Many small batches from each side, so that they interleave on the lock.
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(data), tag, "40", "25"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b")
    ]
    outputs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outputs.append([json.loads(line) for line in out.splitlines()])
    acknowledged = [row for out in outputs for row in out]
    assert len(acknowledged) == 2000
    assert not any(dup for _, _, _, dup in acknowledged)
    days = {day for day, _, _, _ in acknowledged}
    with Log.open(data) as log:
        stored = {}
        for day in days:
            for e in log.store.iter_entries(day):
                stored[(day, e.leaf_index)] = e.leaf_hash.hex()
        # Every acknowledged entry is stored at the index it was given, and nothing else is.
        assert {(d, i): h for d, i, h, _ in acknowledged} == stored
        for day in days:
            indices = sorted(i for d, i in stored if d == day)
            assert indices == list(range(len(indices)))
        # Both writers really interleaved (batches of 25 from each side, mixed).
        writers = [
            json.loads(e.claims)["writer"] for d in sorted(days) for e in log.store.iter_entries(d)
        ]
        switches = sum(1 for x, y in itertools.pairwise(writers) if x != y)
        assert switches >= 1
        log.checkpoint()
        assert audit_store(log).ok
