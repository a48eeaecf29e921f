"""`POST /records` in a worker process: the body check AND the append.

The append of a 1,000-record batch is many milliseconds of Python (sequencing, tiles, the
head and proofs for `prove=1`). On a thread of the serving process it holds the GIL that
every SQLite call of a concurrent `GET /proof` must take back, so reads waited for writes.
Here it runs in the body-check pool (`api/bodies.py`): each worker opens ONE `Log` on the
data dir the first time it is asked, and keeps it for its life. SQLite's write lock
serialises it with the service's own writer `Log` (background checkpoints, seal, stamps,
`POST /checkpoint`) and with CLI writers, exactly as between any two writer processes.

The time is read by the serving process through its ClockGuard (so a disagreeing clock is
a 503 before anything is stored) and passed in with the monotonic reading it was taken at;
the worker continues that reading by the monotonic clock (CLOCK_BOOTTIME is one clock for
every process of a boot), as `ClockGuard.pinned` does for the in-process path.

The answer is plain data (exceptions with keyword-only arguments do not survive pickling):
`("ok", the entries as JSON bytes)`, a body-check error `(code, note)`, `("error", (class
name, message, position))` for a `CapabilityAnchorError`, rebuilt at the HTTP edge by
`rebuild` so that its class decides the status and note, or `("crash", traceback)`. It
answers only after COMMIT returned: acknowledged still means durable.
"""

from __future__ import annotations

import contextlib
import logging
import traceback
from collections.abc import Iterable, Iterator
from multiprocessing import util
from pathlib import Path
from typing import Any

from capability_anchor import errors
from capability_anchor.errors import CapabilityAnchorError, InvalidRecord, StoreError
from capability_anchor.log import Log
from capability_anchor.log.clockguard import monotonic

from .bodycheck import Outcome, check_body
from .caching import ordered_answer
from .models import AppendedEntry, ProvedEntry

_logs: dict[Path, Log] = {}
EVENTS = "capability_anchor"  # the Log's event loggers are below it


def _log(data_dir: Path, public_url: str | None) -> Log:
    log = _logs.get(data_dir)
    if log is None:
        # No checkpointer thread: the service's own writer Log copies the WAL back.
        log = Log.open(data_dir, background_checkpoints=False)
        _logs[data_dir] = log
        util.Finalize(log, log.close, exitpriority=10)
    if public_url:
        log.public_url = public_url
    return log


def _forget(data_dir: Path) -> None:
    log = _logs.pop(data_dir, None)
    if log is not None:
        log.close()


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.kept: list[tuple[str, int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.kept.append((record.name, record.levelno, record.getMessage()))


@contextlib.contextmanager
def _events_kept() -> Iterator[list[tuple[str, int, str]]]:
    """(logger, level, message) of what the Log logs meanwhile, for the service to replay."""
    keep = _Keep()
    events = logging.getLogger(EVENTS)
    # A worker has no logging set up: its loggers would drop INFO before any handler.
    level = events.level
    events.setLevel(logging.INFO)
    events.addHandler(keep)
    try:
        yield keep.kept
    finally:
        events.removeHandler(keep)
        events.setLevel(level)


def replay(events: Iterable[tuple[str, int, str]]) -> None:
    """In the service: the worker's event lines, as if its own Log had logged them."""
    for name, level, message in events:
        logging.getLogger(str(name)).log(int(level), "%s", message)


def check_and_append(
    body: bytes,
    iss: str,
    max_records: int,
    data_dir: Path,
    prove: bool,
    now: float,
    at_mono: float,
    public_url: str | None = None,
) -> Outcome:
    """Check `body` (`{"records": [...]}`) and append it to the log in `data_dir` as of the
    time `now` (read at monotonic time `at_mono`); with `prove`, as `append_and_prove`."""
    try:
        log = _log(Path(data_dir), public_url)
        # The log's own record rule (`init --records`), as the in-process path uses it.
        code, value = check_body(
            "records", body, iss, max_records, log.records, now, log.id_namespace
        )
        if code != "ok":
            return (code, value)

        def clock() -> float:
            return now + max(0.0, monotonic() - at_mono)

        log.clock = clock
        with _events_kept() as events:
            if prove:
                out = ordered_answer(list[ProvedEntry], log.append_and_prove(value))
            else:
                entries = [r.to_json() for r in log.append_prepared(value)]
                out = ordered_answer(list[AppendedEntry], entries)
        # Encoded here, from the answer's Structs: bytes cross the pipe and are unpickled
        # (under the service's GIL) far faster than 1,000 dicts. The Log's event lines (a
        # head published for `prove=1`) go back too: the service's log is where an operator
        # reads them.
        return ("ok", (out, events))
    except CapabilityAnchorError as exc:
        if isinstance(exc, StoreError) and not exc.retryable:
            # A damaged or replaced database: open it afresh next time, not a stale handle.
            _forget(Path(data_dir))
        position = exc.position if isinstance(exc, InvalidRecord) else None
        return ("error", (type(exc).__name__, str(exc), position))
    except Exception:  # reported to the service, which logs it and answers 503
        _forget(Path(data_dir))
        return ("crash", traceback.format_exc())


def rebuild(described: Any) -> CapabilityAnchorError:
    """The exception `check_and_append` described, of its own class where that class is in
    `errors` and can be built from a message (else a StoreError, answered 503)."""
    name, message, position = described
    cls = getattr(errors, str(name), None)
    if isinstance(cls, type) and issubclass(cls, InvalidRecord):
        return cls(str(message), position=position)
    if isinstance(cls, type) and issubclass(cls, CapabilityAnchorError):
        try:
            return cls(str(message))
        except TypeError:
            pass
    return StoreError(str(message))


__all__ = ["check_and_append", "rebuild"]
