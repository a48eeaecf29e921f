"""Check 7 of SPEC §9, `timestamp`: a stored RFC 3161 stamp of the sealed head chains to a trusted
TSA CA at its genTime. rfc3161-client is imported only when there is a stamp to check."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING

from capability_anchor import head as heads
from capability_anchor import strictjson
from capability_anchor.errors import MalformedJSON, TimestampError, VerificationError

from .anchor import Anchor
from .checks import Check, Outcome
from .sources import Sources, StampSource

if TYPE_CHECKING:
    from cryptography.x509 import Certificate

# Imported inside functions: `timestamp` ~20 ms (python -X importtime after `cli.verify_proof`,
# min of 7 runs, 2026-12-05): loaded only when there are stamps to check.

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
