"""Submitting the history's newest checkpoint to one witness, and what is stored afterwards
(SPEC §12.3): read, exchange, store, with no lock held while the network is used (the steps
and their crash safety: docs/explanation/procedures.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from capability_anchor.errors import MalformedNote, WitnessError
from capability_anchor.log.published import witness_ahead
from capability_anchor.metrics.service import observe
from capability_anchor.note import PolicyWitness, parse_note
from capability_anchor.store import CosignatureRow, WitnessState

from .client import (
    COSIGNED,
    DEFAULT_DEADLINE_S,
    FAILED,
    RETRY_FROM,
    STOP,
    UNKNOWN,
    Answer,
    Sent,
    Verdict,
    judge,
    post,
    post_async,
    request_body,
)

if TYPE_CHECKING:
    from httpx import AsyncClient

    from capability_anchor.log import Log

Offload = Callable[..., Awaitable[Any]]  # `await offload(fn, *args)`: fn off the event loop

log = logging.getLogger("capability_anchor.witnessing")

# After a failure: 30 s, doubling, at most an hour, with jitter (several logs must not
# hammer a recovering witness in step). A witness that does not know the log: an hour.
RETRY_FIRST_S = 30.0
RETRY_MAX_S = 3600.0
UNKNOWN_RETRY_S = 3600.0

# WitnessState.status
OK, RETRY, STOPPED = "ok", "retry", "stopped"
# Outcome.problem (an episode kind): answered, but not with a cosignature (403/404, 409, 422,
# 429, 5xx, a bad answer); no answer (the connection failed, the deadline passed).
REFUSED, UNREACHABLE = "refused", "unreachable"
# Outcome.result: cosigned now, nothing to submit, failed (retried later), stopped.
CURRENT, STOPPED_RESULT = "current", "stopped"


@dataclass(frozen=True)
class Outcome:
    """What one submission did, as `cosign` prints it."""

    witness: str
    old: int
    size: int
    result: str
    detail: str
    problem: str | None = None  # when it failed: REFUSED or UNREACHABLE

    @property
    def ok(self) -> bool:
        return self.result in (COSIGNED, CURRENT)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "problem"}


def submit(
    log_: Log,
    witness: PolicyWitness,
    *,
    deadline: float = DEFAULT_DEADLINE_S,
    resume: bool = False,
    wait: bool = True,
) -> Outcome:
    """Submit the newest checkpoint to WITNESS (docs/explanation/procedures.md). A stopped
    witness is skipped unless RESUME (the operator acts); with WAIT false, a witness another
    process is submitting to right now is skipped rather than waited for."""

    async def send(body: bytes) -> Answer:
        return post(witness.url or "", body, deadline=deadline)

    async def inline(fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)

    outcome, stored = asyncio.run(_submit(log_, witness, send, inline, resume, wait))
    if stored is not None:
        _report(outcome, stored)
    return outcome


async def submit_async(
    log_: Log,
    witness: PolicyWitness,
    client: AsyncClient,
    offload: Offload,
    *,
    deadline: float = DEFAULT_DEADLINE_S,
) -> Outcome:
    """`submit` (WAIT false, no RESUME) with the exchange on this event loop and CLIENT,
    and the store's steps through OFFLOAD. Nothing is logged: the caller reports."""

    async def send(body: bytes) -> Answer:
        return await post_async(client, witness.url or "", body, deadline=deadline)

    return (await _submit(log_, witness, send, offload, False, False))[0]


async def _submit(
    log_: Log,
    witness: PolicyWitness,
    send: Callable[[bytes], Awaitable[Answer]],
    offload: Offload,
    resume: bool,
    wait: bool,
) -> tuple[Outcome, int | None]:
    """Both `submit`s: the outcome, and how many cosignatures were stored (None: no exchange)."""
    with _exclusive(log_, witness.name, wait) as mine:  # non-blocking unless WAIT
        if not mine:
            return Outcome(witness.name, 0, 0, FAILED, "another process is submitting to it"), None
        begun = await offload(_begin, log_, witness, resume)
        if isinstance(begun, Outcome):
            return begun, None
        state, sent = begun
        verdict = await _ask(log_, sent, send, offload)
        if verdict.kind == RETRY_FROM and verdict.witness_size is not None:
            sent = Sent(sent.witness, verdict.witness_size, sent.size, sent.checkpoint)
            verdict = await _ask(log_, sent, send, offload)
            if verdict.kind == RETRY_FROM:  # retried once: a second 409 is a failure
                verdict = Verdict(FAILED, verdict.detail + " (again)", (), verdict.witness_size)
        return await offload(_store, log_, state, sent, verdict)  # type: ignore[no-any-return]


