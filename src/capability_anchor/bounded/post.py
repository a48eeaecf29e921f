"""One HTTP POST bounded by one deadline for the whole exchange and a reply cap, shared by the TSA
and witness clients: a peer that drips bytes cannot hold its caller longer. It runs on asyncio on a
daemon thread joined for at most the deadline (a hanging DNS lookup is not waited for, and a caller
already in an event loop works); httpx is imported lazily."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from capability_anchor.errors import CapabilityAnchorError, UsageError

if TYPE_CHECKING:
    from httpx import AsyncClient, Response

_GRACE_S = 0.5


@dataclass(frozen=True)
class Reply:
    """An HTTP answer: status, media type (lowercase, no parameters) and body as received."""

    status: int
    media_type: str
    body: bytes


@dataclass(frozen=True)
class Peer:
    """Whom the exchange is with, for its messages, and the error class to raise."""

    url: str
    name: str
    kind: str
    noun: str
    error: type[CapabilityAnchorError]


def post(body: bytes, headers: dict[str, str], *, deadline: float, cap: int, peer: Peer) -> Reply:
    """POST `body` to `peer.url` and return the answer; any failure is `peer.error`."""
    if not deadline > 0 or not cap > 0:
        raise UsageError("deadline and cap must be positive")
    import asyncio
    import threading

    outcome: list[Reply | BaseException] = []

    async def fresh_client() -> Reply:
        import httpx

        async with httpx.AsyncClient(timeout=deadline, follow_redirects=False) as client:
            return await post_async(client, body, headers, deadline=deadline, cap=cap, peer=peer)

    def exchange() -> None:
        try:
            outcome.append(asyncio.run(fresh_client()))
        except BaseException as e:  # handed to the caller's thread below
            outcome.append(e)

    worker = threading.Thread(target=exchange, name=f"{peer.kind.lower()}-post", daemon=True)
    worker.start()
    worker.join(deadline + _GRACE_S)
    if not outcome:
        raise peer.error(_timed_out(peer, deadline))
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


async def post_async(
    client: AsyncClient,
    body: bytes,
    headers: dict[str, str],
    *,
    deadline: float,
    cap: int,
    peer: Peer,
) -> Reply:
    """`post` on the caller's event loop and client (no redirects), no thread per exchange."""
    import asyncio

    import httpx

    try:
        async with (
            asyncio.timeout(deadline),
            client.stream(
                "POST",
                peer.url,
                content=body,
                headers={**headers, "Accept-Encoding": "identity"},
                timeout=deadline,
            ) as response,
        ):
            return await _read(response, cap, peer)
    # InvalidURL is no HTTPError: named on its own.
    except (TimeoutError, httpx.HTTPError, httpx.StreamError, httpx.InvalidURL, OSError) as e:
        raise peer.error(_failure(e, peer, deadline)) from None


async def _read(response: Response, cap: int, peer: Peer) -> Reply:
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding != "identity":
        raise peer.error(
            f"{peer.name} sent a {encoding!r}-encoded {peer.noun}; only identity is read"
        )
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise peer.error(f"{peer.name} announced a {declared}-byte {peer.noun}; the cap is {cap}")
    body = bytearray()
    async for chunk in response.aiter_raw():
        body += chunk
        if len(body) > cap:
            raise peer.error(f"{peer.name} sent more than {cap} bytes; reading stopped")
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    return Reply(response.status_code, media, bytes(body))


def _timed_out(peer: Peer, deadline: float) -> str:
    return f"{peer.name} sent no complete {peer.noun} within the {deadline:g} s deadline"


def _failure(e: Exception, peer: Peer, deadline: float) -> str:
    """What went wrong, for `e` (order matters: a timeout is an OSError too)."""
    import httpx

    if isinstance(e, TimeoutError | httpx.TimeoutException):
        return _timed_out(peer, deadline)
    if isinstance(e, httpx.ConnectError):
        return f"cannot connect to {peer.name}: {e}"
    if isinstance(e, httpx.RemoteProtocolError):
        return f"{peer.name} broke the HTTP exchange (no or partial {peer.noun}): {e}"
    if isinstance(e, httpx.UnsupportedProtocol):
        return f"the {peer.kind} URL {peer.url!r} is not http:// or https://"
    if isinstance(e, httpx.InvalidURL):
        return f"the {peer.kind} URL {peer.url!r} is invalid: {e}"
    return f"the exchange with {peer.name} failed: {e}"
