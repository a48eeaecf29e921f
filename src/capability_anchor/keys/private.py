"""The Ed25519 private key and its file (`SigningKey`, `create_key_file`, `load_key_file`):
created 0600 by `os.open` itself, never overwritten, refused when others may read it."""

from __future__ import annotations

import json
import os
import stat

import nacl.bindings
import nacl.exceptions
import nacl.signing

from capability_anchor import strictjson
from capability_anchor.encoding import EncodingError, b64url_decode, b64url_encode
from capability_anchor.errors import InvalidKey, KeyFileError, SignatureMismatch
from capability_anchor.files import write_secret_file

from .public import ED25519_KEY_SIZE, ED25519_SIGNATURE_SIZE, PublicKey

# A private key file is a few hundred bytes; refuse to read more than this so a wrong path
# (a log file, a device) fails fast instead of being slurped into memory.
_MAX_KEY_FILE_SIZE = 64 * 1024

# Members a private key file may carry. We write exactly kty, crv, x, d, kid; `use` and
# `alg` are tolerated (with their only sensible values) so a JWK made by another tool loads.
_KEY_FILE_MEMBERS = frozenset({"kty", "crv", "x", "d", "kid", "use", "alg"})


class SigningKey:
    """An Ed25519 private key (libsodium). Its repr names only the kid, never the seed."""

    __slots__ = ("_key", "_public", "_secret")

    def __init__(self, key: nacl.signing.SigningKey) -> None:
        if not isinstance(key, nacl.signing.SigningKey):
            raise InvalidKey("SigningKey wraps a nacl.signing.SigningKey")
        self._key = key
        self._public = PublicKey.from_raw(bytes(key.verify_key))
        # libsodium's 64-byte secret key, so that `sign` calls it without PyNaCl's wrapping.
        self._secret = nacl.bindings.crypto_sign_seed_keypair(bytes(key))[1]

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
        signed = nacl.bindings.crypto_sign(bytes(message), self._secret)  # signature + message
        if len(signed) != ED25519_SIGNATURE_SIZE + len(message):  # pragma: no cover - libsodium
            raise SignatureMismatch("libsodium returned a signature of the wrong size")
        return signed[:ED25519_SIGNATURE_SIZE]

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
    """Generate a key and write it to a new owner-only file `path` (`files.write_secret_file`)."""
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
    """Open without a race or a FIFO hang, check type and mode, read at most the size cap + 1."""
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
    """Load a private Ed25519 JWK file: refused when others may read it or its members disagree."""
    name = os.fspath(path)
    jwk = _private_jwk_of(name, _read_private_file(name))
    key = SigningKey.from_seed(_seed_of(name, jwk["d"]))
    if jwk["x"] != key.public.x:
        raise _file_error(
            name, f"x {jwk['x']!r} is not the public key of d (d gives {key.public.x})"
        )
    if "kid" in jwk and jwk["kid"] != key.kid:
        raise _file_error(name, f"kid {jwk['kid']!r} is not the RFC 7638 thumbprint {key.kid}")
    return key


def _private_jwk_of(name: str, data: bytes) -> dict[str, object]:
    """The file's JSON object, with exactly an Ed25519 private JWK's members (`d`, `x` later)."""
    if len(data) > _MAX_KEY_FILE_SIZE:
        raise _file_error(name, f"is larger than {_MAX_KEY_FILE_SIZE} bytes; not a key file")
    jwk = strictjson.load_object(
        data,
        f"key file {name}",
        error=KeyFileError,
        not_object="{what}: is not a JSON object (expected a private OKP JWK)",
        invalid="{what}: is not valid JSON: {detail}",
    )
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
    return jwk


def _seed_of(name: str, d: object) -> bytes:
    try:
        seed = b64url_decode(d) if isinstance(d, str) else None
    except EncodingError:
        seed = None
    # The message never echoes `d`: it is the secret.
    if seed is None or len(seed) != ED25519_KEY_SIZE:
        raise _file_error(name, "d is not canonical base64url of a 32-byte Ed25519 seed")
    return seed
