"""Offline verification of a resolver-2 record's anchor and proof (SPEC §9, §12.5): `verify` runs
all nine checks of `verify.checks.CHECKS`, in order; a failed check is a result, and only input that
cannot be read raises `InputError`. Inputs come loaded (trust only from `keys`; head, stamps and
tlog-proof from a `Sources`); only the standard library and the kernel are imported."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from capability_anchor import head as heads
from capability_anchor import jws, strictjson
from capability_anchor.errors import (
    CapabilityAnchorError,
    InputError,
    InvalidRecord,
    UsageError,
    VerificationError,
)
from capability_anchor.keys import KeySet
from capability_anchor.keys.trust import Revocation, voided
from capability_anchor.leaf import leaf_hash
from capability_anchor.merkle import verify_inclusion
from capability_anchor.strictjson import is_int
from capability_anchor.verify import members as record_members

from .anchor import Anchor, Proof, explain_inclusion, head_mismatches, parse_anchor, parse_proof
from .checks import Check, Outcome
from .history_checks import check_history, check_timestamp, check_witnesses, checkpoint_not_revoked
from .sources import Sources

if TYPE_CHECKING:
    from cryptography.x509 import Certificate

    from capability_anchor.note import Policy

PASS, FAIL, SKIP = Outcome.PASS, Outcome.FAIL, Outcome.SKIP


@dataclass
class Result:
    """The nine checks, in order, the --explain traces, and `notes` for a human reader."""

    checks: list[Check] = field(default_factory=list)
    explain: list[str] = field(default_factory=list)
    explain_history: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(check.outcome is not FAIL for check in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": [
                {"name": c.name, "result": c.outcome.value, "detail": c.detail} for c in self.checks
            ],
        }


@dataclass(frozen=True)
class Record:
    """RECORD as read: its JWS (`token`) or its `unsigned` object; `plain`: members beside jws."""

    token: str | None
    unsigned: dict[str, Any] | None = None
    plain: dict[str, Any] | None = None


@dataclass(frozen=True)
class _Tree:
    """The record's anchor and proof, or why they could not be read."""

    anchor: Anchor | None
    proof: Proof | None
    error: str


def token_text(data: bytes) -> str:
    """A compact JWS read from a file: trailing line ends are tolerated, nothing else."""
    return data.rstrip(b"\r\n").decode("ascii", errors="replace")


def read_record(record: bytes) -> Record:
    """A record JSON object (its `jws`, when present, replaces it) or a compact JWS."""
    text = record.strip()
    if not text:
        raise InputError("RECORD is empty")
    # A byte order mark cannot start a compact JWS (ASCII): it is JSON, and malformed.
    if not (text[:1] in (b"{", b"[", b'"') or text.startswith(b"\xef\xbb\xbf")):
        return Record(token_text(record))
    obj = strictjson.load_object(text, "RECORD", error=InputError)
    if "jws" in obj:
        if not isinstance(obj["jws"], str):
            raise InputError("RECORD's jws member is not a string")
        return Record(obj["jws"], plain=obj)
    if not isinstance(obj.get("anchor"), dict) or not isinstance(obj.get("proof"), dict):
        raise InputError("RECORD carries no anchor and proof objects")
    return Record(None, unsigned=obj)


# --- the checks, in the order of CHECKS ------------------------------------------------------


def check_record_signature(record: Record, keys: KeySet) -> tuple[Check, dict[str, Any] | None]:
    """1: the record token verifies with a trusted key; the claims to use (unsigned: its own)."""
    if record.token is None:
        return Check("record_signature", SKIP, _UNSIGNED), record.unsigned
    try:
        claims = jws.verify_claims(record.token, keys, jws.RECORD_TYP)
    except VerificationError as exc:
        return Check("record_signature", FAIL, f"{type(exc).__name__}: {exc}"), None
    signed = f"EdDSA signature by a trusted kid, typ {jws.RECORD_TYP}"
    if record.plain is None:
        return Check("record_signature", PASS, signed), claims
    different = record_members.differences(record.plain, claims)
    if different:
        detail = (
            f"{signed}, but the record's plain members differ from its signed claims: "
            + ", ".join(different)
        )
        return Check("record_signature", FAIL, detail), claims
    detail = f"{signed}; the plain members equal the signed claims"
    return Check("record_signature", PASS, detail), claims


