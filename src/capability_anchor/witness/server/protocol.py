"""c2sp.org/tlog-witness `add-checkpoint` (SPEC §12.3): the body, the checks in the spec's order
(404, 403, 400, 409, 422: each status tells the client something else), and `Witness`, which
verifies the log's signature outside any transaction and runs the stateful checks and the insert
as one `WitnessStore.advance`. A log's keys are read at every request (`witness update-log`
is adopted at once)."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from capability_anchor.errors import MalformedNote, MalformedProof, NoteSignatureError, RootMismatch
from capability_anchor.keys import load_key_file
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
from capability_anchor.store import open as stores
from capability_anchor.store.witness import Cosigned, WitnessStore

MAX_PROOF_LINES = 63
HASH_SIZE = 32
MAX_BODY = 64 * 1024  # a checkpoint with 100 signatures and 63 proof lines is under 20 KiB
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


KEY_FILE = "witness-key.jwk"
log = logging.getLogger("capability_anchor.witness")


@dataclass
class Witness:
    """One witness: its store, its cosigning key, and the `add-checkpoint` steps in order."""

    store: WitnessStore
    cosigner: Cosigner
    clock: Callable[[], float] = field(default=time.time)
    _keys_seen: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def open(cls, data_dir: Path) -> Witness:
        store = stores.open_witness(data_dir)
        try:
            key = load_key_file(data_dir / KEY_FILE)
            return cls(store, Cosigner(store.name(), key))
        except BaseException:
            store.close()
            raise

    def add_checkpoint(self, body: bytes) -> str:
        """The cosignature line for a valid request, else a `Refusal`."""
        request = parse_request(body)
        cp, old = request.checkpoint, request.old
        witnessed = self.store.log(cp.origin)
        if witnessed is None:
            raise Refusal(404, f"unknown log origin {cp.origin[:100]!r}")
        before = self._keys_seen.get(witnessed.origin)
        self._keys_seen[witnessed.origin] = witnessed.vkeys
        if before is not None and before != witnessed.vkeys:
            log.info(
                "log %s: now verified with the key set [%s] (was [%s])",
                witnessed.origin,
                ", ".join(witnessed.vkeys),
                ", ".join(before),
            )
        try:
            verifiers = [note_verifier(v) for v in witnessed.vkeys]
            open_checkpoint(request.note, list(verifiers), origin=cp.origin)
        except NoteSignatureError as exc:
            raise Refusal(403, str(exc)) from None
        if old > cp.size:
            raise Refusal(400, f"old size {old} is over the checkpoint's {cp.size}")

        def step(latest: Cosigned | None) -> Cosigned:
            """409, then 422, against the latest cosigned checkpoint; the row to store."""
            size = latest.size if latest is not None else 0
            if old != size:
                raise Refusal(409, f"old size {old} is not the latest cosigned size {size}", size)
            if old == 0 and request.proof:
                raise Refusal(422, "a consistency proof was sent with old size 0")
            if cp.size == 0 and cp.root != EMPTY_ROOT:
                raise Refusal(422, "a size-0 checkpoint's root is not SHA-256 of the empty string")
            if latest is not None and old != 0:
                if cp.size == old and cp.root != latest.root:
                    raise Refusal(409, f"another root was cosigned at size {old}", size)
                try:
                    verify_consistency(old, cp.size, latest.root, cp.root, list(request.proof))
                except (MalformedProof, RootMismatch) as exc:
                    raise Refusal(422, f"the consistency proof does not verify: {exc}") from None
            now = int(self.clock())
            line = self.cosigner.cosign(request.note.text, now).line()  # cosignature/v1
            return Cosigned(cp.origin, cp.size, cp.root, request.note_bytes, line, now)

        return self.store.advance(cp.origin, step).cosignature

    def monitoring(self, hex_origin: str) -> bytes:
        """The latest cosigned checkpoint of the log whose origin hashes to `hex_origin`,
        with our cosignature; a Refusal(404) when there is none."""
        witnessed = self.store.log_by_hash(hex_origin)
        latest = None if witnessed is None else self.store.latest(witnessed.origin)
        if latest is None:
            raise Refusal(404, "no checkpoint cosigned for that log")
        return latest.monitoring_note()

    def close(self) -> None:
        self.store.close()
