"""The proof that a copy of a log is the log (`migrate`, `log.migrate`): both exported with
their tiles, the two folders identical byte for byte, and both audits passing."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from capability_anchor.errors import Conflict
from capability_anchor.export.days import export
from capability_anchor.log import Log
from capability_anchor.progress import Progress
from capability_anchor.store import open as stores

from .datadir import audit_data_dir


def prove_copy(log: Log, data_dir: Path, staging: Path, progress: Progress) -> dict[str, Any]:
    """Export both logs (into `staging`) and audit both; Conflict, so nothing is switched,
    unless the exports are equal byte for byte and both audits pass. `log` is the source,
    open on `data_dir`; `staging` is the copy's data dir."""
    progress(1, 5, "migrate: export the source")
    export(log, staging / "export-from", tiles=True)
    progress(2, 5, "migrate: export the copy")
    with Log.open(staging, background_checkpoints=False, handoff=False) as moved:
        export(moved, staging / "export-to", tiles=True)
    left, right = digest(staging / "export-from"), digest(staging / "export-to")
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
            f"{stores.describe(staging)} before trying again): " + "; ".join(problems)
        )
    return {
        "exports_identical": True,
        "export_files": left[0],
        "export_sha256": left[1],
        "audit_from_ok": audits["from"].ok,
        "audit_to_ok": audits["to"].ok,
    }


def digest(folder: Path) -> tuple[int, str]:
    """(file count, SHA-256 over each file's relative path and bytes, each length-prefixed
    with 8 bytes, the files in the order of their paths' components)."""
    h = hashlib.sha256()
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    for path in files:
        rel = path.relative_to(folder).as_posix().encode()
        data = path.read_bytes()
        h.update(len(rel).to_bytes(8, "big") + rel + len(data).to_bytes(8, "big") + data)
    return len(files), h.hexdigest()


__all__ = ["digest", "prove_copy"]
