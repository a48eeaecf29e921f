"""The log's sequencer process (SPEC §13.4): the log's `Committer`, fed by every writer.

The holder of `DIR/sequencer.lock` listens on `DIR/sequencer.sock` (`log.handoff`'s wire)
and commits every writer's batches, checkpoints and seals; a full queue answers "busy".
Each serving process starts a candidate (`service.sequencing`). docs/explanation/write-path.md.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import logging.handlers
import os
import signal
import socket
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import msgspec

from capability_anchor.envvars import DEFAULT_WRITE_QUEUE
from capability_anchor.errors import CapabilityAnchorError, StoreError
from capability_anchor.log.batch import MAX_BATCH
from capability_anchor.log.clockguard import monotonic
from capability_anchor.log.committer import Committer, Submission
from capability_anchor.log.handoff import (
    LOCK_NAME,
    SOCKET_NAME,
    Append,
    Reply,
    Request,
    address,
    describe,
    frame,
    read_frame,
    request_decoder,
)
from capability_anchor.log.lifecycle import Log
from capability_anchor.parentdeath import tie_to_parent

WAKE_S = 0.05
"""How often an idle sequencer looks for a standby's request to sign."""
BUSY_NOTE = "busy: the log's write queue is full; try again in a second"
EVENTS = "capability_anchor"  # the Log's event loggers are below it
_logger = logging.getLogger("capability_anchor.sequencer")


@contextlib.contextmanager
def events_kept() -> Iterator[list[tuple[str, int, str]]]:
    """What the Log logs meanwhile, for the writer to replay (the operator reads its log)."""
    keep = logging.handlers.BufferingHandler(capacity=1 << 30)
    keep.setLevel(logging.INFO)
    events = logging.getLogger(EVENTS)
    level = events.level
    events.setLevel(logging.INFO)
    events.addHandler(keep)
    kept: list[tuple[str, int, str]] = []
    try:
        yield kept
    finally:
        events.removeHandler(keep)
        events.setLevel(level)
        kept.extend((r.name, r.levelno, r.getMessage()) for r in keep.buffer)


class _Connection:
    """One writer's connection; a lock, so two replies never interleave."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._lock = threading.Lock()

    def send(self, reply: Reply) -> None:
        with self._lock, contextlib.suppress(OSError):
            self.sock.sendall(frame(reply))  # a writer that went away lost its answer only


class Sequencer:
    """The committer of one log (the process holding the lease), and its readers' side."""

    def __init__(self, log: Log, queue_records: int = DEFAULT_WRITE_QUEUE) -> None:
        if queue_records < MAX_BATCH:
            raise ValueError(f"the write queue must hold at least {MAX_BATCH} records")
        self.log = log
        self.committer = Committer(self._commit, bound=queue_records)
        self.stopping = False

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
        if isinstance(request, Append):
            sub = Submission(request.prepared, request.prove, origin=(conn, request))
        else:
            sub = Submission([], kind=type(request).__name__.lower(), origin=(conn, request))
        if not self.committer.submit(sub):
            conn.send(Reply(request.id, "busy", BUSY_NOTE))

    def run(self) -> None:
        """Commit what is queued until `stopping` (what is queued then is still committed)."""
        self.committer.serve(lambda: self.stopping, self._sign_for_standby, WAKE_S)

    def _sign_for_standby(self) -> None:
        """A standby replica waits for a head covering what it appended (its `?prove=1`)."""
        if not self.log.store.signature_wanted():
            return
        try:
            self.log.writer.checkpoint()
        except CapabilityAnchorError as exc:
            _logger.warning("a standby asked for a head, and none was signed: %s", exc)

    def _commit(self, group: Sequence[Submission]) -> None:
        # One reading for the whole group: the latest of its callers', each continued by the
        # monotonic clock to now (a caller's verdict on the clock holds for what it sent).
        mono = monotonic()
        base = max(s.origin[1].now + max(0.0, mono - s.origin[1].at_mono) for s in group)
        self.log.clock = lambda: base + max(0.0, monotonic() - mono)
        with events_kept() as events:
            self._answer(group)
        for n, sub in enumerate(group):
            conn, request = sub.origin
            reply = self._reply(request.id, sub)
            if n == 0:
                reply.events = events
            conn.send(reply)
        # The log's handle is not to be trusted after any other failure: it is reopened.
        failed = group[0].error
        trusted = isinstance(failed, CapabilityAnchorError) and (
            not isinstance(failed, StoreError) or failed.retryable
        )
        if failed is not None and not trusted:
            self._reopen()

    def _answer(self, group: Sequence[Submission]) -> None:
        writer = self.log.writer
        if group[0].kind == "append":
            writer.commit_group(group)
            return
        try:
            group[0].result = (
                writer.checkpoint() if group[0].kind == "checkpoint" else writer.seal()
            )
        except Exception as exc:
            group[0].error = exc

    def _reply(self, request_id: int, sub: Submission) -> Reply:
        exc = sub.error
        if exc is None:
            if sub.kind != "append" or sub.prove:
                return Reply(request_id, "ok", sub.result)
            day = sub.result[0].day if sub.result else ""
            return Reply(request_id, "ok", (day, [(x.leaf_index, x.duplicate) for x in sub.result]))
        if isinstance(exc, CapabilityAnchorError):
            return Reply(request_id, "error", describe(exc))
        crash = "".join(traceback.format_exception(exc))
        _logger.error("the sequencer failed: %s", crash)
        return Reply(request_id, "crash", crash)

    def _reopen(self) -> None:
        """A damaged or replaced database, or a failure nobody foresaw: the next commit opens
        the log afresh rather than trust this handle's caches."""
        with contextlib.suppress(Exception):
            self.log.close()
        public_url = self.log.public_url
        try:
            self.log = Log.open(self.log.data_dir, handoff=False)
        except Exception as exc:
            # This candidate cannot sequence: it ends, and the next candidate opens the log
            # afresh (or fails to, saying why).
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


def main(
    data_dir: str,
    queue_records: int,
    public_url: str | None = None,
    setup: Callable[[], None] | None = None,
) -> None:
    """A sequencer candidate: `setup` (the service's log format), then wait for the lease and
    sequence the log until SIGTERM or the death of the process that started it."""
    if setup is not None:
        setup()
    tie_to_parent()
    # A Ctrl-C reaches the whole process group: the service stops its candidate (SIGTERM).
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
