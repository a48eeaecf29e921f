"""The data-dir audit of every stored witness fact (SPEC §12.6): policies (exactly those the log
signed), cosignatures (each verifies with its witness's key in the policy in force, within the clock
guard's tolerance, when it was stored), deleted rows (ids are 1..n; a witness's newest size has its
cosignature) and witness state (never past the newest checkpoint)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from capability_anchor.errors import CapabilityAnchorError, MalformedNote, NoteError
from capability_anchor.log import Log
from capability_anchor.log.clockguard import TOLERANCE_S
from capability_anchor.log.policies import policies_problems
from capability_anchor.note import TYPE_ED25519, Policy, format_vkey, parse_note, parse_policy
from capability_anchor.note.cosignature import timestamp_of
from capability_anchor.store import CosignatureRow

from .report import AuditReport

OK = "ok"  # WitnessState.status after a cosignature (witnessing.rounds)


@dataclass(frozen=True)
class _Stored:
    id: int
    added: int
    policy: Policy | None  # None: it does not parse (reported)


def _policies(report: AuditReport, log: Log) -> list[_Stored]:
    try:
        origin = log.read.history.origin()
    except CapabilityAnchorError:
        origin = None  # no history yet: no log line can be checked (nor stored by us)
    vkeys = {format_vkey(origin, TYPE_ED25519, k.raw) for k in log.keyset()} if origin else set()
    stored: list[_Stored] = []
    for number, added, text in log.store.policy_rows():
        try:
            policy: Policy | None = parse_policy(text)
        except CapabilityAnchorError as exc:
            report.problems.append(f"witnesses: stored policy #{number} is not usable: {exc}")
            policy = None
        if policy is not None and origin is not None:
            for entry in policy.logs:
                if entry.verifier.vkey() not in vkeys:
                    report.problems.append(
                        f"witnesses: stored policy #{number} names the log key "
                        f"{entry.verifier.vkey()}, which is not one of this log's keys"
                    )
        stored.append(_Stored(number, added, policy))
    return stored


def _in_force(policies: Sequence[_Stored], added: int) -> list[Policy]:
    """The policies in force at any time within TOLERANCE_S of `added`."""
    found: list[Policy] = []
    for i, stored in enumerate(policies):
        until = policies[i + 1].added if i + 1 < len(policies) else None
        starts_in_time = stored.added <= added + TOLERANCE_S
        still_in_force = until is None or until >= added - TOLERANCE_S
        if starts_in_time and still_in_force and stored.policy is not None:
            found.append(stored.policy)
    return found


def _gaps(report: AuditReport, table: str, ids: Sequence[int]) -> None:
    """Rows are numbered 1..n; every number missing is a deleted row."""
    missing = sorted(set(range(1, max(ids, default=0) + 1)) - set(ids))
    if missing:
        shown = ", ".join(f"#{n}" for n in missing[:10]) + (" ..." if len(missing) > 10 else "")
        report.problems.append(f"witnesses: {table} row(s) {shown} are missing (deleted)")


def _check(report: AuditReport, log: Log, policies: Sequence[Policy], row: CosignatureRow) -> None:
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
    if not policies:
        report.problems.append(f"{where} was stored when no witness policy was in force")
        return
    listed = [w for p in policies if (w := p.witness(row.witness)) is not None]
    if not listed:
        report.problems.append(
            f"{where}: no policy in force when it was stored lists a witness {row.witness}"
        )
        return
    keyed = [w for w in listed if (w.verifier.name, w.verifier.key_id) == (line.name, line.key_id)]
    if not keyed:
        report.problems.append(f"{where} is not by the policy's key for {row.witness}")
        return
    try:
        keyed[0].verifier.verify(opened.text.encode("utf-8"), line.signature)
    except NoteError as exc:
        report.problems.append(f"{where} does not verify over the stored checkpoint: {exc}")
        return
    report.count("cosignatures")


def audit_cosignatures(report: AuditReport, log: Log) -> None:
    """Check every stored witness fact, inside the caller's read snapshot if any."""
    report.problems += policies_problems(log.store, log.iss, log.keyset())
    policies = _policies(report, log)
    _gaps(report, "policies", [p.id for p in policies])
    rows = list(log.store.iter_cosignature_rows())
    _gaps(report, "cosignatures", [number for number, _, _ in rows])
    cosigned: set[tuple[str, int]] = set()
    for _, added, row in rows:
        _check(report, log, _in_force(policies, added), row)
        cosigned.add((row.witness, row.size))
    newest = log.store.checkpoint_size()
    for state in log.store.witness_states():
        where = f"witnesses: the stored state of {state.witness}"
        if state.size > newest:
            report.problems.append(
                f"{where} says size {state.size}, beyond the newest checkpoint {newest} (no "
                "submission to it could ever be made)"
            )
        elif state.status == OK and state.size > 0 and (state.witness, state.size) not in cosigned:
            report.problems.append(
                f"{where} says it cosigned size {state.size}, but no cosignature of that size "
                "by it is stored (a deleted row)"
            )
        report.count("witness_states")
