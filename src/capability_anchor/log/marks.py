"""The data dir's two marks that stop the log signing (SPEC §13.3, §14.2), files every
process sees: `behind-published.json` (`published.learn` enters it, `recover` clears it) and
`restored-copy.json` (backup's mark, cleared by a passing comparison).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capability_anchor.errors import BehindPublished, NotCompared
from capability_anchor.files import fsync_dir, marks_changed, watch_marks, write_secret_file
from capability_anchor.store.damage import Damage, found

BEHIND_FILE = "behind-published.json"
RESTORED_FILE = "restored-copy.json"

_events = logging.getLogger("capability_anchor.published")


BEHIND, CONFLICT = "behind", "conflict"


@dataclass(frozen=True)
class Behind:
    """Why the log signs nothing: BEHIND (a larger history was published) or CONFLICT
    (another root at a size we hold: forked, recover cannot fix it)."""

    kind: str
    source: str
    published_size: int
    our_size: int
    since: int
    detail: str

    def reason(self) -> str:
        return (
            f"{self.source} shows history size {self.published_size}, this data dir holds "
            f"{self.our_size}: {self.detail}"
        )

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def error(self) -> BehindPublished:
        fix = (
            "run `capability-anchor recover --from URL|DIR` (the public mirror or an export)"
            if self.kind == BEHIND
            else "this data dir already conflicts with what was published: do not serve it; "
            "restore a backup the published history extends, then `capability-anchor "
            "recover --from URL|DIR`"
        )
        return BehindPublished(f"behind what was published: {self.reason()}; {fix}")


def behind_state(data_dir: Path) -> Behind | None:
    """The data dir's behind state, or None (an unreadable state file is a state)."""
    path = Path(data_dir) / BEHIND_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return Behind(CONFLICT, str(path), 0, 0, 0, f"the state file is unreadable: {exc}")
    try:
        obj = json.loads(raw)
        return Behind(
            str(obj["kind"]),
            str(obj["source"]),
            int(obj["published_size"]),
            int(obj["our_size"]),
            int(obj["since"]),
            str(obj["detail"]),
        )
    except (ValueError, KeyError, TypeError):
        return Behind(CONFLICT, str(path), 0, 0, 0, "the state file is malformed")


def check_not_behind(data_dir: Path) -> None:
    """Raise BehindPublished while the data dir is behind what was published: a stat per
    call (every `/record` asks), the file read only when it is there."""
    try:
        os.lstat(f"{data_dir}/{BEHIND_FILE}")  # (`os.path.join` costs 1.5 µs more)
    except FileNotFoundError:
        return
    except OSError:
        pass  # an unreadable state file is a state: `behind_state` says which
    state = behind_state(data_dir)
    if state is not None:
        raise state.error()


def mark_behind(data_dir: Path, state: Behind) -> bool:
    """Enter the behind state; whether this call entered it (and logged it)."""
    data_dir = Path(data_dir)
    path = data_dir / BEHIND_FILE
    if path.exists():
        return False
    tmp = data_dir / f".{BEHIND_FILE}.tmp-{os.getpid()}-{time.monotonic_ns()}"
    write_secret_file(tmp, json.dumps(state.to_json(), sort_keys=True).encode() + b"\n")
    try:
        try:
            os.link(tmp, path)  # fails if another process entered it first
        except FileExistsError:
            return False
        fsync_dir(data_dir)
    finally:
        tmp.unlink(missing_ok=True)
    marks_changed(data_dir)
    _events.error(
        "behind what was published: signing stopped, appends refused: %s; operator: %s",
        state.reason(),
        state.error().action,
    )
    return True


def clear_behind(data_dir: Path) -> Behind | None:
    """Leave the behind state (after `recover`); the state that was cleared, if any."""
    state = behind_state(data_dir)
    path = Path(data_dir) / BEHIND_FILE
    path.unlink(missing_ok=True)
    fsync_dir(Path(data_dir))
    marks_changed(data_dir)
    if state is not None:
        _events.info("caught up with what was published: signing resumes (%s)", state.reason())
    return state


WATCH_PERIOD_S = 0.5


class MarkWatch:
    """The data dir's damage mark and behind state as in-process flags for the request path (an
    attribute read, not a file per request): read again every WATCH_PERIOD_S by `run` on the
    event loop, so another process's mark is seen, and at once when this process changes one
    (`files.marks_changed`). What signs or stores reads the files itself, never these
    (docs/explanation/decisions/37-stack.md). The damage, once seen, stays."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self.key = self.data_dir.resolve()
        self.damage: Damage | None = None
        self.behind: Behind | None = None
        self.refresh()
        watch_marks(self)

    def refresh(self) -> None:
        if self.damage is None:
            self.damage = found(self.data_dir)
        self.behind = behind_state(self.data_dir)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(WATCH_PERIOD_S)
            self.refresh()


# --- the restored copy's mark (SPEC §14.2) ------------------------------------------------


@dataclass(frozen=True)
class Restored:
    """The mark `backup` leaves in its copy: the history it holds, and when it was made."""

    history_size: int
    history_root: str
    backed_up: int

    def describe(self) -> str:
        held = (
            f"a backup of history size {self.history_size}"
            if self.history_size >= 0
            else "its mark is unreadable"
        )
        return f"this data dir is a restored copy ({held}, {RESTORED_FILE})"


def restored_mark(data_dir: Path) -> Restored | None:
    """The data dir's mark, or None. A mark that cannot be read is still a mark."""
    path = Path(data_dir) / RESTORED_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError:
        return Restored(-1, "", 0)
    try:
        obj = json.loads(raw)
        return Restored(int(obj["history_size"]), str(obj["history_root"]), int(obj["backed_up"]))
    except (ValueError, KeyError, TypeError):
        return Restored(-1, "", 0)


def restored_mark_bytes(history_size: int, history_root: bytes, backed_up: int) -> bytes:
    """What `backup` writes as its copy's mark (it writes the file as it writes the keys)."""
    mark = {
        "history_size": history_size,
        "history_root": history_root.hex(),
        "backed_up": backed_up,
    }
    return json.dumps(mark, sort_keys=True).encode() + b"\n"


def clear_restored(data_dir: Path, why: str) -> None:
    """Remove the mark (a passing comparison, `--published none`, `recover`); said once."""
    mark = restored_mark(data_dir)
    if mark is None:
        return
    (Path(data_dir) / RESTORED_FILE).unlink(missing_ok=True)
    fsync_dir(Path(data_dir))
    _events.info("%s: the restored copy's mark is cleared, it may sign", why)


_COMPARE_HOW = (
    "give `--published URL|DIR` (the public mirror or an export folder; env "
    "CAPABILITY_ANCHOR_PUBLISHED), or `--published none` if nothing was ever published, or "
    "run `capability-anchor recover --from URL|DIR`"
)


def not_compared(mark: Restored, why: str) -> NotCompared:
    return NotCompared(f"{mark.describe()}: {why}; {_COMPARE_HOW}")


def check_compared(data_dir: Path) -> None:
    """NotCompared while the data dir is a restored copy not compared with the published."""
    mark = restored_mark(data_dir)
    if mark is not None:
        raise not_compared(mark, "it signs nothing until it was compared with what was published")
