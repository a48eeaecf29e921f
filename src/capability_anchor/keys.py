"""Ed25519 keys: RFC 7638 key IDs, the private key file, and the trusted public key set.

All cryptography is PyNaCl (libsodium); this module only moves bytes in and out of JWKs.

- `thumbprint(x)` is the RFC 7638 `kid` of an OKP Ed25519 public key. The RFC's canonical
  input for OKP keys is the JSON object of the required members `crv`, `kty`, `x` in
  lexicographic order with no whitespace; `x` is base64url, which never needs escaping,
  so the bytes are built directly and cannot drift with a JSON library's settings.
- `PublicKey` and `KeySet` validate when they are built: holding one means it is a
  well-formed Ed25519 key whose `kid` is its thumbprint, unless `thumbprint_kid` is False.
  Only `KeySet.from_jwks` makes such a key, for a verifier's trusted key set: Capability
  Resolution §8 says a kid SHOULD be the thumbprint, so another resolver's key set may name
  a key otherwise, and it is matched by the kid the set gives. Keys this project creates
  (`from_raw`, `from_x`, `SigningKey`) and loads for its own log (`require_thumbprints`)
  always have thumbprint kids.
- The private key file is a private OKP JWK. It is created with mode 0600 by `os.open`
  itself (never chmod-ed after the secret is on disk, which would leave a window where
  it is readable), never overwritten, and refused on load when group or others have any
  permission bit: a key that others could read must be assumed copied.

Trust comes only from a `KeySet` the caller built from files it chose; nothing in a token
or a document adds a key to it.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import nacl.exceptions
import nacl.signing
import rfc8785

from . import strictjson
from .encoding import EncodingError, b64url_decode, b64url_encode
from .errors import (
    InvalidKey,
    KeyFileError,
    MalformedJSON,
    MalformedKeySet,
    SignatureMismatch,
    UnknownKeyError,
)
from .files import write_secret_file

__all__ = [
    "ED25519_KEY_SIZE",
    "ED25519_SIGNATURE_SIZE",
    "KeySet",
    "PublicKey",
    "SigningKey",
    "create_key_file",
    "load_key_file",
    "thumbprint",
]

ED25519_KEY_SIZE = 32
ED25519_SIGNATURE_SIZE = 64

# A private key file is a few hundred bytes; refuse to read more than this so a wrong path
# (a log file, a device) fails fast instead of being slurped into memory.
_MAX_KEY_FILE_SIZE = 64 * 1024

# Members a private key file may carry. We write exactly kty, crv, x, d, kid; `use` and
# `alg` are tolerated (with their only sensible values) so a JWK made by another tool loads.
_KEY_FILE_MEMBERS = frozenset({"kty", "crv", "x", "d", "kid", "use", "alg"})


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
    """RFC 7638 thumbprint (the `kid`) of the OKP Ed25519 public key with this `x`.

    SHA-256 over the exact bytes `{"crv":"Ed25519","kty":"OKP","x":"<x>"}`. `x` is checked
    first (canonical base64url of 32 bytes, else InvalidKey) because a second spelling of
    the same key would otherwise get a second kid.
    """
    _decode_x(x_b64)
    canonical = '{"crv":"Ed25519","kty":"OKP","x":"' + x_b64 + '"}'
    return b64url_encode(hashlib.sha256(canonical.encode("ascii")).digest())


# --- public key ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PublicKey:
    """An Ed25519 public key with its base64url `x` and its `kid`.

    Validated on construction (`raw` is 32 bytes, `x` spells it, `kid` is its RFC 7638
    thumbprint), so code holding a PublicKey never re-checks. Build one with `from_raw` or
    `from_x`. `thumbprint_kid=False` (made only by `KeySet.from_jwks` for a verifier's
    key set) is a key whose kid, a non-empty string, was given by a trusted JWK Set and is
    not its thumbprint; `thumbprint` is then still the key's RFC 7638 thumbprint.
    """

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
        """Check a detached Ed25519 signature; raise SignatureMismatch, never return a bool.

        Any libsodium failure (bad signature, wrong length, a key libsodium refuses) is a
        mismatch: the caller only needs to know the statement is not vouched for.
        """
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


# --- signing key ---------------------------------------------------------------------------


class SigningKey:
    """An Ed25519 private key (libsodium). Its repr names only the kid, never the seed."""

    __slots__ = ("_key", "_public")

    def __init__(self, key: nacl.signing.SigningKey) -> None:
        if not isinstance(key, nacl.signing.SigningKey):
            raise InvalidKey("SigningKey wraps a nacl.signing.SigningKey")
        self._key = key
        self._public = PublicKey.from_raw(bytes(key.verify_key))

    @classmethod
    def generate(cls) -> SigningKey:
        """A fresh key from the OS random source (libsodium's randombytes)."""
        return cls(nacl.signing.SigningKey.generate())

    @classmethod
    def from_seed(cls, seed: bytes) -> SigningKey:
        """The key with this 32-byte seed (the JWK `d`, RFC 8037 §2)."""
        if not isinstance(seed, bytes) or len(seed) != ED25519_KEY_SIZE:
            raise InvalidKey(f"an Ed25519 private key seed is {ED25519_KEY_SIZE} bytes")
        return cls(nacl.signing.SigningKey(seed))

    @property
    def public(self) -> PublicKey:
        return self._public

    @property
    def kid(self) -> str:
        return self._public.kid

    def sign(self, message: bytes) -> bytes:
        """The 64-byte detached Ed25519 signature of `message` (deterministic, RFC 8032)."""
        signature = self._key.sign(bytes(message)).signature
        if len(signature) != ED25519_SIGNATURE_SIZE:  # pragma: no cover - libsodium contract
            raise SignatureMismatch("libsodium returned a signature of the wrong size")
        return bytes(signature)

    def _private_jwk(self) -> dict[str, str]:
        return {
            "kty": "OKP",
            "crv": "Ed25519",
            "x": self._public.x,
            "d": b64url_encode(bytes(self._key)),
            "kid": self._public.kid,
        }

    def __repr__(self) -> str:
        return f"SigningKey(kid={self.kid!r})"


# --- private key file ----------------------------------------------------------------------


def create_key_file(path: str | os.PathLike[str]) -> SigningKey:
    """Generate a key and write it to a new file `path` that only the owner can read
    (`files.write_secret_file`: created 0600, never overwriting anything)."""
    key = SigningKey.generate()
    content = (json.dumps(key._private_jwk(), separators=(",", ":")) + "\n").encode("ascii")
    try:
        write_secret_file(path, content)
    except FileExistsError:
        raise KeyFileError(f"refusing to overwrite existing key file {os.fspath(path)}") from None
    except OSError as exc:
        raise KeyFileError(f"cannot create key file {os.fspath(path)}: {exc.strerror}") from None
    return key


def _file_error(path: str, problem: str) -> KeyFileError:
    return KeyFileError(f"key file {path}: {problem}")


def _read_private_file(name: str) -> bytes:
    """Open, check type and mode on the open descriptor (so the file checked is the file
    read, with no race against a rename), then read at most _MAX_KEY_FILE_SIZE + 1 bytes.

    O_NONBLOCK keeps a FIFO planted at the path from hanging the open; it has no effect on
    reading a regular file, and anything else is refused before reading.
    """
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(name, flags)
    except OSError as exc:
        raise _file_error(name, f"cannot open: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _file_error(name, "is not a regular file")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise _file_error(
                name,
                f"mode is {mode:04o}; a private key must not be accessible to group or "
                f"others (run: chmod 600 {name})",
            )
        chunks: list[bytes] = []
        remaining = _MAX_KEY_FILE_SIZE + 1
        while remaining > 0:
            chunk = os.read(fd, remaining)
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise _file_error(name, f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)


def load_key_file(path: str | os.PathLike[str]) -> SigningKey:
    """Load the private key written by `create_key_file` (or any Ed25519 private OKP JWK).

    Refused when group or others have any permission bit (`st_mode & 0o077`), the message
    naming the path and the mode (e.g. 0644). Then `d` must be canonical base64url of 32
    bytes, `x` the public key of `d`, and `kid`, when present, its RFC 7638 thumbprint.
    """
    name = os.fspath(path)
    data = _read_private_file(name)
    if len(data) > _MAX_KEY_FILE_SIZE:
        raise _file_error(name, f"is larger than {_MAX_KEY_FILE_SIZE} bytes; not a key file")
    try:
        jwk = strictjson.loads(data)
    except MalformedJSON as exc:
        raise _file_error(name, f"is not valid JSON: {exc}") from None
    if not isinstance(jwk, dict):
        raise _file_error(name, "is not a JSON object (expected a private OKP JWK)")
    unknown = sorted(set(jwk) - _KEY_FILE_MEMBERS)
    if unknown:
        raise _file_error(name, f"unexpected member(s) {', '.join(unknown)}")
    for member in ("kty", "crv", "x", "d"):
        if member not in jwk:
            raise _file_error(name, f"missing member {member!r}")
    if jwk["kty"] != "OKP" or jwk["crv"] != "Ed25519":
        raise _file_error(name, f"not an Ed25519 key (kty={jwk['kty']!r}, crv={jwk['crv']!r})")
    if jwk.get("use", "sig") != "sig" or jwk.get("alg", "EdDSA") != "EdDSA":
        raise _file_error(name, "use must be 'sig' and alg 'EdDSA' when present")
    d = jwk["d"]
    try:
        seed = b64url_decode(d) if isinstance(d, str) else None
    except EncodingError:
        seed = None
    # The message never echoes `d`: it is the secret.
    if seed is None or len(seed) != ED25519_KEY_SIZE:
        raise _file_error(name, "d is not canonical base64url of a 32-byte Ed25519 seed")
    key = SigningKey.from_seed(seed)
    if jwk["x"] != key.public.x:
        raise _file_error(
            name, f"x {jwk['x']!r} is not the public key of d (d gives {key.public.x})"
        )
    if "kid" in jwk and jwk["kid"] != key.kid:
        raise _file_error(name, f"kid {jwk['kid']!r} is not the RFC 7638 thumbprint {key.kid}")
    return key


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
    """The trusted Ed25519 public keys, by kid. Immutable once built; never empty.

    A JWK's other members (RFC 7517 §4 says unknown ones are ignored) do not matter; the
    ones that could change what a key means are checked: kty, crv, x, kid, use, alg, and d
    (rejected outright).
    """

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
        """Build from a parsed JWK Set `{"keys": [...]}` (other top-level members ignored,
        so a discovery document's `keys` can be passed as `{"keys": doc["keys"]}`).

        A key whose `kid` is not its RFC 7638 thumbprint is trusted under that kid
        (`thumbprint_kid` False; see `non_thumbprint_keys`), as a verifier of another resolver's
        key set needs; `require_thumbprints=True` refuses it, for keys this project
        publishes or endorses itself."""
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
        """Parse a JWK Set document strictly (UTF-8, duplicate members rejected); malformed
        JSON is `MalformedKeySet` (an InvalidKey and a MalformedJSON)."""
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
        return bytes(rfc8785.dumps(self.jwks()))

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
