"""The proof that a copy of a log is the log (`migrate`, `log.migrate`): both exported with
their tiles, the two folders identical byte for byte, and both audits passing."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from capability_anchor.errors import Conflict
from capability_anchor.export.days import export
from capability_anchor.log import Log
from capability_anchor.progress import Progress, labelled
from capability_anchor.store import open as stores

from .datadir import audit_data_dir


def prove_copy(log: Log, data_dir: Path, staging: Path, progress: Progress) -> dict[str, Any]:
    """Export and audit both logs; Conflict unless the exports are byte-equal and both pass."""
    source = labelled(progress, "migrate: export the source")
    export(log, staging / "export-from", source, tiles=True)
    with Log.open(staging, background_checkpoints=False, handoff=False) as moved:
        export(
            moved, staging / "export-to", labelled(progress, "migrate: export the copy"), tiles=True
        )
    left, right = digest(staging / "export-from"), digest(staging / "export-to")
    entries = sum(log.store.day_size(day) for day in log.store.entry_days())
    audits = {}
    for name, where in (("from", data_dir), ("to", staging)):
        what = f"migrate: audit the {'source' if name == 'from' else 'copy'}"
        with _entries_audited(progress, what, entries) as audited:
            audits[name] = audit_data_dir(where, progress=audited)
    problems = [f"{n}: {p}" for n, r in audits.items() for p in r.problems]
    if left != right:
        problems.insert(0, "the two logs' exports differ")
    if problems:
        raise Conflict(
            "migrate: the copy is not proven, nothing was switched (drop the database at "
            f"{stores.describe(staging)} before trying again): " + "; ".join(problems)
        )
    return {
        "exports_identical": True,
        "export_files": left[0],
        "export_sha256": left[1],
        "audit_from_ok": audits["from"].ok,
        "audit_to_ok": audits["to"].ok,
    }


@contextlib.contextmanager
def _entries_audited(progress: Progress, label: str, entries: int) -> Iterator[Progress]:
    """The audit's reports as entries audited of `entries`, from 0 to all of them."""
    days: dict[str, int] = {}
    progress(0, entries, label)

    def report(done: int, total: int | None, what: str) -> None:
        days[what] = done  # the audit names each report by its day (`audit.day`)
        progress(min(sum(days.values()), entries - 1), entries, label)

    yield report
    progress(entries, entries, label)


def digest(folder: Path) -> tuple[int, str]:
    """(file count, SHA-256 over each file's length-prefixed path and bytes, in path order)."""
    h = hashlib.sha256()
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    for path in files:
        rel = path.relative_to(folder).as_posix().encode()
        data = path.read_bytes()
        h.update(len(rel).to_bytes(8, "big") + rel + len(data).to_bytes(8, "big") + data)
    return len(files), h.hexdigest()
