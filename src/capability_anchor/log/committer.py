"""The log's one committer (SPEC §13.4): a queue of batches, drained in groups, one at a time.

Each group is one transaction, one fsync and one day, whoever queued its batches. In-process
callers lead in turn (`run`); the sequencer process drains the queue of every writer from one
thread (`serve`). Why and what it guarantees: docs/explanation/write-path.md.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .batch import MAX_BATCH, Prepared

MAX_GROUP_RECORDS = 4 * MAX_BATCH
"""Records in one group at most: a bound on one transaction's time, memory and WAL."""


@dataclass(slots=True, eq=False)
class Submission:
    """One caller's batch (or, `kind`, a checkpoint or seal), and its `result` or `error`."""

    prepared: Sequence[Prepared]
    prove: bool = False
    kind: str = "append"
    origin: Any = None
    """Whom to answer (the sequencer's connection and request)."""
    result: Any = None
    error: BaseException | None = None
    done: bool = False


Commit = Callable[[Sequence[Submission]], None]
"""Commits a group in one transaction and sets `result` or `error` on each submission."""


def take_group(queue: deque[Submission], max_records: int = MAX_GROUP_RECORDS) -> list[Submission]:
    """The head of `queue` that is one commit, removed from it: a checkpoint or seal alone,
    else the appends that fit in `max_records` (at least one)."""
    if queue[0].kind != "append":
        return [queue.popleft()]
    group: list[Submission] = []
    records = 0
    while queue and queue[0].kind == "append":
        if group and records + len(queue[0].prepared) > max_records:
            break
        records += len(queue[0].prepared)
        group.append(queue.popleft())
    return group


def answers(
    subs: Sequence[Submission], results: Sequence[Any], read: Any = None, row: Any = None
) -> list[Any]:
    """Each submission's part of the group's `results`; with head `row`, a `prove` one's
    entries with its anchor and their inclusion proofs in it (one read for the group)."""
    parts: list[Any] = []
    at = 0
    for sub in subs:
        parts.append(results[at : at + len(sub.prepared)])
        at += len(sub.prepared)
    if row is None:
        return parts
    anchor = read.anchor(row)
    pairs = list(zip(subs, parts, strict=True))
    wanted = [r.leaf_index for sub, part in pairs if sub.prove for r in part]
    proofs = iter(read.uncached_proofs(row, wanted))
    return [
        [{**r.to_json(), "anchor": anchor, "proof": next(proofs)} for r in part]
        if sub.prove
        else part
        for sub, part in pairs
    ]


class Committer:
    """A queue that one leader at a time commits, a group per `commit` call. `bound`: the
    records queued at most (`submit` refuses past it; None, no bound)."""

    def __init__(
        self, commit: Commit, bound: int | None = None, max_records: int = MAX_GROUP_RECORDS
    ) -> None:
        self._commit = commit
        self._bound = bound
        self._max = max_records
        self._cond = threading.Condition()
        self._queue: deque[Submission] = deque()
        self._queued = 0
        self._leading = False

    def submit(self, sub: Submission) -> bool:
        """Queue `sub` for a leader, or False (nothing queued) when it would pass `bound`."""
        records = len(sub.prepared)
        with self._cond:
            if self._bound is not None and records and self._queued + records > self._bound:
                return False
            self._queue.append(sub)
            self._queued += records
            self._cond.notify_all()
        return True

    def run(self, sub: Submission) -> Any:
        """Queue `sub`, and lead (commit what is queued) or follow until it is done."""
        with self._cond:
            self._queue.append(sub)
            self._queued += len(sub.prepared)
            while not sub.done:
                if self._leading:
                    self._cond.wait()
                else:
                    self._lead()
        if sub.error is not None:
            raise sub.error
        return sub.result

    def serve(self, stopping: Callable[[], bool], idle: Callable[[], None], wake_s: float) -> None:
        """Lead every group until `stopping()` with nothing queued; `idle()` each `wake_s`
        the queue stays empty."""
        with self._cond:
            while True:
                if self._queue and not self._leading:
                    self._lead()
                    continue
                if stopping():
                    return
                self._cond.wait(wake_s)
                if not self._queue:
                    self._cond.release()
                    try:
                        idle()
                    finally:
                        self._cond.acquire()

    def _lead(self) -> None:
        """Commit the queue's head (called, and returning, with `_cond` held)."""
        self._leading = True
        group = take_group(self._queue, self._max)
        self._queued -= sum(len(sub.prepared) for sub in group)
        self._cond.release()
        try:
            self._commit(group)
        except BaseException as exc:
            # What the commit did not catch itself (a Ctrl-C held back until now): every
            # submission of the group shares its fate, none is left waiting.
            for sub in group:
                if sub.error is None and sub.result is None:
                    sub.error = exc
            raise
        finally:
            for sub in group:
                sub.done = True
            self._cond.acquire()
            self._leading = False
            self._cond.notify_all()
