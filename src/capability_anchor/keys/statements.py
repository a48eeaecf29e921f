"""The signed statements of a two-phase key rotation (SPEC §13.2): the pending rotation (signed by
the current key, so whoever writes the database cannot move the activation) and the revocation
(signed by the successor). Pure, shared by the log, the audit, `verify-proof` and `monitor`; formats
in roots/README.md."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from capability_anchor import jws, strictjson
from capability_anchor.errors import ClaimsError, IssuerMismatch, JWSError
from capability_anchor.head import VERSION, exact_claims
from capability_anchor.keys import KeySet, SigningKey
from capability_anchor.strictjson import is_int

ROTATION_TYP = "capability-anchor-rotation+jws"
REVOCATION_TYP = "capability-anchor-revocation+jws"
ROTATION_CLAIMS = ("v", "iss", "kid", "iat", "activate_at")
REVOCATION_CLAIMS = ("v", "iss", "kid", "revoked_at", "iat")


def rfc3339(t: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _claims(verified: jws.VerifiedJWS, what: str) -> dict[str, Any]:
    return strictjson.load_object(verified.payload, f"{what}: the payload", error=ClaimsError)


def exact_members(claims: Mapping[str, Any], names: Sequence[str], what: str) -> None:
    """Exactly the claims NAMES, and `v` this version's (every statement the log signs)."""
    exact_claims(claims, names, missing=f"{what}: missing claim(s)", version=f"{what}: v")


def _check(claims: Mapping[str, Any], names: Sequence[str], what: str, iss: str) -> None:
    exact_members(claims, names, what)
    if claims["iss"] != iss:
        raise IssuerMismatch(f"{what}: iss is {claims['iss']!r}, expected {iss!r}")
    if not isinstance(claims["kid"], str) or not claims["kid"]:
        raise ClaimsError(f"{what}: kid must be a non-empty string")
    for name in names:
        if name not in ("v", "iss", "kid") and (not is_int(claims[name]) or claims[name] < 0):
            raise ClaimsError(f"{what}: {name} must be a non-negative integer")


# --- the pending rotation --------------------------------------------------------------------


@dataclass(frozen=True)
class PendingRotation:
    """A verified pending rotation: `kid` published at `published`, signing from `activate_at`."""

    signer: str
    kid: str
    published: int
    activate_at: int
    token: str


def make_pending_rotation(
    current: SigningKey, next_kid: str, *, iss: str, iat: int, activate_at: int
) -> str:
    claims = {"v": VERSION, "iss": iss, "kid": next_kid, "iat": iat, "activate_at": activate_at}
    return jws.sign_claims(claims, current, ROTATION_TYP)


def verify_pending_rotation(token: str, current: KeySet, *, iss: str) -> PendingRotation:
    verified = jws.verify(token, current, ROTATION_TYP)
    claims = _claims(verified, "pending rotation")
    _check(claims, ROTATION_CLAIMS, "pending rotation", iss)
    if claims["activate_at"] < claims["iat"]:
        raise ClaimsError("pending rotation: activate_at is before iat")
    if claims["kid"] == verified.kid:
        raise ClaimsError(f"pending rotation: key {verified.kid} rotates to itself")
    return PendingRotation(
        verified.kid, claims["kid"], int(claims["iat"]), int(claims["activate_at"]), token
    )


# --- revocations -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Revocation:
    """A verified revocation: nothing `kid` signed from `revoked_at` on is the log's."""

    signer: str
    kid: str
    revoked_at: int
    iat: int
    token: str

    def covers(self, kid: str, signed_at: int) -> bool:
        """Whether a statement by `kid` dated `signed_at` is voided by this revocation."""
        return kid == self.kid and signed_at > self.revoked_at

    def describe(self) -> str:
        return (
            f"key {self.kid} was revoked at {rfc3339(self.revoked_at)} "
            f"(revocation signed by {self.signer})"
        )


def make_revocation(successor: SigningKey, revoked: str, *, iss: str, revoked_at: int) -> str:
    claims = {"v": VERSION, "iss": iss, "kid": revoked, "revoked_at": revoked_at, "iat": revoked_at}
    return jws.sign_claims(claims, successor, REVOCATION_TYP)


def verify_revocation(token: str, trusted: KeySet, *, iss: str) -> Revocation:
    verified = jws.verify(token, trusted, REVOCATION_TYP)
    claims = _claims(verified, "revocation")
    _check(claims, REVOCATION_CLAIMS, "revocation", iss)
    if claims["kid"] == verified.kid:
        raise ClaimsError(f"revocation: key {verified.kid} revokes itself")
    return Revocation(
        verified.kid, claims["kid"], int(claims["revoked_at"]), int(claims["iat"]), token
    )


def is_revocation(token: str) -> bool:
    """Whether `token` claims (unverified) to be a revocation, not a rotation record."""
    try:
        return jws.unverified_header(token).get("typ") == REVOCATION_TYP
    except JWSError:
        return False


def voided(revocations: Mapping[str, Revocation], kid: str, signed_at: int) -> Revocation | None:
    """The revocation that voids a statement by `kid` dated `signed_at`, if any."""
    found = revocations.get(kid)
    return found if found is not None and found.covers(kid, signed_at) else None
