"""An h11 protocol for uvicorn (`--http capability_anchor.web.nodelay:NoDelayH11Protocol`)
that sets TCP_NODELAY and closes a connection whose request headers are not complete within
`header_timeout` seconds (env CAPABILITY_ANCHOR_HEADER_TIMEOUT, default 10). Apart from
`asgi`, so uvicorn's supervisor imports it without opening the log. Why:
docs/explanation/decisions/36-api.md."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from capability_anchor.envvars import HEADER_TIMEOUT

DEFAULT_HEADER_TIMEOUT = 10.0


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


class NoDelayH11Protocol(H11Protocol):
    header_timeout: float = header_timeout_from_env()
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # h11 leaves IDLE only once a whole header block has been parsed.
        if self.conn.their_state is not h11.IDLE:
            self._cancel_header_timer()

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not None and self.cycle is not cycle:
            # A new request: its task has not run yet, so it writes through this.
            self.cycle.transport = _OneWritePerAnswer(self.transport)  # type: ignore[assignment]

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # The next request's headers are due from now (unless a pipelined one is already in).
        if self.conn.their_state is h11.IDLE:
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
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        with contextlib.suppress(h11.LocalProtocolError):
            self.conn.send(h11.ConnectionClosed())
        self.transport.close()


def with_header_timeout(seconds: float) -> type[NoDelayH11Protocol]:
    """The protocol class with another header timeout (for `serve --header-timeout`)."""
    if not seconds > 0:
        raise ValueError("the header timeout must be a positive number of seconds")
    return type("NoDelayH11Protocol", (NoDelayH11Protocol,), {"header_timeout": seconds})
