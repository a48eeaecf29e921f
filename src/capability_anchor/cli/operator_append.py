"""`capability-anchor append FILE|-`: JSON Lines into the log in bounded memory (#23), in two
passes that never hold the input: *validate* parses, checks and prepares every record into a spool
(an unnamed file in the data dir), storing nothing; *append* stores the spool one durable batch at
a time. Why: docs/explanation/decisions/23-writes.md, "A streaming append"."""

from __future__ import annotations

import argparse
import contextlib
import errno
import struct
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import msgspec

from capability_anchor import leaf
from capability_anchor.errors import InputError, InvalidRecord, StoreFull
from capability_anchor.progress import StderrProgress

from .common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, emit, sigint_held
from .operator_base import PROG, open_log

if TYPE_CHECKING:
    from capability_anchor.log import Log, Prepared

# Imported inside functions: the log ~100-380 ms (python -X importtime after `cli.operator`, min
# of 7 runs, 2026-12-05): `--help` and the other commands skip it.

# No record's line is longer: a leaf is at most 16 KiB (SPEC §2), and 64 times that leaves
# room for whitespace and escapes. A longer line is refused unread, so that no input (one
# line of gigabytes included) is ever held whole.
LINE_LIMIT = 64 * leaf.MAX_LEAF_BYTES
# How much of an input whose first record does not parse is read to see whether it is one
# JSON document (the hint below); the hint needs no more for any pretty-printed record.
HINT_LIMIT = 16 * 2**20
HINT = "; input is JSON Lines: one object per line"
# The bytes `bytes.strip` takes that are JSON whitespace too (no \v, no \f).
_JSON_SPACE = b" \t\r\n"


