"""Several processes publishing heads at once on one data dir give one history, in SPEC
§12.1's order, that audits clean; SIGKILL during publication leaves it so too.

Two library processes run a fast clock (three UTC days in 40 appends, the same for both: it
moves with the appends both have made, counted in a shared file, not with wall time, so a
loaded machine slows it rather than skips days), appending and checkpointing, so their
checkpoints seal past days; a third process, the real CLI on the real clock, appends,
checkpoints and seals beside them and seals the days they are still writing to. Every
refusal the race can cause is a `Conflict` (a sealed day); anything else fails the worker,
and so the test.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from capability_anchor.log import Log
from tests.e2e.test_history import audit, check_history, stored_leaves
from tests.kit.logkit import CLI, ISS, Clock, at, raw

WORKER = r"""
import json, os, sys, time
from capability_anchor.errors import Conflict
from capability_anchor.log import Log

data, wid, ticks, base, step = sys.argv[1], sys.argv[2], sys.argv[3], *map(float, sys.argv[4:6])

def fast(now):
    return base + os.stat(ticks).st_size * step

def clock():
    now = time.time()
    return min(now, fast(now))

published = 0
with Log.open(data, clock=clock) as log:
    n = 0
    while True:
        now = time.time()
        caught_up = fast(now) >= now
        records = [{"v": "0.2", "iss": "https://resolver.example", "sub": f"example:w{wid}-{n + i}",
                    "url": f"https://w{wid}-{n + i}.example", "status": "ok",
                    "checked_at": "2026-01-01T00:00:00Z",
                    "evidence": {"method": "https://resolver.example/method"}}
                   for i in range(3)]
        n += 3
        try:
            log.append(records)
        except Conflict:
            pass  # the day was sealed by another process meanwhile
        with open(ticks, "ab") as f:
            f.write(b".")
        if log.checkpoint() is not None:
            published += 1
        if caught_up:
            break
print(json.dumps({"worker": wid, "published": published}))
"""


def _day(offset: int) -> str:
    return (dt.datetime.now(dt.UTC).date() + dt.timedelta(days=offset)).isoformat()


def _cli(data: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(CLI), *args, "--data", str(data)], input=stdin, capture_output=True, timeout=120
    )


def _cli_loop(data: Path, stop: threading.Event, failures: list[str]) -> None:
    n = 0
    while not stop.is_set():
        lines = "".join(
            json.dumps(
                {
                    "v": "0.2",
                    "iss": ISS,
                    "sub": f"example:cli-{n}-{i}",
                    "url": f"https://cli-{n}-{i}.example",
                    "status": "ok",
                    "checked_at": "2026-01-01T00:00:00Z",
                    "evidence": {"method": f"{ISS}/method"},
                }
            )
            + "\n"
            for i in range(3)
        )
        n += 1
        for args, stdin in (
            (("append", "-"), lines.encode()),
            (("checkpoint",), None),
            (("seal",), None),
        ):
            done = _cli(data, *args, stdin=stdin)
            if done.returncode != 0:
                failures.append(f"{args[0]}: exit {done.returncode}: {done.stderr.decode()[:300]}")


def test_processes_publishing_at_once_make_one_history_in_order(tmp_path: Path) -> None:
    if dt.datetime.now(dt.UTC).hour == 23 and dt.datetime.now(dt.UTC).minute >= 58:
        time.sleep(180)  # never straddle the real midnight: the CLI's day would move
    data = tmp_path / "data"
    first = _day(-2)
    Log.init(data, iss=ISS, clock=Clock(at(first, 60))).close()
    base, ticks = at(first, 3600), tmp_path / "ticks"
    ticks.touch()
    step = (time.time() - base) / 40  # the fast clocks catch up with the real one in 40 appends
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(data), str(w), str(ticks), repr(base), repr(step)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for w in range(2)
    ]
    stop, failures = threading.Event(), []
    # The CLI starts sealing once the fast clocks are on the second day (20 appends made).
    deadline = time.monotonic() + 300
    while ticks.stat().st_size < 20 and all(w.poll() is None for w in workers):
        assert time.monotonic() < deadline, "the workers made no progress in 300 s"
        time.sleep(0.05)
    cli = threading.Thread(target=_cli_loop, args=(data, stop, failures))
    cli.start()
    outputs = [w.communicate(timeout=300) for w in workers]
    stop.set()
    cli.join(timeout=300)
    for worker, (out, err) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, err.decode()
        assert json.loads(out)["published"] > 0
    assert failures == []
    keys = [k for _, k, _ in stored_leaves(data)]
    assert {(d, s) for d, s, _ in keys} >= {
        (first, False),
        (first, True),
        (_day(-1), True),
        (_day(0), False),
    }
    check_history(data)
    assert audit(data) == (0, [])


def _checkpoints(data: Path) -> dict[int, bytes]:
    with raw(data) as conn:
        return {int(n): bytes(c) for n, c in conn.execute("SELECT size, note FROM checkpoints")}


def test_sigkill_during_publication_leaves_the_history_whole(tmp_path: Path) -> None:
    """`checkpoint` killed at random moments (a real process, SIGKILL): the history still
    holds exactly the stored heads, in order, and the next run carries on."""
    data = tmp_path / "data"
    first = _day(-1)
    with Log.init(data, iss=ISS, clock=Clock(at(first, 60))) as log:
        log.append(
            [
                {
                    "v": "0.2",
                    "iss": ISS,
                    "sub": f"example:old-{i}",
                    "url": f"https://old-{i}.example",
                    "status": "ok",
                    "checked_at": "2026-01-01T00:00:00Z",
                    "evidence": {"method": f"{ISS}/method"},
                }
                for i in range(5)
            ]
        )
    rng = random.Random(13)
    kills = 0
    seen: dict[int, bytes] = {}
    for round_ in range(8):
        record = {
            "v": "0.2",
            "iss": ISS,
            "sub": f"example:k-{round_}",
            "url": f"https://k-{round_}.example",
            "status": "ok",
            "checked_at": "2026-01-01T00:00:00Z",
            "evidence": {"method": f"{ISS}/method"},
        }
        assert _cli(data, "append", "-", stdin=(json.dumps(record) + "\n").encode()).returncode == 0
        proc = subprocess.Popen(
            [str(CLI), "checkpoint", "--data", str(data)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.05, 0.6))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
        check_history(data)
        assert audit(data) == (0, [])
        # No checkpoint ever changes; each history size has one once its head is stored.
        now = _checkpoints(data)
        assert {n: now[n] for n in seen} == seen
        assert sorted(now) == list(range(1, len(stored_leaves(data)) + 1))
        seen = now
    assert _cli(data, "checkpoint").returncode == 0
    check_history(data)
    assert audit(data) == (0, [])
    keys = [k for _, k, _ in stored_leaves(data)]
    assert (first, True, 5) in keys
    assert kills > 0
