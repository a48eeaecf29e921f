"""Small durable-file helpers shared by the store, the log and export."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a file created, linked or renamed in it) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_secret_file(path: str | os.PathLike[str], data: bytes) -> None:
    """Create `path` holding `data`, readable by the owner only, durably.

    `O_CREAT | O_EXCL` makes creation atomic and refuses any existing path (a symlink
    included, even a dangling one), so nothing is ever overwritten; the mode is 0600 from the
    moment the file exists (never chmod a file that already held the secret). If writing
    fails, the partial file is removed so a retry is possible. Raises FileExistsError or
    OSError; callers say what the file was.
    """
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
