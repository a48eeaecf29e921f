"""Background work: checkpoints when the tree grew, sealing after midnight, and exactly one
process per data dir doing it (an flock in the data dir)."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from capability_anchor.errors import StoreCorrupt
from capability_anchor.log import Log
from capability_anchor.service.background import Background
from tests.kit.obskit import observation

ISS = "https://resolver.example"
T0 = dt.datetime(2026, 11, 2, 23, 59, 0, tzinfo=dt.UTC).timestamp()


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


def test_checkpoints_and_seals_in_the_background(tmp_path: Path) -> None:
    clock = Clock()
    data = tmp_path / "d"
    Log.init(data, iss=ISS, clock=clock).close()

    async def scenario() -> None:
        with Log.open(data, clock=clock) as writer:
            bg = Background(writer, data, checkpoint_interval=0.0)
            writer.append([observation(1), observation(2)])
            await bg.start()
            await asyncio.sleep(0.3)
            heads = writer.store.heads("2026-11-02")
            assert [(h.tree_size, h.sealed) for h in heads] == [(2, False)]
            clock.t += 120  # past midnight: the day is sealed within the next tick
            await asyncio.sleep(1.5)
            await bg.stop()
            assert writer.store.sealed_head("2026-11-02") is not None
            assert bg.ticks >= 2

    asyncio.run(scenario())


def test_only_one_process_per_data_dir_does_background_work(tmp_path: Path) -> None:
    data = tmp_path / "d"
    Log.init(data, iss=ISS).close()

    async def scenario() -> None:
        with Log.open(data) as a_log, Log.open(data) as b_log:
            a = Background(a_log, data, checkpoint_interval=3600)
            b = Background(b_log, data, checkpoint_interval=3600)
            await a.start()
            await asyncio.sleep(0.2)
            await b.start()
            await asyncio.sleep(0.3)
            assert a.ticks >= 1 and b.ticks == 0  # b waits for the lock
            await a.stop()  # the lock is released: b takes over at its next try
            await asyncio.sleep(1.3)
            assert b.ticks >= 1
            await b.stop()

    asyncio.run(scenario())


def _zero_entries_root_page(data: Path) -> None:
    """Fold the WAL into the database, then zero the root page of the entries b-tree."""
    db = data / "log.sqlite3"
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'entries'"
        ).fetchone()
    finally:
        conn.close()
    with open(db, "r+b") as f:
        f.seek((int(root) - 1) * page_size)
        f.write(b"\0" * page_size)


def _background_lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "capability_anchor.background" and r.levelno == level
    ]


def test_a_damaged_database_stops_the_background_work_with_one_message(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "d"
    Log.init(data, iss=ISS).close()
    with Log.open(data) as writer:
        writer.append([observation(i, sub=f"example:s-{i}", pad="x" * 200) for i in range(300)])
    _zero_entries_root_page(data)

    async def scenario() -> None:
        with Log.open(data) as writer:
            bg = Background(writer, data, checkpoint_interval=0.0)
            with caplog.at_level(logging.INFO, logger="capability_anchor.background"):
                await bg.start()
                await asyncio.sleep(2.5)  # two more ticks would have run
                await bg.stop()
            assert isinstance(bg.stopped_by, StoreCorrupt), bg.stopped_by
            assert bg.ticks == 1
            # What is not damaged is still answered.
            assert writer.store.last_sealed_day() is None

    asyncio.run(scenario())
    (line,) = _background_lines(caplog, logging.ERROR)
    assert "background work stopped" in line and "restore the database" in line, line
    assert _background_lines(caplog, logging.WARNING) == []


def test_an_unwritable_database_is_retried_and_the_checkpoint_follows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    data = tmp_path / "d"
    Log.init(data, iss=ISS).close()
    files = [data / "log.sqlite3", data / "log.sqlite3-wal"]

    async def scenario() -> None:
        with Log.open(data) as writer:
            writer.append([observation(1), observation(2)])
            probe = subprocess.run(["chattr", "+i", str(files[0])], capture_output=True)
            if probe.returncode != 0:
                pytest.skip(f"this file system has no immutable flag: {probe.stderr!r}")
            bg = Background(writer, data, checkpoint_interval=0.0)
            try:
                subprocess.run(["chattr", "+i", str(files[1])], check=True)
                with caplog.at_level(logging.INFO, logger="capability_anchor.background"):
                    await bg.start()
                    await asyncio.sleep(2.5)
            finally:
                subprocess.run(["chattr", "-i", *map(str, files)], check=True)
            await asyncio.sleep(1.5)  # the next tick checkpoints
            await bg.stop()
            assert bg.stopped_by is None
            assert bg.ticks >= 3
            assert [h.tree_size for h in writer.store.heads(writer.today())] == [2]

    asyncio.run(scenario())
    retried = _background_lines(caplog, logging.WARNING)
    assert len(retried) >= 2 and all("retrying at the next tick" in m for m in retried), retried
    assert _background_lines(caplog, logging.ERROR) == []
