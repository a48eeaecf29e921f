"""Heads (SPEC §4): claims, the signed head document, the `prev` link, anchors (SPEC §5).

Pure functions shared by the log (which makes heads) and the verifiers (which check them).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from capability_anchor import jws, strictjson

from .encoding import EncodingError, hash_from_hex, parse_day
from .errors import ClaimsError
from .keys import KeySet, SigningKey
from .strictjson import canonical, is_int

VERSION = "0.2"
HEAD_CLAIMS = ("v", "iss", "day", "tree_size", "root", "sealed", "prev", "iat")


@dataclass(frozen=True, slots=True)
class Head:
    """A head whose claims were checked for shape (not for signature: see `verify_head`)."""

    claims: dict[str, Any]
    jws: str

    @property
    def day(self) -> str:
        return str(self.claims["day"])

    @property
    def tree_size(self) -> int:
        return int(self.claims["tree_size"])

    @property
    def root(self) -> bytes:
        return bytes.fromhex(self.claims["root"])

    @property
    def sealed(self) -> bool:
        return bool(self.claims["sealed"])

    def document(self) -> bytes:
        return document(self.claims, self.jws)


def make_claims(
    *, iss: str, day: str, tree_size: int, root: bytes, sealed: bool, prev: str | None, iat: int
) -> dict[str, Any]:
    return {
        "v": VERSION,
        "iss": iss,
        "day": day,
        "tree_size": tree_size,
        "root": root.hex(),
        "sealed": sealed,
        "prev": prev,
        "iat": iat,
    }


def sign(claims: dict[str, Any], key: SigningKey) -> Head:
    check_claims(claims)
    return Head(claims, jws.sign_claims(claims, key, jws.HEAD_TYP))


def document(claims: dict[str, Any], token: str) -> bytes:
    """The head document: JCS of the claims plus `jws`, no trailing newline."""
    return canonical({**claims, "jws": token})


def claims_digest(claims: dict[str, Any]) -> str:
    """Hex SHA-256 of the JCS bytes of a head's claims: the next day's `prev`."""
    return hashlib.sha256(canonical(claims)).hexdigest()


def sealed_iat(day: str) -> int:
    """A sealed head is dated when its day ended, so sealing twice gives the same bytes."""
    end = dt.datetime.combine(parse_day(day), dt.time(), dt.UTC) + dt.timedelta(days=1)
    return int(end.timestamp())


def exact_claims(
    claims: Mapping[str, Any], names: Sequence[str], *, missing: str, version: str
) -> None:
    """Exactly the claims `names` and this version's `v`, in each caller's words."""
    absent = [name for name in names if name not in claims]
    extra = sorted(set(claims) - set(names))
    if absent or extra:
        raise ClaimsError(f"{missing} {absent}, unexpected {extra}")
    if claims["v"] != VERSION:
        raise ClaimsError(f"{version} is {claims['v']!r}, expected {VERSION!r}")


def check_claims(claims: object) -> dict[str, Any]:
    """The shape SPEC §4 requires of head claims; raises ClaimsError."""
    if not isinstance(claims, dict):
        raise ClaimsError("head claims must be a JSON object")
    exact_claims(claims, HEAD_CLAIMS, missing="head claims: missing", version="head v")
    if not isinstance(claims["iss"], str):
        raise ClaimsError("head iss must be a string")
    try:
        parse_day(claims["day"])
        hash_from_hex(claims["root"], "head root")
        if claims["prev"] is not None:
            hash_from_hex(claims["prev"], "head prev")
    except EncodingError as exc:
        raise ClaimsError(str(exc)) from None
    for name in ("tree_size", "iat"):
        value = claims[name]
        if not is_int(value) or value < 0:
            raise ClaimsError(f"head {name} must be a non-negative integer")
    if not isinstance(claims["sealed"], bool):
        raise ClaimsError("head sealed must be true or false")
    return claims


def parse_document(data: bytes) -> Head:
    """Read a head document (or a bare compact JWS) without verifying the signature."""
    text = data.strip()
    if text.startswith(b"{"):
        no_jws = "head document has no `jws` member"
        doc = strictjson.load_object(text, "head document", error=ClaimsError, not_object=no_jws)
        if not isinstance(doc.get("jws"), str):
            raise ClaimsError(no_jws)
        token = doc.pop("jws")
        return Head(check_claims(doc), token)
    raise ClaimsError("not a head document (expected a JSON object)")


def verify_head(token: str, keys: KeySet) -> Head:
    """Verify a head's JWS (typ capability-anchor+jws, trusted kid) and its claims' shape."""
    claims = jws.verify_claims(token, keys, jws.HEAD_TYP)
    return Head(check_claims(claims), token)


@dataclass(frozen=True, slots=True)
class CheckedDocument:
    """A verified head document: `head`'s signed claims (act on these), `document`'s plain ones."""

    document: Head
    head: Head

    @property
    def claims_match(self) -> bool:
        return self.document.claims == self.head.claims


def verify_document(data: bytes, keys: KeySet) -> CheckedDocument:
    """Parse a head document, verify its JWS with `keys`, compare its plain and signed claims."""
    parsed = parse_document(data)
    return CheckedDocument(parsed, verify_head(parsed.jws, keys))


def anchor_url(base: str, day: str, tree_size: int, sealed: bool) -> str:
    """SPEC §5: the URL form names the exact head (and tells sealed from unsealed)."""
    return f"{base}/roots/{day}" if sealed else f"{base}/roots/{day}/{tree_size}"


def proof_json(leaf_index: int, tree_size: int, path: Sequence[bytes]) -> dict[str, Any]:
    """SPEC §5: the `proof` member of a resolver-2 record (an RFC 9162 inclusion path)."""
    return {
        "type": "rfc9162-sha256",
        "leaf_index": leaf_index,
        "tree_size": tree_size,
        "path": [p.hex() for p in path],
    }


def proof_member(leaf_index: int, tree_size: int, path: Sequence[bytes]) -> str:
    """`strictjson.member("proof", proof_json(…))` written directly, names in order (hex and
    these integers need no escape): `/record` writes one per token."""
    if max(abs(leaf_index), abs(tree_size)) > strictjson.MAX_SAFE_INTEGER:
        return strictjson.member("proof", proof_json(leaf_index, tree_size, path))
    hexes = '"' + '","'.join([p.hex() for p in path]) + '"' if path else ""
    return (
        f'"proof":{{"leaf_index":{leaf_index},"path":[{hexes}],'
        f'"tree_size":{tree_size},"type":"rfc9162-sha256"}}'
    )
