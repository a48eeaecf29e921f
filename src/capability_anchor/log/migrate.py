"""`migrate --from DATA --to URL`: move a SQLite log into another store (PostgreSQL), exactly,
proving the copy before the data dir switches over (docs/how-to/postgresql.md, decisions).

1. The source is opened as a log (its start-up self-check passes) while this process holds
   the sequencer's lock file, so no service runs on it meanwhile (refused if one does).
2. Every row is copied in one transaction of the new store (`log.copy`): a failure leaves
   no log there.
3. Proof: both logs are exported (`export --tiles`) and the two folders must be identical
   byte for byte; both are audited and both audits must pass.
4. The switch, in one write transaction of the source: its contents are compared once more
   with what was copied (a writer meanwhile is refused, nothing switched), and the SQLite
   log is marked `moved_to` (it never opens again: a second live copy of a log, with its
   key, could sign a head that conflicts with the moved one). Then the data dir is bound to
   the new store (`store-url`), and every command given it opens the moved log.

A run stopped between the mark and the binding is finished by running `migrate` again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from capability_anchor.errors import Conflict, StoreError, UsageError
from capability_anchor.files import fsync_dir
from capability_anchor.progress import Progress, silent
from capability_anchor.store import binding
from capability_anchor.store import open as stores

from .copy import copy_store, fingerprint
from .datafiles import key_files
from .handoff import LOCK_NAME
from .writer_token import TOKEN_FILE

MOVED_TO = "moved_to"
"""Meta of a SQLite log that `migrate` moved: the URL of its store now."""

STAGING = ".migrate"


def moved_message(data_dir: Path, url: str) -> str:
    return (
        f"the log in {data_dir} moved to {url} (`migrate`): it is opened through the data "
        f"dir's {binding.STORE_FILE}, which is missing; run `capability-anchor migrate --from "
        f"{data_dir} --to {url}` again to finish the move"
    )


def migrate(data_dir: Path, url: str, progress: Progress = silent) -> dict[str, Any]:
    """Move the SQLite log in `data_dir` to the new store at `url`; the report printed."""
    from . import Log

    url = binding.check_url(url)
    if url.split("://", 1)[0].lower() == stores.DEFAULT_SCHEME:
        raise UsageError("--to names the new store (postgresql://USER@HOST/DBNAME)")
    stores.resolve(url)
    have = binding.bound_file(data_dir)
    if have is not None:
        raise UsageError(f"{data_dir} is already the data dir of the log at {have}")
    if not stores.exists(data_dir):
        raise StoreError(f"no log at {stores.describe(data_dir)} to migrate")
    source = stores.open_readonly(data_dir)
    try:
        with source.read():
            moved = source.meta().get(MOVED_TO)
    finally:
        source.close()
    if moved is not None:
        return _finish(data_dir, url, moved)
    with (
        _no_service(data_dir),
        Log.open(data_dir, background_checkpoints=False, handoff=False) as log,
    ):
        if stores.exists(url):
            raise Conflict(f"a log already exists at {stores.describe(url)}; not replacing it")
        progress(0, 5, "migrate: copy")
        with log.store.snapshot():
            before = fingerprint(log.store)
            copied: list[Any] = []
            stores.create(url, lambda dst: copied.append(copy_store(log.store, dst)))
        proof = _prove(log, data_dir, url, progress)
        with log.store.write():
            if fingerprint(log.store) != before:
                raise Conflict(
                    f"the log in {data_dir} changed during the copy (a writer ran): nothing "
                    f"was switched; drop the database at {stores.describe(url)} and run "
                    "migrate again with every writer stopped"
                )
            log.store.set_meta(MOVED_TO, url)
    stores.bind(data_dir, url)
    return {"from": str(data_dir), "to": stores.describe(url), **copied[0].to_json(), **proof}


def _finish(data_dir: Path, url: str, moved: str) -> dict[str, Any]:
    if moved != url:
        raise UsageError(f"the log in {data_dir} moved to {moved} already, not to {url}")
    stores.bind(data_dir, url)
    return {"from": str(data_dir), "to": stores.describe(url), "finished": True}


@contextlib.contextmanager
def _no_service(data_dir: Path) -> Iterator[None]:
    """Hold the sequencer's lock (a service's sequencer holds it while it lives)."""
    fd = os.open(data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(
                f"a service is running on {data_dir}: stop it (and every writer) before migrate"
            ) from None
        yield
    finally:
        os.close(fd)


def _prove(log: Any, data_dir: Path, url: str, progress: Progress) -> dict[str, Any]:
    """Export and audit both logs; Conflict (nothing switched) unless the exports are equal
    byte for byte and both audits pass."""
    from capability_anchor.audit.datadir import audit_data_dir
    from capability_anchor.export.days import export

    from . import Log

    staging = data_dir / STAGING
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(mode=0o700)
    try:
        # The new log's data dir, as the data dir will be after the switch.
        for path in [*key_files(data_dir), data_dir / TOKEN_FILE]:
            shutil.copy2(path, staging / path.name)
        stores.bind(staging, url)
        progress(1, 5, "migrate: export the source")
        export(log, staging / "export-from", tiles=True)
        progress(2, 5, "migrate: export the copy")
        with Log.open(staging, background_checkpoints=False, handoff=False) as moved:
            export(moved, staging / "export-to", tiles=True)
        left, right = _digest(staging / "export-from"), _digest(staging / "export-to")
        audits = {}
        for step, (name, where) in enumerate((("from", data_dir), ("to", staging)), 3):
            progress(step, 5, f"migrate: audit the {'source' if name == 'from' else 'copy'}")
            audits[name] = audit_data_dir(where)
        problems = [f"{n}: {p}" for n, r in audits.items() for p in r.problems]
        if left != right:
            problems.insert(0, "the two logs' exports differ")
        if problems:
            raise Conflict(
                "migrate: the copy is not proven, nothing was switched (drop the database at "
                f"{stores.describe(url)} before trying again): " + "; ".join(problems)
            )
        return {
            "exports_identical": True,
            "export_files": left[0],
            "export_sha256": left[1],
            "audit_from_ok": audits["from"].ok,
            "audit_to_ok": audits["to"].ok,
        }
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        fsync_dir(data_dir)


def _digest(folder: Path) -> tuple[int, str]:
    """(file count, SHA-256 over every file's relative path and bytes, in path order)."""
    h = hashlib.sha256()
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    for path in files:
        rel = path.relative_to(folder).as_posix().encode()
        data = path.read_bytes()
        h.update(len(rel).to_bytes(8, "big") + rel + len(data).to_bytes(8, "big") + data)
    return len(files), h.hexdigest()


__all__ = ["MOVED_TO", "migrate", "moved_message"]
