"""One C2SP tlog-witness exchange: the `add-checkpoint` request body, the POST under one
deadline (httpx), and the answer as received.

    body = request_body(old, proof, checkpoint_note)
    answer = post("http://witness.example/w1", body, deadline=10.0)   # Answer or WitnessError
    answer.status, answer.media_type, answer.body

Nothing here judges an answer or touches the store (`witnessing.rounds` does both). httpx and
asyncio are imported inside the functions that use them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import UsageError, WitnessError
from ..note.signed import b64encode

if TYPE_CHECKING:
    from httpx import Response

DEFAULT_DEADLINE_S = 10.0
# tlog-witness: a client MUST NOT send more than 63 consistency proof lines.
MAX_PROOF_LINES = 63
# A 200 is a few signature lines; a witness with many keys still sends far less than this.
ANSWER_CAP = 64 * 1024
_GRACE_S = 0.5  # beyond the deadline, for the exchange's own cancellation to report itself


@dataclass(frozen=True)
class Answer:
    """A witness's HTTP answer: the status, the media type (lowercase, without parameters)
    and the body exactly as received (at most ANSWER_CAP bytes)."""

    status: int
    media_type: str
    body: bytes


def request_body(old: int, proof: list[bytes], checkpoint: bytes) -> bytes:
    """`old <M>\\n`, one base64 line per proof hash, a blank line, the signed checkpoint."""
    if old < 0 or (old == 0 and proof):
        raise UsageError("a consistency proof is sent only from an old size above 0")
    if len(proof) > MAX_PROOF_LINES:
        raise UsageError(f"a consistency proof of {len(proof)} hashes is more than 63 lines")
    lines = [f"old {old}", *(b64encode(h) for h in proof)]
    return ("\n".join(lines) + "\n\n").encode("ascii") + checkpoint


def submission_url(prefix: str) -> str:
    """`<submission prefix>/add-checkpoint` (the policy's URL is the prefix)."""
    return prefix.rstrip("/") + "/add-checkpoint"


def post(prefix: str, body: bytes, *, deadline: float = DEFAULT_DEADLINE_S) -> Answer:
    """POST BODY to the witness at the submission PREFIX; its answer, whatever its status.

    DEADLINE bounds the whole exchange (connect, send, every byte of the answer), so a
    witness that stalls or drips cannot hold its caller longer; as in `timestamp.client`,
    the exchange runs on a daemon thread with its own event loop, joined for at most the
    deadline. Unreachable, too slow, a broken exchange, an answer over ANSWER_CAP bytes or
    compressed: WitnessError."""
    if not deadline > 0:
        raise UsageError("the witness deadline must be positive")
    import asyncio
    import threading

    url = submission_url(prefix)
    outcome: list[Answer | BaseException] = []

    def exchange() -> None:
        try:
            outcome.append(asyncio.run(_post(url, body, deadline)))
        except BaseException as e:  # handed to the caller's thread below
            outcome.append(e)

    worker = threading.Thread(target=exchange, name="witness-post", daemon=True)
    worker.start()
    worker.join(deadline + _GRACE_S)
    if not outcome:
        raise WitnessError(f"{url} sent no complete answer within the {deadline:g} s deadline")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


async def _post(url: str, body: bytes, deadline: float) -> Answer:
    import asyncio

    import httpx

    try:
        async with (
            asyncio.timeout(deadline),
            httpx.AsyncClient(timeout=deadline, follow_redirects=False) as client,
            client.stream(
                "POST",
                url,
                content=body,
                headers={
                    "Content-Type": "text/plain; charset=utf-8",
                    "Accept-Encoding": "identity",
                },
            ) as response,
        ):
            return await _read(response, url)
    except (TimeoutError, httpx.HTTPError, httpx.StreamError, OSError) as e:
        raise WitnessError(_failure(e, url, deadline)) from None


async def _read(response: Response, url: str) -> Answer:
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding != "identity":
        raise WitnessError(f"{url} sent a {encoding!r}-encoded answer; only identity is read")
    body = bytearray()
    async for chunk in response.aiter_raw():
        body += chunk
        if len(body) > ANSWER_CAP:
            raise WitnessError(f"{url} sent more than {ANSWER_CAP} bytes; reading stopped")
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    return Answer(response.status_code, media, bytes(body))


def _failure(e: Exception, url: str, deadline: float) -> str:
    """What went wrong with the exchange with URL (a timeout is also an OSError, a
    ConnectError also an HTTPError: checked in this order)."""
    import httpx

    if isinstance(e, TimeoutError | httpx.TimeoutException):
        return f"{url} sent no complete answer within the {deadline:g} s deadline"
    if isinstance(e, httpx.ConnectError):
        return f"cannot connect to {url}: {e}"
    if isinstance(e, httpx.RemoteProtocolError):
        return f"{url} broke the HTTP exchange (no or partial answer): {e}"
    if isinstance(e, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return f"the witness URL {url!r} is not a usable http:// or https:// URL: {e}"
    return f"the exchange with {url} failed: {e}"
