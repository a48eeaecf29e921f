"""When the log submits to its witnesses: one round now (`cosign`), and the service's
schedule (`Witnessing`, driven by `api.background`).

    outcomes = run_round(log, deadline=10.0)             # every policy witness, in parallel
    w = Witnessing(log, interval=60.0)                    # the service
    for witness in w.due():                               # each in a thread of its own
        w.submit(witness)

A witness is due when the history has a checkpoint it has not cosigned, it is not stopped,
its retry time (after a failure) has passed, no submission to it is in flight, and none was
made in the last checkpoint interval (SPEC §12.3: at most one per witness per interval).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ..note import Policy, PolicyWitness
from .client import DEFAULT_DEADLINE_S
from .policyfile import check_policy, submitted_to
from .rounds import STOPPED, Outcome, submit

if TYPE_CHECKING:
    from ..log import Log

MAX_PARALLEL = 16  # witnesses asked at once by `cosign`


def stored_policy(log: Log) -> Policy | None:
    """The data dir's policy, checked again (the log's vkey never changes, but a policy is
    read as untrusted input every time), or None without one."""
    with log.store.read():
        text = log.store.policy()
    if text is None:
        return None
    return check_policy(text, log.read.history.vkeys())


def run_round(
    log: Log,
    policy: Policy | None = None,
    *,
    deadline: float = DEFAULT_DEADLINE_S,
    resume: bool = False,
) -> list[Outcome]:
    """One submission to every witness of POLICY (default: the stored one) that has a URL,
    all at once, so a hanging witness costs the round one deadline, not one per witness.
    Outcomes in policy order."""
    policy = policy if policy is not None else stored_policy(log)
    witnesses = submitted_to(policy) if policy is not None else []
    if not witnesses:
        return []
    with ThreadPoolExecutor(min(MAX_PARALLEL, len(witnesses)), "cosign") as pool:
        futures = [pool.submit(submit, log, w, deadline=deadline, resume=resume) for w in witnesses]
        return [f.result() for f in futures]


class Witnessing:
    """The service's witnessing schedule (one per process doing background work)."""

    def __init__(
        self,
        log: Log,
        interval: float,
        *,
        deadline: float = DEFAULT_DEADLINE_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = log
        self.interval = interval
        self.deadline = deadline
        self._monotonic = monotonic
        self._policy: tuple[bytes, Policy] | None = None
        self._last: dict[str, float] = {}
        self._in_flight: set[str] = set()
        self._lock = threading.Lock()

    def _current_policy(self) -> Policy | None:
        """The stored policy, parsed again only when its text changed (`policy FILE` while
        the service runs takes effect at the next round)."""
        with self.log.store.read():
            text = self.log.store.policy()
        if text is None:
            return None
        if self._policy is None or self._policy[0] != text:
            self._policy = (text, check_policy(text, self.log.read.history.vkeys()))
        return self._policy[1]

    def due(self) -> list[PolicyWitness]:
        """The witnesses to submit to now (each marked in flight until `submit` returns)."""
        policy = self._current_policy()
        if policy is None:
            return []
        store = self.log.store
        with store.read():
            size = store.checkpoint_size()
            states = {s.witness: s for s in store.witness_states()}
        now, wall = self._monotonic(), self.log.clock()
        out: list[PolicyWitness] = []
        with self._lock:
            for witness in submitted_to(policy):
                state = states.get(witness.name)
                if witness.name in self._in_flight or size == 0:
                    continue
                if state is not None and (
                    state.size >= size or state.status == STOPPED or state.retry_at > wall
                ):
                    continue
                last = self._last.get(witness.name)
                if last is not None and now - last < self.interval:
                    continue
                self._last[witness.name] = now
                self._in_flight.add(witness.name)
                out.append(witness)
        return out

    def submit(self, witness: PolicyWitness) -> Outcome:
        """One submission to a witness `due` returned (blocking: run it in a thread)."""
        try:
            return submit(self.log, witness, deadline=self.deadline, wait=False)
        finally:
            with self._lock:
                self._in_flight.discard(witness.name)
