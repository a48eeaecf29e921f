"""C2SP signed-note: key IDs, vkeys, the note format, signing and opening. Parsing rejects all the
format does not allow; `open_note` ignores signatures by unknown keys, requires every known key's
signature to verify, and at least one to exist."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Protocol

from capability_anchor.errors import (
    MalformedNote,
    MalformedVKey,
    NoteSignatureError,
    SignatureMismatch,
)
from capability_anchor.keys import ED25519_KEY_SIZE, PublicKey, SigningKey

TYPE_ED25519 = 0x01
TYPE_COSIGNATURE_V1 = 0x04
EM_DASH = "\u2014"
_SIGNATURE_PREFIX = EM_DASH + " "

# signed-note: verifiers MUST accept at least 16 signatures; golang.org/x/mod's note
# package refuses more than 100, and so do we. A note past MAX_NOTE_SIZE is refused before
# any parsing, so a hostile peer cannot make us split megabytes of lines.
MAX_SIGNATURES = 100
MAX_NOTE_SIZE = 1024 * 1024


def b64encode(data: bytes) -> str:
    """Standard base64 with padding (RFC 4648 §4), as every C2SP text uses it."""
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str, what: str) -> bytes:
    """Strict standard base64: padded, no whitespace, the one canonical spelling."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise MalformedNote(f"{what} is not standard padded base64: {text[:80]!r}") from None
    if b64encode(raw) != text:
        raise MalformedNote(f"{what} is not canonical base64: {text[:80]!r}")
    return raw


def _surrogate(ch: str) -> bool:
    return 0xD800 <= ord(ch) <= 0xDFFF  # a str that no UTF-8 text can hold


def check_key_name(name: str) -> str:
    """A key name is non-empty, has no Unicode space, no `+` and no control character."""
    if not isinstance(name, str) or not name:
        raise MalformedNote("a key name must be a non-empty string")
    for ch in name:
        if ch.isspace() or ch == "+" or ord(ch) < 0x20 or ch == "\x7f" or _surrogate(ch):
            raise MalformedNote(f"key name {name!r} contains {ch!r}")
    return name


def key_id(name: str, key_type: int, public_key: bytes) -> bytes:
    """SHA-256(name || 0x0A || type || public key)[:4], the signed-note key ID."""
    check_key_name(name)
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([key_type]) + public_key)
    return digest.digest()[:4]


# --- signatures and notes -----------------------------------------------------------------


@dataclass(frozen=True)
class Signature:
    """One signature line: the key name, the 4-byte key ID and the signature after it."""

    name: str
    key_id: bytes
    signature: bytes

    def __post_init__(self) -> None:
        check_key_name(self.name)
        if len(self.key_id) != 4:
            raise MalformedNote(f"a key ID is 4 bytes, got {len(self.key_id)}")
        if not self.signature:
            raise MalformedNote(f"the signature by {self.name} is empty")

    def line(self) -> str:
        return f"{_SIGNATURE_PREFIX}{self.name} {b64encode(self.key_id + self.signature)}\n"


def _check_text(text: str, what: str) -> None:
    if not isinstance(text, str) or any(_surrogate(ch) for ch in text):
        raise MalformedNote(f"{what} must be text that UTF-8 can encode")
    if not text.endswith("\n"):
        raise MalformedNote(f"{what} must end in a newline")
    for ch in text:
        if ord(ch) < 0x20 and ch != "\n":
            raise MalformedNote(f"{what} contains the control character {ch!r}")


@dataclass(frozen=True)
class Note:
    """A parsed note: its text (final newline included) and its signatures in order."""

    text: str
    signatures: tuple[Signature, ...]

    def __post_init__(self) -> None:
        _check_text(self.text, "the note text")
        if not self.signatures:
            raise MalformedNote("a signed note has at least one signature line")
        if len(self.signatures) > MAX_SIGNATURES:
            raise MalformedNote(f"more than {MAX_SIGNATURES} signatures")

    def to_bytes(self) -> bytes:
        return (self.text + "\n" + "".join(s.line() for s in self.signatures)).encode("utf-8")