def check_record_lifetime(record: Record, claims: dict[str, Any] | None, now: int) -> Check:
    """2: Capability Resolution §8's three expiry rules at `now`."""
    if record.token is None:
        return Check("record_lifetime", SKIP, "the record is unsigned")
    if claims is None:
        return Check("record_lifetime", SKIP, "the record token did not verify")
    try:
        jws.check_record_lifetime(claims, now)
    except (VerificationError, UsageError) as exc:
        return Check("record_lifetime", FAIL, f"{type(exc).__name__}: {exc}")
    return Check(
        "record_lifetime",
        PASS,
        f"iat {claims['iat']}, exp {claims['exp']} valid at {now} "
        f"(lifetime ≤ {jws.MAX_RECORD_LIFETIME} s, skew {jws.CLOCK_SKEW} s)",
    )


def check_leaf(claims: dict[str, Any] | None) -> tuple[Check, bytes | None]:
    """3: SHA-256(0x00 || JCS(claims minus the reserved members))."""
    if claims is None:
        return Check("leaf", SKIP, "no verified record claims"), None
    try:
        leaf = leaf_hash(claims)
    except InvalidRecord as exc:
        return Check("leaf", FAIL, f"the claims are not a valid record: {exc}"), None
    return Check("leaf", PASS, f"leaf hash {leaf.hex()} from the claims (SPEC §2)"), leaf


def _read_tree(claims: dict[str, Any]) -> _Tree:
    anchor = proof = None
    anchor_error = proof_error = ""
    try:
        anchor = parse_anchor(claims.get("anchor"))
    except VerificationError as exc:
        anchor_error = str(exc)
    try:
        proof = parse_proof(claims.get("proof"))
    except VerificationError as exc:
        proof_error = str(exc)
    return _Tree(anchor, proof, anchor_error or proof_error)


def check_inclusion(
    claims: dict[str, Any] | None, leaf: bytes | None, tree: _Tree | None
) -> tuple[Check, list[str]]:
    """4: the proof's path from the leaf reaches the anchor's root; and the --explain trace."""
    if claims is None or tree is None:
        return Check("inclusion", SKIP, "no verified record claims"), []
    anchor, proof = tree.anchor, tree.proof
    if anchor is None or proof is None:
        return Check("inclusion", FAIL, tree.error), []
    if leaf is None:
        return Check("inclusion", SKIP, "no leaf hash"), []
    explain = explain_inclusion(
        leaf, proof.leaf_index, proof.tree_size, proof.path, anchor.root, "the anchor's"
    )
    try:
        verify_inclusion(leaf, proof.leaf_index, proof.tree_size, proof.path, anchor.root)
    except VerificationError as exc:
        return Check("inclusion", FAIL, f"{type(exc).__name__}: {exc}"), explain
    detail = (
        f"leaf {proof.leaf_index} of tree size {proof.tree_size} with "
        f"{len(proof.path)} path hashes reaches the anchor root {anchor.root.hex()}"
    )
    return Check("inclusion", PASS, detail), explain


def check_head_signature(
    claims: dict[str, Any] | None, anchor: Anchor | None, sources: Sources, keys: KeySet
) -> tuple[Check, heads.Head | None]:
    """5: locate the head, verify typ capability-anchor+jws and a trusted kid."""
    if claims is None and not sources.names_head:
        # Without verified claims there is no anchor to trust for locating the head.
        return Check("head_signature", SKIP, "no verified anchor to locate the head by"), None
    try:
        data, where = sources.head(anchor)
    except VerificationError as exc:
        return Check("head_signature", FAIL, f"cannot locate the head: {exc}"), None
    try:
        verified = _verified_head(data, keys)
    except CapabilityAnchorError as exc:
        return Check("head_signature", FAIL, f"head from {where}: {exc}"), None
    detail = f"head from {where}: EdDSA signature by a trusted kid, typ {jws.HEAD_TYP}"
    return Check("head_signature", PASS, detail), verified


