"""Checks 7 to 9 of `verify-proof` (SPEC §9, §12.5), over what a `Sources` supplies. `timestamp`: a
stored RFC 3161 stamp of the sealed head chains to a trusted TSA CA at its genTime; `history`: the
head's tlog-proof is found, parses, its `extra` is this head's JWS, its checkpoint is signed under
the expected origin by a trusted key, and the path reaches the root; `witnesses`: the policy's
cosignatures meet its quorum. `timestamp` and `note` are imported only when there is one to read."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from capability_anchor import head as heads
from capability_anchor import jws, strictjson
from capability_anchor.encoding import EncodingError, b64url_decode
from capability_anchor.errors import (
    CapabilityAnchorError,
    MalformedJSON,
    MalformedNote,
    NoteError,
    TimestampError,
    UsageError,
    VerificationError,
)
from capability_anchor.keys import KeySet
from capability_anchor.keys.trust import Revocation
from capability_anchor.merkle import hash_leaf, verify_inclusion
from capability_anchor.strictjson import is_int

from .anchor import Anchor, explain_inclusion
from .checks import Check, Outcome
from .sources import Sources, StampSource

if TYPE_CHECKING:
    from cryptography.x509 import Certificate

    from capability_anchor.note import Note, Policy, TlogProof, Verifier

# Imported inside functions: `note` ~90 ms and `timestamp` ~20 ms (python -X importtime after
# `cli.verify_proof`, min of 7 runs, 2026-12-05): verifying a record without its history never
# loads `note`, nor without stamps to check `timestamp`.

PASS, FAIL, SKIP = Outcome.PASS, Outcome.FAIL, Outcome.SKIP


def check_timestamp(
    verified: heads.Head | None,
    anchor: Anchor | None,
    sources: Sources,
    cas: Sequence[Certificate],
) -> Check:
    """7: PASS when one stored stamp of this head's JWS chains to a --tsa-ca at its genTime."""
    if not cas:
        return Check("timestamp", SKIP, "no --tsa-ca given")
    if verified is None:
        return Check("timestamp", SKIP, "no verified head to check stamps of")
    if not verified.sealed:
        return Check("timestamp", SKIP, "unsealed heads are never stamped")
    source = sources.stamps(verified.day, anchor)
    try:
        tokens = _stamp_tokens(verified.day, source)
    except VerificationError as exc:
        return Check("timestamp", FAIL, str(exc))
    if not tokens:
        return Check("timestamp", SKIP, f"no stamp of {verified.day} in {source.where}")
    return _first_verifying_stamp(verified, tokens, source.where, cas)


