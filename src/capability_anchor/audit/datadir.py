"""The data-dir audit as a whole: the database opened read-only and read in one snapshot; the
store's own checks (0, 5, 6 of docs/how-to/audit.md: integrity, schema, indexes, worded by the
store) and the unsigned columns (7) checked before and beside `audit.audit_store`."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from capability_anchor import head as heads
from capability_anchor.audit import AuditReport, audit_folder, audit_store
from capability_anchor.encoding import b64url_decode, parse_day
from capability_anchor.errors import CapabilityAnchorError, StoreCorrupt, StoreError, TimestampError
from capability_anchor.keys import KeySet, SigningKey, load_key_file
from capability_anchor.log import KEY_FILE, Log
from capability_anchor.log.datafiles import check_restored
from capability_anchor.log.stamping import TsaConfig
from capability_anchor.progress import Progress, silent
from capability_anchor.store import SCHEMA_VERSION, HeadRow, Store
from capability_anchor.store import open as stores
from capability_anchor.timestamp import carried_certificates

if TYPE_CHECKING:
    from cryptography.x509 import Certificate

    from capability_anchor.note import Policy


def audit_data_dir(
    data_dir: Path,
    *,
    keys: KeySet | None = None,
    tsa_ca: Sequence[Certificate] | None = None,
    roots: Path | None = None,
    progress: Progress = silent,
    policy: Policy | None = None,
) -> AuditReport:
    """Audit a data dir (and `roots`) read-only; damage is reported, I/O errors raise."""
    # A file opened as immutable (nothing had the log open) may be checkpointed into by a
    # process that opens the log during the audit; what was read then is no one moment of
    # the log, damage included, so the audit reads again (by then the opener's lock file
    # makes the next opening a shared one) rather than report it.
    for attempt in range(1, IMMUTABLE_ATTEMPTS + 1):
        report, changed = _audit_once(data_dir, keys, tsa_ca, roots, progress, policy)
        if changed is None or attempt == IMMUTABLE_ATTEMPTS:
            break
    if changed is not None:
        raise changed
    return report


IMMUTABLE_ATTEMPTS = 3


def _audit_once(
    data_dir: Path,
    keys: KeySet | None,
    tsa_ca: Sequence[Certificate] | None,
    roots: Path | None,
    progress: Progress,
    policy: Policy | None = None,
) -> tuple[AuditReport, StoreError | None]:
    """One read: the report, and the error if the file changed under an immutable read."""
    report = AuditReport()
    try:
        store = stores.open_readonly(data_dir)
    except StoreCorrupt as exc:
        report.problems.append(f"the database cannot be read: {exc}")
        report.damage = report.problems[-1]
        return report, None
    try:
        check_restored(data_dir)
        key = load_key_file(data_dir / KEY_FILE)
        with store.snapshot():
            damaged, version = _check_structure(report, store)
            if damaged:
                report.damage = report.problems[0] if report.problems else "damaged structure"
            if version != 0:  # an older schema's queries may fail as a damaged one's would
                _guarded(
                    report,
                    damaged or version != SCHEMA_VERSION,
                    lambda: _audit_log(
                        report, data_dir, store, key, keys, tsa_ca, roots, progress, policy
                    ),
                )
            report.problems += store.engine_findings(after_reads=True).problems
    except StoreCorrupt as exc:
        if report.problems:
            report.problems.append(f"the audit stopped on the damage: {exc}")
        else:
            report.problems.append(f"the database cannot be read: {exc}")
        report.damage = report.damage or report.problems[-1]
    except CapabilityAnchorError:
        # Whatever a torn read made fail is not the log's fault if the file changed.
        if not store.changed_under_read():
            raise
    finally:
        store.close()
    try:
        store.check_unchanged()
    except StoreError as exc:
        return report, exc
    return report, None


def _guarded(report: AuditReport, damaged: bool, run: Callable[[], None]) -> None:
    """Run the logical audit; on a damaged file or wrong schema, what stops it is reported."""
    try:
        run()
    except StoreCorrupt as exc:
        report.problems.append(f"the database cannot be read further: {exc}")
    except StoreError as exc:
        if not damaged:
            raise  # I/O, locks: exit 2 as elsewhere
        report.problems.append(f"the audit stopped on the damage: {exc}")
    except CapabilityAnchorError as exc:
        report.problems.append(f"the audit stopped on what the store holds: {exc}")
    except Exception as exc:  # only once the structure checks failed: see the docstring
        if not damaged:
            raise
        report.problems.append(f"the audit stopped on a damaged value: {type(exc).__name__}: {exc}")


def _audit_log(
    report: AuditReport,
    data_dir: Path,
    store: Store,
    key: SigningKey,
    keys: KeySet | None,
    tsa_ca: Sequence[Certificate] | None,
    roots: Path | None,
    progress: Progress,
    policy: Policy | None = None,
) -> None:
    try:
        log = Log(data_dir, store, key, time.time)
    except ValueError as exc:  # the stored config is not JSON
        report.problems.append(f"meta: the stored config is not valid JSON: {exc}")
        return
    except StoreError as exc:  # no iss or first_day: nothing to audit the log against
        report.problems.append(f"meta: {exc}")
        return
    try:
        log.self_check()
    except CapabilityAnchorError as exc:
        report.problems.append(f"start-up check: {exc}")
    cas = tsa_ca  # the stamps chain to --tsa-ca, else to the CAs stored by init
    if cas is None:
        cas = TsaConfig.resolve(log.config).cas() if log.config.get("tsa_ca") else []
    report.add(audit_store(log, progress, keys, cas))
    _check_head_kids(report, store.all_heads())
    # An entry's day is the UTC day it was accepted (order within a day is not checked).
    for day, index, at in store.entries_accepted_off_day():
        report.problems.append(f"day {day}: entry {index}: accepted_at {at} is not a time on {day}")
    _check_stamp_rows(report, store, log.config)
    _check_carried_certificates(report, store, cas)
    if roots is not None:
        report.add(audit_folder(roots, keys, log, progress, tsa_ca or (), policy), "roots_")


# --- 0, 5, 6: the file, the schema, the indexes --------------------------------------------------


def _check_structure(report: AuditReport, store: Store) -> tuple[bool, int]:
    """Items 0, 5, 6: whether the file is damaged, and the schema version (0: not a log)."""
    found = store.engine_findings()
    report.add(found)
    if found.stopped is not None:
        raise found.stopped
    version = found.version
    if version == 0:
        report.problems.append("schema version 0: not a capability-anchor log")
        return True, version
    try:
        # PostgreSQL's findings re-derive its indexes already (reading every row is also how
        # a damaged page is found without pg_amcheck): they are named once.
        if "indexes" not in found.checked:
            report.problems += store.index_mismatches()
    except StoreCorrupt:
        raise
    except StoreError as exc:  # e.g. a column renamed in the damaged schema's text
        if not report.problems:
            raise
        report.problems.append(f"the index checks stopped on the damage: {exc}")
    report.count("indexes_rederived")
    damaged = bool(report.problems)
    if version != SCHEMA_VERSION:
        # A problem, but not damage: an older schema is migrated at a writer's open, and
        # must not leave the damage mark that refuses every open (store/damage.py).
        report.problems.append(
            f"schema version {version}: this program creates and audits version {SCHEMA_VERSION}"
        )
    return damaged, version


# --- 7: the columns no signature covers ------------------------------------------------------


def _check_head_kids(report: AuditReport, rows: Sequence[HeadRow]) -> None:
    for row in rows:
        try:
            header = json.loads(b64url_decode(heads.parse_document(row.doc).jws.split(".")[0]))
        except (CapabilityAnchorError, ValueError):
            continue  # an unreadable head is reported by the head checks
        kid = header.get("kid") if isinstance(header, dict) else None
        if isinstance(kid, str) and kid != row.kid:
            state = "sealed" if row.sealed else "unsealed"
            report.problems.append(
                f"head {row.day} size {row.tree_size} {state}: the kid column says {row.kid!r}, "
                f"its JWS header {kid!r}"
            )


def _check_stamp_rows(report: AuditReport, store: Store, config: Mapping[str, Any]) -> None:
    listed = config.get("tsa")
    stored_tsas = {str(u) for u in listed} if isinstance(listed, list) else set()
    by_token: dict[bytes, list[tuple[str, str]]] = {}
    for day, tsa, token, added in store.stamp_rows():
        where = f"day {day}: the stamp by {tsa}"
        by_token.setdefault(token, []).append((day, tsa))
        parts = urlsplit(tsa)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            report.problems.append(f"{where}: the TSA name is not an http(s) URL")
        elif stored_tsas and tsa not in stored_tsas:
            report.problems.append(
                f"{where}: this TSA is not one of the stored config's {sorted(stored_tsas)}"
            )
        try:
            end = dt.datetime.combine(
                parse_day(day) + dt.timedelta(days=1), dt.time(), dt.UTC
            ).timestamp()
        except CapabilityAnchorError:
            continue  # a stamp of no valid day has no sealed head: reported by the audit
        if added < end:
            report.problems.append(
                f"{where} was stored at {added}, before its day ended (it stamps the sealed head)"
            )
    for names in by_token.values():
        if len(names) > 1:
            report.problems.append(
                "one stamp token is stored "
                f"{len(names)} times: {', '.join(f'{d} by {t}' for d, t in names)}"
            )


def _check_carried_certificates(
    report: AuditReport, store: Store, cas: Sequence[Certificate]
) -> None:
    """Certificates a reply carries are outside its signature, so each must be a trusted CA or
    signed by one at hand; with no trusted CA, one whose issuer is not carried is left alone."""

    for day, tsa, token, _ in store.stamp_rows():
        try:
            carried = carried_certificates(token)
        except TimestampError:
            continue  # an unreadable token is reported by the stamp checks
        at_hand = [(c, _subject(c)) for c in (*carried, *cas)]
        for cert in carried:
            if cert in cas:
                continue
            issuers = [c for c, subject in at_hand if subject == cert.issuer]
            if not issuers and not cas:
                continue
            if not any(_issued_by(cert, issuer) for issuer in issuers):
                report.problems.append(
                    f"day {day}: the stamp by {tsa} carries a certificate "
                    f"({cert.subject.rfc4514_string()}) that no certificate at hand signed"
                )


def _subject(cert: Certificate) -> object:
    try:
        return cert.subject
    except ValueError:  # a damaged name (parsed when first read) matches no issuer
        return None


def _issued_by(cert: Certificate, issuer: Certificate) -> bool:
    from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm

    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature, UnsupportedAlgorithm):
        return False
    return True
