"""A small multi-day history built with the library, for tests that audit, export or tamper.

`build_history(tmp)` makes `tmp/data` with a clock the test controls:

- day 1 (2026-03-01): 5 entries, one checkpoint at size 3 and one at size 5;
- day 2: nothing (sealed empty, tree_size 0);
- day 3: 300 entries (one full level-0 tile of 256 hashes, so a tile with a root exists),
  checkpoints at sizes 2, 257 and 300, then 20 more entries (sealed at 320);
- day 4: nothing;
- the clock moves to day 5 and `seal()` seals days 1 to 4.

It returns a `History`: the data dir, the clock and every head document that was published.
Build it once per module and `copy()` it for each test (a copytree is much cheaper).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from capability_anchor import head as heads
from capability_anchor.log import Log
from capability_anchor.store.sqlite import DB_NAME

ISS = "https://resolver.example"
DAY1, DAY2, DAY3, DAY4, DAY5 = (f"2026-03-0{n}" for n in range(1, 6))
DAYS = (DAY1, DAY2, DAY3, DAY4)  # the days that end up sealed
SEALED_SIZES = {DAY1: 5, DAY2: 0, DAY3: 320, DAY4: 0}
CHECKPOINT_SIZES = {DAY1: (3, 5), DAY3: (2, 257, 300)}
CLI = Path(sys.executable).parent / "capability-anchor"


def at(day: str, seconds: int = 0) -> float:
    """The epoch time `seconds` after 00:00 UTC of `day`."""
    start = dt.datetime.combine(dt.date.fromisoformat(day), dt.time(), dt.UTC)
    return start.timestamp() + seconds


class Clock:
    """A clock the test moves (Log's clock is any `() -> float`)."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def set(self, day: str, seconds: int = 0) -> None:
        self.t = at(day, seconds)


def record(day: str, n: int) -> dict[str, object]:
    return {
        "v": "0.2",
        "iss": ISS,
        "sub": f"example:server-{day}-{n}",
        "url": f"https://s{n}.example/{day}",
        "status": "ok",
        "checked_at": f"{day}T00:00:00Z",
        "evidence": {"method": f"{ISS}/method"},
        "n": n,
    }


@dataclass
class History:
    data: Path
    clock: Clock
    checkpoints: dict[str, list[bytes]] = field(default_factory=dict)  # day -> docs
    sealed: dict[str, bytes] = field(default_factory=dict)  # day -> sealed head doc

    def open(self) -> Log:
        return Log.open(self.data, clock=self.clock)

    def copy(self, dest: Path) -> History:
        """A copy of the data dir at `dest` (copytree keeps the key file's 0600 mode)."""
        shutil.copytree(self.data, dest)
        return History(dest, Clock(self.clock.t), dict(self.checkpoints), dict(self.sealed))

    def claims(self, day: str) -> dict[str, object]:
        return heads.parse_document(self.sealed[day]).claims


def _append(log: Log, clock: Clock, day: str, first: int, count: int) -> None:
    clock.set(day, 3600 + 60 * first)
    results = log.append([record(day, n) for n in range(first, first + count)])
    assert [r.leaf_index for r in results] == list(range(first, first + count))


def _checkpoint(log: Log, clock: Clock, history: History, day: str) -> None:
    clock.t += 30
    doc = log.checkpoint()
    assert doc is not None
    history.checkpoints.setdefault(day, []).append(doc)


def build_history(tmp: Path) -> History:
    clock = Clock(at(DAY1, 60))
    data = tmp / "data"
    history = History(data, clock)
    with Log.init(data, iss=ISS, clock=clock) as log:
        _append(log, clock, DAY1, 0, 3)
        _checkpoint(log, clock, history, DAY1)
        _append(log, clock, DAY1, 3, 2)
        _checkpoint(log, clock, history, DAY1)
        # day 2: nothing
        _append(log, clock, DAY3, 0, 2)
        _checkpoint(log, clock, history, DAY3)  # also seals days 1 and 2
        _append(log, clock, DAY3, 2, 255)
        _checkpoint(log, clock, history, DAY3)
        _append(log, clock, DAY3, 257, 43)
        _checkpoint(log, clock, history, DAY3)
        _append(log, clock, DAY3, 300, 20)
        clock.set(DAY5, 30)
        log.seal()
        for row in log.store.sealed_heads():
            history.sealed[row.day] = row.doc
    assert sorted(history.sealed) == list(DAYS)
    for day, size in SEALED_SIZES.items():
        assert heads.parse_document(history.sealed[day]).tree_size == size
    return history


def run_cli(
    *args: str | os.PathLike[str], timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    """The operator CLI as a user runs it (a real process); `timeout` bounds a run that
    might otherwise never end."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPABILITY_ANCHOR_")}
    return subprocess.run(
        [str(CLI), *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=timeout,
    )


__all__ = [
    "CHECKPOINT_SIZES",
    "CLI",
    "DAY1",
    "DAY2",
    "DAY3",
    "DAY4",
    "DAY5",
    "DAYS",
    "ISS",
    "SEALED_SIZES",
    "Clock",
    "History",
    "at",
    "build_history",
    "record",
    "run_cli",
]


@contextlib.contextmanager
def raw(data: Path) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection to the log's file (autocommit: every statement stands), as
    an attacker with file access would open it."""
    conn = sqlite3.connect(data / DB_NAME, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


def heads_of(data: Path) -> dict[tuple[str, int, int], bytes]:
    """Every head row, (day, tree_size, sealed) -> root, read with plain sqlite3."""
    with sqlite3.connect(f"file:{data / 'log.sqlite3'}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT day, tree_size, sealed, root FROM heads").fetchall()
    return {(d, n, s): bytes(r) for d, n, s, r in rows}


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }
