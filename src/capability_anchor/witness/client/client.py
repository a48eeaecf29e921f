"""One C2SP tlog-witness exchange: the `add-checkpoint` request body and the POST under one
deadline; nothing here judges an answer or touches the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from capability_anchor.bounded.post import Peer, Reply
from capability_anchor.bounded.post import post as bounded_post
from capability_anchor.bounded.post import post_async as bounded_post_async
from capability_anchor.errors import UsageError, WitnessError
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
