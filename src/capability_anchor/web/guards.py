"""The checks both services run before a handler (the public rate limit of SPEC §10, a
body's declared length, Bearer tokens) and the `/metrics` answer they share."""

from __future__ import annotations

import hmac
import time
from typing import Any

import anyio.to_thread
from litestar import Request, Response

from capability_anchor.errors import UsageError
from capability_anchor.metrics import service as metrics

from . import accesslog
from .errors import ApiError


class RateLimiter:
    """A token bucket per client address: `rate` requests per second, bursts up to `rate`."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._buckets: dict[str, tuple[float, float]] = {}

    def check(self, client: str) -> float:
        """0 if allowed now, else the seconds to wait."""
        now = time.monotonic()
        tokens, last = self._buckets.get(client, (float(self.rate), now))
        tokens = min(float(self.rate), tokens + (now - last) * self.rate)
        if tokens < 1:
            self._buckets[client] = (tokens, now)
            return (1 - tokens) / self.rate
        self._buckets[client] = (tokens - 1, now)
        if len(self._buckets) > 100_000:
            # Forget full buckets: they are identical to a new client's.
            full = [c for c, (t, _) in self._buckets.items() if t >= self.rate - 1]
            for c in full:
                del self._buckets[c]
        return 0.0


def check_bearer(
    request: Request[Any, Any, Any], expected: str, missing_note: str, wrong_note: str
) -> None:
    """401 `unauthorized` unless the request carries Bearer `expected`."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        note = missing_note
    # Constant-time comparison: the time taken says nothing about how much of a guess was right.
    elif not hmac.compare_digest(token.encode(), expected.encode()):
        note = wrong_note
    else:
        return
    raise ApiError("unauthorized", note, {"WWW-Authenticate": 'Bearer realm="capability-anchor"'})


MISSING_METRICS_TOKEN_NOTE = "/metrics needs Authorization: Bearer <metrics token>"  # noqa: S105
WRONG_METRICS_TOKEN_NOTE = "the bearer token does not match this service's metrics token"  # noqa: S105


def check_metrics(request: Request[Any, Any, Any], token: str | None) -> None:
    """`/metrics`: public without a metrics token, else 401 unless Bearer that token. Never
    rate limited: a scraper (or several behind one address) must not be refused."""
    if token is not None:
        check_bearer(request, token, MISSING_METRICS_TOKEN_NOTE, WRONG_METRICS_TOKEN_NOTE)


def metrics_token(value: str | None) -> str | None:
    """A metrics token as given (`--metrics-token`, CAPABILITY_ANCHOR_METRICS_TOKEN): None
    for none; empty or with white space is a usage error (a header could not carry it)."""
    if value is None:
        return None
    if not value or any(c.isspace() or not c.isprintable() for c in value):
        raise UsageError(
            "the metrics token must be non-empty visible characters without spaces "
            "(--metrics-token, CAPABILITY_ANCHOR_METRICS_TOKEN)"
        )
    return value


def check_rate(request: Request[Any, Any, Any], limiter: RateLimiter | None) -> None:
    """429 with Retry-After when the client's address is over `limiter`'s rate (the log's
    API and the witness share it)."""
    if limiter is None:
        return
    wait = limiter.check(request.client.host if request.client else "unknown")
    if wait > 0:
        raise ApiError(
            "rate_limited",
            f"over {limiter.rate} requests per second",
            {"Retry-After": str(max(1, int(wait + 0.999)))},
        )


def check_length(request: Request[Any, Any, Any], limit: int) -> None:
    """A declared Content-Length over the limit is refused before the body is read."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise ApiError("too_large", f"the request body is over {limit} bytes")


async def metrics_answer(*collectors: Any) -> Response[bytes]:
    """The exposition, made in a worker thread (`metrics.exposition` blocks), of every
    request this process answered before it (their counts are added in batches)."""
    accesslog.flush()
    body = await anyio.to_thread.run_sync(metrics.exposition, *collectors)
    # An explicit header is sent as given (Litestar would append a second charset).
    return Response(
        body, media_type=metrics.CONTENT_TYPE, headers={"Content-Type": metrics.CONTENT_TYPE}
    )
