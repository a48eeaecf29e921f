"""The audit's report and the small readers every part of it shares."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capability_anchor import head as heads
from capability_anchor.encoding import parse_day
from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.store import EngineFindings, HeadRow


@dataclass
class AuditReport:
    problems: list[str] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)
    damage: str | None = None  # the first problem saying the file is damaged (`audit --data` marks)

    @property
    def ok(self) -> bool:
        return not self.problems

    def count(self, what: str, n: int = 1) -> None:
        self.checked[what] = self.checked.get(what, 0) + n

    def add(self, found: AuditReport | EngineFindings, prefix: str = "") -> None:
        """Take another check's problems, and its counts under `prefix`."""
        self.problems += found.problems
        for what, n in found.checked.items():
            self.count(prefix + what, n)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "problems": self.problems, "checked": self.checked}


def days_between(first: str, last: str) -> Iterable[str]:
    day = parse_day(first)
    end = parse_day(last)
    while day <= end:
        yield day.isoformat()
        day += dt.timedelta(days=1)


def parses(row: HeadRow) -> bool:
    try:
        heads.parse_document(row.doc)
    except CapabilityAnchorError:
        return False
    return True


def is_day(text: str) -> bool:
    try:
        parse_day(text)
    except CapabilityAnchorError:
        return False
    return True


def read_json(report: AuditReport, path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        report.problems.append(f"{path} is missing")
    except (ValueError, UnicodeDecodeError) as exc:
        report.problems.append(f"{path} is not valid JSON: {exc}")
    return None
