"""Asking a TSA: the TimeStampReq (rfc3161ng), the HTTP exchange under one deadline, and `stamp`
(`make_request` -> `fetch` -> `verify_reply`), which verifies the reply before anyone stores it.
httpx, rfc3161ng and pyasn1 are imported inside the functions: the verifying path never loads them.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from capability_anchor.bounded.post import Peer, post
from capability_anchor.errors import TimestampError, UsageError

from .verify import Verified, check_digest, digest_of, verify_reply

if TYPE_CHECKING:
    from cryptography.x509 import Certificate

QUERY_TYPE = "application/timestamp-query"
DEFAULT_DEADLINE_S = 10.0
REPLY_CAP = 64 * 1024


@dataclass(frozen=True)
class Request:
    """A DER TimeStampReq and what its reply must echo."""

    der: bytes
    nonce: int
    digest: bytes


def make_request(digest: bytes) -> Request:
    """A TimeStampReq for a SHA-256 DIGEST, a fresh 64-bit nonce and certReq."""
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
    """Stamp a head's JWS at the TSA at URL and verify the reply; its bytes, to be stored raw."""
    digest = digest_of(jws)
    if not cas:
        raise UsageError("no trusted TSA CA certificate given")
    request = make_request(digest)
    reply = fetch(url, request.der, deadline=deadline)
    return reply, verify_reply(reply, digest=digest, cas=cas, nonce=request.nonce)


def fetch(
    url: str, query: bytes, *, deadline: float = DEFAULT_DEADLINE_S, cap: int = REPLY_CAP
) -> bytes:
    """POST QUERY to the TSA at URL and return the reply body as received, all under DEADLINE
    (`bounded.post`). A reply over CAP bytes, not 200, compressed, or a failed connection:
    TimestampError."""
    peer = Peer(url, f"the TSA at {url}", "TSA", "reply", TimestampError)
    headers = {"Content-Type": QUERY_TYPE, "Accept": "application/timestamp-reply"}
    reply = post(query, headers, deadline=deadline, cap=cap, peer=peer)
    if reply.status != 200:
        raise TimestampError(f"the TSA at {url} answered HTTP {reply.status}, not 200")
    return reply.body
