"""Small durable-file helpers shared by the store, the log and export, and the data dir's
modes."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Iterable
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


_modes_log = logging.getLogger("capability_anchor.files")


def tighten_modes(data_dir: Path, store_files: Iterable[str]) -> list[tuple[Path, int, int]]:
    """Take every group and other permission bit off the data dir and the store's files in
    it (`store_files`, from `store.open.own_files`), and return (path, old mode, new mode)
    of each one changed, each also logged as a warning.

    Logs made before 0.2 left the data dir 0755 and the database 0644 (the umask's
    defaults); nothing needs group or other access to them (readers use HTTP or an export),
    and refusing would stop every such log at its next start, so they are tightened rather
    than refused. The key and token files are never changed: a secret that was readable by
    others is refused, so the operator decides whether it leaked. A path that cannot be
    changed (not the owner, a read-only copy) is left as it is, with a warning.
    """
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
