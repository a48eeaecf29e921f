"""What a monitor keeps in its `--state DIR`, in plain files: `leaves` (the history's leaf hashes,
append-only) and `state.json` (the last checkpoint that passed, the rule state); a run fsyncs new
leaves, then replaces `state.json`, and `load` cuts `leaves` back to it, so a crash leaves the last
commit. Alarms: `evidence/<ID>/` (fsynced first) and append-only `alarms.jsonl`, until an operator
acknowledges them; the ID hashes findings and evidence. `monitor compare` reads two states."""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from capability_anchor.errors import InputError
from capability_anchor.files import fsync_dir
from capability_anchor.keys import KeySet
from capability_anchor.merkle import HASH_SIZE, TreeEdge
from capability_anchor.note import Policy
from capability_anchor.strictjson import canonical

STATE_FILE = "state.json"
LEAVES_FILE = "leaves"


@dataclass(frozen=True)
class MonitorOptions:
    keys: KeySet
    state_dir: Path
    policy: Policy | None = None
    origin: str | None = None
    entries: bool = False
    max_lag: float = 3600.0  # seconds the heads may be past the checkpoint (`checkpoint_stale`)
    now: Callable[[], float] = time.time


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
    replace_file(
        folder / STATE_FILE, json.dumps(state.to_json(), indent=1, sort_keys=True).encode()
    )
    fsync_dir(folder)


def replace_file(path: Path, data: bytes) -> None:
    """`path` holds `data`, or what it held, whatever the crash: temp file, fsync, rename."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def compare_states(first: Path, second: Path) -> list[dict[str, Any]]:
    """The findings: `split_view` alarms, else one `consistent` line."""
    a, b = load(first), load(second)
    if a.size == 0 or b.size == 0:
        raise InputError("a state has seen no checkpoint yet: nothing to compare")
    found: list[dict[str, Any]] = []
    if a.origin != b.origin:
        raise InputError(f"the states follow different logs ({a.origin} and {b.origin})")
    roots_a = {size: root for size, root in a.seen}
    for size, root in b.seen:
        if size in roots_a and roots_a[size] != root:
            found.append(
                {"alarm": "split_view", "size": size, "detail": f"roots {roots_a[size]} and {root}"}
            )
    common = min(a.size, b.size) * HASH_SIZE
    if a.leaf_hashes[:common] != b.leaf_hashes[:common]:
        index = next(
            i // HASH_SIZE
            for i in range(0, common, HASH_SIZE)
            if a.leaf_hashes[i : i + HASH_SIZE] != b.leaf_hashes[i : i + HASH_SIZE]
        )
        found.append(
            {
                "alarm": "split_view",
                "index": index,
                "detail": f"history leaf {index} differs: the two views are not consistent",
            }
        )
    if not found:
        found.append({"consistent": True, "origin": a.origin, "sizes": [a.size, b.size]})
    return found


EVENTS_FILE = "alarms.jsonl"
EVIDENCE_DIR = "evidence"
FINDINGS_FILE = "findings.json"


@dataclass(frozen=True)
class Pending:
    id: str
    at: int
    findings: list[dict[str, Any]]


def alarm_id(findings: list[dict[str, Any]], evidence: dict[str, bytes]) -> str:
    digests = {name: hashlib.sha256(data).hexdigest() for name, data in evidence.items()}
    body = canonical({"evidence": digests, "findings": findings})
    return hashlib.sha256(body).hexdigest()[:16]


def _events(folder: Path) -> list[dict[str, Any]]:
    path = folder / EVENTS_FILE
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise InputError(f"{path}: {exc}") from None
    events = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            event = json.loads(line)
        except ValueError:
            if number == len(text.splitlines()) and not text.endswith("\n"):
                continue  # a line a crash cut short: its alarm is raised again next run
            raise InputError(f"{path}: line {number} is not JSON") from None
        if not isinstance(event, dict):
            raise InputError(f"{path}: line {number} is not a JSON object")
        events.append(event)
    return events


def pending(folder: Path) -> list[Pending]:
    """The raised alarms not acknowledged since, oldest first."""
    raised: dict[str, Pending] = {}
    for event in _events(folder):
        if "raised" in event:
            raised.pop(event["raised"], None)
            raised[event["raised"]] = Pending(event["raised"], event["at"], event["findings"])
        elif "acknowledged" in event:
            raised.pop(event["acknowledged"], None)
    return list(raised.values())


def _append(folder: Path, event: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / EVENTS_FILE, "ab") as f:
        f.write(json.dumps(event, sort_keys=True, separators=(",", ":")).encode() + b"\n")
        f.flush()
        os.fsync(f.fileno())
    fsync_dir(folder)


def raise_alarm(folder: Path, findings: list[dict[str, Any]], evidence: dict[str, bytes]) -> str:
    """Keep the evidence, then record the alarm; its ID."""
    ident = alarm_id(findings, evidence)
    where = folder / EVIDENCE_DIR / ident
    where.mkdir(parents=True, exist_ok=True)
    files = {**evidence, FINDINGS_FILE: canonical(findings)}
    for name, data in files.items():
        path = where / name
        if path.exists() and path.read_bytes() == data:
            continue  # the same alarm raised again: its evidence is already here
        replace_file(path, data)
    fsync_dir(where)
    fsync_dir(where.parent)
    _append(folder, {"raised": ident, "at": int(time.time()), "findings": findings})
    return ident


def acknowledge(folder: Path, ident: str) -> dict[str, Any]:
    """Record that alarm `ident` was cleared; the line recorded, or why nothing was."""
    events = _events(folder)
    if not any(e.get("raised") == ident for e in events):
        known = sorted({e["raised"] for e in events if "raised" in e})
        raise InputError(f"{folder}: no alarm {ident} (raised: {', '.join(known) or 'none'})")
    if ident not in {p.id for p in pending(folder)}:
        return {"acknowledged": ident, "pending": False, "note": "already acknowledged"}
    try:
        who = getpass.getuser()
    except (KeyError, OSError):  # no user name for this uid
        who = f"uid {os.getuid()}"
    event = {"acknowledged": ident, "at": int(time.time()), "by": who}
    _append(folder, event)
    return event
