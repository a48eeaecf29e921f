"""`migrate --from DATA --to URL`: move a SQLite log into another store (PostgreSQL), exactly,
proving the copy before the data dir switches over (docs/how-to/postgresql.md; the steps:
docs/explanation/procedures.md).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from capability_anchor.errors import Conflict, StoreError, UsageError
from capability_anchor.files import fsync_dir
from capability_anchor.progress import Progress, labelled, silent
from capability_anchor.store import binding
from capability_anchor.store import open as stores

from .copy import copy_store, fingerprint
from .datafiles import MOVED_TO, key_files, locked
from .handoff import LOCK_NAME
from .lifecycle import Log
from .writer_token import TOKEN_FILE

STAGING = ".migrate"


Prove = Callable[[Any, Path, Path, Progress], dict[str, Any]]
"""(log, data dir, copy's data dir, progress) -> report, or Conflict (`audit.copies.prove_copy`)."""


def migrate(data_dir: Path, url: str, prove: Prove, progress: Progress = silent) -> dict[str, Any]:
    """Move the SQLite log in `data_dir` to the new store at `url`; the report printed."""
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
    if moved is not None:  # the switch was made: only the binding is left to write
        if moved != url:
            raise UsageError(f"the log in {data_dir} moved to {moved} already, not to {url}")
        stores.bind(data_dir, url)
        return {"from": str(data_dir), "to": stores.describe(url), "finished": True}
    # The sequencer's lock: a service's sequencer holds it while it lives.
    busy = UsageError(
        f"a service is running on {data_dir}: stop it (and every writer) before migrate"
    )
    with (
        locked(data_dir / LOCK_NAME, busy),
        Log.open(data_dir, background_checkpoints=False, handoff=False) as log,
    ):
        if stores.exists(url):
            raise Conflict(f"a log already exists at {stores.describe(url)}; not replacing it")
        # The source's index made whole first (`reindex`): its audit is part of the proof.
        reindexed = sum(d["added"] for d in log.writer.reindex())
        with log.store.snapshot():
            before = fingerprint(log.store)
            copied: list[Any] = []
            copy = labelled(progress, "migrate: copy the entries")
            stores.create(url, lambda dst: copied.append(copy_store(log.store, dst, copy)))
        proof = _staged(log, data_dir, url, prove, progress)
        with log.store.write():
            if fingerprint(log.store) != before:
                raise Conflict(
                    f"the log in {data_dir} changed during the copy (a writer ran): nothing "
                    f"was switched; drop the database at {stores.describe(url)} and run "
                    "migrate again with every writer stopped"
                )
            log.store.set_meta(MOVED_TO, url)
    stores.bind(data_dir, url)
    progress(1, 1, "migrate: switched")
    return {
        "from": str(data_dir),
        "to": stores.describe(url),
        **copied[0].to_json(),
        "source_index_rows_added": reindexed,
        **proof,
    }


def _staged(log: Any, data_dir: Path, url: str, prove: Prove, progress: Progress) -> dict[str, Any]:
    """`prove` run with the copy's data dir as the data dir will be after the switch."""
    staging = data_dir / STAGING
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(mode=0o700)
    try:
        for path in [*key_files(data_dir), data_dir / TOKEN_FILE]:
            shutil.copy2(path, staging / path.name)
        stores.bind(staging, url)
        return prove(log, data_dir, staging, progress)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        fsync_dir(data_dir)
