"""The log's sequencer (SPEC §13.4): one process per log that commits every writer's batches.

Writers fought for the database's write lock: each one-record request was its own durable
commit, and two uvicorn workers spent half their time in `BEGIN IMMEDIATE` waiting for each
other. Here whoever holds `DIR/sequencer.lock` (an exclusive `flock`, released by the kernel
when its holder dies) is the log's one sequencer: it listens on `DIR/sequencer.sock`, and
writers hand it their prepared batches (`log.handoff`). One committer thread takes all that
are queued at once, up to `MAX_GROUP_RECORDS` records, and commits them in one transaction
(`LogWriter.commit_group`): group commit. Checkpoints and seals are its too (handed over the
same way), so the one process that assigns leaf indexes also signs the heads, and a
checkpoint never waits behind a stream of commits for the lock.

Every process that serves the log starts a candidate (`api.sequencing`); the first to take
the lock leads, the others wait on it and one takes over within moments of the leader's end.
A candidate dies with the process that started it (`parentdeath`).

Backpressure: at most `queue_records` records wait for a commit; a batch that would pass the
bound is answered "busy" at once, queued nowhere (the service answers 503 with Retry-After).
Acknowledged still means durable: a reply is sent only after the commit returned.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import socket
import threading
import traceback
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from capability_anchor.envvars import DEFAULT_WRITE_QUEUE
from capability_anchor.errors import CapabilityAnchorError, StoreError
from capability_anchor.parentdeath import tie_to_parent

from .batch import MAX_BATCH
from .clockguard import monotonic
from .groupcommit import MAX_GROUP_RECORDS, Submission
from .handoff import (
    LOCK_NAME,
    SOCKET_NAME,
    Append,
    Checkpoint,
    Reply,
    Request,
    Seal,
    address,
    describe,
    frame,
    read_frame,
    request_decoder,
)
from .lifecycle import Log

DEFAULT_QUEUE_RECORDS = DEFAULT_WRITE_QUEUE  # CAPABILITY_ANCHOR_WRITE_QUEUE, `--write-queue`
WAKE_S = 0.05
"""How often an idle sequencer looks for a standby's request to sign."""
BUSY_NOTE = "busy: the log's write queue is full; try again in a second"
EVENTS = "capability_anchor"  # the Log's event loggers are below it
_logger = logging.getLogger("capability_anchor.sequencer")


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.kept: list[tuple[str, int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.kept.append((record.name, record.levelno, record.getMessage()))


@contextlib.contextmanager
def events_kept() -> Iterator[list[tuple[str, int, str]]]:
    """(logger, level, message) of what the Log logs meanwhile, for the writer to replay: the
    operator reads the service's log, not this process's."""
    keep = _Keep()
    events = logging.getLogger(EVENTS)
    level = events.level
    events.setLevel(logging.INFO)
    events.addHandler(keep)
    try:
        yield keep.kept
    finally:
        events.removeHandler(keep)
        events.setLevel(level)


class _Connection:
    """One writer's connection: requests in on its reader thread, replies out from the
    committer (a lock, so two replies never interleave)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._lock = threading.Lock()

    def send(self, reply: Reply) -> None:
        with self._lock, contextlib.suppress(OSError):
            # A writer that went away lost its answer, not the commit.
            self.sock.sendall(frame(reply))


_Item = tuple[_Connection, Request]


class Sequencer:
    """The queue and the committer of one log (the process holding the lease)."""

    def __init__(self, log: Log, queue_records: int = DEFAULT_QUEUE_RECORDS) -> None:
        if queue_records < MAX_BATCH:
            raise ValueError(f"the write queue must hold at least {MAX_BATCH} records")
        self.log = log
        self.bound = queue_records
        self._cond = threading.Condition()
        self._queue: deque[_Item] = deque()
        self._queued = 0
        self.stopping = False

    # --- the readers' side -----------------------------------------------------------------

    def serve_connection(self, sock: socket.socket) -> None:
        conn = _Connection(sock)
        try:
            while True:
                self.submit(conn, request_decoder.decode(read_frame(sock)))
        except (EOFError, OSError, ValueError, msgspec.DecodeError):
            pass  # the writer closed, or sent what no writer sends: drop the connection
        finally:
            sock.close()

    def submit(self, conn: _Connection, request: Request) -> None:
        records = len(request.prepared) if isinstance(request, Append) else 0
        with self._cond:
            if records and self._queued + records > self.bound:
                conn.send(Reply(request.id, "busy", BUSY_NOTE))
                return
            self._queue.append((conn, request))
            self._queued += records
            self._cond.notify()

    # --- the committer ---------------------------------------------------------------------

    def run(self) -> None:
        """Commit what is queued until `stopping` (what is queued then is still committed)."""
        while True:
            with self._cond:
                while not self._queue:
                    if self.stopping:
                        return
                    self._cond.wait(WAKE_S)
                    if not self._queue and self.log.store.signature_wanted():
                        break
                group = self._take() if self._queue else []
            if group:
                self._commit(group)
            else:
                self._sign_for_standby()

    def _sign_for_standby(self) -> None:
        """A standby replica waits for a head covering what it appended (`log.standby`)."""
        try:
            self.log.writer.checkpoint()
        except CapabilityAnchorError as exc:
            _logger.warning("a standby asked for a head, and none was signed: %s", exc)

    def _take(self) -> list[_Item]:
        """The queue's head: one checkpoint or seal, or the appends after it that fit in one
        commit."""
        first = self._queue[0][1]
        if not isinstance(first, Append):
            return [self._queue.popleft()]
        group: list[_Item] = []
        records = 0
        while self._queue:
            request = self._queue[0][1]
            if not isinstance(request, Append):
                break
            if group and records + len(request.prepared) > MAX_GROUP_RECORDS:
                break
            group.append(self._queue.popleft())
            records += len(request.prepared)
        self._queued -= records
        return group

    def _commit(self, group: list[_Item]) -> None:
        # One reading for the whole group: the latest of its callers', each continued by the
        # monotonic clock to now (a caller's verdict on the clock holds for what it sent).
        mono = monotonic()
        base = max(r.now + max(0.0, mono - r.at_mono) for _, r in group)
        self.log.clock = lambda: base + max(0.0, monotonic() - mono)
        with events_kept() as events:
            replies = self._replies(group)
        for n, ((conn, _), reply) in enumerate(zip(group, replies, strict=True)):
            if n == 0:
                reply.events = events
            conn.send(reply)

    def _replies(self, group: list[_Item]) -> list[Reply]:
        writer = self.log.writer
        request = group[0][1]
        if isinstance(request, Checkpoint | Seal):
            try:
                value: Any = (
                    writer.checkpoint() if isinstance(request, Checkpoint) else writer.seal()
                )
            except Exception as exc:
                return [self._failed(request.id, exc)]
            return [Reply(request.id, "ok", value)]
        subs = [Submission(r.prepared, r.prove) for _, r in group if isinstance(r, Append)]
        writer.commit_group(subs)
        replies = []
        for (_, r), sub in zip(group, subs, strict=True):
            if sub.error is not None:
                replies.append(self._failed(r.id, sub.error))
            elif sub.prove:
                replies.append(Reply(r.id, "ok", sub.result))
            else:
                day = sub.result[0].day if sub.result else ""
                placed = [(x.leaf_index, x.duplicate) for x in sub.result]
                replies.append(Reply(r.id, "ok", (day, placed)))
        return replies

    def _failed(self, request_id: int, exc: BaseException) -> Reply:
        if isinstance(exc, CapabilityAnchorError):
            if isinstance(exc, StoreError) and not exc.retryable:
                self._reopen()
            return Reply(request_id, "error", describe(exc))
        _logger.error("the sequencer failed: %s", "".join(traceback.format_exception(exc)))
        self._reopen()
        return Reply(request_id, "crash", "".join(traceback.format_exception(exc)))

    def _reopen(self) -> None:
        """A damaged or replaced database, or a failure nobody foresaw: the next commit opens
        the log afresh rather than trust this handle's caches."""
        with contextlib.suppress(Exception):
            self.log.close()
        public_url = self.log.public_url
        try:
            self.log = Log.open(self.log.data_dir, handoff=False)
        except Exception as exc:
            # This candidate cannot sequence: it ends, its writers write themselves or wait
            # for the next candidate, which opens the log afresh (or fails to, saying why).
            _logger.error("the sequencer cannot reopen the log, and stops: %s", exc)
            self.stopping = True
            raise SystemExit(1) from None
        self.log.public_url = public_url


def _listen(data_dir: Path) -> socket.socket:
    """The socket, bound 0600 in place of any a former sequencer left (the lease is ours)."""
    (data_dir / SOCKET_NAME).unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    umask = os.umask(0o177)
    try:
        with address(data_dir) as where:
            sock.bind(where)
    finally:
        os.umask(umask)
    sock.listen(256)
    return sock


def _accept(listener: socket.socket, sequencer: Sequencer) -> None:
    while True:
        try:
            sock, _ = listener.accept()
        except OSError:
            return
        threading.Thread(
            target=sequencer.serve_connection, args=(sock,), name="sequencer-reader", daemon=True
        ).start()


def main(data_dir: str, queue_records: int, public_url: str | None = None) -> None:
    """A sequencer candidate (a process of its own): wait for the lease, then sequence the
    log until SIGTERM or the death of the process that started it."""
    tie_to_parent()
    # A Ctrl-C at the terminal reaches the whole process group: the service decides when its
    # candidate stops (SIGTERM, after the requests it answers), not the keyboard.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    folder = Path(data_dir)
    lease = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lease, fcntl.LOCK_EX)  # a standby waits here, for as long as the leader lives
    log = Log.open(folder, handoff=False)
    if public_url:
        log.public_url = public_url
    sequencer = Sequencer(log, queue_records)

    def stop(signum: int, frame: object) -> None:
        sequencer.stopping = True

    signal.signal(signal.SIGTERM, stop)
    listener = _listen(folder)
    threading.Thread(target=_accept, args=(listener, sequencer), daemon=True).start()
    try:
        sequencer.run()
    finally:
        # Gone before the lease is: a writer then finds no socket, or a successor's.
        (folder / SOCKET_NAME).unlink(missing_ok=True)
        listener.close()
        sequencer.log.close()
        os.close(lease)


__all__ = ["BUSY_NOTE", "DEFAULT_QUEUE_RECORDS", "Sequencer", "events_kept", "main"]
