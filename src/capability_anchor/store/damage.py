"""The damage mark `DIR/damaged`: once any process finds the database damaged, every write
transaction refuses (`StoreDamaged`) until `audit --data DIR` passes after a restore
(issue #21, item 6; docs/explanation/store.md, "Module notes")."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
from dataclasses import dataclass
from pathlib import Path

from capability_anchor.errors import StoreDamaged
from capability_anchor.files import marks_changed

MARK_FILE = "damaged"


@dataclass(frozen=True)
class Damage:
    found_at: str
    """UTC time of the first finding, ISO 8601."""
    finding: str
    """What found it and SQLite's own words."""


def mark(data_dir: Path, finding: str) -> None:
    """Keep the first finding (a later one does not replace it). Never raises: a data dir
    that cannot be written to (a read-only copy) keeps no mark, and the finding is still
    reported by whoever made it."""
    path = data_dir / MARK_FILE
    if path.exists():
        marks_changed(data_dir)
        return
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    body = json.dumps({"found_at": now, "finding": finding, "pid": os.getpid()}).encode()
    tmp = data_dir / f".{MARK_FILE}.{os.getpid()}"
    with contextlib.suppress(OSError):
        fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, body + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # the first finding wins; another process may have marked
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
    marks_changed(data_dir)


def found(data_dir: Path) -> Damage | None:
    """The mark, if the data dir has one (one whose content cannot be read still counts)."""
    path = data_dir / MARK_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return Damage("unknown", f"the damage mark {path} cannot be read: {exc.strerror}")
    try:
        doc = json.loads(raw)
        return Damage(str(doc["found_at"]), str(doc["finding"]))
    except (ValueError, KeyError, TypeError):
        return Damage("unknown", f"the damage mark {path} is not the JSON this program writes")


def refuse_if_damaged(data_dir: Path) -> None:
    """StoreDamaged, naming the finding and the fix, if the data dir is marked."""
    damage = found(data_dir)
    if damage is not None:
        raise StoreDamaged(describe(data_dir, damage))


def describe(data_dir: Path, damage: Damage) -> str:
    return (
        f"the log's database in {data_dir} was found damaged at {damage.found_at} "
        f"({damage.finding}); restore {data_dir / 'log.sqlite3'} from a backup (or repair it), "
        f"then run `capability-anchor audit --data {data_dir}`: once it passes it removes "
        f"{data_dir / MARK_FILE}, and the service can start again"
    )


def clear(data_dir: Path) -> bool:
    """Remove the mark (the audit passed). Whether there was one."""
    try:
        (data_dir / MARK_FILE).unlink()
    except FileNotFoundError:
        return False
    return True
