"""What every command shares: the exit code of an error (SPEC §10, by its class, never its message),
message printing, SIGINT held over a transaction, and `quiet_broken_pipe`, so a reader that stops
early (`| head -c 0`) gets no traceback and the command its own exit code."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO, cast

from capability_anchor.errors import EXIT_FAILED as EXIT_FAILED
from capability_anchor.errors import EXIT_USAGE as EXIT_USAGE
from capability_anchor.errors import CapabilityAnchorError

EXIT_OK = 0
EXIT_INTERRUPTED = 130  # 128 + SIGINT: what a shell reports for a command stopped by Ctrl-C


def exit_code_for(exc: BaseException) -> int:
    """The error class's own `exit_code`; an OSError is I/O (2), anything else a failure (1)."""
    if isinstance(exc, CapabilityAnchorError):
        return exc.exit_code
    if isinstance(exc, OSError):
        return EXIT_USAGE
    return EXIT_FAILED


def emit(obj: Any) -> None:
    """One JSON document per line on stdout (machine output)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")


class _QuietPipe:
    """stdout, dropping writes once the reader is gone: a command's outcome never depends on it."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._reader_gone()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._reader_gone()

    def _reader_gone(self) -> None:
        self.broken = True
        # The real stream still holds what it could not write, and the interpreter flushes
        # it at exit ("Exception ignored ... BrokenPipeError"); pointing fd 1 at /dev/null
        # makes that last flush succeed silently.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._stream.fileno())
            finally:
                os.close(devnull)
        except (OSError, ValueError):
            pass  # no file descriptor (an in-process capture): nothing will flush it

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def sigint_held() -> Iterator[list[int]]:
    """Hold SIGINT for a block that must end committed or rolled back; the list says if it came."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield received
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def quiet_broken_pipe() -> Iterator[None]:
    """Run a command's main with stdout a `_QuietPipe`, flushed on the way out."""
    real = sys.stdout
    guard = _QuietPipe(real)
    guarded = cast(TextIO, guard)
    sys.stdout = guarded
    try:
        yield
    finally:
        guard.flush()
        if sys.stdout is guarded:
            sys.stdout = real
