"""The log's signed statements of trust (formats in roots/README.md): key rotation records and the
closure of an anchor over them (a record counts only once its signer is trusted), the two phases of
a key rotation (SPEC §13.2: the pending rotation, signed by the current key so whoever writes the
database cannot move the activation, and the revocation, signed by the successor), and the
statement of the log's settings. Pure, shared by the log, the audit, `verify-proof`, `monitor`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from capability_anchor import jws, strictjson
from capability_anchor.encoding import utc_second
from capability_anchor.errors import (
    CapabilityAnchorError,
    ClaimsError,
    InputError,
    InvalidKey,
    IssuerMismatch,
    JWSError,
    UnknownKeyError,
)
from capability_anchor.head import VERSION, exact_claims
from capability_anchor.keys import KeySet, PublicKey, SigningKey
from capability_anchor.strictjson import canonical, is_int

KEY_TYP = "capability-anchor-key+jws"
SETTINGS_TYP = "capability-anchor-settings+jws"
KEY_CLAIMS = ("v", "iss", "kid", "jwk", "iat")
SETTINGS_CLAIMS = ("v", "iss", "first_day", "public_url", "config", "reason", "iat")
SETTINGS_REASONS = ("init", "upgrade", "rotate-key")
# The meta values a settings statement covers, as the claims name them.
_SETTINGS_META = ("iss", "first_day", "public_url", "config")


ROTATION_TYP = "capability-anchor-rotation+jws"
REVOCATION_TYP = "capability-anchor-revocation+jws"
ROTATION_CLAIMS = ("v", "iss", "kid", "iat", "activate_at")
REVOCATION_CLAIMS = ("v", "iss", "kid", "revoked_at", "iat")


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
            f"key {self.kid} was revoked at {utc_second(self.revoked_at)} "
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


def _exact_members(claims: Mapping[str, Any], names: Sequence[str], what: str) -> None:
    exact_members(claims, names, what)
    iat = claims["iat"]
    if not is_int(iat) or iat < 0:
        raise ClaimsError(f"{what}: iat must be a non-negative integer")


# --- key rotation records --------------------------------------------------------------------


@dataclass(frozen=True)
class KeyRecord:
    """A rotation record that verified: `signer` vouches for `key`."""

    signer: str
    key: PublicKey
    iat: int
    token: str


def make_key_record(signer: SigningKey, endorsed: PublicKey, *, iss: str, iat: int) -> str:
    """`signer` endorses `endorsed` for the log `iss`."""
    claims = {"v": VERSION, "iss": iss, "kid": endorsed.kid, "jwk": endorsed.jwk(), "iat": iat}
    return jws.sign_claims(claims, signer, KEY_TYP)


def verify_key_record(token: str, trusted: KeySet, *, iss: str) -> KeyRecord:
    """Verify a rotation record signed by a key of `trusted`: JWS, exact claims, `iss`, `jwk`."""
    verified = jws.verify(token, trusted, KEY_TYP)
    claims = _claims(verified, "key record")
    _exact_members(claims, KEY_CLAIMS, "key record")
    if claims["iss"] != iss:
        raise IssuerMismatch(f"key record: iss is {claims['iss']!r}, expected {iss!r}")
    jwk = claims["jwk"]
    try:
        key = KeySet.from_jwks({"keys": [jwk]}, require_thumbprints=True).get(str(claims["kid"]))
    except (InvalidKey, UnknownKeyError) as exc:
        raise ClaimsError(f"key record: jwk and kid do not name one Ed25519 key: {exc}") from None
    if jwk != key.jwk():
        # One spelling per key: what is endorsed is byte for byte what keys.json publishes.
        raise ClaimsError(f"key record: jwk of {key.kid} is not its published form")
    if key.kid == verified.kid:
        raise ClaimsError(f"key record: key {key.kid} endorses itself")
    return KeyRecord(verified.kid, key, int(claims["iat"]), token)


@dataclass
class TrustChain:
    """The closure of `anchors` over rotation records, and the revocations among them, by kid."""

    keys: KeySet
    records: dict[int, KeyRecord] = field(default_factory=dict)
    problems: dict[int, str] = field(default_factory=dict)
    revocations: dict[str, Revocation] = field(default_factory=dict)


def closure(anchors: Iterable[PublicKey], tokens: Sequence[str], *, iss: str) -> TrustChain:
    """Follow rotation records from `anchors` until nothing changes; a record never trusted or
    failing lands in `problems`. Then revocations, in order: a record signed by a revoked key at or
    after its revocation is not followed."""
    anchors = list(anchors)
    skipped: dict[int, str] = {}
    while True:
        found = _follow(anchors, tokens, iss, skipped)
        late = {
            i: f"signed by {gone.describe()}"
            for i, record in found.records.items()
            if (gone := voided(found.revocations, record.signer, record.iat)) is not None
        }
        if not late:
            found.problems.update(skipped)
            return found
        skipped.update(late)


def _follow(
    anchors: Sequence[PublicKey], tokens: Sequence[str], iss: str, skipped: Mapping[int, str]
) -> TrustChain:
    trusted = {k.kid: k for k in anchors}
    records: dict[int, KeyRecord] = {}
    problems: dict[int, str] = {}
    revoking = [i for i, token in enumerate(tokens) if is_revocation(token)]
    pending = [i for i in range(len(tokens)) if i not in skipped and i not in set(revoking)]
    unknown: dict[int, str] = {}
    changed = True
    while pending and changed:
        changed = False
        keyset = KeySet(trusted.values())
        waiting: list[int] = []
        for i in pending:
            try:
                record = verify_key_record(tokens[i], keyset, iss=iss)
            except UnknownKeyError as exc:
                waiting.append(i)
                unknown[i] = str(exc)
                continue
            except CapabilityAnchorError as exc:
                problems[i] = str(exc)
                continue
            records[i] = record
            if record.key.kid not in trusted:
                trusted[record.key.kid] = record.key
                keyset = KeySet(trusted.values())  # later records in this pass may use it
                changed = True
        pending = waiting
    for i in pending:
        problems[i] = f"signed by a key no trusted key endorses ({unknown[i]})"
    keys = KeySet(trusted.values())
    revocations: dict[str, Revocation] = {}
    for i in revoking:
        try:
            revocation = verify_revocation(tokens[i], keys, iss=iss)
        except CapabilityAnchorError as exc:
            problems[i] = str(exc)
            continue
        if revocation.signer in revocations:
            problems[i] = f"signed by {revocations[revocation.signer].describe()}"
            continue
        revocations.setdefault(revocation.kid, revocation)
    return TrustChain(keys, records, problems, revocations)


def published_keys(chain: TrustChain) -> KeySet:
    """What `/keys` and keys.json list: the trusted set without the revoked keys."""
    return KeySet(k for k in chain.keys if k.kid not in chain.revocations)


# --- the settings statement ------------------------------------------------------------------


def settings_claims(meta: Mapping[str, str]) -> dict[str, Any]:
    """What a settings statement says about the stored `meta` (no `reason`, no `iat`)."""
    config = meta.get("config", "{}")
    parsed = strictjson.load_object(config, "the stored config", error=ClaimsError)
    return {
        "v": VERSION,
        "iss": meta.get("iss"),
        "first_day": meta.get("first_day"),
        "public_url": meta.get("public_url") or None,
        "config": parsed,
    }


def sign_settings(meta: Mapping[str, str], key: SigningKey, *, reason: str, iat: int) -> str:
    if reason not in SETTINGS_REASONS:
        raise ClaimsError(f"settings reason {reason!r} is not one of {SETTINGS_REASONS}")
    claims = {**settings_claims(meta), "reason": reason, "iat": iat}
    return jws.sign_claims(claims, key, SETTINGS_TYP)


def verify_settings(token: str, keys: KeySet) -> dict[str, Any]:
    """A settings statement signed by one of `keys`; its claims (exact members)."""
    claims = jws.verify_claims(token, keys, SETTINGS_TYP)
    _exact_members(claims, SETTINGS_CLAIMS, "settings statement")
    if claims["reason"] not in SETTINGS_REASONS:
        raise ClaimsError(f"settings statement: reason {claims['reason']!r} is unknown")
    if not isinstance(claims["config"], dict):
        raise ClaimsError("settings statement: config is not a JSON object")
    return claims


def settings_differences(signed: Mapping[str, Any], meta: Mapping[str, str]) -> list[str]:
    """Each stored setting that differs from the signed statement (`meta.public_url`, ...)."""
    try:
        stored = settings_claims(meta)
    except ClaimsError as exc:
        return [f"meta.config: {exc}"]
    found: list[str] = []
    for name in _SETTINGS_META:
        if name == "config":
            config, want = stored["config"], signed["config"]
            for member in sorted(set(config) | set(want)):
                if config.get(member) != want.get(member):
                    found.append(
                        f"meta.config.{member} differs from the signed settings "
                        f"({_describe(want.get(member))} signed, {_describe(config.get(member))}"
                        " stored)"
                    )
        elif stored[name] != signed[name]:
            found.append(
                f"meta.{name} is {stored[name]!r}, the signed settings say {signed[name]!r}"
            )
    return found


def _describe(value: object) -> str:
    if isinstance(value, str) and "-----BEGIN CERTIFICATE-----" in value:
        n = value.count("-----BEGIN CERTIFICATE-----")
        return f"{n} certificate{'s' if n != 1 else ''}"
    if value is None:
        return "nothing"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# --- key-records.json (export) -----------------------------------------------------------------

KEY_RECORDS_FILE = "key-records.json"


def key_records_document(iss: str, tokens: Sequence[str]) -> bytes:
    """`key-records.json`: JCS bytes of `{"v","iss","records"}`, records in stored order."""
    return canonical({"v": VERSION, "iss": iss, "records": list(tokens)})


def read_key_records(data: bytes) -> tuple[str, list[str]]:
    """(iss, records) of a `key-records.json`; ClaimsError when it is not one."""
    shape = f"{KEY_RECORDS_FILE} is not {{v: {VERSION!r}, iss, records: [JWS]}}"
    doc = strictjson.load_object(data, KEY_RECORDS_FILE, error=ClaimsError, not_object=shape)
    if (
        set(doc) != {"v", "iss", "records"}
        or doc["v"] != VERSION
        or not isinstance(doc["iss"], str)
        or not isinstance(doc["records"], list)
        or not all(isinstance(r, str) for r in doc["records"])
    ):
        raise ClaimsError(shape)
    return doc["iss"], list(doc["records"])


def published_closure(keys: KeySet, data: bytes, where: str) -> TrustChain:
    """`closure` of `keys` over a published `key-records.json` read from `where` (a file or
    URL the caller named): one that is not such a document is an InputError (exit 2)."""
    try:
        iss, tokens = read_key_records(data)
    except ClaimsError as exc:
        raise InputError(f"{where}: {exc}") from None
    return closure(keys, tokens, iss=iss)
