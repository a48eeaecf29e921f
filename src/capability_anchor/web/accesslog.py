"""The service's log on stderr (JSON Lines or plain, `serve --log-format`, env
CAPABILITY_ANCHOR_LOG_FORMAT): one access line per request, refusals with their `error` and
`note` (it replaces uvicorn's access log), and the service's events. Every logger under
`capability_anchor` goes to the one handler installed here; records still propagate. Access
lines are no log records: formatted at once, written in batches by the loop (`_Batch`)."""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import re
import sys
import threading
import time
from bisect import bisect_left
from typing import Any
from urllib.parse import quote

from capability_anchor.envvars import LOG_FORMAT
from capability_anchor.errors import UsageError
from capability_anchor.metrics.defs import LATENCY_BUCKETS
from capability_anchor.metrics.service import count_requests, observe

from .exchange import ORIGINAL_METHOD, AccessLine, AnchorApp, Scope

FORMATS = ("plain", "json")
ROOT_LOGGER = "capability_anchor"
ACCESS_LOGGER = "capability_anchor.access"
EVENTS_LOGGER = "capability_anchor.service"

# A query value longer than this is cut (leaf hashes are 64 characters and kept whole); the
# path is cut at MAX_PATH. Long values say nothing an operator needs and can be anyone's.
MAX_QUERY_VALUE = 64
MAX_PATH = 200
_VISIBLE = re.compile(r"[!#-\[\]-~…]*")


events = logging.getLogger(EVENTS_LOGGER)
_access = logging.getLogger(ACCESS_LOGGER)


def log_format(value: str | None = None) -> str:
    """The format asked for (argument, else env, else plain); anything else is a usage error."""
    fmt = value if value is not None else (LOG_FORMAT.get() or "plain")
    if fmt not in FORMATS:
        raise UsageError(f"log format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    return fmt


_second = (-1, "")
_MILLIS = [f".{n:03d}Z" for n in range(1000)]


def _utc(ts: float) -> str:
    global _second
    whole = int(ts)
    if whole != _second[0]:  # strftime once a second, not once a line
        _second = (whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)))
    return _second[1] + _MILLIS[int(ts * 1000) % 1000]


def access_line(json_lines: bool, ts: float, level: str, fields: dict[str, Any]) -> str:
    """One access line: `fields` are method, path, status, ms, client, then error and note
    when the refusal gave them."""
    if json_lines:
        doc: dict[str, Any] = {"ts": _utc(ts), "level": level, "event": "request", **fields}
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    reason = ""
    if "error" in fields:
        reason = f" {fields['error']}"
        if "note" in fields:
            reason += f": {fields['note']}"
    return (
        f"{_utc(ts)} {level} {fields['client']} "
        f'"{fields["method"]} {fields["path"]}" {fields["status"]} '
        f"{fields['ms']} ms{reason}"
    )


