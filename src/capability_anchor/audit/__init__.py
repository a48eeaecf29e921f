"""`audit`: re-derive everything the log has published, from its data dir or an export folder, and
name all that does not match (problems are collected, not raised; the checks, numbered as the report
lists them: docs/how-to/audit.md). May import the kernel, `read/`, `log/`, `export/`, `verify/`,
`timestamp/` and the store's contract; never `api/` or `cli/`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from capability_anchor import head as heads
from capability_anchor.keys import KeySet
from capability_anchor.log import Log
from capability_anchor.log import trust as logtrust
from capability_anchor.log.rotation import pending_problems
from capability_anchor.log.stamping import TsaConfig
from capability_anchor.progress import Progress, silent

from .cosignatures import audit_cosignatures
from .day import audit_day, audit_history
from .folder import audit_folder
from .report import AuditReport, days_between, parses
from .stamps import audit_stored_stamps

if TYPE_CHECKING:
    from cryptography.x509 import Certificate

__all__ = ["AuditReport", "audit_folder", "audit_store"]


def audit_store(
    log: Log,
    progress: Progress = silent,
    keys: KeySet | None = None,
    tsa_ca: Sequence[Certificate] | None = None,
) -> AuditReport:
    """Re-derive and check the data dir; stamps chain to `tsa_ca`, else the stored TSA CAs."""
    report = AuditReport()
    store = log.store
    if tsa_ca is None:
        tsa_ca = TsaConfig.resolve(log.config).cas() if log.config.get("tsa_ca") else []
    report.problems += logtrust.trust_problems(log)
    report.problems += pending_problems(log)
    # Trusted: the configured key, the keys rotation records lead to from it, and `--keys`;
    # never the store's keys table, which a database writer could extend.
    by_kid = {k.kid: k for k in (keys or ())}
    by_kid.update((k.kid, k) for k in log.keyset())
    keys = KeySet(by_kid.values())
    all_heads = store.all_heads()
    report.problems += logtrust.late_signature_problems(log, all_heads)
    entry_days = store.entry_days()
    last_sealed = store.last_sealed_day()
    candidates = [log.first_day, *entry_days, *(h.day for h in all_heads)]
    last_day = max(candidates)
    prev_digest: str | None = None  # the previous day's sealed claims, which `prev` names
    for day in days_between(log.first_day, last_day):
        day_heads = sorted(
            (h for h in all_heads if h.day == day), key=lambda h: (h.tree_size, h.sealed)
        )
        sealed = next((h for h in day_heads if h.sealed), None)
        size = audit_day(report, log, day, day_heads, keys, progress)
        if last_sealed is not None and day <= last_sealed and sealed is None:
            report.problems.append(f"day {day} is not sealed, but later day {last_sealed} is")
        want_prev = None if day == log.first_day else prev_digest
        for h in filter(parses, day_heads):
            claims = heads.parse_document(h.doc).claims
            if claims["prev"] != want_prev:
                report.problems.append(
                    f"head {day} size {h.tree_size}: prev is {claims['prev']}, the previous "
                    f"day's sealed head digests to {want_prev}"
                )
        audit_stored_stamps(report, log, day, sealed, tsa_ca)
        prev_digest = None
        if sealed is not None and sealed.tree_size != size:
            report.problems.append(
                f"day {day}: sealed at size {sealed.tree_size} but holds {size} entries"
            )
        if sealed is not None and parses(sealed):
            prev_digest = heads.claims_digest(heads.parse_document(sealed.doc).claims)
        report.count("days")
    if any(h.day < log.first_day for h in all_heads) or any(d < log.first_day for d in entry_days):
        report.problems.append(f"data exists before the log's first day {log.first_day}")
    audit_history(report, log, all_heads, keys)
    audit_cosignatures(report, log)
    return report
