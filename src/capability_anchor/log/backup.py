"""`backup DEST`: a consistent copy of a live data dir, every file a restore needs, marked
as a restored copy (what is copied and in which order: docs/explanation/procedures.md).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capability_anchor.errors import StoreError, UsageError
from capability_anchor.files import fsync_dir, write_secret_file
from capability_anchor.keys import load_key_file
from capability_anchor.log import datafiles
from capability_anchor.store import Store
from capability_anchor.store import open as stores

from .copy import copy_store
from .lifecycle import Log
from .marks import RESTORED_FILE, restored_mark_bytes
from .writer_token import TOKEN_FILE

ATTEMPTS = 3


@dataclass(frozen=True)
class BackupResult:
    dest: Path
    history_size: int
    history_root: bytes
    days: dict[str, int]
    files: list[str]
    bytes: int
    seconds: float
    not_copied: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "dest": str(self.dest),
            "restored_mark": RESTORED_FILE,
            "history_size": self.history_size,
            "history_root": self.history_root.hex(),
            "days": self.days,
            "records": sum(self.days.values()),
            "files": self.files,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 3),
            "not_copied": self.not_copied,
        }

    def text(self) -> str:
        lines = [
            f"backup in {self.dest}: history size {self.history_size}, "
            f"root {self.history_root.hex()}",
            *(f"  day {day}: {size} records" for day, size in self.days.items()),
            f"  {len(self.files)} files, {self.bytes} bytes, {self.seconds:.1f} s",
        ]
        lines += [f"  not copied: {name}" for name in self.not_copied]
        lines.append(
            f"  marked as a restored copy ({RESTORED_FILE}): before it signs, it compares "
            "itself with what was published (--published URL|DIR, a policy witness, or "
            "--publish DIR; --published none if nothing ever was)"
        )
        return "\n".join(lines)


def _side_files(data_dir: Path) -> dict[str, bytes]:
    """The files beside the database, by name, with their bytes; a missing one is an error."""
    missing = datafiles.missing_files(data_dir)
    if missing:
        raise UsageError(
            f"{data_dir} lacks {', '.join(missing)}: a backup without it cannot be restored"
        )
    names = [p.name for p in datafiles.key_files(data_dir)]
    if (data_dir / TOKEN_FILE).exists():
        names.append(TOKEN_FILE)
    return {name: (data_dir / name).read_bytes() for name in names}


def _partial(dest: Path, name: str) -> Path:
    return dest / f".{name}.partial"


def _write_file(dest: Path, name: str, data: bytes) -> None:
    tmp = _partial(dest, name)
    tmp.unlink(missing_ok=True)
    write_secret_file(tmp, data)
    os.rename(tmp, dest / name)


@contextlib.contextmanager
def _stage(dest: Path, name: str) -> Iterator[Path]:
    """A fresh folder `dest/.NAME.partial`, removed afterwards."""
    stage = dest / f".{name}.partial"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(mode=0o700)
    try:
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _summary(dest: Path, db_name: str) -> tuple[int, bytes, dict[str, int]]:
    """The copy's history size and root and day sizes, read through a link before the copy
    is renamed (its mark holds them)."""
    with _stage(dest, "summary") as stage:
        os.link(_partial(dest, db_name), stage / db_name)
        store = stores.open_readonly(stage)
        try:
            log = Log(stage, store, load_key_file(dest / datafiles.KEY_FILE), time.time)
            with store.snapshot():
                days = {day: log.store.day_size(day) for day in log.store.entry_days()}
                return log.store.history_size(), log.read.history.root(), days
        finally:
            store.close()


def _copy_rows(data_dir: Path, dest: Path, db_name: str) -> None:
    """A log in another engine (PostgreSQL) is backed up as a SQLite log: every row copied
    (`log.copy`) from one snapshot of it (DEST runs as it is, `migrate` moves it back)."""
    src = stores.open_readonly(data_dir)
    try:

        def fill(dst: Store) -> None:
            copy_store(src, dst)

        with _stage(dest, "rows") as stage:
            with src.snapshot():
                stores.create(stage, fill)
            os.rename(stage / db_name, _partial(dest, db_name))
    finally:
        src.close()


def backup(data_dir: Path, dest: Path) -> BackupResult:
    """Copy the log in `data_dir` to `dest` (a new or empty folder, else UsageError)."""
    started = time.monotonic()
    if not stores.exists(data_dir):
        raise StoreError(f"no log at {stores.describe(data_dir)} (nothing to back up)")
    if dest.exists():
        if not dest.is_dir():
            raise UsageError(f"{dest} exists and is not a folder; refusing to back up into it")
        if any(dest.iterdir()):
            raise UsageError(f"{dest} is not empty; a backup goes into a new or empty folder")
    else:
        dest.mkdir(mode=0o700, parents=True)
    os.chmod(dest, 0o700)
    engine, _ = stores.resolve(data_dir)
    own = engine.scheme == stores.DEFAULT_SCHEME
    db_name = (
        stores.copy_name(data_dir) if own else stores.engine(stores.DEFAULT_SCHEME).copy_name(dest)
    )
    tmp = _partial(dest, db_name)
    for _attempt in range(ATTEMPTS):
        before = _side_files(data_dir)
        tmp.unlink(missing_ok=True)
        if own:
            stores.copy_to(data_dir, tmp)
        else:
            _copy_rows(data_dir, dest, db_name)
        if _side_files(data_dir) == before:
            break
    else:
        tmp.unlink(missing_ok=True)
        raise StoreError(
            f"the key files in {data_dir} changed during each of {ATTEMPTS} copies (a "
            "rotate-key running?); run backup again when it is done"
        )
    for name, data in before.items():
        _write_file(dest, name, data)
    size, root, days = _summary(dest, db_name)
    _write_file(dest, RESTORED_FILE, restored_mark_bytes(size, root, int(time.time())))
    fsync_dir(dest)
    os.rename(tmp, dest / db_name)  # last: only now does DEST look like a log
    fsync_dir(dest)
    files = [db_name, *before]
    total = sum((dest / name).stat().st_size for name in files)
    others = sorted(  # what a restore does not need; runtime files and a copy's mark unnamed
        p.name
        for p in data_dir.iterdir()
        if p.name not in before
        and p.name != RESTORED_FILE
        and p.name not in stores.own_files(data_dir)
        and not datafiles.is_runtime(data_dir, p.name)
    )
    took = time.monotonic() - started
    return BackupResult(dest, size, root, days, files, total, took, others)