class _Formatter(logging.Formatter):
    def __init__(self, fmt: str) -> None:
        super().__init__()
        self.json = fmt == "json"

    def format(self, record: logging.LogRecord) -> str:
        level = record.levelname.lower()
        if self.json:
            doc: dict[str, Any] = {"ts": _utc(record.created), "level": level}
            doc["event"] = record.name.removeprefix(ROOT_LOGGER + ".")
            doc["msg"] = record.getMessage()
            return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
        name = record.name.removeprefix(ROOT_LOGGER + ".")
        message = record.getMessage()
        if name == record.name:  # a library's (DRIVER_LOGGERS): libpq's notes span lines
            message = " ".join(message.split())
        return f"{_utc(record.created)} {level} {name}: {message}"


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is at the time (it is replaced in tests and by
    embedding hosts); a handler bound to an old stream would write into a closed file. The
    access lines held so far go first: the log stays in order."""

    def emit(self, record: logging.LogRecord) -> None:
        _batch.flush()
        self.stream = sys.stderr
        super().emit(record)


Exchange = tuple[Scope, int, bytes, float, float]
"""An answered exchange as the log holds it until its line is made: (its scope, status, a
refusal's first bytes, seconds taken, `time.time()` at its end)."""


class _Batch:
    """Answered exchanges waiting for their access lines to be made and written to stderr,
    and their counts to be added to the metrics (`metrics.service.count_requests`): at most
    FLUSH_S after the first of them, at once past FLUSH_LINES, before any event line or
    scrape, at the app's shutdown and at exit (decisions/37-stack.md, 37-base.md, 37-edge4.md).
    Added to on the event loop; flushed from any thread."""

    FLUSH_S = 0.1
    FLUSH_LINES = 256

    def __init__(self) -> None:
        self.held: list[Exchange] = []
        self.lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.timer = False

    def add(self, exchange: Exchange) -> None:
        with self.lock:
            self.held.append(exchange)
            held = len(self.held)
        loop = asyncio.get_running_loop()
        if held >= self.FLUSH_LINES:
            self.flush()
        elif not self.timer or loop is not self.loop:
            self.loop, self.timer = loop, True
            loop.call_later(self.FLUSH_S, self._due)

    def _due(self) -> None:
        self.timer = False
        self.flush()

    def flush(self) -> None:
        with self.lock:
            if not self.held:
                return
            held, self.held = self.held, []
            lines: list[str] = []
            tally: dict[tuple[str, str, int], list[float]] = {}
            for exchange in held:
                _account(exchange, lines, tally)
            count_requests(tally)
            if lines:
                sys.stderr.write("\n".join(lines) + "\n")
                sys.stderr.flush()


def _account(
    exchange: Exchange, lines: list[str], tally: dict[tuple[str, str, int], list[float]]
) -> None:
    """One exchange's access line (if its level is on) and its count and latency."""
    scope, status, refusal, elapsed, ts = exchange
    method = str(scope.get(ORIGINAL_METHOD) or scope.get("method", ""))
    labels = (route_of(scope), method, status)
    counts = tally.get(labels)
    if counts is None:
        counts = tally[labels] = [0.0] * (len(LATENCY_BUCKETS) + 3)
    counts[0] += 1
    counts[1] += elapsed
    counts[2 + bisect_left(LATENCY_BUCKETS, elapsed)] += 1
    level = logging.INFO if 0 < status < 400 else logging.WARNING
    if not _access.isEnabledFor(level):
        return
    client = scope.get("client")
    fields: dict[str, Any] = {
        "method": method,
        "path": loggable_path(scope),
        "status": status,
        "ms": round(elapsed * 1000, 2),
        "client": client[0] if client else "-",
    }
    if status >= 400:
        fields.update(_reason(refusal))
    name = "info" if level == logging.INFO else "warning"
    lines.append(access_line(_json_lines, ts, name, fields))


_batch = _Batch()


def flush() -> None:
    """Write the access lines and counts held so far (at exit, at the app's shutdown, before
    a scrape)."""
    _batch.flush()


atexit.register(flush)


def _forked() -> None:
    global _batch
    _batch = _Batch()  # a child writes only its own lines


os.register_at_fork(after_in_child=_forked)


# Libraries whose warnings the service's log carries, in its format. psycopg_pool reports
# a lost connection and each failed reconnect on `psycopg.pool`; with no handler there,
# Python printed them bare on stderr (its last-resort handler), plain text, several lines
# for one libpq error, in the middle of a JSON Lines log.
DRIVER_LOGGERS = ("psycopg",)
_json_lines = False
"""The access lines' format: that of the handler `configure` installed."""


def _attach(fmt: str | None, names: tuple[str, ...]) -> None:
    """One stderr handler in the format `fmt` (checked) on the loggers `names`, in place of
    any such handler they had."""
    global _json_lines
    _batch.flush()  # the lines held so far in the format they were logged in
    handler = _Stderr()
    handler.setFormatter(_Formatter(log_format(fmt)))
    if ROOT_LOGGER in names:
        _json_lines = log_format(fmt) == "json"
    for name in names:
        logger = logging.getLogger(name)
        for old in list(logger.handlers):
            if isinstance(old, _Stderr):
                logger.removeHandler(old)
        logger.addHandler(handler)
    driver = logging.getLogger(DRIVER_LOGGERS[0])
    if driver.level == logging.NOTSET:
        driver.setLevel(logging.WARNING)  # its warnings and errors, not its chatter


def configure(fmt: str | None = None) -> None:
    """Install (or replace) the service's one stderr handler in the given format."""
    _attach(fmt, (ROOT_LOGGER, *DRIVER_LOGGERS))
    root = logging.getLogger(ROOT_LOGGER)
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)
    # Ours replaces uvicorn's (a disabled logger drops what it is given).
    logging.getLogger("uvicorn.access").disabled = True


