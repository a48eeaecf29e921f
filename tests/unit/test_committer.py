"""Group commit's leader and followers (`log/committer.py`), with threads: every caller is
answered with its own result only after the commit holding it ran, callers queued while a
commit runs share the next one, a failed commit fails every submission of its group and no
other, and a group never passes its record bound."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence

import pytest

from capability_anchor.log.committer import Committer, Submission, take_group


def sub(n: int, tag: int = 0) -> Submission:
    return Submission([(bytes([tag]) * 32, b"x", ()) for _ in range(n)])


def test_take_group_keeps_the_order_and_the_bound_and_takes_at_least_one() -> None:
    a, b, c = sub(3, 1), sub(4, 2), sub(5, 3)
    queue = deque([a, b, c])
    assert take_group(queue, 7) == [a, b] and list(queue) == [c]
    # A submission bigger than the bound is committed alone, never left behind.
    big = deque([sub(20), sub(1)])
    first = big[0]
    assert take_group(big, 7) == [first] and len(big) == 1


class Recorder:
    """A commit that records its groups, and holds the first one until told to go on."""

    def __init__(self, fail_group: int | None = None) -> None:
        self.groups: list[list[Submission]] = []
        self.release = threading.Event()
        self.fail_group = fail_group

    def __call__(self, group: Sequence[Submission]) -> None:
        self.groups.append(list(group))
        if len(self.groups) == 1:
            assert self.release.wait(30)
        if len(self.groups) - 1 == self.fail_group:
            for s in group:
                s.error = RuntimeError("disk on fire")
            return
        for s in group:
            s.result = ("committed in", len(self.groups) - 1, id(s))


def _run_all(gc: Committer, recorder: Recorder, subs: list[Submission]) -> list[object]:
    answers: list[object] = [None] * len(subs)

    def call(i: int) -> None:
        try:
            answers[i] = gc.run(subs[i])
        except RuntimeError as exc:
            answers[i] = exc

    first = threading.Thread(target=call, args=(0,))
    first.start()
    while not recorder.groups:  # the first caller leads and its commit is held
        time.sleep(0.001)
    rest = [threading.Thread(target=call, args=(i,)) for i in range(1, len(subs))]
    for t in rest:
        t.start()
    while len(gc._queue) < len(subs) - 1:  # everyone else is queued behind it
        time.sleep(0.001)
    recorder.release.set()
    for t in [first, *rest]:
        t.join(30)
    return answers


def test_callers_queued_during_a_commit_share_the_next_one() -> None:
    recorder = Recorder()
    gc = Committer(recorder, max_records=1000)
    subs = [sub(1, i) for i in range(20)]
    answers = _run_all(gc, recorder, subs)
    assert [len(g) for g in recorder.groups] == [1, 19]
    for s, answer in zip(subs, answers, strict=True):
        assert answer == s.result and s.done
        assert isinstance(answer, tuple) and answer[2] == id(s)


def test_a_failed_commit_fails_its_group_only() -> None:
    recorder = Recorder(fail_group=1)
    gc = Committer(recorder, max_records=5)
    subs = [sub(1, i) for i in range(11)]
    answers = _run_all(gc, recorder, subs)
    # The held first group, then groups of 5 records: the second one fails, whole.
    assert [len(g) for g in recorder.groups] == [1, 5, 5]
    failed = {id(s) for s in recorder.groups[1]}
    for s, answer in zip(subs, answers, strict=True):
        if id(s) in failed:
            assert isinstance(answer, RuntimeError) and str(answer) == "disk on fire"
        else:
            assert isinstance(answer, tuple)


def test_what_escapes_a_commit_reaches_every_caller_of_its_group() -> None:
    def interrupted(group: Sequence[Submission]) -> None:
        raise KeyboardInterrupt

    gc = Committer(interrupted)
    with pytest.raises(KeyboardInterrupt):
        gc.run(sub(1))
    # The next caller leads afresh: nothing is left waiting or leading.
    recorder = Recorder()
    recorder.release.set()
    gc._commit = recorder
    assert gc.run(sub(2))[0] == "committed in"
