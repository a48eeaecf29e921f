"""What a monitor remembers between runs, in plain files: `leaves` (the history's leaf hashes,
append-only) and `state.json` (the last checkpoint that passed and the rule state). A run fsyncs new
leaves, then replaces `state.json` (temp file, fsync, rename, fsync the folder); `load` cuts
`leaves` back to the size `state.json` names, so a crash leaves the last commit."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from capability_anchor.errors import InputError
from capability_anchor.files import fsync_dir
from capability_anchor.merkle import HASH_SIZE, TreeEdge

STATE_FILE = "state.json"
LEAVES_FILE = "leaves"


@dataclass
class LastHead:
    day: str
    sealed: bool
    tree_size: int
    root: str


@dataclass
class DayEdge:
    day: str
    size: int
    partials: list[str]

    def edge(self) -> TreeEdge:
        return TreeEdge(self.size, [bytes.fromhex(p) for p in self.partials])

    @classmethod
    def of(cls, day: str, edge: TreeEdge) -> DayEdge:
        levels = {t.level: data for t, data in edge.partial_tiles()}
        top = max(levels, default=-1)
        rows = [levels.get(level, b"") for level in range(top + 1)]
        return cls(day, edge.size, [r.hex() for r in rows])


@dataclass
class Behind:
    """The log's heads have grown past the checkpoint of `size` since `since` (epoch s)."""

    size: int
    since: float


@dataclass
class MonitorState:
    origin: str | None = None
    size: int = 0
    checked: int = 0  # leaves whose head rules passed (< size while a catch-up is under way)
    checkpoint: str | None = None
    last: LastHead | None = None
    sealed_digest: str | None = None  # the newest sealed head's, and its day
    sealed_day: str | None = None
    sealed_before: str | None = None  # the sealed head's before sealed_day (its own prev)
    day_edge: DayEdge | None = None
    seen: list[list[Any]] = field(default_factory=list)  # [size, base64 root] that passed
    behind: Behind | None = None  # heads past the checkpoint at `size`, and since when
    rotations: list[str] = field(default_factory=list)  # keys noted as followed (`rotations`)
    missing_since: float | None = None  # the first run that found no checkpoint (epoch s)
    leaf_hashes: bytearray = field(default_factory=bytearray, repr=False)

    def edge(self) -> TreeEdge:
        edge = TreeEdge()
        edge.extend(bytes(self.leaf_hashes))
        return edge

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        del data["leaf_hashes"]
        return data


def _from_json(data: dict[str, Any]) -> MonitorState:
    last = data.get("last")
    day_edge = data.get("day_edge")
    return MonitorState(
        origin=data.get("origin"),
        size=int(data.get("size", 0)),
        checked=int(data.get("checked", data.get("size", 0))),
        checkpoint=data.get("checkpoint"),
        last=LastHead(**last) if last else None,
        sealed_digest=data.get("sealed_digest"),
        sealed_day=data.get("sealed_day"),
        sealed_before=data.get("sealed_before"),
        day_edge=DayEdge(**day_edge) if day_edge else None,
        seen=list(data.get("seen", [])),
        behind=Behind(**data["behind"]) if data.get("behind") else None,
        rotations=[str(kid) for kid in data.get("rotations", [])],
        missing_since=data.get("missing_since"),
    )


def load(folder: Path) -> MonitorState:
    """The committed state (a fresh one for an empty or new folder)."""
    path = folder / STATE_FILE
    if not path.exists():
        return MonitorState()
    try:
        state = _from_json(json.loads(path.read_text("utf-8")))
        with open(folder / LEAVES_FILE, "rb") as f:
            leaves = f.read(state.size * HASH_SIZE)
    except (OSError, ValueError, TypeError) as exc:
        raise InputError(f"{folder}: not a monitor state ({exc})") from None
    if len(leaves) != state.size * HASH_SIZE:
        raise InputError(f"{folder / LEAVES_FILE}: shorter than the {state.size} leaves it needs")
    state.leaf_hashes = bytearray(leaves)
    return state


def save(folder: Path, state: MonitorState, old_size: int) -> None:
    """Commit `state` (see the module docstring for the order of the writes)."""
    folder.mkdir(parents=True, exist_ok=True)
    leaves = folder / LEAVES_FILE
    with open(leaves, "ab") as f:
        f.truncate(old_size * HASH_SIZE)  # a crashed run's tail, never committed
        f.write(bytes(state.leaf_hashes[old_size * HASH_SIZE :]))
        f.flush()
        os.fsync(f.fileno())
    tmp = folder / (STATE_FILE + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state.to_json(), f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, folder / STATE_FILE)
    fsync_dir(folder)
