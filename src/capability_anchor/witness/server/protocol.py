"""c2sp.org/tlog-witness `add-checkpoint`, pure: the request body, and the checks in the
order the spec gives them. No storage and no HTTP: bytes and the witness's state in, the
new state out or a `Refusal` naming the status.

The order matters because each status tells the client something different: 404 (we do
not know this origin) and 403 (no signature by a key we trust, or a bad one by such a key)
come before anything stateful; 400 (old > size, or a body that is not the format); 409
`text/x.tlog.size` with our latest cosigned size (the client retries from it); 422 (the
proof does not prove old -> size, a proof with old 0, a size-0 checkpoint whose root is not
the empty tree's); then the row to store and the cosignature to answer with.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from capability_anchor.errors import MalformedNote, MalformedProof, NoteSignatureError, RootMismatch
from capability_anchor.merkle.verify import verify_consistency
from capability_anchor.note import (
    Checkpoint,
    Cosigner,
    Note,
    note_verifier,
    open_checkpoint,
    parse_checkpoint,
)
from capability_anchor.note.checkpoint import parse_size
from capability_anchor.note.signed import b64decode, parse_note
from capability_anchor.store.witness import Cosigned, WitnessedLog

MAX_PROOF_LINES = 63
HASH_SIZE = 32
MAX_BODY = 64 * 1024
"""A checkpoint with 100 signatures and 63 proof lines is under 20 KiB."""
EMPTY_ROOT = hashlib.sha256(b"").digest()
SIZE_CONTENT_TYPE = "text/x.tlog.size"


class Refusal(Exception):
    """A tlog-witness answer other than 200: its status and a short human reason."""

    def __init__(self, status: int, reason: str, latest: int | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.latest = latest  # for 409: the size the witness last cosigned

    def body(self) -> bytes:
        """The 409 body tlog-witness defines: the latest cosigned size and a newline."""
        return b"%d\n" % (self.latest or 0)


@dataclass(frozen=True)
class AddCheckpoint:
    """A parsed `add-checkpoint` body (not yet verified)."""

    old: int
    proof: tuple[bytes, ...]
    note: Note
    checkpoint: Checkpoint
    note_bytes: bytes


def _malformed(reason: str) -> Refusal:
    return Refusal(400, f"malformed add-checkpoint body: {reason}")


def parse_request(body: bytes) -> AddCheckpoint:
    """`old <M>\\n`, up to 63 base64 hash lines, an empty line, a signed checkpoint note."""
    if len(body) > MAX_BODY:
        raise _malformed(f"over {MAX_BODY} bytes")
    first, sep, rest = body.partition(b"\n")
    if not sep or not first.startswith(b"old "):
        raise _malformed("the first line is not 'old <size>'")
    try:
        old = parse_size(first[4:].decode("ascii"), "the old size")
    except (UnicodeDecodeError, MalformedNote) as exc:
        reason = str(exc) if isinstance(exc, MalformedNote) else "non-ASCII old size"
        raise _malformed(reason) from None
    proof: list[bytes] = []
    while True:
        line, sep, rest = rest.partition(b"\n")
        if not sep:
            raise _malformed("no empty line before the checkpoint")
        if not line:
            break
        if len(proof) == MAX_PROOF_LINES:
            raise _malformed(f"more than {MAX_PROOF_LINES} consistency proof lines")
        proof.append(_hash_line(line, len(proof) + 1))
    try:
        note = parse_note(rest)
        checkpoint = parse_checkpoint(note.text)
    except MalformedNote as exc:
        raise _malformed(str(exc)) from None
    return AddCheckpoint(old, tuple(proof), note, checkpoint, rest)


def _hash_line(line: bytes, number: int) -> bytes:
    try:
        raw = b64decode(line.decode("ascii"), f"proof line {number}")
    except (UnicodeDecodeError, MalformedNote):
        raise _malformed(f"proof line {number} is not standard base64") from None
    if len(raw) != HASH_SIZE:
        raise _malformed(f"proof line {number} is {len(raw)} bytes, not {HASH_SIZE}")
    return raw


def check_signature(request: AddCheckpoint, log: WitnessedLog | None) -> None:
    """404 for an origin we do not witness, 403 unless a trusted key signed and none failed."""
    origin = request.checkpoint.origin
    if log is None:
        raise Refusal(404, f"unknown log origin {origin[:100]!r}")
    try:
        verifiers = [note_verifier(v) for v in log.vkeys]
        open_checkpoint(request.note, list(verifiers), origin=origin)
    except NoteSignatureError as exc:
        raise Refusal(403, str(exc)) from None
    if request.old > request.checkpoint.size:
        raise Refusal(
            400, f"old size {request.old} is over the checkpoint's {request.checkpoint.size}"
        )


def check_state(request: AddCheckpoint, latest: Cosigned | None) -> None:
    """409, then 422, against the latest cosigned checkpoint (None: never cosigned, size 0)."""
    cp, old = request.checkpoint, request.old
    size = latest.size if latest is not None else 0
    if old != size:
        raise Refusal(409, f"old size {old} is not the latest cosigned size {size}", size)
    if old == 0 and request.proof:
        raise Refusal(422, "a consistency proof was sent with old size 0")
    if cp.size == 0 and cp.root != EMPTY_ROOT:
        raise Refusal(422, "a size-0 checkpoint's root is not SHA-256 of the empty string")
    if latest is None or old == 0:
        return
    if cp.size == old and cp.root != latest.root:
        raise Refusal(409, f"another root was cosigned at size {old}", size)
    try:
        verify_consistency(old, cp.size, latest.root, cp.root, list(request.proof))
    except (MalformedProof, RootMismatch) as exc:
        raise Refusal(422, f"the consistency proof does not verify: {exc}") from None


def cosign(request: AddCheckpoint, cosigner: Cosigner, now: int) -> Cosigned:
    """The row to store and the cosignature/v1 line (type 0x04) to answer with."""
    cp = request.checkpoint
    line = cosigner.cosign(request.note.text, now).line()
    return Cosigned(cp.origin, cp.size, cp.root, request.note_bytes, line, now)
