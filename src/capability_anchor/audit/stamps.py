"""The audit of RFC 3161 stamps: those the store holds and those an exported folder lists."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from capability_anchor import head as heads
from capability_anchor.errors import TimestampError
from capability_anchor.export.days import timestamps_document
from capability_anchor.store import HeadRow
from capability_anchor.strictjson import canonical
from capability_anchor.timestamp import digest_of, read_reply, verify_reply

from .report import AuditReport, parses, read_json

if TYPE_CHECKING:
    from cryptography.x509 import Certificate

    from capability_anchor.log import Log


def stamp_problems(
    token: bytes, jws: str, gen_time: str | None, cas: Sequence[Certificate]
) -> list[str]:
    """What is wrong with a stored RFC 3161 reply for a sealed head's JWS: granted, over exactly
    that JWS, the listed genTime, and verifying with a chain to `cas` at genTime (no `cas`: to a
    self-signed certificate it carries, integrity without trust)."""

    try:
        parsed = read_reply(token)
    except TimestampError as exc:
        return [f"is not a granted SHA-256 time-stamp reply: {exc}"]
    problems: list[str] = []
    digest = digest_of(jws.encode("ascii"))
    if parsed.digest != digest:
        problems.append("stamps another message than the day's JWS")
    if gen_time is not None and parsed.gen_time != gen_time:
        problems.append(f"is listed with genTime {gen_time}, the token says {parsed.gen_time}")
    trust = list(cas) or list(parsed.self_signed)
    if trust and not problems:
        try:
            verify_reply(token, digest=digest, cas=trust, nonce=None)
        except TimestampError as exc:
            what = (
                "does not verify with a chain to a trusted TSA CA"
                if cas
                else ("does not verify against the certificates it carries")
            )
            problems.append(f"{what}: {exc}")
    return problems


def audit_stored_stamps(
    report: AuditReport,
    log: Log,
    day: str,
    sealed: HeadRow | None,
    cas: Sequence[Certificate],
) -> None:
    for stamp in log.store.stamps(day):
        where = f"day {day}: the stamp by {stamp.tsa}"
        if sealed is None or not parses(sealed):
            report.problems.append(f"{where} has no sealed head to stamp")
            continue
        jws = heads.parse_document(sealed.doc).jws
        for problem in stamp_problems(stamp.token, jws, stamp.gen_time, cas):
            report.problems.append(f"{where} {problem}")
        report.count("stamps")


def audit_folder_stamps(
    report: AuditReport,
    folder: Path,
    day: str,
    log: Log | None,
    jws: str,
    cas: Sequence[Certificate],
) -> None:
    """`<day>.timestamps.json` and `<day>.tsr`: well formed, consistent, this day's, the log's."""
    path = folder / f"{day}.timestamps.json"
    tsr = folder / f"{day}.tsr"
    doc = read_json(report, path)
    if doc is None:
        return
    stamps = doc.get("timestamps") if isinstance(doc, dict) else None
    if not isinstance(stamps, list) or doc.get("v") != heads.VERSION or doc.get("day") != day:
        report.problems.append(f"{path} is not the timestamps document of {day}")
        return
    tokens: list[bytes] = []
    for n, stamp in enumerate(stamps):
        try:
            token = base64.b64decode(stamp["token"], validate=True)
            if not isinstance(stamp["tsa"], str) or not isinstance(stamp["gen_time"], str):
                raise ValueError("tsa and gen_time must be strings")
        except (KeyError, TypeError, ValueError, binascii.Error) as exc:
            report.problems.append(f"{path}: stamp {n} is malformed: {exc}")
            continue
        # Its shape (a DER TimeStampResp) first, then its content: stamp_problems.
        for problem in stamp_problems(token, jws, stamp["gen_time"], cas):
            report.problems.append(f"{path}: stamp {n} ({stamp['tsa']}) {problem}")
        report.count("stamps_chained" if cas else "stamps")
        tokens.append(token)
    if tsr.exists():
        if not tokens or tsr.read_bytes() != tokens[0]:
            report.problems.append(f"{tsr} is not the first stamp listed in {path.name}")
    elif tokens:
        report.problems.append(f"{tsr} is missing although {path.name} lists stamps")
    if log is not None:
        want = canonical(timestamps_document(day, log.store.stamps(day)))
        if path.read_bytes() != want:
            report.problems.append(f"{path} differs from the log's stamps of {day}")
