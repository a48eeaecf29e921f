"""`POST /records?prove=1` on a replica that does not hold the sequencer lease (SPEC §13.4).

The leader signs every head; a standby may not. A standby's proved batch is therefore
committed as a plain append (durable, gapless indexes: the store's write lock), the leader
is asked to sign (`Store.wake_signer`: PostgreSQL's NOTIFY, heard on the leader's lease
session), and the answer waits for a head that covers the batch, then proves every entry
against that head as the store holds it, so the anchor and the proof are of one head
whoever signed it. Each second it also tries to sign itself: if the leader is gone, its
lease is free and this replica takes it (a newer term) and signs.

No head within `WAIT_S`: `Unproven` (503). The records are stored by then, and the note
says so: re-sending the batch returns them as duplicates, at their indexes, with proofs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from capability_anchor.errors import LeaseLost, Unproven

from .committer import Submission

if TYPE_CHECKING:
    from .writer import LogWriter

WAIT_S = 10.0
"""How long a standby's proved batch waits for a covering head."""

POLL_S = 0.02
RETRY_S = 1.0


def commit(writer: LogWriter, subs: Sequence[Submission]) -> list[Any]:
    """`LogWriter.commit_group`'s answers: signed by this process when it holds the lease,
    else, for a group that asks for proofs, `commit_and_prove`."""
    try:
        return writer._commit_group(subs)
    except LeaseLost:
        if not any(sub.prove for sub in subs):
            raise
        return commit_and_prove(writer, subs)


def commit_and_prove(writer: LogWriter, subs: Sequence[Submission]) -> list[Any]:
    """The group committed without signing, then each `prove` submission's entries with the
    anchor and proof of the first head that covers them all."""
    plain = [Submission(s.prepared) for s in subs]
    answers = writer._commit_group(plain)
    results = [r for answer in answers for r in answer]
    if not results:
        return answers
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
    anchor = read.anchor(head)
    out: list[Any] = []
    for sub, answer in zip(subs, answers, strict=True):
        if not sub.prove:
            out.append(answer)
            continue
        proofs = read.uncached_proofs(head, [r.leaf_index for r in answer])
        out.append(
            [
                {**r.to_json(), "anchor": anchor, "proof": proof}
                for r, proof in zip(answer, proofs, strict=True)
            ]
        )
    return out


__all__ = ["POLL_S", "WAIT_S", "commit", "commit_and_prove"]