def _parse_signature_line(line: str, number: int) -> Signature:
    where = f"signature line {number}"
    if not line.startswith(_SIGNATURE_PREFIX):
        raise MalformedNote(f"{where} does not start with an em dash (U+2014) and a space")
    parts = line[len(_SIGNATURE_PREFIX) :].split(" ")
    if len(parts) != 2:
        raise MalformedNote(f"{where} is not '— <key name> <base64 signature>'")
    name, encoded = parts
    try:
        check_key_name(name)
    except MalformedNote as exc:
        raise MalformedNote(f"{where}: {exc}") from None
    blob = b64decode(encoded, f"{where}'s signature")
    if len(blob) < 5:
        raise MalformedNote(f"{where}: a signature is a 4-byte key ID and at least one byte")
    return Signature(name=name, key_id=blob[:4], signature=blob[4:])


def parse_note(data: bytes) -> Note:
    """The note in `data`, or MalformedNote naming the first rule it breaks."""
    if not isinstance(data, bytes):
        raise MalformedNote("a note is bytes")
    if len(data) > MAX_NOTE_SIZE:
        raise MalformedNote(f"a note is at most {MAX_NOTE_SIZE} bytes")
    try:
        whole = data.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedNote("a note must be valid UTF-8") from None
    _check_text(whole, "a signed note")
    # The text ends at the last blank line; signature lines are never empty, so that is the
    # last "\n\n" of the note.
    split = whole.rfind("\n\n")
    if split < 0:
        raise MalformedNote("a signed note has a blank line before its signatures")
    text, block = whole[: split + 1], whole[split + 2 :]
    lines = block.split("\n")[:-1]  # the block ends in "\n" (checked above)
    if len(lines) > MAX_SIGNATURES:
        raise MalformedNote(f"more than {MAX_SIGNATURES} signatures")
    signatures = tuple(_parse_signature_line(line, n) for n, line in enumerate(lines, 1))
    return Note(text=text, signatures=signatures)


# --- keys ---------------------------------------------------------------------------------


class Verifier(Protocol):
    """A known key: its name and key ID, and the check of one signature over a note text."""

    @property
    def name(self) -> str: ...

    @property
    def key_id(self) -> bytes: ...

    def verify(self, text: bytes, signature: bytes) -> None:
        """Raise NoteSignatureError unless `signature` is this key's over `text`."""


def _ed25519_key(public_key: bytes, what: str) -> PublicKey:
    if len(public_key) != ED25519_KEY_SIZE:
        raise MalformedVKey(f"{what}: an Ed25519 key is 32 bytes, got {len(public_key)}")
    return PublicKey.from_raw(public_key)


@dataclass(frozen=True)
class NoteVerifier:
    """An Ed25519 note key (type 0x01): the signature is Ed25519 over the note text."""

    name: str
    public_key: bytes
    key_type: ClassVar[int] = TYPE_ED25519

    def __post_init__(self) -> None:
        check_key_name(self.name)
        _ed25519_key(self.public_key, self.name)

    @property
    def key_id(self) -> bytes:
        return key_id(self.name, self.key_type, self.public_key)

    def vkey(self) -> str:
        return format_vkey(self.name, self.key_type, self.public_key)

    def verify(self, text: bytes, signature: bytes) -> None:
        self._ed25519(text, signature, "signature")

    def _ed25519(self, message: bytes, signature: bytes, what: str) -> None:
        try:
            _ed25519_key(self.public_key, self.name).verify(message, signature)
        except SignatureMismatch as exc:
            who = f"{self.name}+{self.key_id.hex()}"
            raise NoteSignatureError(f"the {what} by {who} does not verify: {exc}") from None


@dataclass(frozen=True)
class NoteSigner:
    """An Ed25519 note signer: the log's `SigningKey` under a key name."""

    name: str
    key: SigningKey

    def __post_init__(self) -> None:
        check_key_name(self.name)

    @property
    def verifier(self) -> NoteVerifier:
        return NoteVerifier(self.name, self.key.public.raw)

    def signature(self, text: str) -> Signature:
        _check_text(text, "the note text")
        raw = self.key.sign(text.encode("utf-8"))
        return Signature(name=self.name, key_id=self.verifier.key_id, signature=raw)


def format_vkey(name: str, key_type: int, public_key: bytes) -> str:
    """`<name>+<8 lowercase hex key ID>+<base64(type || public key)>`."""
    ident = key_id(name, key_type, public_key).hex()
    return f"{name}+{ident}+{b64encode(bytes([key_type]) + public_key)}"