def _begin(log_: Log, witness: PolicyWitness, resume: bool) -> tuple[WitnessState, Sent] | Outcome:
    """Step 1: the witness's state and the request to send, or the outcome without one."""
    with log_.store.read():
        state = log_.store.witness_state(witness.name) or WitnessState(
            witness.name, 0, OK, 0, 0, "never submitted to", 0
        )
    if state.status == STOPPED and not resume:
        return Outcome(witness.name, state.size, state.size, STOPPED_RESULT, state.detail)
    with log_.store.read():
        size = log_.store.checkpoint_size()
        if size > 0 and state.size < size:
            return state, Sent(witness, state.size, size, log_.read.history.checkpoint(size))
    if state.size > size:
        # Never stored by a submission (a 409's size is kept only up to ours): the
        # store was changed. Said, not taken for "cosigned", which would end the
        # submissions to this witness silently.
        detail = _BEYOND.format(old=state.size, size=size)
        log.error("witness %s: %s", witness.name, detail)
        return Outcome(witness.name, state.size, size, FAILED, detail)
    return Outcome(witness.name, state.size, size, CURRENT, f"cosigned size {size}")


_BEYOND = (
    "the stored state says it cosigned size {old}, beyond the newest checkpoint {size}: the "
    "store was changed (run `capability-anchor audit`); nothing is submitted to it"
)


