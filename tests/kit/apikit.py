"""Shared helpers for the HTTP API tests (`test_api.py`, `test_api_schema.py`).

The service takes its clock from `Settings.clock`, so the history is built on a clock the
test owns: `build_history(tmp)` makes `tmp/data` on `History.clock`, a `SteadyClock` at noon
UTC of the real day (it runs at the real rate, so the service's ClockGuard sees no jump, and
no test runs long enough to reach midnight on it), relative to that day, *today*:

- D2 (today - 2, the log's first day): entries a0..a5; unsealed heads at sizes 3 and 5;
  sealed at 6 (a5 is covered only by the sealed head);
- D1 (today - 1): entries b0, b1; an unsealed head at 2 and the sealed head at 2 (so the
  same size has an unsealed and a sealed head);
- TODAY: entries c0, Y (= b0 again: dedupe is per day), c2 (carries every reserved
  member), c3; an unsealed head at 4; then X (= a5 again) at index 4, covered by no head.

Apps built with `Settings(clock=history.clock)` share that idea of today. A test serving
the history from a `serve` or uvicorn process (which reads the system clock: a Python clock
cannot be handed to it) calls `wait_clear_of_midnight()` before building. `snapshot(data)`
is every row of every table of the SQLite store, read through a connection of its own:
equal snapshots before and after a rejected request prove that nothing stored changed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from capability_anchor import head as heads
from capability_anchor import leaf
from capability_anchor.log import Log, utc_day
from capability_anchor.log.clockguard import monotonic

ISS = "https://resolver.example"
VERSION = "0.2"
IMMUTABLE = "public, max-age=31536000, immutable"
NO_CACHE = "no-cache"
ERROR_STATUS = {
    "bad_request": 400,
    "invalid_record": 400,
    "unauthorized": 401,
    "not_found": 404,
    "method_not_allowed": 405,
    "conflict": 409,
    "too_large": 413,
    "rate_limited": 429,
    "unavailable": 503,
}
MIDNIGHT_MARGIN_S = 45

# What must never reach a client: a traceback, a source location, an exception class name,
# an object repr, a file system path.
_INTERNALS = re.compile(
    r"Traceback \(most recent call last\)"
    r"|File \"[^\"]*\", line \d+"
    r"|site-packages|/work/|/tmp/|\.py\b"
    r"|\b[A-Z][A-Za-z]*(?:Error|Exception)\b"
    r"|<[\w.]+ object at 0x[0-9a-f]+>"
    r"|sqlite3?\b"
)


class Clock:
    """A clock the test moves (the Log's clock is any `() -> float`)."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class SteadyClock:
    """Real seconds counted from `start` (by the monotonic clock): a service on it agrees
    with its ClockGuard, and its day is the test's whatever the system clock says."""

    def __init__(self, start: float) -> None:
        self.start = start
        self._at = monotonic()

    def __call__(self) -> float:
        return self.start + (monotonic() - self._at)


def noon_today() -> SteadyClock:
    """A `SteadyClock` at 12:00 UTC of the real day: twelve hours clear of either midnight."""
    return SteadyClock(day_start(utc_day(time.time())) + 43200)


def day_start(day: str) -> float:
    start = dt.datetime.combine(dt.date.fromisoformat(day), dt.time(), dt.UTC)
    return start.timestamp()


def shift_day(day: str, days: int) -> str:
    return (dt.date.fromisoformat(day) + dt.timedelta(days=days)).isoformat()


def wait_clear_of_midnight(margin: float = MIDNIGHT_MARGIN_S) -> None:
    """Sleep past 00:00 UTC when it is less than `margin` seconds away (or just passed), so
    a test's idea of "today" is the service's for as long as the test runs. Only for tests
    of a server process (`serve`, uvicorn), which reads the system clock; an app built in
    the test takes `Settings(clock=...)` instead."""
    into_day = time.time() % 86400
    if into_day > 86400 - margin:
        time.sleep(86400 - into_day + 2)
    elif into_day < 2:
        time.sleep(2 - into_day)


def rec(tag: str, n: int, **extra: Any) -> dict[str, Any]:
    return {
        "v": VERSION,
        "iss": ISS,
        "sub": f"example:{tag}-{n}",
        "url": f"https://s{n}.{tag}.example/mcp",
        "status": "ok",
        "checked_at": "2026-10-28T10:05:00Z",
        "evidence": {"method": f"{ISS}/method"},
        "n": n,
        **extra,
    }


RESERVED = {
    "iat": 1,
    "exp": 2,
    "anchor": {"day": "2000-01-01", "root": "00" * 32, "url": "https://x.example/roots/x"},
    "proof": {"type": "rfc9162-sha256", "leaf_index": 0, "tree_size": 1, "path": []},
    "jws": "a.b.c",
    "expires": "1970-01-01T00:00:02Z",
}


@dataclass
class History:
    data: Path
    d2: str
    d1: str
    today: str
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # day -> in order
    x: dict[str, Any] = field(default_factory=dict)  # in D2 (covered) and today (uncovered)
    y: dict[str, Any] = field(default_factory=dict)  # in D1 and today, both covered
    token: str = ""
    clock: Callable[[], float] = time.time  # the service's clock (`Settings.clock`)

    def leaf_hashes(self, day: str) -> list[bytes]:
        return [leaf.leaf_hash(r) for r in self.records[day]]


def build_history(
    data: Path, records: str = "observation", service_clock: Callable[[], float] | None = None
) -> History:
    """`records`: the log's record rule ("any" for tests of what SPEC §2 alone allows).
    `service_clock`: the clock today is read from (default `noon_today()`)."""
    service_clock = service_clock or noon_today()
    now = service_clock()
    today = utc_day(now)
    d2, d1 = shift_day(today, -2), shift_day(today, -1)
    clock = Clock(day_start(d2) + 3600)
    a = [rec("a", n) for n in range(6)]
    b = [rec("b", n) for n in range(2)]
    x, y = a[5], b[0]
    c = [rec("c", 0), y, rec("c", 2, **RESERVED), rec("c", 3)]
    with Log.init(data, iss=ISS, records=records, clock=clock) as log:
        log.append(a[:3])
        clock.t += 30
        assert log.checkpoint() is not None  # D2 at 3
        log.append(a[3:5])
        clock.t += 30
        assert log.checkpoint() is not None  # D2 at 5
        log.append(a[5:])  # sealed at 6 only
        clock.t = day_start(d1) + 7200
        log.append(b)
        assert log.checkpoint() is not None  # seals D2; D1 at 2
        clock.t = now
        log.append(c)
        assert log.checkpoint() is not None  # seals D1 (at 2, like its checkpoint); today at 4
        results = log.append([x])
        assert (results[0].day, results[0].leaf_index, results[0].duplicate) == (today, 4, False)
    history = History(data, d2, d1, today, {d2: a, d1: b, today: [*c, x]}, x, y)
    history.clock = service_clock
    history.token = (data / "writer-token").read_text().strip()
    return history


# --- the store, seen from outside ------------------------------------------------------------


def snapshot(data: Path) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """Every row of every table (schema included), through a connection of its own."""
    with contextlib.closing(sqlite3.connect(data / "log.sqlite3")) as conn:
        tables = [
            (str(name), str(sql))
            for name, sql in conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
        out = []
        for name, sql in tables:
            rows = conn.execute(f'SELECT * FROM "{name}"').fetchall()
            out.append((sql, sorted(rows, key=repr)))
        out.append(("user_version", [tuple(conn.execute("PRAGMA user_version").fetchone())]))
    return out


def insert_stamp(data: Path, day: str, tsa: str, token: bytes, gen_time: str) -> None:
    """A stamp row as `capability-anchor timestamp` would store it (plain SQL; the store's
    triggers still apply)."""
    with contextlib.closing(sqlite3.connect(data / "log.sqlite3")) as conn, conn:
        conn.execute(
            "INSERT INTO stamps (day, tsa, token, gen_time, added) VALUES (?, ?, ?, ?, ?)",
            (day, tsa, token, gen_time, int(time.time())),
        )


# --- responses ---------------------------------------------------------------------------------


def assert_no_internals(text: str, echoed: Iterable[str] = ()) -> None:
    """`echoed`: the request's own inputs, which a note may quote back (a fuzzer's day value
    of "sqlite" or "/tmp/x.py" is the client's text, not ours)."""
    for value in sorted(echoed, key=len, reverse=True):
        if value:
            text = text.replace(value, "").replace(repr(value), "")
    found = _INTERNALS.search(text)
    assert found is None, f"a response shows internals ({found.group(0)!r}): {text[:500]}"


def assert_error_parts(
    status: int,
    content_type: str | None,
    content: bytes,
    codes: tuple[str, ...] | None = None,
    echoed: Iterable[str] = (),
) -> dict[str, Any]:
    """`{v, error, note}` whose `error` is one of `codes` (any SPEC §6 code when None), with
    the status SPEC §6 gives it, and nothing internal."""
    assert (content_type or "").split(";")[0] == "application/json", (status, content_type)
    body = json.loads(content)
    assert isinstance(body, dict) and set(body) == {"v", "error", "note"}, (status, body)
    assert body["v"] == VERSION
    assert body["error"] in (codes or tuple(ERROR_STATUS)), (status, body)
    assert status == ERROR_STATUS[body["error"]], (status, body)
    assert isinstance(body["note"], str) and body["note"], body
    assert_no_internals(content.decode("utf-8", "replace"), echoed)
    return body


def assert_error(response: httpx.Response, code: str | tuple[str, ...]) -> dict[str, Any]:
    """`assert_error_parts` for an httpx response; `code` may be a tuple of acceptable codes."""
    codes = (code,) if isinstance(code, str) else code
    return assert_error_parts(
        response.status_code, response.headers.get("content-type"), response.content, codes
    )


@contextlib.contextmanager
def unchanged(data: Path) -> Iterator[None]:
    """Nothing stored changes inside the block."""
    before = snapshot(data)
    yield
    assert snapshot(data) == before, "a rejected request changed stored data"


def head_claims(doc: bytes) -> dict[str, Any]:
    return heads.parse_document(doc).claims


__all__ = [
    "ERROR_STATUS",
    "IMMUTABLE",
    "ISS",
    "NO_CACHE",
    "RESERVED",
    "VERSION",
    "Clock",
    "History",
    "SteadyClock",
    "assert_error",
    "assert_error_parts",
    "assert_no_internals",
    "build_history",
    "day_start",
    "head_claims",
    "insert_stamp",
    "noon_today",
    "rec",
    "shift_day",
    "snapshot",
    "unchanged",
    "wait_clear_of_midnight",
]