def configured_format() -> str | None:
    """The format of the handler `configure` installed in this process (None: none)."""
    for handler in logging.getLogger(ROOT_LOGGER).handlers:
        if isinstance(handler, _Stderr) and isinstance(handler.formatter, _Formatter):
            return "json" if handler.formatter.json else "plain"
    return None


def configure_drivers(fmt: str) -> None:
    """In another process of the service's (the sequencer candidate, whose own events the
    service replays in its log), the drivers' warnings in the service's format."""
    _attach(fmt, DRIVER_LOGGERS)


def _visible(text: str) -> str:
    """`text` as is when it is visible ASCII without `"` or `\\` (what a request line
    carries), else percent-encoded: a line of the log is never split or forged by a path."""
    return text if _VISIBLE.fullmatch(text) else quote(text, safe="/:@!$&'()*+,;=-._~%?")


def loggable_path(scope: Scope) -> str:
    """The path as sent, and the query with each long value cut to its first characters
    (not decoded: what the client sent, made safe for one log line)."""
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if isinstance(raw, bytes) else scope.get("path", "")
    path = _visible(path)
    if len(path) > MAX_PATH:
        path = path[:MAX_PATH] + "…"
    query = scope.get("query_string", b"").decode("latin-1")
    if not query:
        return path
    if len(query) > MAX_QUERY_VALUE:
        parts = []
        for part in query.split("&"):
            name, eq, value = part.partition("=")
            if len(value) > MAX_QUERY_VALUE:
                value = value[:16] + "…"
            parts.append(f"{name[:MAX_QUERY_VALUE]}{eq}{value}")
        query = "&".join(parts)
    return f"{path}?{_visible(query)}"


def _reason(body: bytes) -> dict[str, str]:
    try:
        doc = json.loads(body)
    except ValueError:
        return {}
    if not isinstance(doc, dict):
        return {}
    return {k: doc[k] for k in ("error", "note") if isinstance(doc.get(k), str)}


UNROUTED = "(unrouted)"
"""The route label of a request no route took (404, 405 before routing): raw paths are
anyone's, so they never become labels."""


def route_of(scope: Scope) -> str:
    """The route template that took the request (`/roots/{day:str}`), never the raw path:
    the label's values are the app's routes, a bounded set."""
    if scope.get("route_handler") is None:
        return UNROUTED
    return str(scope.get("path_template") or UNROUTED)


def _exchange_logger(writes: tuple[str, str] | None) -> AccessLine:
    """The app's `log_exchange`: the exchange held for its access line and its count in the
    metrics (`_Batch`). A refusal of the `writes` route ((method, template), `POST /records`)
    is also counted by its error code, at once."""

    def logged(scope: Scope, status: int, refusal: bytes, started: float) -> None:
        _batch.add((scope, status, refusal, time.perf_counter() - started, time.time()))
        if status >= 400 and writes is not None:
            method = str(scope.get(ORIGINAL_METHOD) or scope.get("method", ""))
            if (method, route_of(scope)) == writes:
                error = _reason(refusal).get("error")
                observe().rejected.labels(error or str(status)).inc()

    return logged


def litestar_logging() -> Any:
    """Litestar's own logging ("litestar" logger: unexpected errors) without the handler it
    would put on the root logger, which would print every line of ours a second time."""
    from litestar.logging.config import LoggingConfig

    return LoggingConfig(configure_root_logger=False)


def install(app: AnchorApp, writes: tuple[str, str] | None = None) -> None:
    """Log every request `app` answers (its `log_exchange`), and its start and shutdown."""
    if configured_format() is None:
        configure()
    app.log_exchange = _exchange_logger(writes)

    async def started(_: Any) -> None:
        events.info("started (pid %d)", os.getpid())

    async def stopping(_: Any) -> None:
        events.info("shutting down: no new connections; background work finishes")

    async def stopped(_: Any) -> None:
        _batch.flush()  # every access line before the last event
        events.info("stopped (pid %d)", os.getpid())

    app.on_startup.append(started)
    app.on_shutdown.insert(0, stopping)
    app.on_shutdown.append(stopped)
