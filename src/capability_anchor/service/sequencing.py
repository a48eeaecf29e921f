"""The service's hand-off to the log's sequencer: its candidate process, and the link.

`SequencerLink` is one connection per serving process, on the event loop, carrying all of its
`POST /records` batches at once (answered in any order). docs/explanation/write-path.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import msgspec

from capability_anchor.errors import StoreBusy
from capability_anchor.log.handoff import (
    SOCKET_NAME,
    EncodedAppend,
    Reply,
    address,
    frame,
    frame_length,
    rebuild,
    replay,
    reply_decoder,
)

from . import sequencer

_logger = logging.getLogger("capability_anchor.api")
CONNECT_DEADLINE_S = 10.0
"""How long a write waits for a sequencer to listen (at start-up, or while a standby takes
over) before it is answered 503."""
STOP_GRACE_S = 10.0


class Busy(Exception):
    """A queue is full (a body lane's, the sequencer's): `note` says which. Answered 503."""

    def __init__(self, note: str) -> None:
        super().__init__(note)
        self.note = note


class WorkerLost(Exception):
    """The process appending a batch was lost before answering: the batch may or may not be
    stored. Re-sending it is safe: what was stored is answered `duplicate: true`."""


class SequencerLink:
    def __init__(
        self,
        data_dir: Path,
        queue_records: int,
        public_url: str | None,
        context: BaseContext,
    ) -> None:
        self.data_dir = data_dir
        self.args = (str(data_dir), queue_records, public_url)
        self.context = context
        self.setup: Callable[[], None] | None = None
        self.candidate: BaseProcess | None = None
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._reading: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[Reply]] = {}
        self._next = 0
        self._connecting: asyncio.Lock | None = None

    def start(self, setup: Callable[[], None] | None = None) -> None:
        """Start this process's candidate, unless it is running; `setup` runs first in it
        (and in every candidate started after)."""
        if setup is not None:
            self.setup = setup
        if self.candidate is not None and self.candidate.is_alive():
            return
        if self.candidate is not None:
            self.candidate.join(0)
        self.candidate = self.context.Process(  # type: ignore[attr-defined]
            target=sequencer.main,
            args=(*self.args, self.setup),
            name="capability-anchor-sequencer",
            daemon=True,
        )
        self.candidate.start()

    def stop(self) -> None:
        """Stop the candidate: a leader commits what it was sent, then lets the lease go."""
        candidate, self.candidate = self.candidate, None
        if candidate is None:
            return
        if candidate.is_alive():
            candidate.terminate()
            candidate.join(STOP_GRACE_S)
        if candidate.is_alive():
            candidate.kill()
            candidate.join()

    async def _connected(self) -> asyncio.StreamWriter:
        if self._streams is not None and not self._streams[1].is_closing():
            return self._streams[1]
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._streams is not None and not self._streams[1].is_closing():
                return self._streams[1]
            loop = asyncio.get_running_loop()
            give_up = loop.time() + CONNECT_DEADLINE_S
            while True:
                try:
                    with address(self.data_dir) as where:
                        streams = await asyncio.open_unix_connection(where)
                    break
                except OSError:  # no socket yet, or one nobody listens on
                    if loop.time() > give_up:
                        raise StoreBusy(
                            f"no sequencer listens on {self.data_dir / SOCKET_NAME}"
                        ) from None
                    self.start()  # ours died: a new candidate (a standby may lead first)
                    await asyncio.sleep(0.02)
            self._streams = streams
            self._reading = asyncio.create_task(self._read(streams[0]), name="sequencer-link")
            return streams[1]

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                head = await reader.readexactly(4)
                reply = reply_decoder.decode(await reader.readexactly(frame_length(head)))
                future = self._pending.pop(reply.id, None)
                if future is not None and not future.done():
                    future.set_result(reply)
        except (OSError, EOFError, ValueError, asyncio.IncompleteReadError):
            pass
        except Exception:  # a reply no sequencer sends: the link is not to be trusted
            _logger.exception("the sequencer's link broke")
        finally:
            self._broken()

    def _broken(self) -> None:
        """The connection is gone: every request in flight may or may not be stored."""
        streams, self._streams = self._streams, None
        if streams is not None:
            streams[1].close()
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(WorkerLost())

    async def append(self, prepared: bytes, prove: bool, now: float, at_mono: float) -> Any:
        """The batch (`handoff.encode_prepared`) appended by the sequencer, as it answered:
        with `prove` the entries with anchor and proof, else `(day, [(index, duplicate)])`."""
        writer = await self._connected()
        self._next += 1
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._pending[self._next] = future
        try:
            message = EncodedAppend(self._next, msgspec.Raw(prepared), prove, now, at_mono)
            writer.write(frame(message))
            await writer.drain()
        except OSError:  # the connection broke as the batch left: it may have arrived
            self._pending.pop(self._next, None)
            self._broken()
            raise WorkerLost() from None
        reply = await future
        replay(reply.events)
        if reply.code == "ok":
            return reply.value
        if reply.code == "error":
            raise rebuild(reply.value)
        if reply.code == "busy":
            raise Busy(str(reply.value))
        _logger.error("the sequencer failed to append:\n%s", reply.value)
        raise WorkerLost()

    async def close(self) -> None:
        if self._reading is not None:
            self._reading.cancel()
            with contextlib.suppress(BaseException):
                await self._reading
        self._broken()
