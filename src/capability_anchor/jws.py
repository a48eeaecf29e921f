"""Compact JWS (RFC 7515) with EdDSA over Ed25519 (RFC 8037), for heads and record tokens.

Signing makes one header, the JCS bytes of `{"alg","kid","typ"}`. `verify` checks nine rules in a
fixed order, cheap and structural first, each with its own error class (the list and its choices:
docs/explanation/architecture.md, "The verifying path"); keys come only from the caller's KeySet.
Record tokens add the Capability Resolution §8 claims and expiry rules."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from capability_anchor import strictjson

from .encoding import EncodingError, b64url_decode, b64url_encode, utc_second
from .errors import (
    ClaimsError,
    IssuerMismatch,
    JWSAlgorithmError,
    JWSEncodingError,
    JWSFormatError,
    JWSHeaderError,
    JWSTypeError,
    SignatureMismatch,
    TokenExpired,
    TokenLifetimeError,
    TokenNotYetValid,
    UsageError,
)
from .keys import ED25519_SIGNATURE_SIZE, KeySet, SigningKey
from .strictjson import canonical, is_int, json_type_name

ALG = "EdDSA"
HEAD_TYP = "capability-anchor+jws"
RECORD_TYP = "capability-resolver+jws"

#: Capability Resolution §8: `exp - iat` must not exceed 48 hours.
MAX_RECORD_LIFETIME = 172800
#: Capability Resolution §8: allowed clock difference for `exp` and `iat`, in seconds.
CLOCK_SKEW = 300
#: Capability Resolution §8 "Required" claims, in the order the spec lists them.
RECORD_REQUIRED_CLAIMS = (
    "v",
    "iss",
    "sub",
    "url",
    "status",
    "checked_at",
    "iat",
    "exp",
    "evidence",
)

_HEADER_MEMBERS = ("alg", "kid", "typ")
_SEGMENT_NAMES = ("header", "payload", "signature")
_KNOWN_TYPS = {HEAD_TYP: "a head", RECORD_TYP: "a record token"}


@dataclass(frozen=True)
class VerifiedJWS:
    """A token that passed every check; `signing_input` is `header.payload` as received."""

    header: dict[str, str]
    payload: bytes
    kid: str
    signing_input: bytes


# --- signing -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _header_segment(kid: str, typ: str) -> str:
    """The base64url of the JCS header `{"alg","kid","typ"}` and its dot, written once per key."""
    return b64url_encode(canonical({"alg": ALG, "kid": kid, "typ": typ})) + "."


def sign(payload: bytes, key: SigningKey, typ: str) -> str:
    """Sign `payload` as a compact JWS with the header `{"alg":"EdDSA","kid":…,"typ":typ}`."""
    if not isinstance(payload, bytes):
        raise UsageError(f"payload must be bytes, got {type(payload).__name__}")
    if not payload:
        # RFC 7515 allows an empty payload, but `verify` refuses empty segments; never
        # make a token this module would not accept.
        raise UsageError("payload must not be empty")
    if not isinstance(typ, str) or not typ:
        raise UsageError("typ must be a non-empty string")
    signing_input = _header_segment(key.kid, typ) + b64url_encode(payload)
    signature = key.sign(signing_input.encode("ascii"))
    return signing_input + "." + b64url_encode(signature)


def sign_claims(claims: Mapping[str, Any], key: SigningKey, typ: str) -> str:
    """Sign the RFC 8785 bytes of `claims` (so equal claims always give equal payloads)."""
    if not isinstance(claims, Mapping):
        raise UsageError(f"claims must be a JSON object, got {type(claims).__name__}")
    try:
        payload = canonical(dict(claims))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"claims cannot be canonicalized with RFC 8785: {exc}") from None
    return sign(payload, key, typ)


def sign_record(
    claims: Mapping[str, Any],
    *,
    anchor: Mapping[str, Any],
    proof: Mapping[str, Any],
    key: SigningKey,
    iat: int,
    lifetime: int,
) -> dict[str, Any]:
    """A resolver-2 record (Capability Resolution §6.3): the leaf `claims` plus `iat`, `exp`,
    `anchor` and `proof`, signed as a record token; returned with `expires` (RFC 3339 UTC)
    and the compact `jws` beside the signed members."""
    try:
        written = canonical(dict(claims))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"claims cannot be canonicalized with RFC 8785: {exc}") from None
    members = strictjson.members(written)[0]
    members["anchor"] = strictjson.member("anchor", anchor)
    members["proof"] = strictjson.member("proof", proof)
    answer = record_answer(members, key=key, iat=iat, lifetime=lifetime)
    found: dict[str, Any] = strictjson.loads(answer)
    return found


# Records signed in one second share it.
_utc_second = functools.lru_cache(maxsize=4)(utc_second)


def record_answer(written: dict[str, str], *, key: SigningKey, iat: int, lifetime: int) -> bytes:
    """`sign_record`'s record as RFC 8785 bytes, from members as written (a dict this adds
    to): a leaf's claims as stored (`strictjson.members`) with `anchor` and `proof`
    (`strictjson.member`), spliced into the payload and the answer, never written again."""
    exp = iat + lifetime
    written["iat"] = strictjson.member("iat", iat)
    written["exp"] = strictjson.member("exp", exp)
    token = sign(strictjson.joined(written), key, RECORD_TYP)
    # Both strings are ASCII without a quote or backslash: JSON writes them as they are.
    written["expires"] = f'"expires":"{_utc_second(exp)}"'
    written["jws"] = f'"jws":"{token}"'
    return strictjson.joined(written)


# --- verification --------------------------------------------------------------------------


_CONTROL = re.compile(r"[\x00-\x20\x7f]")


def _check_format(token: object) -> list[str]:
    """Rules 1-2: a str, ASCII, no whitespace/control characters, three non-empty segments."""
    if not isinstance(token, str):
        raise JWSFormatError(f"a compact JWS is a str, got {type(token).__name__}")
    if not token.isascii():
        at = next(i for i, ch in enumerate(token) if not ch.isascii())
        raise JWSFormatError(f"non-ASCII character {token[at]!r} at offset {at}")
    bad = _CONTROL.search(token)  # a per-character loop here was a monitor's hot spot
    if bad is not None:
        i, ch = bad.start(), bad.group()
        where = "at the end" if i == len(token) - 1 else f"at offset {i}"
        raise JWSFormatError(f"whitespace or control character {ch!r} {where}")
    segments = token.split(".")
    if len(segments) != 3:
        raise JWSFormatError(f"expected 3 dot-separated segments, found {len(segments)}")
    for name, segment in zip(_SEGMENT_NAMES, segments, strict=True):
        if not segment:
            raise JWSFormatError(f"the {name} segment is empty")
    return segments


def _decode_segments(segments: list[str]) -> tuple[bytes, bytes, bytes]:
    """Rule 3: each segment canonical unpadded base64url (one spelling per byte string)."""
    decoded: list[bytes] = []
    for name, segment in zip(_SEGMENT_NAMES, segments, strict=True):
        try:
            decoded.append(b64url_decode(segment))
        except EncodingError as exc:
            raise JWSEncodingError(f"the {name} segment: {exc}") from None
    return decoded[0], decoded[1], decoded[2]


_NOT_AN_OBJECT = "{what} is a JSON {type}, not an object"


def _parse_header(header_bytes: bytes) -> dict[str, str]:
    """Rules 4-5: a strict JSON object with exactly alg, kid, typ, all strings."""
    header = strictjson.load_object(
        header_bytes, "the header", error=JWSEncodingError, not_object=_NOT_AN_OBJECT
    )
    extra = sorted(set(header) - set(_HEADER_MEMBERS))
    if extra:
        raise JWSHeaderError(
            f"header member(s) {', '.join(repr(m) for m in extra)} not allowed (only alg, kid, typ)"
        )
    for member in _HEADER_MEMBERS:
        if member not in header:
            raise JWSHeaderError(f"header member {member!r} is missing")
        if not isinstance(header[member], str):
            raise JWSHeaderError(
                f"header member {member!r} must be a string, found {json_type_name(header[member])}"
            )
    return header


def unverified_header(token: str) -> dict[str, str]:
    """The header of a well-formed compact JWS, NOT verified: which kind of token it claims."""
    return _parse_header(_decode_segments(_check_format(token))[0])


def verify(token: str, keys: KeySet, typ: str) -> VerifiedJWS:
    """Verify a compact JWS with `keys`, header `typ`; a JWSError names the first rule failed."""
    segments = _check_format(token)
    header_bytes, payload, signature = _decode_segments(segments)
    header = _parse_header(header_bytes)
    if header["alg"] != ALG:
        raise JWSAlgorithmError(f"alg is {header['alg']!r}; only {ALG!r} is accepted")
    if header["typ"] != typ:
        found = _KNOWN_TYPS.get(header["typ"])
        hint = (
            f" ({found} was presented where {_KNOWN_TYPS[typ]} was expected)"
            if (found and typ in _KNOWN_TYPS)
            else ""
        )
        raise JWSTypeError(f"typ is {header['typ']!r}, expected {typ!r}{hint}")
    public_key = keys.get(header["kid"])
    signing_input = (segments[0] + "." + segments[1]).encode("ascii")
    if len(signature) != ED25519_SIGNATURE_SIZE:
        raise SignatureMismatch(
            f"the signature is {len(signature)} bytes; an Ed25519 signature is "
            f"{ED25519_SIGNATURE_SIZE}"
        )
    public_key.verify(signing_input, signature)
    return VerifiedJWS(
        header=header, payload=payload, kid=header["kid"], signing_input=signing_input
    )


def verify_claims(token: str, keys: KeySet, typ: str) -> dict[str, Any]:
    """`verify`, then parse the payload as a strict JSON object (ClaimsError otherwise)."""
    payload = verify(token, keys, typ).payload
    return strictjson.load_object(
        payload, "the payload", error=ClaimsError, not_object=_NOT_AN_OBJECT
    )


# --- record tokens (Capability Resolution §8) -----------------------------------------------


def _int_claim(claims: Mapping[str, Any], name: str) -> int:
    if name not in claims:
        raise ClaimsError(f"required claim {name!r} is missing")
    value = claims[name]
    if not is_int(value):
        raise ClaimsError(
            f"claim {name!r} must be an integer number of seconds, "
            f"found {type(value).__name__} {value!r}"
        )
    return value


def check_record_lifetime(claims: Mapping[str, Any], at: int) -> None:
    """Capability Resolution §8's expiry rules at `at` (epoch seconds), in order."""
    if not is_int(at):
        raise UsageError(f"at must be integer epoch seconds, got {type(at).__name__}")
    iat = _int_claim(claims, "iat")
    exp = _int_claim(claims, "exp")
    lifetime = exp - iat
    if lifetime > MAX_RECORD_LIFETIME:
        raise TokenLifetimeError(
            f"lifetime exp - iat is {lifetime} s, more than the {MAX_RECORD_LIFETIME} s allowed"
        )
    if lifetime < 0:
        # The spec only bounds the lifetime from above; a token that expires before it
        # was issued is nonsense no honest resolver signs, so it is refused too.
        raise TokenLifetimeError(f"exp {exp} is before iat {iat}")
    if exp < at - CLOCK_SKEW:
        raise TokenExpired(
            f"exp {exp} is {at - exp} s before {at}, more than the {CLOCK_SKEW} s skew allowed"
        )
    if iat > at + CLOCK_SKEW:
        raise TokenNotYetValid(
            f"iat {iat} is {iat - at} s after {at}, more than the {CLOCK_SKEW} s skew allowed"
        )


def check_record_claims(claims: Mapping[str, Any], *, iss: str) -> None:
    """The required claims, integer `iat`/`exp`, and the issuer (no clock rules)."""
    missing = [name for name in RECORD_REQUIRED_CLAIMS if name not in claims]
    if missing:
        raise ClaimsError(f"required claim(s) {', '.join(repr(m) for m in missing)} missing")
    _int_claim(claims, "iat")
    _int_claim(claims, "exp")
    if claims["iss"] != iss:
        raise IssuerMismatch(f"iss is {claims['iss']!r}, expected {iss!r}")


def verify_record_token(token: str, keys: KeySet, *, iss: str, at: int) -> dict[str, Any]:
    """Verify a record token, its required claims, issuer and expiry at `at`; its claims."""
    claims = verify_claims(token, keys, RECORD_TYP)
    check_record_claims(claims, iss=iss)
    check_record_lifetime(claims, at)
    return claims
