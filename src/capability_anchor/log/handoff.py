"""Handing writes to the log's sequencer (SPEC §13.4): the wire, and the blocking client.

Frames are a 4-byte big-endian length and a msgpack body: a request (`Append`, `Checkpoint`,
`Seal`) with its caller's id, a `Reply` per request, in any order. With no sequencer live a
writer writes itself. docs/explanation/write-path.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from capability_anchor import errors
from capability_anchor.errors import CapabilityAnchorError, InvalidRecord, OutcomeUnknown

from .batch import AppendResult, Prepared
from .clockguard import monotonic

LOCK_NAME = "sequencer.lock"
SOCKET_NAME = "sequencer.sock"
MAX_FRAME = 64 << 20
"""A frame bigger than this is refused: far above a batch of MAX_BATCH records as prepared."""
_LEN = struct.Struct(">I")
T = TypeVar("T")
BUSY_WAIT_S = 60.0
"""How long a blocking writer re-sends a batch a full queue refused, before StoreBusy."""


class Append(msgspec.Struct, tag="append", array_like=True):
    id: int
    prepared: list[tuple[bytes, bytes, tuple[str, ...]]]
    prove: bool
    now: float
    at_mono: float


class EncodedAppend(msgspec.Struct, tag="append", array_like=True):
    """An `Append` whose batch a body worker already encoded (`encode_prepared`): the same
    frame, and the batch is neither pickled back to the service nor encoded again."""

    id: int
    prepared: msgspec.Raw
    prove: bool
    now: float
    at_mono: float


class Checkpoint(msgspec.Struct, tag="checkpoint", array_like=True):
    id: int
    now: float
    at_mono: float


class Seal(msgspec.Struct, tag="seal", array_like=True):
    id: int
    now: float
    at_mono: float


Request = Append | Checkpoint | Seal


class Reply(msgspec.Struct, array_like=True):
    """`code` "ok" (`value` the answer), "error" (`value` a `describe`d error), "busy"
    (nothing was queued) or "crash" (a traceback); `events`: what the sequencer logged."""

    id: int
    code: str
    value: Any
    events: list[tuple[str, int, str]] = []


_encoder = msgspec.msgpack.Encoder()
request_decoder = msgspec.msgpack.Decoder(Request)
reply_decoder = msgspec.msgpack.Decoder(Reply)
prepared_decoder = msgspec.msgpack.Decoder(list[tuple[bytes, bytes, tuple[str, ...]]])


def encode_prepared(prepared: list[Prepared]) -> bytes:
    """A prepared batch as `Append.prepared` is on the wire (`prepared_decoder` reads it)."""
    return _encoder.encode(prepared)


def frame(message: msgspec.Struct) -> bytes:
    body = _encoder.encode(message)
    return _LEN.pack(len(body)) + body


def frame_length(head: bytes) -> int:
    (length,) = _LEN.unpack(head)
    if length > MAX_FRAME:
        raise ValueError(f"a frame of {length} bytes is over the {MAX_FRAME} allowed")
    return int(length)


def read_frame(sock: socket.socket) -> bytes:
    """The body of the next frame on a blocking socket (EOFError when the peer closed)."""
    n = frame_length(_recv_exactly(sock, _LEN.size))
    return _recv_exactly(sock, n)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise EOFError("the connection was closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


@contextlib.contextmanager
def address(data_dir: Path) -> Iterator[str]:
    """The socket's path. A unix socket path has at most 107 bytes; a longer data dir is
    reached through a descriptor of it (`/proc/self/fd/N/...`, Linux)."""
    path = str(Path(data_dir) / SOCKET_NAME)
    if len(os.fsencode(path)) < 100 or not Path("/proc/self/fd").is_dir():
        yield path
        return
    fd = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{SOCKET_NAME}"
    finally:
        os.close(fd)


def describe(exc: CapabilityAnchorError) -> tuple[str, str, int | None]:
    position = exc.position if isinstance(exc, InvalidRecord) else None
    return (type(exc).__name__, str(exc), position)


def rebuild(described: Any) -> CapabilityAnchorError:
    """The error `describe`d, of its own class where that class is in `errors` and can be
    built from a message (else a StoreError, answered 503)."""
    name, message, position = described
    cls = getattr(errors, str(name), None)
    if isinstance(cls, type) and issubclass(cls, InvalidRecord):
        return cls(str(message), position=position)
    if isinstance(cls, type) and issubclass(cls, CapabilityAnchorError):
        with contextlib.suppress(TypeError):
            return cls(str(message))
    return errors.StoreError(str(message))


def replay(events: Iterable[tuple[str, int, str]]) -> None:
    """The sequencer's event lines, as if this process's log had logged them."""
    for name, level, message in events:
        logging.getLogger(str(name)).log(int(level), "%s", message)


def results_of(prepared: list[Prepared], value: Any) -> list[AppendResult]:
    """The AppendResults of an "ok" answer to a non-proving Append: (day, [(index, dup)])."""
    day, placed = value
    return [
        AppendResult(str(day), int(index), p[0], bool(dup))
        for p, (index, dup) in zip(prepared, placed, strict=True)
    ]


class Handoff:
    """A blocking connection to a live sequencer (one request at a time)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._next = 0

    @classmethod
    def connect(cls, data_dir: Path) -> Handoff | None:
        """A connection to the log's sequencer, or None when none is live."""
        if not (Path(data_dir) / SOCKET_NAME).exists():
            return None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with address(data_dir) as where:
                sock.connect(where)
        except OSError:  # a socket left by a sequencer that is gone: nobody listens
            sock.close()
            return None
        return cls(sock)

    def close(self) -> None:
        self._sock.close()

    def open(self) -> bool:
        """Whether the sequencer still holds this connection open (a kept connection to one
        that is gone would turn a batch never sent into "may be stored")."""
        try:
            return self._sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
        except BlockingIOError:
            return True
        except OSError:
            return False

    def _answer(self, build: Callable[[int, float], Request]) -> Any:
        """The answer to `build(id, at_mono)`, re-sent while the sequencer is busy (`at_mono`
        read once: the sequencer continues the caller's time from it)."""
        mono = monotonic()
        give_up = time.monotonic() + BUSY_WAIT_S
        pause = 0.01
        while True:
            self._next += 1
            try:
                self._sock.sendall(frame(build(self._next, mono)))
                reply = reply_decoder.decode(read_frame(self._sock))
            except (OSError, EOFError, ValueError, msgspec.DecodeError) as exc:
                raise OutcomeUnknown(f"the sequencer's connection broke: {exc}") from None
            replay(reply.events)
            if reply.code == "ok":
                return reply.value
            if reply.code == "error":
                raise rebuild(reply.value)
            if reply.code != "busy" or time.monotonic() > give_up:
                raise errors.StoreBusy(f"the sequencer answered {reply.code}: {reply.value}")
            time.sleep(pause)
            pause = min(1.0, pause * 2)

    def append(self, prepared: list[Prepared], prove: bool, now: float) -> Any:
        """AppendResults, or with `prove` the entries with anchor and proof."""
        value = self._answer(lambda i, mono: Append(i, prepared, prove, now, mono))
        return value if prove else results_of(prepared, value)

    def checkpoint(self, now: float) -> bytes | None:
        value = self._answer(lambda i, mono: Checkpoint(i, now, mono))
        return None if value is None else bytes(value)

    def seal(self, now: float) -> list[bytes]:
        return [bytes(d) for d in self._answer(lambda i, mono: Seal(i, now, mono))]


class Handoffs:
    """A writer's kept connections to its log's sequencer, one per thread at a time.
    `call(use)` is `use(connection)`, or None when no sequencer is live."""

    def __init__(self, data_dir: Path | None) -> None:
        self._dir = data_dir
        self._idle: list[Handoff] = []
        self._lock = threading.Lock()

    def call(self, use: Callable[[Handoff], T]) -> T | None:
        if self._dir is None:
            return None
        handoff = self._take(self._dir)
        if handoff is None:
            return None
        try:
            out = use(handoff)
        except BaseException as exc:
            if isinstance(exc, CapabilityAnchorError) and not isinstance(exc, OutcomeUnknown):
                self._idle.append(handoff)  # an answer: the connection is sound
            else:
                handoff.close()
            raise
        self._idle.append(handoff)
        return out

    def _take(self, data_dir: Path) -> Handoff | None:
        with self._lock:
            while self._idle:
                kept = self._idle.pop()
                if kept.open():
                    return kept
                kept.close()
        return Handoff.connect(data_dir)

    def close(self) -> None:
        with self._lock:
            for handoff in self._idle:
                handoff.close()
            self._idle.clear()
