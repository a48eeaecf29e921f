"""Reading what an auditor is handed, bounded as it is read: files and stdin by size (at most limit
+ 1 bytes are ever read), HTTP GETs by size and one deadline for the whole exchange.
`verify-proof`'s inputs and the monitor's reads come here; urllib3 is imported only when a `Getter`
is made."""

from __future__ import annotations

import contextlib
import functools
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from capability_anchor.errors import CapabilityAnchorError, InputError, UsageError

DEFAULT_DEADLINE_S = 30.0
"""`--deadline`: how long one GET may take, from connecting to the last byte of the body."""
MAX_REDIRECTS = 5

INPUT_LIMIT = 1 << 20
"""What any one input may be unless its kind has its own limit (a policy, a tlog-proof):
1 MiB, far above a record, a head document, a JWK set or a CA bundle."""


def too_large(where: str, limit: int) -> str:
    return f"{where}: larger than {limit} bytes, the limit for this input (read no further)"


def read_stream(
    stream: BinaryIO,
    where: str,
    *,
    limit: int = INPUT_LIMIT,
    error: type[CapabilityAnchorError] = InputError,
) -> bytes:
    """At most `limit` bytes of STREAM, read to its end; more is `error`, naming `where`."""
    data = stream.read(limit + 1)  # a buffered read: loops until limit + 1 bytes or the end
    if len(data) > limit:
        raise error(too_large(where, limit))
    return data


def read_file(
    path: str | Path,
    *,
    limit: int = INPUT_LIMIT,
    error: type[CapabilityAnchorError] = InputError,
    name: str | None = None,
) -> bytes:
    """A file's bytes, at most `limit`; unreadable or larger raises `error` naming it."""
    where = name or str(path)
    try:
        with Path(path).open("rb") as stream:
            return read_stream(stream, where, limit=limit, error=error)
    except OSError as exc:
        raise error(f"cannot read {where}: {exc.strerror or exc}") from None


# --- HTTP GET ---------------------------------------------------------------------------------


def check_deadline(seconds: float) -> float:
    if not seconds > 0 or seconds == float("inf"):
        raise UsageError(f"--deadline must be a positive number of seconds, got {seconds:g}")
    return seconds


class Getter:
    """GETs with urllib3 (`parallel` kept-alive connections), each bounded by `deadline` in all and
    a size limit: `_WATCH` shuts the socket of a GET past its deadline (urllib3's timeouts are per
    read). Redirects are followed within the deadline; nothing is retried. urllib3, not httpx: half
    the CPU per GET."""

    def __init__(self, base: str, *, deadline: float = DEFAULT_DEADLINE_S, parallel: int = 1):
        import urllib3  # lazily: reading files needs no HTTP client

        self.deadline = check_deadline(deadline)
        self._errors: tuple[type[Exception], ...] = (urllib3.exceptions.HTTPError, OSError)
        retries = urllib3.Retry(
            total=MAX_REDIRECTS, connect=0, read=0, status=0, other=0, redirect=MAX_REDIRECTS
        )
        options: dict[str, Any] = {
            "maxsize": parallel,
            "block": True,
            "timeout": urllib3.Timeout(deadline),
            "retries": retries,
        }
        proxy = proxy_for(base)
        self._http: urllib3.PoolManager = (
            urllib3.PoolManager(**options)
            if proxy is None
            else urllib3.ProxyManager(proxy, **options)
        )
        self._http.pool_classes_by_scheme = _pool_classes()

    def get(self, url: str, *, limit: int = INPUT_LIMIT) -> bytes | None:
        """A 200's body of at most `limit` bytes; a 404 is None; anything else an InputError."""
        watched = _WATCH.begin(self.deadline)
        try:
            try:
                response: Any = self._http.request("GET", url, preload_content=False)
            except self._errors as exc:
                raise InputError(self._failure(url, watched, exc)) from None
            try:
                body = _body(url, response, limit)
            except self._errors as exc:
                response.close()
                raise InputError(self._failure(url, watched, exc)) from None
            finally:
                response.release_conn()
            if watched.expired:  # a body cut short by the shutdown can look complete
                raise InputError(self._failure(url, watched, None))
            return body
        finally:
            _WATCH.end(watched)

    def _failure(self, url: str, watched: _Watched, exc: Exception | None) -> str:
        if watched.expired:
            return f"GET {url}: no complete answer within the {self.deadline:g} s deadline"
        return f"GET {url}: {exc}"

    def close(self) -> None:
        self._http.clear()

    def __enter__(self) -> Getter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _body(url: str, response: Any, limit: int) -> bytes | None:
    """A 200's body of at most `limit` bytes, a 404 None; an unread rest closes the connection."""
    if response.status == 404:
        response.close()
        return None
    if response.status != 200:
        response.close()
        raise InputError(f"GET {url}: HTTP {response.status}")
    declared = response.headers.get("content-length", "0")
    if not declared.isdigit() or int(declared) <= limit:
        body = bytes(response.read(limit + 1))
        if len(body) <= limit:
            return body
    response.close()
    raise InputError(f"GET {url}: the reply is larger than {limit} bytes")


