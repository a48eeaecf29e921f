"""The audit of an exported folder (`--roots DIR`): each `<day>.json` against its own JWS and
`<day>.jws`, the chain of days, `index.json`, `keys.json`, saved unsealed heads, kept records
(through `verify-proof`'s checks); with a data dir too, every file byte for byte against the log."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from capability_anchor import head as heads
from capability_anchor.encoding import parse_day
from capability_anchor.errors import CapabilityAnchorError, InvalidKey, MalformedJSON
from capability_anchor.keys import KeySet
from capability_anchor.log import trust as logtrust
from capability_anchor.progress import Progress, silent
from capability_anchor.strictjson import canonical, is_int
from capability_anchor.verify.checks import Outcome
from capability_anchor.verify.record import verify
from capability_anchor.verify.sources import FolderSources

from .history_folder import audit_folder_history
from .report import AuditReport, is_day, read_json
from .stamps import audit_folder_stamps

if TYPE_CHECKING:
    from cryptography.x509 import Certificate

    from capability_anchor.log import Log
    from capability_anchor.note import Policy


def audit_folder(
    folder: Path,
    keys: KeySet | None = None,
    log: Log | None = None,
    progress: Progress = silent,
    tsa_ca: Sequence[Certificate] = (),
    policy: Policy | None = None,
) -> AuditReport:
    report = AuditReport()
    folder = Path(folder)
    if keys is None:
        try:
            keys = KeySet.from_json((folder / "keys.json").read_bytes())
        except FileNotFoundError:
            report.problems.append(f"{folder / 'keys.json'} is missing (or pass --keys)")
            return report
        except (InvalidKey, MalformedJSON) as exc:
            report.problems.append(f"{folder / 'keys.json'} is not a valid JWK set: {exc}")
            return report
    keys = logtrust.audit_key_records(report.problems, folder, keys)
    sealed = _audit_days(report, folder, keys, log, progress, tsa_ca)
    audit_index(report, folder, sealed, log)
    _audit_saved_unsealed(report, folder, keys, sealed, log)
    audit_records(report, folder, keys)
    audit_folder_history(report, folder, [k.raw for k in keys], policy)
    if log is not None:
        _cross_check(report, folder, log, sealed)
        report.problems += logtrust.folder_trust_problems(folder, log)
    return report


def _audit_days(
    report: AuditReport,
    folder: Path,
    keys: KeySet,
    log: Log | None,
    progress: Progress,
    tsa_ca: Sequence[Certificate],
) -> dict[str, heads.Head]:
    """Every `<day>.json` in day order; returns the sealed heads that verify, by day."""
    day_files = sorted(p for p in folder.glob("????-??-??.json") if is_day(p.stem))
    prev: heads.Head | None = None
    sealed: dict[str, heads.Head] = {}
    for n, path in enumerate(day_files):
        checked = _verified_document(report, path, keys)
        if checked is None:
            prev = None
            continue
        _, verified = checked
        day, c = path.stem, verified.claims
        if c["day"] != day or not c["sealed"]:
            report.problems.append(f"{path}: holds the head of {c['day']} (sealed={c['sealed']})")
        jws_file = folder / f"{day}.jws"
        if not jws_file.exists():
            report.problems.append(f"{jws_file} is missing")
        elif jws_file.read_bytes() != verified.jws.encode("ascii"):
            report.problems.append(f"{jws_file} differs from the JWS in {path.name}")
        audit_folder_stamps(report, folder, day, log, verified.jws, tsa_ca)
        # The chain: the earliest day's prev is null, every later one links to the day before.
        if n == 0:
            if c["prev"] is not None:
                report.problems.append(
                    f"{path}: the earliest day has prev {c['prev']}: earlier days are missing"
                )
        elif prev is not None:
            expected_day = (parse_day(prev.day) + dt.timedelta(days=1)).isoformat()
            if day != expected_day:
                report.problems.append(f"days {expected_day}..{day} are missing before {path.name}")
            elif c["prev"] != heads.claims_digest(prev.claims):
                report.problems.append(f"{path}: prev does not match {prev.day}'s head")
        prev = verified
        sealed[path.stem] = verified
        report.count("days")
        progress(n + 1, len(day_files), "audit roots")
    return sealed


def _verified_document(
    report: AuditReport, path: Path, keys: KeySet
) -> tuple[bytes, heads.Head] | None:
    """A head document file whose JWS verifies and whose bytes are the canonical document."""
    doc = path.read_bytes()
    try:
        checked = heads.verify_document(doc, keys)
    except CapabilityAnchorError as exc:
        report.problems.append(f"{path}: {exc}")
        return None
    verified = checked.head
    if not checked.claims_match:
        report.problems.append(f"{path}: document claims differ from its signed claims")
    elif doc != verified.document():
        report.problems.append(f"{path}: not the canonical head document bytes")
    return doc, verified


def _audit_saved_unsealed(
    report: AuditReport,
    folder: Path,
    keys: KeySet,
    sealed: dict[str, heads.Head],
    log: Log | None,
) -> None:
    for path in sorted(folder.glob("????-??-??/*.json")):
        day = path.parent.name
        checked = _verified_document(report, path, keys)
        if checked is None:
            continue
        doc, verified = checked
        c = verified.claims
        if log is not None:
            row = log.store.head(c["day"], c["tree_size"], False)
            if row is None or row.doc != doc:
                report.problems.append(f"{path} differs from the log's head {day}/{path.stem}")
        if c["day"] != day or str(c["tree_size"]) != path.stem or c["sealed"]:
            report.problems.append(f"{path}: holds head {c['day']}/{c['tree_size']}")
        final = sealed.get(day)
        if final is not None:
            if c["tree_size"] > final.tree_size:
                report.problems.append(f"{path}: larger than the day's sealed head")
            if c["tree_size"] == final.tree_size and c["root"] != final.claims["root"]:
                report.problems.append(f"{path}: root differs from the sealed head of that size")
            if c["prev"] != final.claims["prev"]:
                report.problems.append(f"{path}: prev differs from the day's sealed head")
        report.count("saved_unsealed_heads")


def _cross_check(
    report: AuditReport, folder: Path, log: Log, sealed: dict[str, heads.Head]
) -> None:
    store_sealed = {h.day: h for h in log.store.sealed_heads()}
    newest_file = max(sealed, default=None)
    for day, row in sorted(store_sealed.items()):
        path = folder / f"{day}.json"
        if not path.exists():
            if newest_file is not None and day < newest_file:
                report.problems.append(f"{path} is missing (the log sealed {day})")
            continue
        if path.read_bytes() != row.doc:
            report.problems.append(f"{path} differs from the log's sealed head of {day}")
    for day in sealed:
        if day not in store_sealed:
            report.problems.append(
                f"{folder / (day + '.json')}: the log has no sealed head of {day}"
            )
    try:
        published = KeySet.from_json((folder / "keys.json").read_bytes())
    except (OSError, CapabilityAnchorError):
        return
    missing = [k.kid for k in log.published_keys() if k.kid not in published]
    if missing:
        report.problems.append(f"keys.json lacks the log's key(s) {missing}")
    revoked = [
        kid for kid in published.kids if kid in log.keyset() and kid not in log.published_keys()
    ]
    if revoked:
        report.problems.append(f"keys.json still lists the revoked key(s) {revoked}")


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
        want = canonical(log.roots(limit=max(1, len(log.store.sealed_heads()))))
        newest_file = max(sealed, default=None)
        newest_log = log.store.last_sealed_day()
        if newest_file == newest_log and (folder / "index.json").read_bytes() != want:
            report.problems.append(f"{folder / 'index.json'} differs from the log's listing")
    days = index.get("days") if isinstance(index, dict) else None
    if not isinstance(days, list):
        report.problems.append(f"{folder / 'index.json'} has no days list")
        return
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


def audit_records(report: AuditReport, folder: Path, keys: KeySet) -> None:
    """Kept records (`records/*.json`) pass `verify-proof`'s checks at the time each was issued."""
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
