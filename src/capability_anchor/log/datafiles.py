"""What a log's data dir holds, and which of its files a restore needs (`backup`); the list is
in docs/explanation/procedures.md.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from capability_anchor.envvars import TOKEN
from capability_anchor.errors import CapabilityAnchorError, KeyFileError
from capability_anchor.store import binding
from capability_anchor.store import open as stores

from .writer_token import TOKEN_FILE

KEY_FILE = "signing-key.jwk"
KEY_PREFIX = "signing-key"
RUNTIME_FILES = (
    "background.lock",
    "clock-ack",
    "clock-disagrees",
    "sequencer.lock",
    "sequencer.sock",
)


MOVED_TO = "moved_to"
"""Meta of a SQLite log that `migrate` moved: the URL of its store now."""


def moved_message(data_dir: Path, url: str) -> str:
    return (
        f"the log in {data_dir} moved to {url} (`migrate`): it is opened through the data "
        f"dir's {binding.STORE_FILE}, which is missing; run `capability-anchor migrate --from "
        f"{data_dir} --to {url}` again to finish the move"
    )


def key_files(data_dir: Path) -> list[Path]:
    """Every signing-key file of the data dir (the current key, retired and pending ones)."""
    return sorted(p for p in data_dir.iterdir() if p.name.startswith(KEY_PREFIX) and p.is_file())


def missing_files(data_dir: Path) -> list[str]:
    """The files beside the database `data_dir` lacks (the writer token's unless it comes
    from the environment)."""
    wanted = [KEY_FILE] + ([] if TOKEN.is_set() else [TOKEN_FILE])
    return [name for name in wanted if not (data_dir / name).exists()]


def check_restored(data_dir: Path) -> None:
    """Refuse a data dir with the database but not its key file (restored alone)."""
    missing = missing_files(data_dir)
    if KEY_FILE in missing and stores.exists(data_dir):
        raise KeyFileError(
            f"{data_dir} holds {stores.copy_name(data_dir)} but not {', '.join(missing)}: "
            "the database alone "
            "cannot be restored; restore every file of the backup (`capability-anchor backup "
            "DEST --data DIR` copies the database, every signing-key* file and the "
            "writer-token)"
        )


def try_lock(path: Path) -> int | None:
    """The descriptor of an exclusive flock on `path` (made 0600), or None while another
    process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def locked(path: Path, refusal: CapabilityAnchorError) -> Iterator[None]:
    """Hold the flock on `path` (a service's `background.lock` or `sequencer.lock`), else
    raise `refusal`."""
    fd = try_lock(path)
    if fd is None:
        raise refusal
    try:
        yield
    finally:
        os.close(fd)


def is_runtime(data_dir: Path, name: str) -> bool:
    """A file of a running process, not of the log (never copied)."""
    if name in RUNTIME_FILES or stores.is_runtime(data_dir, name):
        return True
    return name.startswith("witness-") and name.endswith(".lock")
