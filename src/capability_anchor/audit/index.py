"""The audit of an exported folder's `index.json`: against the sealed heads present and,
with a data dir, byte for byte against the log's listing."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from capability_anchor import head as heads
from capability_anchor.strictjson import canonical

from .report import AuditReport, read_json

if TYPE_CHECKING:
    from capability_anchor.log import Log


def audit_index(
    report: AuditReport, folder: Path, sealed: dict[str, heads.Head], log: Log | None
) -> None:
    index = read_json(report, folder / "index.json")
    if index is None:
        return
    issuers = {h.claims["iss"] for h in sealed.values()}
    if (
        not isinstance(index, dict)
        or index.get("v") != heads.VERSION
        or (issuers and {index.get("iss")} != issuers)
    ):
        report.problems.append(f"{folder / 'index.json'}: v or iss disagree with the heads")
    if log is not None:
        _against_log(report, folder, sealed, log)
    days = index.get("days") if isinstance(index, dict) else None
    if not isinstance(days, list):
        report.problems.append(f"{folder / 'index.json'} has no days list")
        return
    _check_days(report, days, sealed)


def _against_log(
    report: AuditReport, folder: Path, sealed: dict[str, heads.Head], log: Log
) -> None:
    want = canonical(log.roots(limit=max(1, len(log.read.sealed_heads()))))
    newest_file = max(sealed, default=None)
    newest_log = log.read.last_sealed_day()
    if newest_file == newest_log and (folder / "index.json").read_bytes() != want:
        report.problems.append(f"{folder / 'index.json'} differs from the log's listing")


def _check_days(report: AuditReport, days: list[Any], sealed: dict[str, heads.Head]) -> None:
    listed = [str(d.get("day")) for d in days if isinstance(d, dict)]
    if listed != sorted(sealed, reverse=True):
        missing = sorted(set(listed) - set(sealed))
        extra = sorted(set(sealed) - set(listed))
        report.problems.append(
            f"index.json does not list exactly the sealed days present "
            f"(listed but missing: {missing}; present but not listed: {extra})"
        )
    # The URL base is not signed anywhere; without a data dir all we can ask is that every
    # entry uses the same one.
    bases = {
        str(d.get("url"))[: -len(f"/roots/{d.get('day')}")] for d in days if isinstance(d, dict)
    }
    if len(bases) > 1:
        report.problems.append(f"index.json entries use different URL bases: {sorted(bases)}")
    for d in days:
        h = sealed.get(str(d.get("day"))) if isinstance(d, dict) else None
        if h is None:
            continue
        if (d.get("tree_size"), d.get("root")) != (h.tree_size, h.claims["root"]) or not str(
            d.get("url")
        ).endswith(f"/roots/{h.day}"):
            report.problems.append(f"index.json entry for {h.day} disagrees with {h.day}.json")
