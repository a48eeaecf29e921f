"""Small durable-file helpers shared by the store, the log and export, the data dir's modes,
and the signal that this process changed a data-dir mark (`marks_changed`)."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a file created, linked or renamed in it) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_secret_file(path: str | os.PathLike[str], data: bytes) -> None:
    """Create `path` holding `data`, mode 0600 from the start, durably. `O_EXCL` refuses any
    existing path (a symlink too); a failed write removes the partial file. Raises FileExistsError
    or OSError."""
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


_modes_log = logging.getLogger("capability_anchor.files")


def tighten_modes(data_dir: Path, store_files: Iterable[str]) -> list[tuple[Path, int, int]]:
    """Take group and other bits off the data dir and `store_files`; return (path, old, new) for
    each changed, logged as a warning. Old logs are tightened, not refused; key and token files are
    never changed; a path that cannot be changed is left, with a warning."""
    changed: list[tuple[Path, int, int]] = []
    paths = [data_dir] + [data_dir / name for name in store_files]
    for path in paths:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            continue
        if not mode & 0o077:
            continue
        try:
            os.chmod(path, mode & ~0o077)
        except OSError as exc:
            _modes_log.warning(
                "%s has mode %04o (group or others have access) and cannot be changed: %s",
                path,
                mode,
                exc.strerror,
            )
            continue
        _modes_log.warning(
            "%s had mode %04o (group or others had access); changed to %04o",
            path,
            mode,
            mode & ~0o077,
        )
        changed.append((path, mode, mode & ~0o077))
    return changed


_mark_watches: weakref.WeakSet[Any] = weakref.WeakSet()


def watch_marks(watch: Any) -> None:
    """Have `watch.refresh()` called when this process changes a mark of `watch.key`, the
    resolved data dir (`log.marks.MarkWatch`)."""
    _mark_watches.add(watch)


def marks_changed(data_dir: Path) -> None:
    """This process just wrote or removed a mark of `data_dir` (damage, behind): its watches
    read the marks again now, not at their next refresh."""
    key = Path(data_dir).resolve()
    for watch in list(_mark_watches):
        if watch.key == key:
            watch.refresh()
