"""C2SP tlog-checkpoint (`<origin>\\n<size>\\n<base64 root>\\n`) and the SPEC §12.2 origin of a
public URL. Extension lines are read and kept verbatim (they are signed); `sign_checkpoint` refuses
them, and size 0, which SPEC §12.2 never signs."""

from __future__ import annotations

from dataclasses import dataclass

from capability_anchor.errors import MalformedNote, UsageError
from capability_anchor.record.urls import split_http_url

from .signed import (
    Note,
    NoteSigner,
    OpenedNote,
    Verifier,
    b64decode,
    b64encode,
    check_key_name,
    open_note,
    parse_note,
)

ROOT_SIZE = 32
HISTORY_SUFFIX = "/history"


def parse_size(text: str, what: str = "the tree size") -> int:
    """ASCII decimal with no leading zero (`0` itself is allowed)."""
    if not text or not text.isascii() or not text.isdigit():
        raise MalformedNote(f"{what} is not an ASCII decimal: {text[:40]!r}")
    if text != "0" and text.startswith("0"):
        raise MalformedNote(f"{what} has a leading zero: {text[:40]!r}")
    if len(text) > 20 or int(text) >= 2**64:
        raise MalformedNote(f"{what} does not fit in 64 bits: {text[:40]!r}")
    return int(text)


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint's body, built only valid (origin, 64-bit size, 32-byte root, extensions)."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.origin, str) or not self.origin:
            raise MalformedNote("a checkpoint's origin is a non-empty line")
        if "\n" in self.origin or any(ord(c) < 0x20 for c in self.origin):
            raise MalformedNote("a checkpoint's origin has no control characters")
        if isinstance(self.size, bool) or not isinstance(self.size, int):
            raise MalformedNote("a checkpoint's size is an integer")
        if not 0 <= self.size < 2**64:
            raise MalformedNote(f"a checkpoint's size is a 64-bit unsigned integer: {self.size}")
        if not isinstance(self.root, bytes) or len(self.root) != ROOT_SIZE:
            size = len(self.root) if isinstance(self.root, bytes) else "not bytes"
            raise MalformedNote(f"a checkpoint's root is {ROOT_SIZE} bytes, got {size}")
        for line in self.extensions:
            if not line or any(ord(c) < 0x20 for c in line):
                raise MalformedNote("an extension line is non-empty, without control chars")

    def text(self) -> str:
        """The note text, each line ending in a newline."""
        lines = (self.origin, str(self.size), b64encode(self.root), *self.extensions)
        return "".join(line + "\n" for line in lines)


def parse_checkpoint(text: str) -> Checkpoint:
    """The checkpoint whose note text is `text` (at least three non-empty lines)."""
    if not text.endswith("\n"):
        raise MalformedNote("a checkpoint's text ends in a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise MalformedNote(f"a checkpoint has at least 3 lines, got {len(lines)}")
    if any(not line for line in lines):
        raise MalformedNote("a checkpoint has no empty line")
    origin, size, root = lines[0], parse_size(lines[1]), b64decode(lines[2], "the root hash")
    if len(root) != ROOT_SIZE:
        raise MalformedNote(f"a checkpoint's root is {ROOT_SIZE} bytes, got {len(root)}")
    return Checkpoint(origin=origin, size=size, root=root, extensions=tuple(lines[3:]))


def sign_checkpoint(checkpoint: Checkpoint, signer: NoteSigner) -> bytes:
    """The checkpoint note as SPEC §12.2 signs it: no extensions, size >= 1, named the origin."""
    if checkpoint.extensions:
        raise UsageError("this log writes no checkpoint extension lines (SPEC §12.2)")
    if checkpoint.size < 1:
        raise UsageError("a checkpoint of size 0 is never signed (SPEC §12.2)")
    if signer.name != checkpoint.origin:
        raise UsageError(f"key name {signer.name!r} is not the origin {checkpoint.origin!r}")
    text = checkpoint.text()
    return Note(text=text, signatures=(signer.signature(text),)).to_bytes()


@dataclass(frozen=True)
class OpenedCheckpoint:
    checkpoint: Checkpoint
    opened: OpenedNote


def open_checkpoint(
    data: bytes | Note, verifiers: list[Verifier], *, origin: str | None = None
) -> OpenedCheckpoint:
    """Verify a checkpoint note with the known keys, then parse its body (of `origin`, if given)."""
    note = data if isinstance(data, Note) else parse_note(data)
    checkpoint = parse_checkpoint(note.text)
    if origin is not None and checkpoint.origin != origin:
        raise MalformedNote(f"the checkpoint's origin is {checkpoint.origin!r}, not {origin!r}")
    return OpenedCheckpoint(checkpoint=checkpoint, opened=open_note(note, verifiers))


def origin_from_url(public_url: str) -> str:
    """SPEC §12.2: the public URL without scheme and trailing slash, plus `/history`."""
    parts = split_http_url(public_url, path=True)
    if parts is None:
        raise UsageError(f"a public URL is http(s)://host[:port][/path], got {public_url!r}")
    origin = f"{parts.netloc}{parts.path.rstrip('/')}{HISTORY_SUFFIX}"
    try:
        return check_key_name(origin)
    except MalformedNote as exc:
        raise UsageError(f"public URL {public_url!r} gives no valid origin: {exc}") from None
