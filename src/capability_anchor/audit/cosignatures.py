"""The data-dir audit of stored cosignatures (SPEC §12.6): every stored cosignature verifies
with its witness's key, from the stored policy, over the stored checkpoint of its size.

Each row must also say what its line says: the line parses as a signature line, its key
name and key ID are the witness's, its timestamp is the row's. A cosignature by a witness
the stored policy no longer lists (the policy was replaced; cosignatures are kept) has no
key to check it with: it is counted as `cosignatures_unlisted`, not a problem, after the
checks that need no key (its line, its key ID, its timestamp, its checkpoint). A stored
policy that does not parse, or names another log's key, is a problem.
"""

from __future__ import annotations

from ..errors import CapabilityAnchorError, MalformedNote, NoteError
from ..log import Log
from ..note import Policy, parse_note
from ..note.cosignature import timestamp_of
from ..store import CosignatureRow
from ..witnessing.policyfile import check_policy
from .report import AuditReport


def _policy(report: AuditReport, log: Log) -> Policy | None:
    text = log.read.history.policy()
    if text is None:
        return None
    try:
        return check_policy(text, log.read.history.vkeys())
    except CapabilityAnchorError as exc:
        report.problems.append(f"witnesses: the stored policy is not usable: {exc}")
        return None


def _check(report: AuditReport, log: Log, policy: Policy | None, row: CosignatureRow) -> None:
    where = f"witnesses: the cosignature by {row.witness} of size {row.size}"
    note = log.store.checkpoint_note(row.size)
    if note is None:
        report.problems.append(f"{where} is for a size with no stored checkpoint")
        return
    try:
        opened = parse_note(note)
        [line] = parse_note(note + row.line.encode("utf-8") + b"\n").signatures[
            len(opened.signatures) :
        ]
        stamped = timestamp_of(line.signature)
    except (MalformedNote, ValueError) as exc:
        report.problems.append(f"{where}: its stored line is not one cosignature line: {exc}")
        return
    if line.key_id != row.key_id or stamped != row.timestamp:
        report.problems.append(f"{where}: its key ID or timestamp is not its line's")
        return
    witness = policy.witness(row.witness) if policy is not None else None
    if witness is None:
        report.count("cosignatures_unlisted")
        return
    if (line.name, line.key_id) != (witness.verifier.name, witness.verifier.key_id):
        report.problems.append(f"{where} is not by the policy's key for {row.witness}")
        return
    try:
        witness.verifier.verify(opened.text.encode("utf-8"), line.signature)
    except NoteError as exc:
        report.problems.append(f"{where} does not verify over the stored checkpoint: {exc}")
        return
    report.count("cosignatures")


def audit_cosignatures(report: AuditReport, log: Log) -> None:
    """Check every stored cosignature (inside the caller's read snapshot, if any: the
    data-dir audit reads everything in one)."""
    policy = _policy(report, log)
    for row in list(log.store.iter_cosignatures()):
        _check(report, log, policy, row)
