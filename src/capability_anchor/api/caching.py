"""Answer bytes and their caching (SPEC §6): ETags, `If-None-Match`, immutable against
`no-cache` documents, and the encoders that check an answer against its Struct first.
"""

from __future__ import annotations

import hashlib
from typing import Any, TypeVar

import msgspec
from litestar import Request
from litestar.response.base import ASGIResponse
from litestar.types import Receive, Scope, Send

from capability_anchor.log.batch import PLAIN_JCS
from capability_anchor.strictjson import canonical

T = TypeVar("T")

IMMUTABLE = "public, max-age=31536000, immutable"
NO_CACHE = "no-cache"


class Answer(ASGIResponse):
    """An answer made whole by the route: its status, raw headers and body, sent as they are
    (Litestar's `Response` building cost more than a hot read's own work; decisions/37-readpath)."""

    __slots__ = ("raw",)

    def __init__(self, status: int, raw: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.status_code, self.raw, self.body = status, raw, body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw})
        await send({"type": "http.response.body", "body": self.body, "more_body": False})


_CACHE_CONTROL = {True: IMMUTABLE.encode(), False: NO_CACHE.encode()}


def content_type(media_type: str) -> bytes:
    """Litestar's spelling: text types with `; charset=utf-8`."""
    return (
        f"{media_type}; charset=utf-8" if media_type.startswith("text/") else media_type
    ).encode()


JSON = content_type("application/json")


def uncached(body: bytes) -> Answer:
    """A 200 JSON answer never to be reused (`no-cache`, no ETag)."""
    raw = [(b"cache-control", _CACHE_CONTROL[False]), (b"content-type", JSON)]
    raw.append((b"content-length", str(len(body)).encode()))
    return Answer(200, raw, body)


def _if_none_match(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name.lower() == b"if-none-match":
            return value.decode("latin-1")
    return None


def cached(
    request: Request[Any, Any, Any],
    body: bytes,
    *,
    immutable: bool,
    media_type: str = "application/json",
    extra: tuple[tuple[bytes, bytes], ...] = (),
) -> Answer:
    """A 200 with the caching SPEC §6 asks for, or a 304 when the client's copy matches;
    `extra` headers (lowercase names) on both."""
    tag = b'"' + hashlib.sha256(body).hexdigest()[:32].encode() + b'"'
    raw = [(b"cache-control", _CACHE_CONTROL[immutable]), (b"etag", tag), *extra]
    wanted = _if_none_match(request.scope)
    if wanted is not None:
        tags = {t.strip().removeprefix("W/") for t in wanted.split(",")}
        if tag.decode() in tags or "*" in tags:
            return Answer(304, raw, b"")
    kind = JSON if media_type == "application/json" else content_type(media_type)
    raw += ((b"content-type", kind), (b"content-length", str(len(body)).encode()))
    return Answer(200, raw, body)


_ORDERED = msgspec.json.Encoder()


def shaped(model: type[T], value: Any) -> T:
    """VALUE checked against its Struct (a ValidationError, a 500, on any other member)."""
    return msgspec.convert(value, model, strict=True)


def answer(model: type[T], value: Any, *, plain: bool = True) -> bytes:
    """RFC 8785 bytes of an answer, checked against its Struct first: on JCS's fast path
    (the hot read path) unless it holds an open object (`plain=False`)."""
    shaped(model, value)
    return PLAIN_JCS.encode(value) if plain else canonical(value)


def ordered_answer(model: type[T], value: Any) -> bytes:
    """An answer that is no signed or canonical document, members in its Struct's order."""
    return _ORDERED.encode(shaped(model, value))
