"""The audit of the resolver-2 records kept in an exported folder (`records/*.json`)."""

from __future__ import annotations

import json
from pathlib import Path

from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.keys import KeySet
from capability_anchor.strictjson import is_int
from capability_anchor.verify.record import Outcome, verify
from capability_anchor.verify.sources import FolderSources

from .report import AuditReport


def audit_records(report: AuditReport, folder: Path, keys: KeySet) -> None:
    """Resolver-2 records kept beside the heads (`records/*.json`, as in the sample) go
    through the same verification as `verify-proof`, at the time each was issued (a token
    lives 48 h at most; what an audit can still establish is that it was valid then)."""
    sources = FolderSources(folder)

    for path in sorted(folder.glob("records/*.json")):
        data = path.read_bytes()
        try:
            issued = json.loads(data).get("iat")
        except (ValueError, AttributeError):
            issued = None
        at = issued if is_int(issued) else None
        try:
            result = verify(data, keys=keys, sources=sources, at=at)
        except CapabilityAnchorError as exc:
            report.problems.append(f"{path}: {exc}")
            continue
        for check in result.checks:
            if check.outcome is Outcome.FAIL:
                report.problems.append(f"{path}: {check.name}: {check.detail}")
        report.count("records")
