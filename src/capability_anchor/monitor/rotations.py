"""Before step 1 of a monitor run: the log's key records (SPEC §13.2), so a monitor trusting the
log's keys follows an endorsed rotation (noted once, `key_rotation`) without an alarm, and its
revocations reach the head and checkpoint rules (`key_revoked_signature`). A log without
`keys/records` has none: the keys are `--keys`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from capability_anchor.errors import CapabilityAnchorError, ClaimsError, InputError
from capability_anchor.keys import KeySet, trust
from capability_anchor.read.source import LogSource
from capability_anchor.verify.history_checks import revoked_checkpoint

from .heads import Evidence, Finding, leaf_claims
from .state import MonitorState

if TYPE_CHECKING:
    from capability_anchor.note import Note

KEY_RECORDS_PATH = "keys/records"


def follow_keys(
    source: LogSource, keys: KeySet, state: MonitorState, findings: list[dict[str, Any]]
) -> trust.TrustChain:
    """The closure of `keys` over the log's records; a note for each key followed the first time."""
    data = source.read(KEY_RECORDS_PATH)
    if data is None:
        return trust.TrustChain(keys)
    try:
        iss, tokens = trust.read_key_records(data)
    except ClaimsError as exc:
        raise InputError(f"{source.where}/{KEY_RECORDS_PATH}: {exc}") from None
    chain = trust.closure(keys, tokens, iss=iss)
    notes = findings
    for _, record in sorted(chain.records.items()):
        kid = record.key.kid
        if kid in keys or kid in state.rotations:
            continue
        state.rotations.append(kid)
        notes.append(
            {
                "note": "key_rotation",
                "kid": kid,
                "endorsed_by": record.signer,
                "detail": f"the log's key records endorse key {kid} (signed by "
                f"{record.signer}): followed as one of the log's keys",
            }
        )
    for kid, revocation in chain.revocations.items():
        mark = f"revoked:{kid}"
        if mark not in state.rotations:
            state.rotations.append(mark)
            notes.append(
                {
                    "note": "key_revoked",
                    "kid": kid,
                    "revoked_at": revocation.revoked_at,
                    "detail": revocation.describe(),
                }
            )
    return chain


def checkpoint_alarm(
    chain: trust.TrustChain, note: Note, size: int, leaf: bytes
) -> tuple[Finding, Evidence] | None:
    """SPEC §13.2 as `verify-proof` has it: a checkpoint is dated by `leaf`, the newest head it
    covers; after a revocation it needs a signature by a key not revoked. The alarm and its
    evidence, or None."""
    try:
        iat: int = leaf_claims(leaf)["iat"]
    except CapabilityAnchorError:
        return None  # not a head: the head rules name why (`invalid_head_leaf`)
    gone = revoked_checkpoint(note, iat, chain.keys, chain.revocations)
    if not gone:
        return None
    finding: Finding = {
        "alarm": "key_revoked_signature",
        "size": size,
        "detail": f"history/checkpoint: covers a head signed at iat {iat} (index {size - 1}) "
        "but carries no signature by a key that is not revoked: "
        + "; ".join(r.describe() for r in gone),
    }
    evidence = {f"leaf-{size - 1}": leaf}
    evidence.update({f"revocation-{r.kid}.jws": r.token.encode("ascii") for r in gone})
    return finding, evidence
