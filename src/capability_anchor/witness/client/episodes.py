"""Witnessing problems as episodes: one log line when a problem starts, one when it ends,
never one per tick (issue #21). Keyed by (witness, kind), one kind per witness at a time;
counters only grow, `active` is a gauge.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

POLICY = "policy"
"""The stored policy cannot be used now (its log lines do not name the current key, ...)."""
REFUSED = "refused"
"""The witness answered, but not with a cosignature: 403/404, 409, 422, 429, 5xx, a bad
answer."""
UNREACHABLE = "unreachable"
"""No answer: the connection failed, the deadline passed, the exchange broke."""
FAILED = "failed"
"""The submission failed on the log's side (a busy store)."""

KINDS = (POLICY, REFUSED, UNREACHABLE, FAILED)


@dataclass(frozen=True)
class ProblemState:
    """One (witness, kind)'s counters, as `Episodes.snapshot` returns them."""

    witness: str
    problem: str
    active: bool
    """Whether an episode of it is going on now."""
    episodes: int
    """How many episodes of it started (each logged once)."""
    occurrences: int
    """How many times it was seen (every failed submission or skipped round)."""
    since: float | None
    """The wall time the current episode started (None when not active)."""
    detail: str
    """The newest message of it."""


@dataclass
class _Counts:
    episodes: int = 0
    occurrences: int = 0
    since: float | None = None
    detail: str = ""


class Episodes:
    """The problems of one process's witnessing (thread-safe)."""

    def __init__(self, logger: logging.Logger, clock: Callable[[], float] = time.time) -> None:
        self._log = logger
        self._clock = clock
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], _Counts] = {}

    def seen(self, witness: str, problem: str, detail: str, level: int = logging.WARNING) -> None:
        """PROBLEM was seen now: logged if it starts an episode, else counted."""
        ended: list[tuple[str, _Counts]] = []
        with self._lock:
            counts = self._counts.setdefault((witness, problem), _Counts())
            counts.occurrences += 1
            counts.detail = detail
            starts = counts.since is None
            if starts:
                counts.episodes += 1
                counts.since = self._clock()
                ended = self._end_locked(witness, keep=problem)
        for kind, other in ended:
            self._ended(witness, kind, other, f"now {problem}")
        if starts:
            self._log.log(
                level,
                "%s: %s (logged once: the next line says when it ends)",
                _who(witness),
                detail,
            )

    def cleared(self, witness: str, problem: str | None = None) -> None:
        """WITNESS's episode of PROBLEM (default: any) has ended: one line each."""
        with self._lock:
            ended = self._end_locked(witness, keep=None, only=problem)
        for kind, counts in ended:
            self._ended(witness, kind, counts, "resolved")

    def _end_locked(
        self, witness: str, keep: str | None, only: str | None = None
    ) -> list[tuple[str, _Counts]]:
        ended: list[tuple[str, _Counts]] = []
        for (name, kind), counts in self._counts.items():
            if name != witness or kind == keep or counts.since is None:
                continue
            if only is not None and kind != only:
                continue
            ended.append((kind, _Counts(counts.episodes, counts.occurrences, counts.since)))
            counts.since = None
        return ended

    def _ended(self, witness: str, kind: str, counts: _Counts, how: str) -> None:
        lasted = self._clock() - (counts.since or 0.0)
        self._log.info(
            "%s: the %s problem has ended (%s after %.0f s)", _who(witness), kind, how, lasted
        )

    def active(self, witness: str, problem: str) -> bool:
        with self._lock:
            counts = self._counts.get((witness, problem))
            return counts is not None and counts.since is not None

    def snapshot(self) -> list[ProblemState]:
        """Every (witness, kind) seen so far, sorted (what a metrics endpoint exports)."""
        with self._lock:
            return [
                ProblemState(
                    w, k, c.since is not None, c.episodes, c.occurrences, c.since, c.detail
                )
                for (w, k), c in sorted(self._counts.items())
            ]


def _who(witness: str) -> str:
    return f"witness {witness}" if witness else "witnessing"
