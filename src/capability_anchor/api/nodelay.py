"""An h11 protocol for uvicorn's multi-worker form that sets TCP_NODELAY on each connection.

`uvicorn --workers N` binds its listening socket with protocol 0, so asyncio never enables
TCP_NODELAY on accepted connections; a keep-alive response written in two parts then waits
~40 ms for the client's delayed ACK (uvicorn issue 3149). Use it with
`--http capability_anchor.api.nodelay:NoDelayH11Protocol`. It lives apart from `asgi` so
the supervisor process can import it without opening the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket

from uvicorn.protocols.http.h11_impl import H11Protocol


class NoDelayH11Protocol(H11Protocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)
