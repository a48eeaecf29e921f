"""Progress for long work, on stderr: a bar on a terminal, a line every few seconds otherwise. The
library reports through a `Progress` callable (silent by default); the CLI passes a
`StderrProgress`, which always shows a new stage of known size."""

from __future__ import annotations

import sys
import time
from typing import Protocol, TextIO


class Progress(Protocol):
    def __call__(self, done: int, total: int | None, what: str) -> None: ...


def silent(done: int, total: int | None, what: str) -> None:
    """The default: no output."""


def labelled(progress: Progress, label: str) -> Progress:
    """`progress` with every report named `label` (one stage of a longer task)."""

    def report(done: int, total: int | None, what: str) -> None:
        progress(done, total, label)

    return report


class StderrProgress:
    def __init__(self, stream: TextIO | None = None, interval: float = 2.0) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.interval = interval if not self.tty else 0.1
        self._last = 0.0
        self._open_bar = False
        self._what = ""

    def __call__(self, done: int, total: int | None, what: str) -> None:
        now = time.monotonic()
        final = total is not None and done >= total
        stage = total is not None and what != self._what
        if not final and not stage and now - self._last < self.interval:
            return
        self._last, self._what = now, what
        if self.tty and stage:
            self.close()  # the last stage's bar stays on its own line
        if self.tty:
            if total:
                width = 30
                filled = int(width * min(done, total) / total)
                bar = "#" * filled + "-" * (width - filled)
                self.stream.write(f"\r{what}: [{bar}] {done:,}/{total:,}")
            else:
                self.stream.write(f"\r{what}: {done:,}")
            self._open_bar = not final
            if final:
                self.stream.write("\n")
        else:
            suffix = f"/{total:,}" if total is not None else ""
            self.stream.write(f"{what}: {done:,}{suffix}\n")
        self.stream.flush()

    def close(self) -> None:
        if self._open_bar:
            self.stream.write("\n")
            self.stream.flush()
            self._open_bar = False