def not_revoked(
    check: Check,
    token: str,
    claims: Mapping[str, Any],
    revocations: Mapping[str, Revocation] | None,
) -> Check:
    """`check`, or a FAIL when the key was revoked before the token's `iat`."""
    if not revocations or check.outcome is not PASS:
        return check
    iat = claims.get("iat")
    gone = voided(revocations, jws.unverified_header(token)["kid"], iat if is_int(iat) else 0)
    if gone is None:
        return check
    detail = f"signed at iat {iat}, after its key's revocation: {gone.describe()}"
    return Check(check.name, FAIL, detail)


def _verified_head(data: bytes, keys: KeySet) -> heads.Head:
    """A head document or bare JWS, verified; a document's plain claims must equal the signed."""
    if not data.strip().startswith(b"{"):
        return heads.verify_head(token_text(data), keys)
    checked = heads.verify_document(data, keys)
    if not checked.claims_match:
        raise VerificationError("the head document's claims differ from its signed claims")
    return checked.head


def check_head_matches(
    verified: heads.Head | None,
    claims: dict[str, Any] | None,
    tree: _Tree | None,
    iss: str | None,
) -> Check:
    """6: the verified head is the one the anchor and proof name."""
    if verified is None:
        return Check("head_matches", SKIP, "no verified head")
    if claims is None or tree is None:
        return Check("head_matches", SKIP, "no verified record claims")
    if tree.anchor is None or tree.proof is None:
        return Check("head_matches", FAIL, tree.error)
    problems = head_mismatches(verified, tree.anchor, tree.proof, claims, iss)
    if problems:
        return Check("head_matches", FAIL, "; ".join(problems))
    compared = (
        f"day {verified.day}, tree_size {verified.tree_size}, root {verified.root.hex()}, "
        f"sealed {str(verified.sealed).lower()}, iss {verified.claims['iss']}"
    )
    return Check("head_matches", PASS, f"head and anchor/proof/record agree: {compared}")


# --- verification ----------------------------------------------------------------------------


def verify(
    record: bytes,
    *,
    keys: KeySet,
    sources: Sources,
    iss: str | None = None,
    cas: Sequence[Certificate] = (),
    at: int | None = None,
    policy: Policy | None = None,
    origin: str | None = None,
    revocations: Mapping[str, Revocation] | None = None,
) -> Result:
    """Run the nine checks over `record` (a JSON object or compact JWS, as bytes), trusting only
    `keys`, `cas` and `policy`, with the head, stamps and tlog-proof from `sources`; a signature
    after a revocation fails. Raises InputError only for unreadable input."""
    now = int(dt.datetime.now(dt.UTC).timestamp()) if at is None else at
    result = Result()
    read = read_record(record)
    signature, claims = check_record_signature(read, keys)
    if read.token is not None and claims is not None:
        signature = not_revoked(signature, read.token, claims, revocations)
    if read.token is None:
        result.notes.append(_UNSIGNED_NOTE)
    leaf_check, leaf = check_leaf(claims)
    tree = None if claims is None else _read_tree(claims)
    inclusion, result.explain = check_inclusion(claims, leaf, tree)
    anchor = None if tree is None else tree.anchor
    head_signature, verified = check_head_signature(claims, anchor, sources, keys)
    if verified is not None:
        head_signature = not_revoked(head_signature, verified.jws, verified.claims, revocations)
    result.checks = [
        signature,
        check_record_lifetime(read, claims, now),
        leaf_check,
        inclusion,
        head_signature,
        check_head_matches(verified, claims, tree, iss),
        check_timestamp(verified, anchor, sources, cas),
    ]
    history = check_history(verified, anchor, sources, keys, policy=policy, origin=origin)
    result.explain_history = history.explain
    checked = checkpoint_not_revoked(history.check, history.checkpoint, verified, keys, revocations)
    result.checks += [
        checked,
        check_witnesses(history.checkpoint, policy, now, history.check),
    ]
    return result


_UNSIGNED = (
    "the record is unsigned (no jws member): nothing vouches for its members beyond the "
    "inclusion proof, which covers only its leaf members (all but iat, exp, anchor, proof, "
    "expires)"
)
_UNSIGNED_NOTE = (
    "RECORD is unsigned: no resolver signature vouches for any of its members; the checks "
    "above show only that its leaf members are in the log's tree"
)
