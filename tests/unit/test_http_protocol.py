"""The service's HTTP protocol (web/nodelay.py) driven in-process through a recording
transport: one write per answer (GET, HEAD, pipelined, after 100 Continue), the header
deadline (armed on connect and after each answer, never while a request runs) and the bound
on a header block; the server's signal handler. tests/e2e/test_http_edge.py checks the same
against a real server."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from uvicorn.config import Config
from uvicorn.server import ServerState

from capability_anchor.web import accesslog
from capability_anchor.web.nodelay import MAX_HEADER_BYTES, Server, with_header_timeout

BODY = b'{"status":"ok"}'


class Transport:
    """What the protocol writes, write by write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8000)}.get(name)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def app(scope: dict[str, Any], receive: Callable[[], Awaitable[Any]], send: Any) -> None:
    if scope["method"] == "POST":
        while (await receive()).get("more_body"):
            pass
    if scope["path"] == "/slow":
        await asyncio.sleep(0.5)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(BODY))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": BODY})


def connect(header_timeout: float = 5.0) -> tuple[Any, Transport]:
    config = Config(app=app, lifespan="off", log_level="warning")
    config.load()
    protocol = with_header_timeout(header_timeout)(config, ServerState(), {})
    transport = Transport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    return protocol, transport


def get(method: str, path: str = "/healthz", extra: str = "") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode()


async def settle(seconds: float = 0.05) -> None:
    await asyncio.sleep(seconds)


def test_each_answer_is_one_write_get_head_and_pipelined() -> None:
    async def run() -> None:
        protocol, transport = connect()
        protocol.data_received(get("GET"))
        await settle()
        protocol.data_received(get("HEAD"))
        await settle()
        protocol.data_received(get("HEAD"))
        await settle()
        protocol.data_received(get("GET") + get("HEAD") + get("GET", "/slow") + get("GET"))
        await settle(0.7)
        assert len(transport.writes) == 7, transport.writes
        for write, method in zip(transport.writes, "GHHGHGG", strict=True):
            assert write.startswith(b"HTTP/1.1 200 OK\r\n")
            assert write.endswith(b"\r\n\r\n" + BODY if method == "G" else b"\r\n\r\n"), write
        assert not transport.closed

    asyncio.run(run())


def test_expect_continue_is_its_own_write_then_the_answer_is_one() -> None:
    async def run() -> None:
        protocol, transport = connect()
        body = b'{"a":1}'
        extra = f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n"
        protocol.data_received(get("POST", "/records", extra))
        await settle()
        assert transport.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
        protocol.data_received(body)
        await settle()
        assert len(transport.writes) == 2 and transport.writes[1].endswith(BODY)

    asyncio.run(run())


def test_the_header_deadline() -> None:
    async def run() -> None:
        # Armed on connect: an idle connection closes.
        protocol, transport = connect(0.1)
        await settle(0.2)
        assert transport.closed
        # A header block dripping in is cut at the deadline from its start.
        protocol, transport = connect(0.2)
        protocol.data_received(b"GET /healthz HTTP/1.1\r\n")
        for _ in range(3):
            await settle(0.1)
            if not transport.closed:
                protocol.data_received(b"X-Drip: 1\r\n")
        assert transport.closed and transport.writes == []
        # Not while a request runs (0.5 s here); re-armed after its answer.
        protocol, transport = connect(0.2)
        protocol.data_received(get("GET", "/slow"))
        await settle(0.4)
        assert not transport.closed and transport.writes == []
        await settle(0.2)
        assert len(transport.writes) == 1
        await settle(0.4)
        assert transport.closed

    asyncio.run(run())


def test_a_header_block_over_the_bound_gets_400_and_the_connection_closes() -> None:
    async def run() -> None:
        protocol, transport = connect()
        protocol.data_received(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        line = b"X-Pad: " + b"a" * 1000 + b"\r\n"
        for _ in range(MAX_HEADER_BYTES // len(line) + 2):
            if not transport.closed:
                protocol.data_received(line)
        assert transport.closed
        assert transport.writes[0].startswith(b"HTTP/1.1 400 Bad Request\r\n")
        # A large body in the same read as its headers is no header block.
        protocol, transport = connect()
        body = b" " * (4 * MAX_HEADER_BYTES)
        protocol.data_received(get("POST", "/prove", f"Content-Length: {len(body)}\r\n") + body)
        await settle()
        assert not transport.closed and transport.writes[0].endswith(BODY)

    asyncio.run(run())


def test_a_signal_during_the_access_logs_flush_does_not_deadlock_the_server() -> None:
    """The handler runs between two bytecodes of the loop's thread, here while that thread
    holds the access log's lock (as in a flush). Writing the stopping line there waited for
    the lock for ever: `serve` ignored SIGTERM (CI, 2026-12-05). It is logged at shutdown."""
    server = Server(Config(app=None))
    done = threading.Event()
    # The service's stderr handler on its events logger, as `serve` installs it.
    handler, level = accesslog._Stderr(), accesslog.events.level
    accesslog.events.addHandler(handler)
    accesslog.events.setLevel("INFO")

    def flushing_when_the_signal_comes() -> None:
        with accesslog._batch.lock:
            server.handle_exit(signal.SIGTERM, None)
        done.set()

    threading.Thread(target=flushing_when_the_signal_comes, daemon=True).start()
    try:
        assert done.wait(10), "the signal handler waited for the access log's lock"
    finally:
        accesslog.events.removeHandler(handler)
        accesslog.events.setLevel(level)
    assert server.should_exit and server.stopped_by == "SIGTERM"
