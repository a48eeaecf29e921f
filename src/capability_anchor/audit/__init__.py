"""`audit`: re-derive everything the log has published and say what does not match.

Data dir (numbered as the report lists them; 0 and 5-7 are in `audit.datadir`, which opens the
database read-only and reads everything, these included, in one snapshot):
 0. the file: `PRAGMA integrity_check` first, each failure naming its table or index; a file
    SQLite cannot read (not a database, a zeroed or truncated page) is a finding, exit 1;
 1. every entry: indices contiguous from 0, leaf hash = SHA-256(0x00 || stored leaf bytes);
 2. every tile: full tiles and their roots, and the partial tiles of each head's size,
    recomputed from the entries;
 3. every head: its root recomputed from the entries at its size, its JWS verified with the
    log's keys, its claims equal to what is stored beside it, its `iss` the log's; and no
    head, history checkpoint or statement signed by a revoked key after its revocation;
 4. the chain: every day from the first to the last sealed one is sealed, each `prev` is the
    digest of the previous day's sealed claims, the first day's is null, and a sealed day
    holds exactly as many entries as its head says;
 5. the schema: `sqlite_master` (tables, indexes, triggers, their SQL) equals what the
    migrations up to the stored schema version create;
 6. the indexes: each re-derived from its table (the dedupe index among them), the
    `/record` index also searched by key;
 7. the columns no signature covers: `heads.kid`, `entries.accepted_at`, and the stamps'
    TSA names, tokens (one per row, carried certificates signed) and `added`;
 8. the history (SPEC §12.6): rebuilt from the stored heads in SPEC §12.1's order, it equals
    the stored leaves (contiguous, in order, each its head's payload hash) and tiles;
 9. the cosignatures (SPEC §12.6): each stored one verifies with its witness's key from the
    stored policy over the stored checkpoint of its size (`cosignatures`).
Folder (`--roots DIR`): each `<day>.json` against its own JWS and against `<day>.jws`, the
chain of days and `prev` links, `index.json`, `keys.json`, saved unsealed heads; with a data
dir too, every file byte for byte against the log.

Problems are collected, not raised: the report names all of them at once. Here: the data-dir
walk over days (1, 4); `day` one day's entries, tiles, `/record` index and heads (1-3);
`history` the history tree (8); `stamps` the stored and exported stamps; `folder`, `index`
and `records` the exported folder.

May import the kernel, `read/`, `log/`, `export/`, `verify/`, `timestamp/` and the store's
contract (an engine's own checks through `Store.engine_findings`); never `api/` or `cli/`.
"""

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
from capability_anchor.store import HeadRow

from .cosignatures import audit_cosignatures
from .day import audit_day
from .folder import audit_folder
from .history_tree import audit_history
from .report import AuditReport, days_between, parses
from .stamps import audit_stored_stamps, stamp_problems

if TYPE_CHECKING:
    from cryptography.x509 import Certificate

__all__ = ["AuditReport", "audit_folder", "audit_store", "stamp_problems", "trusted_keys"]


def trusted_keys(log: Log, extra: KeySet | None) -> KeySet:
    """What the data-dir audit trusts: the configured signing key and the keys rotation
    records lead to from it (`Log.keyset()`), plus `--keys`. Never the store's own keys
    table: whoever can write the database could add a key there."""
    by_kid = {k.kid: k for k in (extra or ())}
    by_kid.update((k.kid, k) for k in log.keyset())
    return KeySet(by_kid.values())


def audit_store(
    log: Log,
    progress: Progress = silent,
    keys: KeySet | None = None,
    tsa_ca: Sequence[Certificate] | None = None,
) -> AuditReport:
    """Re-derive and check everything in the data dir. Stamps are checked against `tsa_ca`
    (`--tsa-ca`), else the TSA CAs stored in the data dir's config, else only against the
    certificates they carry (signature, imprint, genTime; no trust)."""
    report = AuditReport()
    store = log.read
    if tsa_ca is None:
        tsa_ca = TsaConfig.resolve(log.config).cas() if log.config.get("tsa_ca") else []
    report.problems += logtrust.trust_problems(log)
    report.problems += pending_problems(log)
    keys = trusted_keys(log, keys)
    all_heads = store.all_heads()
    report.problems += logtrust.late_signature_problems(log, all_heads)
    entry_days = store.entry_days()
    last_sealed = store.last_sealed_day()
    candidates = [log.first_day, *entry_days, *(h.day for h in all_heads)]
    last_day = max(candidates)
    prev_digest: str | None = None
    for day in days_between(log.first_day, last_day):
        day_heads = sorted(
            (h for h in all_heads if h.day == day), key=lambda h: (h.tree_size, h.sealed)
        )
        sealed = [h for h in day_heads if h.sealed]
        size = audit_day(report, log, day, day_heads, keys, progress)
        if last_sealed is not None and day <= last_sealed and not sealed:
            report.problems.append(f"day {day} is not sealed, but later day {last_sealed} is")
        want_prev = None if day == log.first_day else prev_digest
        _check_prev(report, day, day_heads, want_prev)
        audit_stored_stamps(report, log, day, sealed[0] if sealed else None, tsa_ca)
        prev_digest = _sealed_digest(report, day, sealed[0], size) if sealed else None
        report.count("days")
    if any(h.day < log.first_day for h in all_heads) or any(d < log.first_day for d in entry_days):
        report.problems.append(f"data exists before the log's first day {log.first_day}")
    audit_history(report, log, all_heads, keys)
    audit_cosignatures(report, log)
    return report


def _check_prev(
    report: AuditReport, day: str, day_heads: list[HeadRow], want_prev: str | None
) -> None:
    """Every head of a day links to the digest of the previous day's sealed claims."""
    for h in day_heads:
        if not parses(h):
            continue
        claims = heads.parse_document(h.doc).claims
        if claims["prev"] != want_prev:
            report.problems.append(
                f"head {day} size {h.tree_size}: prev is {claims['prev']}, the previous "
                f"day's sealed head digests to {want_prev}"
            )


def _sealed_digest(report: AuditReport, day: str, sealed: HeadRow, size: int) -> str | None:
    """The digest the next day's `prev` must name; a sealed day holds what its head says."""
    if sealed.tree_size != size:
        report.problems.append(
            f"day {day}: sealed at size {sealed.tree_size} but holds {size} entries"
        )
    if parses(sealed):
        return heads.claims_digest(heads.parse_document(sealed.doc).claims)
    return None