def proxy_for(base: str) -> str | None:
    """The http(s) proxy the environment names for the base URL, as httpx reads it."""
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(base)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    if urlsplit(proxy).scheme not in ("http", "https"):
        raise InputError(f"{base}: the environment's proxy {proxy} is not an http(s) proxy")
    return proxy


@dataclass
class _Watched:
    """One running GET: its deadline, its connection, and whether its socket was shut."""

    until: float
    conn: Any = None
    sock: socket.socket | None = None
    expired: bool = False

    def shut(self) -> None:
        """Shut the GET's socket (current, else last), waking a blocked recv."""
        sock = getattr(self.conn, "sock", None) or self.sock
        if sock is not None:
            # The plain socket's shutdown, also for TLS: `SSLSocket.shutdown` would unwrap
            # the socket under the thread still reading it. Already closed: nothing waits.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Watch:
    """The running GETs, one per thread, and the thread that shuts each one's socket at its
    deadline."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._running: dict[int, _Watched] = {}
        self._thread: threading.Thread | None = None

    def begin(self, seconds: float) -> _Watched:
        watched = _Watched(time.monotonic() + seconds)
        with self._changed:
            self._running[threading.get_ident()] = watched
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="get-deadline", daemon=True)
                self._thread.start()
            self._changed.notify()
        return watched

    def attach(self, conn: Any) -> float | None:
        """The calling thread's GET's connection now; the time it has left, or None if unwatched."""
        with self._changed:
            watched = self._running.get(threading.get_ident())
            if watched is None:
                return None
            watched.conn = conn
            watched.sock = getattr(conn, "sock", None) or watched.sock
            if watched.expired:
                watched.shut()
            return max(watched.until - time.monotonic(), 0.001)

    def end(self, watched: _Watched) -> None:
        # Under the lock: once a GET has ended, its connection (back in the pool, perhaps
        # already another thread's) is never shut on its behalf.
        with self._changed:
            if self._running.get(threading.get_ident()) is watched:
                del self._running[threading.get_ident()]

    def _run(self) -> None:
        with self._changed:
            while True:
                now = time.monotonic()
                waiting = [w for w in self._running.values() if not w.expired]
                for watched in waiting:
                    if watched.until <= now:
                        watched.expired = True
                        watched.shut()
                pending = [w.until for w in waiting if not w.expired]
                self._changed.wait(min(pending) - now if pending else None)


_WATCH = _Watch()


@functools.cache
def _pool_classes() -> dict[str, type[Any]]:
    """urllib3's pools, whose connections report to `_WATCH` on connect and at each request."""
    import urllib3
    from urllib3.connection import HTTPConnection, HTTPSConnection

    class Reporting:
        timeout: Any

        def connect(self) -> None:
            left = _WATCH.attach(self)
            if left is not None:
                self.timeout = left
            super().connect()  # type: ignore[misc]
            _WATCH.attach(self)  # now with its socket

        def request(self, *args: Any, **kwargs: Any) -> None:
            _WATCH.attach(self)
            super().request(*args, **kwargs)  # type: ignore[misc]

    class Watched(Reporting, HTTPConnection):
        pass

    class WatchedTLS(Reporting, HTTPSConnection):
        pass

    class Pool(urllib3.HTTPConnectionPool):
        ConnectionCls = Watched

    class TLSPool(urllib3.HTTPSConnectionPool):
        ConnectionCls = WatchedTLS

    return {"http": Pool, "https": TLSPool}
