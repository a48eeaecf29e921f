"""C2SP tlog-cosignature, Ed25519 `cosignature/v1` (type 0x04): `timestamp (u64 BE) || signature`
over `cosignature/v1\\ntime <t>\\n` and the checkpoint; type 0x04 gives a witness's cosigning key an
ID apart from its note key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from capability_anchor.errors import MalformedNote, MalformedVKey, NoteSignatureError
from capability_anchor.keys import ED25519_SIGNATURE_SIZE, SigningKey

from .signed import (
    TYPE_COSIGNATURE_V1,
    TYPE_ED25519,
    NoteVerifier,
    Signature,
    check_key_name,
    parse_vkey,
)

HEADER = b"cosignature/v1\n"
TIMESTAMP_SIZE = 8
COSIGNATURE_SIZE = TIMESTAMP_SIZE + ED25519_SIGNATURE_SIZE
MAX_TIMESTAMP = 2**63 - 1


def signed_message(text: bytes, timestamp: int) -> bytes:
    """What a cosignature/v1 signs for the checkpoint note text `text`."""
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise MalformedNote("a cosignature timestamp is an integer")
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise MalformedNote(f"a cosignature timestamp is 0 to 2^63-1, got {timestamp}")
    return HEADER + b"time %d\n" % timestamp + text


def timestamp_of(signature: bytes) -> int:
    """The timestamp of a cosignature's signature bytes (after the key ID)."""
    if len(signature) != COSIGNATURE_SIZE:
        raise MalformedNote(
            f"a cosignature/v1 signature is {COSIGNATURE_SIZE} bytes, got {len(signature)}"
        )
    timestamp = int.from_bytes(signature[:TIMESTAMP_SIZE], "big")
    if timestamp > MAX_TIMESTAMP:
        raise MalformedNote(f"a cosignature timestamp is at most 2^63-1, got {timestamp}")
    return timestamp


@dataclass(frozen=True)
class CosignatureVerifier(NoteVerifier):
    """A witness's cosignature/v1 key: a `Verifier` for `open_note`."""

    key_type: ClassVar[int] = TYPE_COSIGNATURE_V1

    def verify(self, text: bytes, signature: bytes) -> None:
        try:
            timestamp = timestamp_of(signature)
        except MalformedNote as exc:
            who = f"{self.name}+{self.key_id.hex()}"
            raise NoteSignatureError(f"the cosignature by {who}: {exc}") from None
        message = signed_message(text, timestamp)
        self._ed25519(message, signature[TIMESTAMP_SIZE:], "cosignature")


def cosignature_verifier(vkey: str) -> CosignatureVerifier:
    """The cosignature/v1 verifier of a witness vkey (type 0x04, or 0x01 as x/mod gives)."""
    parsed = parse_vkey(vkey)
    if parsed.key_type not in (TYPE_ED25519, TYPE_COSIGNATURE_V1):  # pragma: no cover
        raise MalformedVKey(f"vkey {parsed.name} is not an Ed25519 key")
    return CosignatureVerifier(parsed.name, parsed.public_key)


@dataclass(frozen=True)
class Cosigner:
    """A witness's signing side (the witness server's, `capability-anchor witness`)."""

    name: str
    key: SigningKey

    def __post_init__(self) -> None:
        check_key_name(self.name)

    @property
    def verifier(self) -> CosignatureVerifier:
        return CosignatureVerifier(self.name, self.key.public.raw)

    def cosign(self, text: str, timestamp: int) -> Signature:
        """The cosignature line for the checkpoint note text `text` at `timestamp`."""
        if not text.endswith("\n"):
            raise MalformedNote("the checkpoint text must end in a newline")
        message = signed_message(text.encode("utf-8"), timestamp)
        raw = timestamp.to_bytes(TIMESTAMP_SIZE, "big") + self.key.sign(message)
        return Signature(name=self.name, key_id=self.verifier.key_id, signature=raw)