@contextlib.contextmanager
def _exclusive(log_: Log, name: str, wait: bool) -> Iterator[bool]:
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]
    fd = os.open(log_.data_dir / f"witness-{digest}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the flock


async def _ask(
    log_: Log, sent: Sent, send: Callable[[bytes], Awaitable[Answer]], offload: Offload
) -> Verdict:
    # tlog-witness: the proof is empty from size 0
    history = log_.read.history
    proof = await offload(history.consistency, sent.old, sent.size) if sent.old else []
    body = request_body(sent.old, proof, sent.checkpoint)
    started = time.monotonic()
    try:
        answer = await send(body)
    except WitnessError as exc:
        verdict = Verdict(FAILED, str(exc), answered=False)
    else:
        now = int(log_.clock())
        verdict = await offload(lambda: judge(answer, sent, now=now))
    # Witness names come from the stored policy: a bounded set of labels. The duration first:
    # a scrape that sees the exchange counted then sees its duration too.
    m = observe()
    m.witness_seconds.labels(sent.witness.name).observe(time.monotonic() - started)
    m.witness_requests.labels(sent.witness.name, verdict.kind).inc()
    return verdict


def _store(log_: Log, before: WitnessState, sent: Sent, verdict: Verdict) -> tuple[Outcome, int]:
    """Step 3: the verdict's cosignatures and the witness's new state, in one short
    transaction; the outcome and how many cosignatures were stored."""
    now = int(log_.clock())
    name = sent.witness.name
    stored = 0
    # A crash before this commit leaves a size the witness cosigned unrecorded: the next
    # submission, from the old size, gets a 409 naming it and retries from there.
    with log_.writer.lock, log_.store.write():
        if not _in_stored_policy(log_, sent.witness):
            outcome = Outcome(name, sent.old, sent.size, FAILED, _UNSTORED.format(name=name))
            log.error("witness %s: %s", name, outcome.detail)
            return outcome, 0
        rekeyed = verdict.kind == UNKNOWN and _rekeyed(log_, before.size, sent.checkpoint)
        state = _next_state(before, sent, verdict, now, rekeyed)
        if verdict.kind == COSIGNED:
            stored = _insert(log_, name, sent.size, verdict, now)
        log_.store.set_witness_state(state)
    if verdict.kind == STOP and (verdict.witness_size or 0) > sent.size:
        # It cosigned more of this log than this data dir holds: sign nothing more.
        witness_ahead(log_, sent.witness, verdict.witness_size or 0, sent.size)
    problem = None
    if verdict.kind != COSIGNED:
        problem = REFUSED if verdict.answered else UNREACHABLE
    result = {COSIGNED: COSIGNED, STOP: STOPPED_RESULT}.get(verdict.kind, FAILED)
    outcome = Outcome(name, sent.old, sent.size, result, verdict.detail, problem)
    return outcome, stored


# `cosign --policy FILE` asks witnesses the stored policy may not list. What they answer
# is not stored: the audit checks every cosignature against the stored policy in force when
# it was stored, and could not verify one by a witness (or a key) that policy does not list.
_UNSTORED = (
    "answered, but nothing is stored: the stored policy does not list witness {name} with "
    "this key (store the policy first: `capability-anchor policy FILE`)"
)


def _in_stored_policy(log_: Log, witness: PolicyWitness) -> bool:
    stored = log_.read.history.parsed_policy()
    listed = None if stored is None else stored.witness(witness.name)
    return listed is not None and listed.verifier.vkey() == witness.verifier.vkey()


def _rekeyed(log_: Log, cosigned: int, checkpoint: bytes) -> bool:
    """Whether CHECKPOINT is signed by another of our keys than the checkpoint of size
    COSIGNED that the witness last cosigned (a rotation the witness has not learned yet)."""
    if cosigned == 0:
        return False
    older = log_.store.checkpoint_note(cosigned)
    try:
        if older is None:
            return False
        return parse_note(older).signatures[0].key_id != parse_note(checkpoint).signatures[0].key_id
    except MalformedNote:
        return False


def _insert(log_: Log, name: str, size: int, verdict: Verdict, now: int) -> int:
    """The first verified line of the witness for SIZE, unless one is stored already (a
    second cosignature of one size would only differ in its timestamp)."""
    store = log_.store
    kid = verdict.cosignatures[0][0].key_id
    if any(c.witness == name and c.key_id == kid for c in store.cosignatures(size)):
        return 0
    line, timestamp = verdict.cosignatures[0]
    row = CosignatureRow(name, line.key_id, size, timestamp, line.line().rstrip("\n"))
    return int(store.insert_cosignature(row, now))


def _next_state(
    before: WitnessState, sent: Sent, verdict: Verdict, now: int, rekeyed: bool = False
) -> WitnessState:
    name = sent.witness.name
    known = verdict.witness_size if verdict.witness_size is not None else before.size
    if verdict.kind == COSIGNED:
        return WitnessState(name, sent.size, OK, 0, 0, verdict.detail, now)
    failures = before.failures + 1
    if verdict.kind == STOP:
        return WitnessState(name, before.size, STOPPED, 0, failures, verdict.detail, now)
    if rekeyed:
        delay = 0.0  # at the next interval (the schedule's limit): docs/explanation/procedures.md
    elif verdict.kind == UNKNOWN:
        delay = UNKNOWN_RETRY_S
    else:
        delay = retry_delay(failures)
    # A size the witness named (a 409) is where the next submission starts.
    size = known if known <= sent.size else before.size
    return WitnessState(name, size, RETRY, now + round(delay), failures, verdict.detail, now)


def retry_delay(failures: int) -> float:
    """30 s after the first failure, doubling, at most an hour, jittered by ±20%."""
    delay = RETRY_FIRST_S * float(1 << min(max(failures, 1) - 1, 20))
    return min(RETRY_MAX_S, delay * random.uniform(0.8, 1.2))  # noqa: S311 (jitter)


def _report(outcome: Outcome, stored: int) -> None:
    where = f"witness {outcome.witness} (old {outcome.old}, size {outcome.size})"
    if outcome.result == COSIGNED:
        log.info("%s: %s, %d cosignature(s) stored", where, outcome.detail, stored)
    elif outcome.result == STOPPED_RESULT:
        log.error("%s: %s", where, outcome.detail)
    else:
        log.warning("%s: %s; retried later", where, outcome.detail)