@dataclass(frozen=True)
class VKey:
    """A parsed verifier key: name, key ID, signature type and the public key bytes."""

    name: str
    key_id: bytes
    key_type: int
    public_key: bytes

    def text(self) -> str:
        return format_vkey(self.name, self.key_type, self.public_key)


_HEX = frozenset("0123456789abcdef")


def parse_vkey(text: str) -> VKey:
    """A vkey, strictly: a valid name, its exact key ID, canonical base64, type 0x01 or 0x04."""
    if not isinstance(text, str):
        raise MalformedVKey("a vkey is a string")
    # The name has no '+' and the hex none, so the first two '+' split the three parts;
    # base64 may contain '+' itself.
    parts = text.split("+", 2)
    if len(parts) != 3:
        raise MalformedVKey(f"a vkey is <name>+<hex key ID>+<base64 key>, got {text[:80]!r}")
    name, ident, encoded = parts
    try:
        check_key_name(name)
        material = b64decode(encoded, "the vkey's key")
    except MalformedNote as exc:
        raise MalformedVKey(f"vkey {text[:80]!r}: {exc}") from None
    if len(ident) != 8 or not set(ident) <= _HEX:
        raise MalformedVKey(f"vkey {name}: the key ID must be 8 lowercase hex digits")
    if len(material) < 2:
        raise MalformedVKey(f"vkey {name}: no key after the type byte")
    key_type, public_key = material[0], material[1:]
    if key_type not in (TYPE_ED25519, TYPE_COSIGNATURE_V1):
        raise MalformedVKey(f"vkey {name}: signature type 0x{key_type:02x} is not supported")
    _ed25519_key(public_key, f"vkey {name}")
    expected = key_id(name, key_type, public_key)
    if bytes.fromhex(ident) != expected:
        raise MalformedVKey(f"vkey {name}: key ID {ident} is not {expected.hex()}")
    return VKey(name=name, key_id=expected, key_type=key_type, public_key=public_key)


def note_verifier(vkey: str) -> NoteVerifier:
    """The Ed25519 note verifier of a type 0x01 vkey."""
    parsed = parse_vkey(vkey)
    if parsed.key_type != TYPE_ED25519:
        raise MalformedVKey(f"vkey {parsed.name} is not an Ed25519 note key (type 0x01)")
    return NoteVerifier(parsed.name, parsed.public_key)


# --- signing and opening ------------------------------------------------------------------


def sign_note(text: str, *signers: NoteSigner) -> bytes:
    """The signed note: `text`, a blank line, one signature line per signer in order."""
    return Note(text=text, signatures=tuple(s.signature(text) for s in signers)).to_bytes()


@dataclass(frozen=True)
class OpenedNote:
    """A note whose known signatures verified (`verified`: one or more; `ignored`: unknown)."""

    note: Note
    verified: tuple[Signature, ...]
    ignored: tuple[Signature, ...]


def open_note(data: bytes | Note, verifiers: Iterable[Verifier]) -> OpenedNote:
    """Parse and verify against the known keys; a known key's bad or repeated signature fails."""
    note = data if isinstance(data, Note) else parse_note(data)
    known: dict[tuple[str, bytes], Verifier] = {}
    for key in verifiers:
        ident = (key.name, bytes(key.key_id))
        if ident in known:
            # Which of two keys with one name and ID verifies would be up to us.
            raise MalformedVKey(f"two known keys are named {key.name}+{ident[1].hex()}")
        known[ident] = key
    text = note.text.encode("utf-8")
    verified: list[Signature] = []
    ignored: list[Signature] = []
    for sig in note.signatures:
        verifier = known.get((sig.name, sig.key_id))
        if verifier is None:
            ignored.append(sig)
            continue
        if any(v.name == sig.name and v.key_id == sig.key_id for v in verified):
            raise NoteSignatureError(f"{sig.name}+{sig.key_id.hex()} signed the note twice")
        verifier.verify(text, sig.signature)
        verified.append(sig)
    if not verified:
        names = ", ".join(f"{n}+{i.hex()}" for n, i in known) or "none"
        raise NoteSignatureError(f"no signature by a known key (known: {names})")
    return OpenedNote(note=note, verified=tuple(verified), ignored=tuple(ignored))
