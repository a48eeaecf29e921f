"""The service's side of the log's sequencer (`log.sequencer`): its candidate, and the link.

Every serving process (`serve`, each worker of `uvicorn --workers N`) starts one sequencer
candidate, a process of its own; whichever takes the lease first sequences the log for all
of them, the others stand by. So N workers hand their writes to one committer instead of
fighting for the database's write lock, and the Python of a commit never holds the GIL of a
process that answers reads.

`SequencerLink` is one connection from this process to the sequencer, on the event loop,
carrying every request of this process at once (each with its id, answered in any order):
`POST /records` batches as the body check prepared them. Connecting waits up to
`CONNECT_DEADLINE_S` for a leader (at start, or while a standby takes over), restarting this
process's candidate if it died. A connection that breaks with requests in flight fails them
with WorkerLost: each may or may not be stored, and re-sending it is safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from capability_anchor.errors import StoreBusy, StoreError
from capability_anchor.log import Prepared
from capability_anchor.log.handoff import (
    SOCKET_NAME,
    Append,
    Reply,
    Request,
    address,
    frame,
    frame_length,
    rebuild,
    replay,
    reply_decoder,
)
from capability_anchor.log.sequencer import main as sequencer_main
from capability_anchor.web import accesslog

from .bodies import Busy, WorkerLost, forkserver_context
from .caching import ordered_answer
from .models import AppendedEntry, ProvedEntry

_logger = logging.getLogger("capability_anchor.api")
CONNECT_DEADLINE_S = 10.0
"""How long a write waits for a sequencer to listen (the first at start-up, or a standby
taking over from one that died) before it is answered 503."""
STOP_GRACE_S = 10.0


_ENTRY = b'{"day":"%s","leaf_index":%d,"leaf_hash":"%s","duplicate":%s}'
# The answer's members in AppendedEntry's order, as `ordered_answer` would give them.
assert AppendedEntry.__struct_fields__ == ("day", "leaf_index", "leaf_hash", "duplicate")


def candidate_main(
    data_dir: str, queue_records: int, public_url: str | None, log_format: str | None
) -> None:
    """The sequencer candidate's process: the database driver's warnings (a lost
    connection, a failed reconnect) in the service's log format, then `sequencer.main`."""
    if log_format is not None:
        accesslog.configure_drivers(log_format)
    sequencer_main(data_dir, queue_records, public_url)


def appended_entries(prepared: list[Prepared], value: Any) -> bytes:
    """The JSON array of `AppendedEntry` for a non-proving answer `(day, [(index, dup)])`,
    formatted directly: a 1,000-record batch's answer is on the event loop, and building
    its Structs cost ten times this."""
    day, placed = value
    if not isinstance(day, str) or len(placed) != len(prepared):
        raise StoreError("the sequencer's answer does not match the batch")
    dayb = day.encode()
    parts = [
        _ENTRY % (dayb, int(index), p[0].hex().encode(), b"true" if dup else b"false")
        for p, (index, dup) in zip(prepared, placed, strict=True)
    ]
    return b"[" + b",".join(parts) + b"]"


class SequencerLink:
    def __init__(self, data_dir: Path, queue_records: int, public_url: str | None) -> None:
        self.data_dir = data_dir
        self.queue_records = queue_records
        self.public_url = public_url
        self.candidate: BaseProcess | None = None
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._reading: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[Reply]] = {}
        self._next = 0
        self._connecting: asyncio.Lock | None = None

    # --- the candidate ---------------------------------------------------------------------

    def start(self) -> None:
        """Start this process's candidate, unless it is running."""
        if self.candidate is not None and self.candidate.is_alive():
            return
        if self.candidate is not None:
            self.candidate.join(0)
        candidate = forkserver_context().Process(
            target=candidate_main,
            args=(
                str(self.data_dir),
                self.queue_records,
                self.public_url,
                accesslog.configured_format(),
            ),
            name="capability-anchor-sequencer",
            daemon=True,
        )
        candidate.start()
        self.candidate = candidate

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

    # --- the link --------------------------------------------------------------------------

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
        streams, self._streams = self._streams, None
        if streams is not None:
            streams[1].close()
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(WorkerLost())

    async def call(self, build: Callable[[int], Request]) -> Reply:
        writer = await self._connected()
        self._next += 1
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._pending[self._next] = future
        try:
            writer.write(frame(build(self._next)))
            await writer.drain()
        except OSError:  # the connection broke as the batch left: it may have arrived
            self._pending.pop(self._next, None)
            self._broken()
            raise WorkerLost() from None
        reply = await future
        replay(reply.events)
        return reply

    async def append(
        self, prepared: list[Prepared], prove: bool, now: float, at_mono: float
    ) -> bytes:
        """The batch appended by the sequencer: its entries as `POST /records` answers them
        (encoded here, in the answer's Structs' order)."""
        reply = await self.call(lambda i: Append(i, prepared, prove, now, at_mono))
        if reply.code == "ok":
            if prove:
                return ordered_answer(list[ProvedEntry], reply.value)
            return appended_entries(prepared, reply.value)
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


__all__ = ["CONNECT_DEADLINE_S", "SequencerLink"]
