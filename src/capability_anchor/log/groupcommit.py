"""Group commit (SPEC §13.4): concurrent appends to one log share one durable transaction.

A durable commit is an fsync, and a one-record request pays a whole one: that, not the
records, bounded the writes per second. So every caller's batch is a `Submission`, and a
commit takes all that are waiting at once (up to `MAX_GROUP_RECORDS`): one transaction, one
fsync, however many callers. What each caller is owed does not change:

- it is answered only after the commit that holds its batch returned (durable);
- its batch is in that one transaction, all of it or none of it: a failed commit fails
  every submission of the group, and none of them stored anything;
- one commit reads the clock once, so one group is one day: submissions are never mixed
  across days, and SPEC §3 to §5 hold as for one batch (`LogWriter.commit_group`).

`GroupCommit` is the in-process form, leader and followers: the first caller that finds no
commit running commits everything queued, its own batch among it, while later callers wait
for theirs (threads of one process: the library, the CLI, the service's in-process path).
The sequencer process (`log.sequencer`) gathers the batches of other processes the same way,
from one committer thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .batch import MAX_BATCH, Prepared

MAX_GROUP_RECORDS = 4 * MAX_BATCH
"""Records in one group commit at most: a bound on the transaction's time, memory and WAL
frames (each new record's dedupe-index row can dirty a page of its own in a large log), so
a backlog is committed as several groups rather than one that holds the write lock long."""


@dataclass(slots=True, eq=False)
class Submission:
    """One caller's batch, and what its commit gave it (`result`) or raised (`error`)."""

    prepared: Sequence[Prepared]
    prove: bool = False
    result: Any = None
    error: BaseException | None = None
    done: bool = False

    def answer(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


Commit = Callable[[Sequence[Submission]], None]
"""Commits a group in one transaction and sets `result` or `error` on each submission."""


def take_group(queue: list[Submission], max_records: int = MAX_GROUP_RECORDS) -> list[Submission]:
    """The submissions at the head of `queue` that fit in one commit (always at least one),
    removed from it, in their order of arrival."""
    group: list[Submission] = []
    records = 0
    while queue and (not group or records + len(queue[0].prepared) <= max_records):
        sub = queue.pop(0)
        group.append(sub)
        records += len(sub.prepared)
    return group


class GroupCommit:
    """Leader and followers over `commit`: concurrent `run` calls share commits."""

    def __init__(self, commit: Commit, max_records: int = MAX_GROUP_RECORDS) -> None:
        self._commit = commit
        self._max = max_records
        self._cond = threading.Condition()
        self._queue: list[Submission] = []
        self._leading = False

    def run(self, sub: Submission) -> Any:
        """Queue `sub`, and commit groups (leading) or wait (following) until it is done."""
        with self._cond:
            self._queue.append(sub)
            while not sub.done:
                if self._leading:
                    self._cond.wait()
                    continue
                self._leading = True
                group = take_group(self._queue, self._max)
                self._cond.release()
                try:
                    self._commit_marking(group)
                finally:
                    self._cond.acquire()
                    self._leading = False
                    self._cond.notify_all()
        return sub.answer()

    def _commit_marking(self, group: list[Submission]) -> None:
        try:
            self._commit(group)
        except BaseException as exc:
            # Only what the commit did not catch itself (a Ctrl-C held back until now, say):
            # every submission of the group shares its fate, none is left waiting.
            for sub in group:
                if not sub.done and sub.error is None and sub.result is None:
                    sub.error = exc
            raise
        finally:
            for sub in group:
                sub.done = True
