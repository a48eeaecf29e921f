"""C2SP tlog-proof (`c2sp.org/tlog-proof@v1`): an optional `extra` line, the entry's index, its
inclusion path (leaf's sibling first), a blank line and the checkpoint note verbatim. Parsing is
strict (path length exact for (index, size), index below size); it verifies nothing: the caller
opens the checkpoint with its keys and checks the path."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from capability_anchor.errors import MalformedNote
from capability_anchor.merkle.nodes import inclusion_path_length

from .checkpoint import ROOT_SIZE, Checkpoint, parse_checkpoint, parse_size
from .signed import MAX_NOTE_SIZE, Note, b64decode, b64encode, parse_note

HEADER = "c2sp.org/tlog-proof@v1"
MAX_PROOF_SIZE = MAX_NOTE_SIZE + 64 * 1024


@dataclass(frozen=True)
class TlogProof:
    """A tlog-proof; `note` is the checkpoint note's bytes exactly as they were given."""

    index: int
    path: tuple[bytes, ...]
    note: bytes
    extra: bytes | None = None

    def __post_init__(self) -> None:
        if self.extra is not None and not self.extra:
            raise MalformedNote("a tlog-proof's extra, when present, is not empty")
        if any(not isinstance(h, bytes) or len(h) != ROOT_SIZE for h in self.path):
            raise MalformedNote(f"each inclusion path hash is {ROOT_SIZE} bytes")
        checkpoint = self.checkpoint
        if isinstance(self.index, bool) or not isinstance(self.index, int):
            raise MalformedNote("a tlog-proof's index is an integer")
        if not 0 <= self.index < checkpoint.size:
            raise MalformedNote(
                f"index {self.index} is not below the checkpoint's size {checkpoint.size}"
            )
        expected = inclusion_path_length(self.index, checkpoint.size)
        if len(self.path) != expected:
            raise MalformedNote(
                f"the inclusion path of index {self.index} in size {checkpoint.size} has "
                f"{expected} hashes, got {len(self.path)}"
            )

    @property
    def parsed_note(self) -> Note:
        return parse_note(self.note)

    @property
    def checkpoint(self) -> Checkpoint:
        return parse_checkpoint(self.parsed_note.text)

    def to_bytes(self) -> bytes:
        return format_tlog_proof(self.index, self.path, self.note, self.extra)


def format_tlog_proof(
    index: int, path: Sequence[bytes], note: bytes, extra: bytes | None = None
) -> bytes:
    """A tlog-proof's bytes, unchecked: for the log's own stored checkpoint and path (hot path)."""
    lines = [HEADER]
    if extra is not None:
        lines.append(f"extra {b64encode(extra)}")
    lines.append(f"index {index}")
    lines.extend(b64encode(h) for h in path)
    return ("\n".join(lines) + "\n\n").encode("ascii") + note


def _field(line: str, keyword: str) -> str | None:
    prefix = keyword + " "
    return line[len(prefix) :] if line.startswith(prefix) else None


def parse_tlog_proof(data: bytes) -> TlogProof:
    """The tlog-proof in `data`, or MalformedNote naming what is wrong."""
    if not isinstance(data, bytes):
        raise MalformedNote("a tlog-proof is bytes")
    if len(data) > MAX_PROOF_SIZE:
        raise MalformedNote(f"a tlog-proof is at most {MAX_PROOF_SIZE} bytes")
    head, sep, note = data.partition(b"\n\n")
    if not sep:
        raise MalformedNote("a tlog-proof has a blank line before its checkpoint")
    try:
        lines = head.decode("ascii").split("\n")
    except UnicodeDecodeError:
        raise MalformedNote("a tlog-proof's lines before the checkpoint are ASCII") from None
    if lines[0] != HEADER:
        raise MalformedNote(f"a tlog-proof starts with the line {HEADER!r}")
    rest = lines[1:]
    extra = None
    if rest and (encoded := _field(rest[0], "extra")) is not None:
        extra = b64decode(encoded, "the extra data")
        rest = rest[1:]
    if not rest or (index_text := _field(rest[0], "index")) is None:
        raise MalformedNote("a tlog-proof has an 'index <n>' line after the header (and extra)")
    index = parse_size(index_text, "the index")
    path = []
    for number, encoded in enumerate(rest[1:], 1):
        digest = b64decode(encoded, f"inclusion path hash {number}")
        if len(digest) != ROOT_SIZE:
            raise MalformedNote(f"inclusion path hash {number} is {len(digest)} bytes, not 32")
        path.append(digest)
    return TlogProof(index=index, path=tuple(path), note=note, extra=extra)
