"""The alarms a monitor raised, kept in its `--state DIR` until an operator clears them:
`evidence/<ID>/` (what the alarm rests on, as served) and `alarms.jsonl` (append-only
`raised`/`acknowledged` lines). An ID hashes the findings and evidence, so the same misbehaviour has
the same ID; a pending alarm is repeated and nothing read. Evidence is fsynced before its `raised`
line, so every raised ID has it."""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capability_anchor.errors import InputError
from capability_anchor.files import fsync_dir
from capability_anchor.strictjson import canonical

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
        tmp = where / (name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
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
