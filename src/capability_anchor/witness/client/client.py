"""One C2SP tlog-witness exchange (SPEC §12.3): the `add-checkpoint` request, the POST under one
deadline, and what the answer means before anything is stored (per status:
docs/explanation/procedures.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from capability_anchor.bounded.post import Peer, Reply
from capability_anchor.bounded.post import post as bounded_post
from capability_anchor.bounded.post import post_async as bounded_post_async
from capability_anchor.errors import MalformedNote, NoteError, UsageError, WitnessError
from capability_anchor.note import PolicyWitness, Signature, parse_note
from capability_anchor.note.checkpoint import parse_size
from capability_anchor.note.cosignature import timestamp_of
from capability_anchor.note.signed import b64encode

if TYPE_CHECKING:
    from httpx import AsyncClient

DEFAULT_DEADLINE_S = 10.0
# tlog-witness: a client MUST NOT send more than 63 consistency proof lines.
MAX_PROOF_LINES = 63
# A 200 is a few signature lines; a witness with many keys still sends far less than this.
ANSWER_CAP = 64 * 1024


# A witness's HTTP answer (the body at most ANSWER_CAP bytes).
Answer = Reply


def request_body(old: int, proof: list[bytes], checkpoint: bytes) -> bytes:
    """`old <M>\\n`, one base64 line per proof hash, a blank line, the signed checkpoint."""
    if old < 0 or (old == 0 and proof):
        raise UsageError("a consistency proof is sent only from an old size above 0")
    if len(proof) > MAX_PROOF_LINES:
        raise UsageError(f"a consistency proof of {len(proof)} hashes is more than 63 lines")
    lines = [f"old {old}", *(b64encode(h) for h in proof)]
    return ("\n".join(lines) + "\n\n").encode("ascii") + checkpoint


def post(prefix: str, body: bytes, *, deadline: float = DEFAULT_DEADLINE_S) -> Answer:
    """The witness's answer, whatever its status; DEADLINE bounds the whole exchange
    (`bounded.post`), and any failure of it is WitnessError."""
    peer = _peer(prefix, deadline)
    return bounded_post(body, _HEADERS, deadline=deadline, cap=ANSWER_CAP, peer=peer)


async def post_async(
    client: AsyncClient, prefix: str, body: bytes, *, deadline: float = DEFAULT_DEADLINE_S
) -> Answer:
    """`post` on the caller's event loop, with its client (the service: no thread waits on a
    witness that hangs)."""
    peer = _peer(prefix, deadline)
    return await bounded_post_async(
        client, body, _HEADERS, deadline=deadline, cap=ANSWER_CAP, peer=peer
    )


_HEADERS = {"Content-Type": "text/plain; charset=utf-8"}


def _peer(prefix: str, deadline: float) -> Peer:
    if not deadline > 0:
        raise UsageError("the witness deadline must be positive")
    url = prefix.rstrip("/") + "/add-checkpoint"  # the policy's URL is the prefix
    return Peer(url, url, "witness", "answer", WitnessError)


MAX_FUTURE_S = 60
SIZE_TYPE = "text/x.tlog.size"

COSIGNED = "cosigned"
RETRY_FROM = "retry-from"  # a 409 naming a size to retry from
STOP = "stop"
UNKNOWN = "unknown"  # 403/404: retried after an hour
FAILED = "failed"


@dataclass(frozen=True)
class Sent:
    """One add-checkpoint request: to whom, from which old size, the checkpoint note."""

    witness: PolicyWitness
    old: int
    size: int
    checkpoint: bytes


@dataclass(frozen=True)
class Verdict:
    kind: str
    detail: str
    cosignatures: tuple[tuple[Signature, int], ...] = ()  # (line, timestamp), when COSIGNED
    witness_size: int | None = None  # the size the witness says it last cosigned (a 409)
    answered: bool = True  # False: no answer (unreachable, the deadline, a broken exchange)


def judge(answer: Answer, sent: Sent, *, now: int) -> Verdict:
    status = answer.status
    if status == 200:
        return _cosigned(answer.body, sent, now)
    if status == 409:
        return _conflict(answer, sent)
    if status == 422:
        return Verdict(
            STOP,
            f"HTTP 422: the witness found our checkpoint of size {sent.size} inconsistent "
            f"with what it cosigned before (old {sent.old}); an operator must look",
        )
    if status in (403, 404):
        return Verdict(
            UNKNOWN,
            f"HTTP {status}: the witness does not know this log or its key "
            f"({_snippet(answer.body)}); add the log's origin and vkey to the witness",
        )
    return Verdict(FAILED, f"HTTP {status} ({_snippet(answer.body)})")


def _conflict(answer: Answer, sent: Sent) -> Verdict:
    try:
        if answer.media_type != SIZE_TYPE:
            raise MalformedNote(f"its Content-Type is {answer.media_type!r}, not {SIZE_TYPE}")
        text = answer.body.decode("ascii")
        if not text.endswith("\n"):
            raise MalformedNote("its body does not end in a newline")
        size = parse_size(text[:-1], "the witness's size")
    except (MalformedNote, UnicodeDecodeError) as exc:
        return Verdict(FAILED, f"HTTP 409 that is not a tlog size: {exc}")
    if size > sent.size:
        return Verdict(
            STOP,
            f"HTTP 409: the witness has cosigned size {size} of this log, more than its "
            f"{sent.size} (a restored backup, or the log's key signed elsewhere); "
            "submissions stop until an operator acts",
            witness_size=size,
        )
    if size == sent.old:
        return Verdict(
            STOP,
            f"HTTP 409 naming size {size}, the old size sent: the witness holds another "
            f"checkpoint of size {size} of this log; submissions stop until an operator acts",
            witness_size=size,
        )
    return Verdict(
        RETRY_FROM, f"HTTP 409: the witness last cosigned size {size}", witness_size=size
    )


def _cosigned(body: bytes, sent: Sent, now: int) -> Verdict:
    verifier = sent.witness.verifier
    ours = parse_note(sent.checkpoint)
    try:
        # tlog-witness: the answer appended to the checkpoint is a note of their lines.
        whole = parse_note(sent.checkpoint + body)
        if whole.text != ours.text:
            raise MalformedNote("it has a blank line")
        theirs = whole.signatures[len(ours.signatures) :]
    except MalformedNote as exc:
        return Verdict(FAILED, f"HTTP 200 whose body is not signature lines: {exc}")
    text = ours.text.encode("utf-8")
    found: list[tuple[Signature, int]] = []
    for line in theirs:
        if (line.name, line.key_id) != (verifier.name, verifier.key_id):
            continue  # tlog-witness: cosignatures from unknown keys are ignored
        try:
            verifier.verify(text, line.signature)
            timestamp = timestamp_of(line.signature)
        except NoteError as exc:
            return Verdict(FAILED, f"HTTP 200 with a line that fails: {exc}; nothing stored")
        if timestamp > now + MAX_FUTURE_S:
            return Verdict(
                FAILED,
                f"HTTP 200 with a cosignature dated {timestamp}, more than {MAX_FUTURE_S} s "
                f"after our clock ({now}); nothing stored",
            )
        found.append((line, timestamp))
    if not found:
        return Verdict(
            FAILED,
            f"HTTP 200 with no cosignature by {verifier.name}+{verifier.key_id.hex()} "
            f"({len(theirs)} other line(s) ignored); nothing stored",
        )
    return Verdict(COSIGNED, f"cosigned size {sent.size}", cosignatures=tuple(found))


def _snippet(body: bytes) -> str:
    text = body[:120].decode("utf-8", "replace").strip().replace("\n", " ")
    return text or "empty body"
