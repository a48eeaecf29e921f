"""Group commit in one process (`log/committer.py`, `LogWriter.commit_group`), on a real
log: threads that append while a commit runs share the next one; each is answered its own
entries, at contiguous indices; a group that fails stores nothing of any of its batches and
fails only them; one group is one day, even when the clock crosses midnight between the
batches; and a proving batch in a group gets a head that covers the whole group."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from capability_anchor.log import Log
from capability_anchor.log.committer import Submission
from capability_anchor.merkle import verify_inclusion
from capability_anchor.store.sqlite import DB_NAME
from tests.kit.logkit import ISS, Clock, at, record

DAY = "2026-11-20"
NEXT = "2026-11-21"


@pytest.fixture
def log(tmp_path: Path) -> Iterator[tuple[Log, Clock]]:
    clock = Clock(at(DAY, 3600))
    with Log.init(tmp_path / "data", iss=ISS, clock=clock) as opened:
        yield opened, clock


class Groups:
    """The groups the log's writer commits (the real commit, recorded on the way)."""

    def __init__(self, log: Log) -> None:
        self.sizes: list[list[int]] = []
        self._commit = log.writer.group._commit

        def recorded(group: Sequence[Submission]) -> None:
            self.sizes.append([len(s.prepared) for s in group])
            self._commit(group)

        log.writer.group._commit = recorded


def _held_then_concurrent(log: Log, batches: list[list[Any]], prove: set[int]) -> list[Any]:
    """Append `batches` from one thread each, while another connection holds the database's
    write lock until all of them are waiting: the first commit waits in it, the rest queue."""
    answers: list[Any] = [None] * len(batches)
    prepared = [log.prepare(b) for b in batches]

    def call(i: int) -> None:
        try:
            run = log.append_and_prove if i in prove else log.append_prepared
            answers[i] = run(prepared[i])
        except Exception as exc:
            answers[i] = exc

    lock = sqlite3.connect(log.data_dir / DB_NAME, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(batches))]
    threads[0].start()
    while not log.writer.group._leading:  # the first batch leads, its commit in the lock
        time.sleep(0.005)
    for t in threads[1:]:
        t.start()
    queue = log.writer.group._queue
    while len(queue) < len(batches) - 1:
        time.sleep(0.005)
    lock.execute("ROLLBACK")
    lock.close()
    for t in threads:
        t.join(60)
    return answers


def test_threads_share_commits_and_each_gets_its_own_entries(log: tuple[Log, Clock]) -> None:
    opened, _ = log
    groups = Groups(opened)
    batches = [[record(DAY, 10 * i + k) for k in range(3)] for i in range(8)]
    answers = _held_then_concurrent(opened, batches, set())
    assert len(groups.sizes) == 2 and sorted(groups.sizes[1]) == [3] * 7
    indices = sorted(r.leaf_index for a in answers for r in a)
    assert indices == list(range(24))
    with opened.store.read():
        stored = {
            opened.store.existing(DAY, [r.leaf_hash])[r.leaf_hash] for a in answers for r in a
        }
    assert stored == set(range(24))
    for answer in answers:  # a batch's entries are contiguous, in its order
        assert [r.leaf_index for r in answer] == list(
            range(answer[0].leaf_index, answer[0].leaf_index + 3)
        )


def test_a_failed_group_stores_nothing_of_its_batches(log: tuple[Log, Clock]) -> None:
    opened, _ = log
    groups = Groups(opened)
    real = opened.store.insert_tiles
    calls = []

    def failing(day: str, tiles: Any) -> None:
        calls.append(day)
        if len(calls) == 2:  # the second group, after its entries were inserted
            raise OSError("injected: the disk failed mid-transaction")
        real(day, tiles)

    opened.store.insert_tiles = failing  # type: ignore[method-assign]
    batches = [[record(DAY, 10 * i + k) for k in range(2)] for i in range(5)]
    answers = _held_then_concurrent(opened, batches, set())
    assert [len(g) for g in groups.sizes] == [1, 4]
    failed = [a for a in answers if isinstance(a, Exception)]
    assert len(failed) == 4 and all("injected" in str(a) for a in failed)
    kept = [a for a in answers if not isinstance(a, Exception)]
    assert len(kept) == 1 and [r.leaf_index for r in kept[0]] == [0, 1]
    with opened.store.read():
        assert opened.store.day_size(DAY) == 2
    # Sent again, they are stored, after the one kept batch.
    opened.store.insert_tiles = real  # type: ignore[method-assign]
    again = [opened.append(b) for b, a in zip(batches, answers, strict=True) if a in failed]
    assert sorted(r.leaf_index for a in again for r in a) == list(range(2, 10))
    assert not any(r.duplicate for a in again for r in a)


def test_one_group_is_one_day_when_the_clock_crosses_midnight(log: tuple[Log, Clock]) -> None:
    opened, clock = log
    clock.set(DAY, 86399)
    groups = Groups(opened)
    real = opened.writer.group._commit

    def then_midnight(group: Sequence[Submission]) -> None:
        real(group)
        clock.set(NEXT, 1)  # the first group committed on DAY; the next reads NEXT

    opened.writer.group._commit = then_midnight
    batches = [[record(DAY, 10 * i + k) for k in range(2)] for i in range(6)]
    answers = _held_then_concurrent(opened, batches, {2, 4})
    assert len(groups.sizes) == 2
    days = [{(r.day if hasattr(r, "day") else r["day"]) for r in a} for a in answers]
    assert all(len(d) == 1 for d in days)
    assert sorted(d.pop() for d in days).count(NEXT) == 5
    # The proving batches share one head, covering the whole group of NEXT (10 entries).
    proved = [answers[2], answers[4]]
    for entries in proved:
        for e in entries:
            assert e["proof"]["tree_size"] == 10 and e["anchor"]["day"] == NEXT
            verify_inclusion(
                bytes.fromhex(e["leaf_hash"]),
                e["proof"]["leaf_index"],
                e["proof"]["tree_size"],
                [bytes.fromhex(h) for h in e["proof"]["path"]],
                bytes.fromhex(e["anchor"]["root"]),
            )
