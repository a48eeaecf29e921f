"""Asking a TSA: the TimeStampReq (rfc3161ng), the HTTP exchange under one deadline (httpx),
and `stamp`, which verifies what came back before anyone stores it.

    request = make_request(digest_of(jws))
    reply = fetch("https://tsa.example/", request.der)        # raw bytes, at most REPLY_CAP
    verify_reply(reply, digest=request.digest, cas=cas, nonce=request.nonce)

httpx, asyncio, rfc3161ng and pyasn1 are imported inside the functions that use them: the
offline verifying path imports this package and never loads them.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import TimestampError, UsageError
from .verify import Verified, check_digest, digest_of, verify_reply

if TYPE_CHECKING:
    from cryptography.x509 import Certificate
    from httpx import Response

__all__ = ["DEFAULT_DEADLINE_S", "QUERY_TYPE", "REPLY_CAP", "Request", "fetch", "make_request"]

QUERY_TYPE = "application/timestamp-query"
DEFAULT_DEADLINE_S = 10.0
REPLY_CAP = 64 * 1024
_GRACE_S = 0.5  # beyond the deadline, for the exchange's own cancellation to report itself


@dataclass(frozen=True)
class Request:
    """A DER TimeStampReq and what its reply must echo."""

    der: bytes
    nonce: int
    digest: bytes


def make_request(digest: bytes) -> Request:
    """A TimeStampReq for a SHA-256 DIGEST with a fresh random 64-bit nonce and certReq true.

    Built with rfc3161ng from the digest: its `data=` path would hash with SHA-1. certReq
    makes the TSA include its certificate, which verification needs to find the signer."""
    check_digest(digest)
    import rfc3161ng  # type: ignore[import-untyped]
    from pyasn1.codec.der import encoder  # type: ignore[import-untyped]

    nonce = secrets.randbits(64)
    try:
        request = rfc3161ng.make_timestamp_request(
            digest=digest, hashname="sha256", include_tsa_certificate=True, nonce=nonce
        )
        der = encoder.encode(request)
    except Exception as e:  # pyasn1 raises its own error tree
        raise TimestampError(f"cannot build the TimeStampReq: {e}") from None
    return Request(der=bytes(der), nonce=nonce, digest=digest)


def stamp(
    url: str, jws: bytes, cas: Sequence[Certificate], *, deadline: float = DEFAULT_DEADLINE_S
) -> tuple[bytes, Verified]:
    """Stamp a head: request a time-stamp for its compact JWS from the TSA at URL and verify
    it (with our nonce). Returns the reply bytes exactly as received, to be stored raw."""
    digest = digest_of(jws)
    if not cas:
        raise UsageError("no trusted TSA CA certificate given")
    request = make_request(digest)
    reply = fetch(url, request.der, deadline=deadline)
    return reply, verify_reply(reply, digest=digest, cas=cas, nonce=request.nonce)


def fetch(
    url: str, query: bytes, *, deadline: float = DEFAULT_DEADLINE_S, cap: int = REPLY_CAP
) -> bytes:
    """POST QUERY to the TSA at URL; the reply body, exactly as received.

    DEADLINE bounds the whole exchange (connect, send, every byte of the reply), not each
    read, so a TSA that drips a byte at a time or stalls mid-reply cannot hold sealing up for
    longer. The exchange runs on asyncio so the deadline can cancel it wherever it is. A
    reply over CAP bytes, any status but 200, a compressed body, a refused or dropped
    connection: TimestampError."""
    if not deadline > 0 or not cap > 0:
        raise UsageError("deadline and cap must be positive")
    import asyncio
    import threading

    # The exchange runs on a daemon thread of its own, with its own event loop, joined for
    # at most the deadline (plus a grace for the loop's own cancellation). asyncio.run waits
    # for the resolver thread of a hanging DNS lookup when it shuts down; the join does not,
    # so nothing can hold the caller past the deadline. It also works from a thread that
    # already runs an event loop (the service).
    outcome: list[bytes | BaseException] = []

    def exchange() -> None:
        try:
            outcome.append(asyncio.run(_fetch(url, query, deadline, cap)))
        except BaseException as e:  # handed to the caller's thread below
            outcome.append(e)

    worker = threading.Thread(target=exchange, name="tsa-fetch", daemon=True)
    worker.start()
    worker.join(deadline + _GRACE_S)
    if not outcome:
        raise TimestampError(
            f"the TSA at {url} sent no complete reply within the {deadline:g} s deadline"
        )
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


async def _fetch(url: str, query: bytes, deadline: float, cap: int) -> bytes:
    import asyncio

    import httpx

    try:
        async with (
            asyncio.timeout(deadline),
            httpx.AsyncClient(timeout=deadline, follow_redirects=False) as client,
            client.stream(
                "POST",
                url,
                content=query,
                headers={
                    "Content-Type": QUERY_TYPE,
                    "Accept": "application/timestamp-reply",
                    "Accept-Encoding": "identity",
                },
            ) as response,
        ):
            return await _read_body(response, url, cap)
    except (
        TimeoutError,
        httpx.TimeoutException,
        httpx.ConnectError,
        httpx.RemoteProtocolError,
        httpx.UnsupportedProtocol,
        httpx.InvalidURL,
        httpx.HTTPError,
        httpx.StreamError,
        OSError,
    ) as e:
        raise TimestampError(_failure(e, url, deadline)) from None


async def _read_body(response: Response, url: str, cap: int) -> bytes:
    """The body of a 200, identity-encoded RESPONSE of at most CAP bytes."""
    if response.status_code != 200:
        raise TimestampError(f"the TSA at {url} answered HTTP {response.status_code}, not 200")
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding != "identity":
        raise TimestampError(
            f"the TSA at {url} sent a {encoding!r}-encoded reply; only raw DER is accepted"
        )
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise TimestampError(
            f"the TSA at {url} announced a {declared}-byte reply; the cap is {cap}"
        )
    body = bytearray()
    async for chunk in response.aiter_raw():
        body += chunk
        if len(body) > cap:
            raise TimestampError(f"the TSA at {url} sent more than {cap} bytes; reading stopped")
    return bytes(body)


def _failure(e: Exception, url: str, deadline: float) -> str:
    """What went wrong in the exchange with the TSA at URL, for the exception E (checked in
    this order: a timeout is also an OSError, a ConnectError also an HTTPError)."""
    import httpx

    if isinstance(e, TimeoutError | httpx.TimeoutException):
        return f"the TSA at {url} sent no complete reply within the {deadline:g} s deadline"
    if isinstance(e, httpx.ConnectError):
        return f"cannot connect to the TSA at {url}: {e}"
    if isinstance(e, httpx.RemoteProtocolError):
        return f"the TSA at {url} broke the HTTP exchange (no or partial reply): {e}"
    if isinstance(e, httpx.UnsupportedProtocol):
        return f"the TSA URL {url!r} is not http:// or https://"
    if isinstance(e, httpx.InvalidURL):
        return f"the TSA URL {url!r} is invalid: {e}"
    return f"fetching from the TSA at {url} failed: {e}"
