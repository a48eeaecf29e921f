"""What the log learns about its own published state, and the *behind* state it keeps
(SPEC §13.3: never fork, also after a restore). Sources, what is believed, and a restored
copy's comparison: docs/explanation/procedures.md.
"""

from __future__ import annotations

import hashlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.note import NoteVerifier, open_checkpoint
from capability_anchor.read.source import open_source

from .marks import (
    BEHIND,
    CONFLICT,
    Behind,
    behind_state,
    clear_restored,
    mark_behind,
    not_compared,
    restored_mark,
)
from .policies import stored_policy

if TYPE_CHECKING:
    from capability_anchor.log import Log
    from capability_anchor.note import PolicyWitness

# `--published none`: the operator states that nothing was ever published (SPEC §14.2).
PUBLISHED_NONE = "none"
LEARN_DEADLINE_S = 10.0
LEARN_PARALLEL = 16

_events = logging.getLogger("capability_anchor.published")
# (source, problem) already logged by this process: learning runs every checkpoint interval,
# and a witness without a monitoring view would otherwise say the same thing each time.
_said: set[tuple[str, str]] = set()


def _warn_once(where: str, problem: str) -> None:
    if (where, problem) not in _said:
        _said.add((where, problem))
        _events.warning("learning what was published: %s: %s", where, problem)


# --- learning ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """A checkpoint of this log that a source serves, its log signature verified."""

    source: str
    size: int
    root: bytes
    note: bytes


def monitoring_path(origin: str) -> str:
    """The witness monitoring view of `origin`, relative to the witness's URL prefix."""
    return f"{hashlib.sha256(origin.encode('utf-8')).hexdigest()}/checkpoint"


def verified_checkpoint(log: Log, source: str, note: bytes) -> Seen:
    """`note` if the log's keys sign it under its origin; else CapabilityAnchorError."""
    origin = log.read.history.origin()
    verifiers = [NoteVerifier(origin, key.raw) for key in log.keyset()]
    opened = open_checkpoint(note, list(verifiers), origin=origin)
    return Seen(source, opened.checkpoint.size, opened.checkpoint.root, note)


def _read_checkpoint(log: Log, where: str, path: str, deadline: float) -> Seen | None:
    source = open_source(where, deadline=deadline)
    try:
        note = source.read(path)
    finally:
        source.close()
    if note is None:
        return None
    return verified_checkpoint(log, f"{where.rstrip('/')}/{path}", note)


def judge(log: Log, seen: Seen) -> Behind | None:
    """Behind if `seen` is larger than our history, conflicting if another root (§13.3)."""
    with log.store.read():
        ours = log.store.checkpoint_size()
        root = log.read.history.root(seen.size) if 0 < seen.size <= ours else None
    if seen.size > ours:
        kind, why = (
            BEHIND,
            "a history larger than this data dir's was published (a restored backup?)",
        )
    elif root is not None and root != seen.root:
        kind, why = (
            CONFLICT,
            f"the published root at size {seen.size} is {seen.root.hex()}, ours {root.hex()}",
        )
    else:
        return None
    return Behind(kind, seen.source, seen.size, ours, int(time.time()), why)


def _sources(
    log: Log, published: str | None, publish: Path | None, skip_failing: bool
) -> list[tuple[str, str]]:
    """(where, path) of `--published`, `--publish` and each policy witness's monitoring view
    (with SKIP_FAILING, not witnesses in their backoff)."""
    sources: list[tuple[str, str]] = []
    if published and published != PUBLISHED_NONE:
        sources.append((published, "history/checkpoint"))
    if publish is not None and publish.is_dir():  # not made yet: nothing published there
        sources.append((str(publish), "history/checkpoint"))
    try:
        policy = stored_policy(log)
    except CapabilityAnchorError as exc:
        _warn_once("the stored policy", str(exc))
        policy = None
    origin = log.read.history.origin()
    now = int(log.clock())
    with log.store.read():  # one snapshot for every witness's state, not one each
        for witness in policy.witnesses if policy is not None else ():
            if witness.url is None:
                continue
            if skip_failing:
                state = log.store.witness_state(witness.name)
                if state is not None and state.failures > 0 and state.retry_at > now:
                    continue
            sources.append((witness.url, monitoring_path(origin)))
    return sources


