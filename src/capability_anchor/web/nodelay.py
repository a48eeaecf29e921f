"""The service's HTTP protocol for uvicorn (`--http capability_anchor.web.nodelay:NoDelayProtocol
--loop uvloop`): uvicorn's httptools protocol with TCP_NODELAY, one write per answer, a
bounded header block and a header deadline (env CAPABILITY_ANCHOR_HEADER_TIMEOUT, default 10).
Apart from `asgi`, so uvicorn's supervisor imports it without opening the log. Why:
docs/explanation/decisions/37-edge.md."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from types import FrameType

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from capability_anchor.envvars import HEADER_TIMEOUT

# Imported inside functions: `web.accesslog` ~200 ms (the metrics, prometheus_client; time
# of `import` after this module, 3 runs, 2 cores), which uvicorn's supervisor, importing this
# module for `--http`, never needs: only a server that shuts down logs through it.

DEFAULT_HEADER_TIMEOUT = 10.0
# The most a request line and its headers may take (h11's limit in uvicorn, which this replaced).
MAX_HEADER_BYTES = 16 * 1024


def header_timeout_from_env() -> float:
    value = float(HEADER_TIMEOUT.get() or DEFAULT_HEADER_TIMEOUT)
    if not value > 0:
        raise ValueError("CAPABILITY_ANCHOR_HEADER_TIMEOUT must be a positive number of seconds")
    return value


class _OneWritePerAnswer:
    """The transport as one request's response cycle sees it: the status line and headers
    are held until the first body bytes, so a whole answer leaves in one send(). uvicorn
    writes them apart; each write is a system call, and while a writer thread is busy each
    system call on the event loop costs a wait for the GIL afterwards."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._held = b""
        self._header_due = True

    def write(self, data: bytes) -> None:
        if self._header_due and not data.startswith(b"HTTP/1.1 1"):
            # The first write that is not an interim (100 Continue) answer: the header.
            self._header_due = False
            self._held = data
            return
        if self._held:
            data, self._held = self._held + data, b""
        if data:
            self._transport.write(data)

    def close(self) -> None:
        if self._held:
            self._transport.write(self._held)
            self._held = b""
        self._transport.close()

    def __getattr__(self, name: str) -> object:
        return getattr(self._transport, name)


class NoDelayProtocol(HttpToolsProtocol):
    header_timeout: float = header_timeout_from_env()
    _header_timer: asyncio.TimerHandle | None = None
    _in_head = False  # a request has begun and its header block is not whole yet
    _head_bytes = 0  # bytes read for the open header block after the read it began in

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # Explicit, whatever the loop does: the --workers form shares one listening socket.
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        scope = self.scope  # a new one for each request begun
        super().data_received(data)
        if not self._in_head or self.scope is not scope:
            self._head_bytes = 0
            return
        self._head_bytes += len(data)
        if self._head_bytes > MAX_HEADER_BYTES and not self.transport.is_closing():
            self.send_400_response("Request header block too large.")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True

    def on_headers_complete(self) -> None:
        # A parser callback: the header block is whole.
        self._cancel_header_timer()
        self._in_head = False
        super().on_headers_complete()
        # HEAD answers are one write anyway (uvicorn sends no body for them, so nothing
        # would flush a held header); pipelined cycles are made here too.
        if self.cycle is not None and self.scope["method"] != "HEAD":
            self.cycle.transport = _OneWritePerAnswer(self.transport)  # type: ignore[assignment]

    def on_response_complete(self) -> None:
        # The next request's headers are due from now, unless it is in already.
        waiting = bool(self.pipeline)
        super().on_response_complete()
        if not waiting:
            self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        if not self.transport.is_closing():
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_late)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        self.transport.close()


# The name the shipped unit file used before #37; installed copies still say it (37-edge.md).
NoDelayH11Protocol = NoDelayProtocol


def with_header_timeout(seconds: float) -> type[NoDelayProtocol]:
    """The protocol class with another header timeout (for `serve --header-timeout`)."""
    if not seconds > 0:
        raise ValueError("the header timeout must be a positive number of seconds")
    return type("NoDelayProtocol", (NoDelayProtocol,), {"header_timeout": seconds})


class Server(uvicorn.Server):
    """uvicorn's server as `serve` and `witness serve` run it, logging the signal that stops
    it (uvicorn logs nothing itself at the level the service runs it). The line is written
    when the shutdown begins, on the event loop, never in the signal handler: the handler
    runs between two bytecodes of the loop's thread, possibly inside the access log's flush
    that holds its lock, and a log line there waited for that lock for ever (seen in CI)."""

    stopped_by: str | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.stopped_by is None:
            self.stopped_by = signal.Signals(sig).name
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        from capability_anchor.web.accesslog import events

        if self.stopped_by is not None:
            events.info("%s received: finishing in-flight requests, then stopping", self.stopped_by)
        await super().shutdown(sockets)