def _stamp_tokens(day: str, source: StampSource) -> list[bytes]:
    """The DER replies of a StampSource: a timestamps document's tokens, else its files."""
    if source.listing is None:
        return list(source.tokens)
    try:
        doc = strictjson.loads(source.listing)
        if doc.get("day") != day:
            raise ValueError(f"it lists the stamps of {doc.get('day')!r}")
        return [base64.b64decode(t["token"], validate=True) for t in doc["timestamps"]]
    except (MalformedJSON, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise VerificationError(f"{source.where} is not a timestamps document: {exc}") from None


def _first_verifying_stamp(
    head: heads.Head, tokens: list[bytes], where: str, cas: Sequence[Certificate]
) -> Check:
    from capability_anchor.timestamp import digest_of, verify_reply

    digest = digest_of(head.jws.encode("ascii"))
    reasons: list[str] = []
    for n, token in enumerate(tokens):
        try:
            ok = verify_reply(token, digest=digest, cas=list(cas), nonce=None)
        except TimestampError as exc:
            reasons.append(f"stamp {n}: {exc}")
            continue
        return Check(
            "timestamp",
            PASS,
            f"stamp {n} of {len(tokens)} from {where}: genTime {ok.gen_time}, signed by "
            f"{ok.tsa}, chains to a --tsa-ca, imprint = SHA-256 of the head's JWS",
        )
    return Check("timestamp", FAIL, f"no stamp from {where} verifies: " + "; ".join(reasons))


@dataclass(frozen=True)
class HistoryResult:
    """Check 8's result, its --explain trace, and the checkpoint note check 9 reads."""

    check: Check
    explain: list[str] = field(default_factory=list)
    checkpoint: Note | None = None


def head_payload(head: heads.Head) -> bytes:
    """The verified head's JWS payload: its history leaf bytes (SPEC §12.1)."""
    return b64url_decode(head.jws.split(".")[1])


def _fail(detail: str, explain: list[str] | None = None) -> HistoryResult:
    return HistoryResult(Check("history", FAIL, detail), explain or [])


def check_history(
    verified: heads.Head | None,
    anchor: Anchor | None,
    sources: Sources,
    keys: KeySet,
    *,
    policy: Policy | None = None,
    origin: str | None = None,
) -> HistoryResult:
    """8: the head is in the log's one history (see the module docstring for the steps)."""
    if verified is None:
        return HistoryResult(Check("history", SKIP, "no verified head (check 5)"))
    payload = head_payload(verified)
    leaf = hash_leaf(payload)
    found = sources.history_proof(anchor, leaf)  # 1
    if found.data is None:
        if policy is None:
            return HistoryResult(
                Check("history", SKIP, f"no tlog-proof of the head: {found.where}")
            )
        return _fail(f"--policy is given but there is no tlog-proof of the head: {found.where}")
    from capability_anchor.note import parse_checkpoint, parse_tlog_proof

    try:
        proof = parse_tlog_proof(found.data)  # 2
        # Parsed once here: TlogProof's properties parse the note again on every use.
        note = proof.parsed_note
        checkpoint = parse_checkpoint(note.text)
    except NoteError as exc:
        return _fail(f"{found.where} is not a tlog-proof: {exc}")
    size, root = checkpoint.size, checkpoint.root
    explain = explain_inclusion(
        leaf, proof.index, size, proof.path, root, f"the checkpoint's, {checkpoint.origin} {size}"
    )
    problem = _extra_problem(proof, payload, keys)  # 3
    if problem:
        return _fail(f"{found.where}: {problem}", explain)
    try:
        signers = _open(note, checkpoint.origin, keys, policy, origin, anchor)  # 4
    except (NoteError, UsageError) as exc:
        return _fail(f"{found.where}: the checkpoint: {exc}", explain)
    where = f"tlog-proof from {found.where}"
    try:
        verify_inclusion(leaf, proof.index, size, list(proof.path), root)  # 5
    except VerificationError as exc:
        detail = f"{where}: the history inclusion: {type(exc).__name__}: {exc}"
        return HistoryResult(Check("history", FAIL, detail), explain, note)
    detail = (
        f"{where}: the head is history leaf {proof.index} of size {size}; "
        f"{len(proof.path)} path hashes reach the root of checkpoint {checkpoint.origin} {size} "
        f"signed by {signers}"
    )
    return HistoryResult(Check("history", PASS, detail), explain, note)


def _summary(payload: bytes) -> str:
    try:
        claims = strictjson.loads(payload)
        return f"day {claims['day']} tree_size {claims['tree_size']} sealed {claims['sealed']}"
    except (CapabilityAnchorError, TypeError, KeyError):
        return "unreadable claims"


def _extra_problem(proof: TlogProof, payload: bytes, keys: KeySet) -> str:
    """Why the proof's `extra` is not this head's JWS ('' when it is)."""
    if proof.extra is None:
        return "it has no extra (the head's compact JWS)"
    try:
        token = proof.extra.decode("ascii")
        got = jws.verify(token, keys, jws.HEAD_TYP)
    except UnicodeDecodeError:
        return "its extra is not an ASCII compact JWS"
    except (VerificationError, EncodingError) as exc:
        return f"its extra is not a head JWS by a trusted key: {type(exc).__name__}: {exc}"
    if got.payload != payload:
        return (
            f"its extra is another head ({_summary(got.payload)}) than the anchor's "
            f"({_summary(payload)}): the proof is not for this head"
        )
    return ""


def _expected_origins(
    origin: str | None, policy: Policy | None, anchor: Anchor | None
) -> tuple[tuple[str, ...], str]:
    """The origins a checkpoint may have, and where they come from (SPEC §12.5)."""
    if origin is not None:
        return (origin,), "--origin"
    if policy is not None and policy.logs:
        return tuple(log.verifier.name for log in policy.logs), "the policy's log line"
    if anchor is None:
        raise UsageError("no expected origin: no anchor to derive it from (give --origin)")
    from capability_anchor.note import origin_from_url

    return (origin_from_url(anchor.base),), f"the anchor's base {anchor.base}"


def log_verifiers(name: str, keys: KeySet, policy: Policy | None) -> list[Verifier]:
    """The note keys of origin `name`: trusted JWKs and the policy's `log` vkeys, one per key ID."""
    from capability_anchor.note import NoteVerifier

    verifiers: dict[tuple[str, bytes], Verifier] = {}
    for key in keys:
        # A trusted JWK is the log's Ed25519 key; as a note key it signs under the origin.
        candidate = NoteVerifier(name, key.raw)
        verifiers[(candidate.name, candidate.key_id)] = candidate
    for log in policy.logs if policy is not None else ():
        if log.verifier.name == name:
            verifiers[(log.verifier.name, log.verifier.key_id)] = log.verifier
    return list(verifiers.values())


def _open(
    note: Note,
    name: str,
    keys: KeySet,
    policy: Policy | None,
    origin: str | None,
    anchor: Anchor | None,
) -> str:
    """Step 4: the origin `name` is expected and a trusted key signed `note` under it; who did."""
    from capability_anchor.note import open_checkpoint

    origins, why = _expected_origins(origin, policy, anchor)
    if name not in origins:
        raise MalformedNote(
            f"its origin is {name!r}, not {' or '.join(map(repr, origins))} (from {why})"
        )
    opened = open_checkpoint(note, log_verifiers(name, keys, policy), origin=name)
    return ", ".join(f"{s.name}+{s.key_id.hex()}" for s in opened.opened.verified)


def check_witnesses(
    checkpoint: Note | None, policy: Policy | None, at: int, history: Check
) -> Check:
    """9: with --policy, the checkpoint's cosignatures meet the policy's quorum."""
    if policy is None:
        return Check("witnesses", SKIP, "no --policy given")
    if checkpoint is None:
        return Check(
            "witnesses",
            FAIL,
            f"no checkpoint signed by the log to check (history {history.outcome})",
        )
    from capability_anchor.note import check_cosignatures

    # The checkpoint's first two lines (origin, size) name it in the detail.
    which = "checkpoint " + " ".join(checkpoint.text.split("\n", 2)[:2])
    witnessed = check_cosignatures(checkpoint, policy, at=at)
    try:
        witnessed.require()
    except NoteError as exc:
        return Check("witnesses", FAIL, f"{which}: {exc}")
    names = [f"{name} (time {t})" for name, t in witnessed.cosigned.items()]
    by = ", ".join(names) if names else "no policy witness"
    return Check(
        "witnesses", PASS, f"{which}: quorum {policy.quorum} met at {at}: cosigned by {by}"
    )


def checkpoint_not_revoked(
    check: Check,
    checkpoint: Note | None,
    head: heads.Head | None,
    keys: KeySet,
    revocations: Mapping[str, Revocation] | None,
) -> Check:
    """Check 8 again, SPEC §13.2 (`revoked_checkpoint`): the checkpoint proving `head`."""
    if not revocations or check.outcome is not PASS or checkpoint is None or head is None:
        return check
    iat = head.claims.get("iat")
    gone = revoked_checkpoint(checkpoint, iat if is_int(iat) else 0, keys, revocations)
    if not gone:
        return check
    detail = (
        f"the checkpoint proving a head signed at iat {iat} carries no signature by a key "
        f"that is not revoked: {'; '.join(r.describe() for r in gone)}"
    )
    return Check(check.name, FAIL, detail)


def revoked_checkpoint(
    checkpoint: Note, iat: int, keys: KeySet, revocations: Mapping[str, Revocation]
) -> list[Revocation]:
    """SPEC §13.2 for a checkpoint (which carries no time): after a key's revocation, one signed
    only by the revoked key is not the log's. The revocations it falls foul of, for `verify-proof`
    and `monitor`."""
    from capability_anchor.note import TYPE_ED25519, key_id, parse_checkpoint

    gone = [r for r in revocations.values() if iat > r.revoked_at]
    if not gone:
        return []
    revoked = {r.kid for r in gone}
    name = parse_checkpoint(checkpoint.text).origin
    live = {key_id(name, TYPE_ED25519, k.raw) for k in keys if k.kid not in revoked}
    if any(s.name == name and s.key_id in live for s in checkpoint.signatures):
        return []
    return gone