def cmd_append(args: argparse.Namespace) -> int:
    """Append, and on Ctrl-C (SIGINT) stop with one line saying how many records are stored
    (exit 130, no traceback). The count is exact: SIGINT is held while a batch's transaction
    runs, so a batch is either stored and counted or not stored at all."""
    progress = StderrProgress()
    stored: list[int] = []
    try:
        return _append(args, progress, stored)
    except KeyboardInterrupt:
        progress.close()
        # Spelled as issue #20 gives it, without the program prefix: the one line to read.
        print(
            f"interrupted: {sum(stored)} records stored; rerun the same input to continue "
            "(stored ones come back as duplicates)",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED


def _append(args: argparse.Namespace, progress: Any, stored: list[int]) -> int:
    # The input is opened first: a missing file is said before anything about the log.
    stdin = contextlib.nullcontext(sys.stdin.buffer)
    opened = stdin if args.file == "-" else open(args.file, "rb")  # noqa: SIM115 (with below)
    with opened as stream, open_log(args) as log, _Spool(log.data_dir) as spool:
        from capability_anchor.log import MAX_BATCH

        total = _validate(log, _Lines(stream), spool, progress, MAX_BATCH)
        if total < 0:
            return -total
        progress.close()
        done = 0
        for batch in spool.batches():
            # Each batch is one durable transaction; it is counted once its commit returned,
            # and its lines are printed only then: every line printed is an acknowledged
            # entry. A Ctrl-C while lines are printed (a slow reader) stops at once.
            with sigint_held() as interrupted:
                # All of it or none, durable when this returns: by the log's sequencer
                # when one is live, else by its committer in this process.
                results = log.append_prepared(batch)
            stored.append(len(results))
            for result in results:
                emit(result.to_json())
            sys.stdout.flush()
            done += len(batch)
            progress(done, total, "append")
            if interrupted:
                raise KeyboardInterrupt
        progress.close()
    return EXIT_OK


def _validate(log: Log, lines: _Lines, spool: _Spool, progress: Any, size: int) -> int:
    """The first pass: every line parsed, every record prepared into the spool in batches of
    `size`, until the first refused line. Gives the number of records, or minus the exit code
    once the first bad line was said. Malformed JSON anywhere is exit 2 even after a refused
    record (1): the rest is still parsed."""
    records: list[object] = []
    numbers: list[int] = []
    count = 0
    refused: tuple[int, InvalidRecord] | None = None

    def flush() -> None:
        # Prepared at the clock of now: the record rule's time limit only moves later, so
        # what passes now passes when stored (23-writes.md).
        nonlocal records, numbers, count, refused
        batch, at = records, numbers
        records, numbers = [], []
        if not batch or refused is not None:
            return
        try:
            prepared = log.prepare(batch)
        except InvalidRecord as exc:
            refused = (at[exc.position] if exc.position is not None else 0), exc
            return
        spool.write(prepared)
        count += len(prepared)

    for line in lines:
        if line is None:
            over = f"the line is longer than {LINE_LIMIT} bytes: no record is (SPEC §2)"
            flush()  # the records before it first: the first refused line is the one said
            if refused is None:
                refused = lines.number, InvalidRecord(over)
            continue
        if not line.strip():
            continue  # blank lines are skipped but counted
        try:
            record = leaf.parse_json(line)
        except InvalidRecord as exc:
            # Malformed JSON is exit 2 in every command
            # (docs/explanation/decisions/19-up-to-19.md).
            hint = _json_lines_hint(line, lines) if lines.first_content else ""
            print(f"{PROG}: line {lines.number}: {exc}{hint}", file=sys.stderr)
            return -EXIT_USAGE
        if refused is None:
            records.append(record)
            numbers.append(lines.number)
            if len(records) >= size:
                flush()
                progress(lines.number, None, "validate (lines)")
    flush()
    if refused is not None:
        print(f"{PROG}: line {refused[0]}: {refused[1]}", file=sys.stderr)
        return -EXIT_FAILED
    return count


class _Lines:
    """The lines of a binary stream as `data.split(b"\\n")` gives them (without the
    newline), read one at a time; a line longer than LINE_LIMIT is skipped unread and given
    as None. `number` is the 1-based number of the line given last; `first_content` says
    whether it is the first that is not blank; `odd_space` whether a blank line before the
    first that is not holds whitespace JSON does not allow (a \\v, a \\f)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self.number = 0
        self.first_content = False
        self.odd_space = False
        self._content = 0

    def __iter__(self) -> Iterator[bytes | None]:
        while raw := self._stream.readline(LINE_LIMIT + 1):
            self.number += 1
            if raw.endswith(b"\n"):
                line: bytes | None = raw[:-1]
            elif len(raw) <= LINE_LIMIT:
                line = raw  # the last line, without a newline
            else:
                while (piece := self._stream.readline(LINE_LIMIT)) and not piece.endswith(b"\n"):
                    pass
                line = None
            if line is None or line.strip():
                self._content += 1
            elif not self._content and line.strip(_JSON_SPACE):
                self.odd_space = True
            self.first_content = self._content == 1
            yield line

    def rest(self) -> bytes | None:
        """The rest of the input, or None when it is longer than HINT_LIMIT."""
        data = self._stream.read(HINT_LIMIT + 1)
        return data if len(data) <= HINT_LIMIT else None


def _json_lines_hint(first: bytes, lines: _Lines) -> str:
    """A hint when the first record does not parse because the input is one JSON document
    over several lines (pretty-printed, or an array), not JSON Lines."""
    rest = lines.rest()
    if rest is None:  # more than HINT_LIMIT follows: not parsed as one document
        return HINT if first.strip() in (b"{", b"[") else ""
    if not rest.strip():
        return ""  # one line of content: nothing spread over lines
    if first.strip() in (b"{", b"["):
        return HINT
    if lines.odd_space:  # blank lines before `first` that JSON would not parse
        return ""
    try:
        leaf.parse_json(first + b"\n" + rest)
    except InvalidRecord:
        return ""
    return HINT


_FRAME = struct.Struct(">I")


class _Spool:
    """Prepared batches on disk, each a msgpack frame after its length, in an unnamed file in
    the data dir (not a tmpfs $TMPDIR); it vanishes with the process, a killed one too."""

    def __init__(self, where: Path) -> None:
        self._where = where
        self._encode = msgspec.msgpack.Encoder().encode
        self._decode = msgspec.msgpack.Decoder(list[tuple[bytes, bytes, tuple[str, ...]]]).decode
        self._frames = 0
        with self._disk():
            self._file = tempfile.TemporaryFile(dir=where)  # noqa: SIM115 (closed by __exit__)

    def __enter__(self) -> _Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    @contextlib.contextmanager
    def _disk(self) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise StoreFull(
                f"{self._where}: the disk is full: no room to spool the validated input "
                f"({exc.strerror}); nothing was stored"
            ) from None

    def write(self, batch: list[Prepared]) -> None:
        frame = self._encode(batch)
        with self._disk():
            self._file.write(_FRAME.pack(len(frame)) + frame)
        self._frames += 1

    def batches(self) -> Iterator[list[Prepared]]:
        """The batches written, in order, one at a time."""
        with self._disk():
            self._file.flush()  # a full disk may only show here
            self._file.seek(0)
        for _ in range(self._frames):
            head = self._file.read(_FRAME.size)
            frame = self._file.read(_FRAME.unpack(head)[0]) if len(head) == _FRAME.size else b""
            try:
                batch = self._decode(frame)
            except msgspec.DecodeError as exc:
                raise InputError(
                    f"the spool of the input in {self._where} is damaged: {exc}"
                ) from None
            yield batch
