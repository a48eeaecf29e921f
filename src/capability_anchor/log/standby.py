"""`POST /records?prove=1` on a replica that does not hold the sequencer lease (SPEC §13.4).

The batch is committed unsigned, the leader is asked to sign, and the entries are proved
against the first head that covers them (`Unproven` after `WAIT_S`). Why this way:
docs/explanation/write-path.md#prove1-on-a-standby.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from capability_anchor.errors import LeaseLost, Unproven

from .committer import Submission, answers

if TYPE_CHECKING:
    from .writer import LogWriter

WAIT_S = 10.0
"""How long a standby's proved batch waits for a covering head."""

POLL_S = 0.02
RETRY_S = 1.0


def commit_and_prove(writer: LogWriter, subs: Sequence[Submission]) -> list[Any]:
    """The group committed without signing, then each `prove` submission's entries with the
    anchor and proof of the first head that covers them all."""
    plain = [Submission(s.prepared) for s in subs]
    plain_answers = writer._commit_group(plain)
    results = [r for answer in plain_answers for r in answer]
    if not results:
        return plain_answers
    day = results[0].day
    last = max(r.leaf_index for r in results)
    store, read = writer._store, writer._log.read
    store.wake_signer()
    deadline = time.monotonic() + WAIT_S
    retry = time.monotonic() + RETRY_S
    while True:
        with store.read():
            head = store.newest_covering(day, last)
        if head is not None:
            break
        now = time.monotonic()
        if now >= deadline:
            raise Unproven(
                f"no head of {day} covers index {last} after {WAIT_S:.0f} s (is a leader signing?)"
            )
        if now >= retry:
            retry = now + RETRY_S
            try:
                writer.checkpoint()  # the leader gone: its lease is free, and ours to take
            except LeaseLost:
                store.wake_signer()
        time.sleep(POLL_S)
    return answers(subs, results, read, head)