def learn(
    log: Log,
    published: str | None = None,
    *,
    publish: Path | None = None,
    deadline: float = LEARN_DEADLINE_S,
    skip_failing: bool = False,
    before_signing: bool = False,
) -> Behind | None:
    """Ask every source what was published and return the behind state it enters (None: not
    behind); failing sources are logged and ignored. BEFORE_SIGNING: a restored copy's mark
    must be cleared by a comparison here, else NotCompared (SPEC §14.2)."""
    state = behind_state(log.data_dir)
    if state is not None:
        return state
    mark = restored_mark(log.data_dir) if before_signing else None
    if mark is not None and published == PUBLISHED_NONE:
        clear_restored(log.data_dir, "--published none: nothing was ever published")
        mark = None
    sources = _sources(log, published, publish, skip_failing and mark is None)
    if not sources:
        if mark is not None:
            raise not_compared(mark, "nothing to compare it with before it signs")
        return None
    state, holds, problems = _compare(log, sources, deadline)
    if state is not None or mark is None:
        return state
    if not holds:
        raise not_compared(
            mark, f"no published reference could be compared with it ({'; '.join(problems)})"
        )
    clear_restored(
        log.data_dir,
        f"compared with what was published ({', '.join(holds)}: this data dir holds it)",
    )
    return None


def _compare(
    log: Log, sources: list[tuple[str, str]], deadline: float
) -> tuple[Behind | None, list[str], list[str]]:
    """Read every source at once: (behind state, sources held, why others said nothing)."""
    pool = ThreadPoolExecutor(min(LEARN_PARALLEL, len(sources)), thread_name_prefix="learn")
    futures = {
        pool.submit(_read_checkpoint, log, where, path, deadline): where for where, path in sources
    }
    # One deadline for all of them: a source still reading then ends on its own deadline.
    done, late = wait(futures, timeout=deadline + 1.0)
    pool.shutdown(wait=False, cancel_futures=True)
    holds: list[str] = []
    problems: list[str] = []

    def unheard(where: str, problem: str) -> None:
        _warn_once(where, problem)
        problems.append(f"{where}: {problem}")

    for future in late:
        unheard(futures[future], "did not answer in time")
    for future in done:
        where = futures[future]
        try:
            seen = future.result()
        except CapabilityAnchorError as exc:
            unheard(where, f"not believed: {exc}")
            continue
        except OSError as exc:
            unheard(where, str(exc))
            continue
        if seen is None:
            problems.append(f"{where}: no checkpoint")
            continue
        state = judge(log, seen)
        if state is not None:
            mark_behind(log.data_dir, state)
            return behind_state(log.data_dir), holds, problems
        holds.append(seen.source)
    return None, holds, problems


def witness_ahead(log: Log, witness: PolicyWitness, size: int, ours: int) -> Behind | None:
    """A witness's 409 naming `size` > `ours` (SPEC §12.3) is believed only if its monitoring
    view shows a checkpoint of ours that is larger or conflicts: then the log is behind."""
    where = witness.url or ""
    try:
        seen = _read_checkpoint(log, where, monitoring_path(log.read.history.origin()), 10.0)
    except (CapabilityAnchorError, OSError) as exc:
        seen = None
        problem = f"its monitoring view cannot be read: {exc}"
    else:
        problem = "it has no monitoring view (404)"
    state = judge(log, seen) if seen is not None else None
    if state is None:
        _warn_once(
            f"witness {witness.name}",
            f"HTTP 409 naming size {size} (ours {ours}) not believed: {problem}"
            if seen is None
            else f"HTTP 409 naming size {size} (ours {ours}) not believed: its monitoring view "
            f"shows size {seen.size}, which this data dir holds",
        )
        return None
    mark_behind(log.data_dir, state)
    return behind_state(log.data_dir)
