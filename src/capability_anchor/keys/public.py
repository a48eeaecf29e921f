"""Ed25519 public keys: RFC 7638 key IDs, `PublicKey` and the trusted `KeySet`, each validated
when built, so holding one means it is well-formed."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import nacl.exceptions
import nacl.signing

from capability_anchor import strictjson
from capability_anchor.encoding import EncodingError, b64url_decode, b64url_encode
from capability_anchor.errors import (
    InvalidKey,
    MalformedJSON,
    MalformedKeySet,
    SignatureMismatch,
    UnknownKeyError,
)
from capability_anchor.strictjson import canonical

ED25519_KEY_SIZE = 32
ED25519_SIGNATURE_SIZE = 64


# --- RFC 7638 -------------------------------------------------------------------------------


def _decode_x(x_b64: object) -> bytes:
    """Decode an OKP `x`: canonical unpadded base64url of exactly 32 bytes, else InvalidKey."""
    if not isinstance(x_b64, str):
        raise InvalidKey(f"x must be a base64url string, got {type(x_b64).__name__}")
    try:
        raw = b64url_decode(x_b64)
    except EncodingError as exc:
        raise InvalidKey(f"x {x_b64!r} is not canonical base64url: {exc}") from None
    if len(raw) != ED25519_KEY_SIZE:
        raise InvalidKey(f"x must encode {ED25519_KEY_SIZE} bytes, got {len(raw)}")
    return raw


def thumbprint(x_b64: str) -> str:
    """RFC 7638 thumbprint (the `kid`) of the key `x`, checked first: one key never has two kids."""
    _decode_x(x_b64)
    canonical = '{"crv":"Ed25519","kty":"OKP","x":"' + x_b64 + '"}'
    return b64url_encode(hashlib.sha256(canonical.encode("ascii")).digest())


# --- public key ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PublicKey:
    """An Ed25519 public key with its base64url `x` and its `kid`, validated on construction.
    `thumbprint_kid=False` (only from `KeySet.from_jwks`) is a key a trusted JWK Set names by
    another kid."""

    raw: bytes
    kid: str
    x: str
    thumbprint_kid: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.raw, bytes) or len(self.raw) != ED25519_KEY_SIZE:
            raise InvalidKey(f"an Ed25519 public key is {ED25519_KEY_SIZE} bytes")
        if self.x != b64url_encode(self.raw):
            raise InvalidKey("x does not spell the public key bytes")
        if self.thumbprint_kid:
            if self.kid != thumbprint(self.x):
                raise InvalidKey(f"kid {self.kid!r} is not the RFC 7638 thumbprint of x")
        elif not isinstance(self.kid, str) or not self.kid:
            raise InvalidKey("kid must be a non-empty string")
        elif self.kid == thumbprint(self.x):
            # One form per key: a kid that is the thumbprint is a thumbprint kid.
            raise InvalidKey("a kid that is the RFC 7638 thumbprint has thumbprint_kid=True")

    @property
    def thumbprint(self) -> str:
        """The RFC 7638 thumbprint of the key (its kid unless `thumbprint_kid` is False)."""
        return self.kid if self.thumbprint_kid else thumbprint(self.x)

    @classmethod
    def from_raw(cls, raw: bytes) -> PublicKey:
        """The public key with these 32 bytes."""
        if not isinstance(raw, bytes) or len(raw) != ED25519_KEY_SIZE:
            raise InvalidKey(f"an Ed25519 public key is {ED25519_KEY_SIZE} bytes")
        x = b64url_encode(raw)
        return cls(raw=raw, kid=thumbprint(x), x=x)

    @classmethod
    def from_x(cls, x_b64: str) -> PublicKey:
        """The public key whose JWK `x` is this (canonical base64url, else InvalidKey)."""
        return cls.from_raw(_decode_x(x_b64))

    def jwk(self) -> dict[str, str]:
        """The public JWK as published in `keys.json` and the discovery document."""
        return {
            "kty": "OKP",
            "crv": "Ed25519",
            "x": self.x,
            "kid": self.kid,
            "use": "sig",
            "alg": "EdDSA",
        }

    def verify(self, message: bytes, signature: bytes) -> None:
        """Check a detached Ed25519 signature; any libsodium failure is a SignatureMismatch."""
        if len(signature) != ED25519_SIGNATURE_SIZE:
            raise SignatureMismatch(
                f"an Ed25519 signature is {ED25519_SIGNATURE_SIZE} bytes, got {len(signature)}"
            )
        try:
            nacl.signing.VerifyKey(self.raw).verify(bytes(message), bytes(signature))
        except nacl.exceptions.CryptoError as exc:
            raise SignatureMismatch(
                f"Ed25519 signature does not verify with key {self.kid} ({exc})"
            ) from None


# --- trusted key set -----------------------------------------------------------------------


def _public_key_from_jwk(jwk: object, position: int, *, require_thumbprints: bool) -> PublicKey:
    where = f"key #{position}"
    if not isinstance(jwk, dict):
        raise InvalidKey(f"{where} is not a JSON object")
    if "d" in jwk:
        # Private material in a trust file means the file leaked a key; never accept it.
        raise InvalidKey(f"{where} contains private key material (d); publish public keys only")
    if jwk.get("kty") != "OKP":
        raise InvalidKey(f"{where}: kty is {jwk.get('kty')!r}, expected 'OKP'")
    if jwk.get("crv") != "Ed25519":
        raise InvalidKey(f"{where}: crv is {jwk.get('crv')!r}, expected 'Ed25519'")
    if "x" not in jwk:
        raise InvalidKey(f"{where}: missing x")
    try:
        key = PublicKey.from_x(jwk["x"])
    except InvalidKey as exc:
        raise InvalidKey(f"{where}: {exc}") from None
    if "use" in jwk and jwk["use"] != "sig":
        raise InvalidKey(f"{where}: use is {jwk['use']!r}, expected 'sig'")
    if "alg" in jwk and jwk["alg"] != "EdDSA":
        raise InvalidKey(f"{where}: alg is {jwk['alg']!r}, expected 'EdDSA'")
    if "kid" in jwk and jwk["kid"] != key.kid:
        kid = jwk["kid"]
        if require_thumbprints:
            raise InvalidKey(
                f"{where}: kid {kid!r} is not the RFC 7638 thumbprint of x ({key.kid})"
            )
        if not isinstance(kid, str) or not kid:
            raise InvalidKey(f"{where}: kid must be a non-empty string, got {kid!r}")
        return PublicKey(raw=key.raw, kid=kid, x=key.x, thumbprint_kid=False)
    return key


class KeySet:
    """The trusted Ed25519 public keys, by kid; immutable, never empty."""

    __slots__ = ("_keys",)

    def __init__(self, keys: Iterable[PublicKey]) -> None:
        by_kid: dict[str, PublicKey] = {}
        for key in keys:
            if not isinstance(key, PublicKey):
                raise InvalidKey(f"a KeySet holds PublicKey objects, got {type(key).__name__}")
            if key.kid in by_kid:
                if by_kid[key.kid].raw != key.raw:
                    # A kid must name one key, or which one verifies would be up to us.
                    raise InvalidKey(f"kid {key.kid!r} names two different keys")
                raise InvalidKey(f"key {key.kid} is listed twice")
            by_kid[key.kid] = key
        if not by_kid:
            raise InvalidKey("the key set is empty; it would trust nothing")
        self._keys: Mapping[str, PublicKey] = dict(sorted(by_kid.items()))

    @classmethod
    def of(cls, *public_keys: PublicKey) -> KeySet:
        return cls(public_keys)

    @classmethod
    def from_jwks(cls, obj: object, *, require_thumbprints: bool = False) -> KeySet:
        """A JWK Set's keys; a non-thumbprint kid is kept unless `require_thumbprints`."""
        if not isinstance(obj, dict):
            raise InvalidKey("a JWK set must be a JSON object with a 'keys' array")
        keys = obj.get("keys")
        if not isinstance(keys, list):
            raise InvalidKey("a JWK set must have a 'keys' array")
        return cls(
            _public_key_from_jwk(jwk, i, require_thumbprints=require_thumbprints)
            for i, jwk in enumerate(keys)
        )

    @classmethod
    def from_json(cls, data: bytes | str, *, require_thumbprints: bool = False) -> KeySet:
        """Parse a JWK Set document strictly; malformed JSON is `MalformedKeySet`."""
        try:
            obj = strictjson.loads(data)
        except MalformedJSON as exc:
            raise MalformedKeySet(f"JWK set is not valid JSON: {exc}") from None
        return cls.from_jwks(obj, require_thumbprints=require_thumbprints)

    @property
    def non_thumbprint_keys(self) -> tuple[PublicKey, ...]:
        """The keys trusted under a kid that is not their RFC 7638 thumbprint."""
        return tuple(key for key in self._keys.values() if not key.thumbprint_kid)

    def get(self, kid: str) -> PublicKey:
        """The trusted key with this kid; UnknownKeyError when it is not trusted."""
        key = self._keys.get(kid) if isinstance(kid, str) else None
        if key is None:
            raise UnknownKeyError(
                f"kid {kid!r} is not in the trusted key set (trusted: {', '.join(self._keys)})"
            )
        return key

    @property
    def kids(self) -> tuple[str, ...]:
        return tuple(self._keys)

    def jwks(self) -> dict[str, list[dict[str, str]]]:
        """The JWK Set, keys sorted by kid so its bytes are stable."""
        return {"keys": [key.jwk() for key in self._keys.values()]}

    def to_json(self) -> bytes:
        """The JWK Set as RFC 8785 bytes (no trailing newline)."""
        return canonical(self.jwks())

    def __contains__(self, kid: object) -> bool:
        return kid in self._keys

    def __iter__(self) -> Iterator[PublicKey]:
        return iter(self._keys.values())

    def __len__(self) -> int:
        return len(self._keys)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KeySet):
            return NotImplemented
        return dict(self._keys) == dict(other._keys)

    def __hash__(self) -> int:
        return hash(tuple(self._keys))

    def __repr__(self) -> str:
        return f"KeySet(kids={list(self._keys)!r})"
