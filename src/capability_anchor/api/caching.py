"""Answer bytes and their caching (SPEC §6): ETags, `If-None-Match`, immutable against
`no-cache` documents, and the encoders that check an answer against its Struct first.
"""

from __future__ import annotations

import hashlib
from typing import Any, TypeVar

import msgspec
from litestar import Request, Response
from litestar.status_codes import HTTP_304_NOT_MODIFIED

from capability_anchor.strictjson import canonical

T = TypeVar("T")

IMMUTABLE = "public, max-age=31536000, immutable"
NO_CACHE = "no-cache"


def cached(
    request: Request[Any, Any, Any],
    body: bytes,
    *,
    immutable: bool,
    media_type: str = "application/json",
) -> Response[bytes]:
    """A 200 with the caching SPEC §6 asks for, or a 304 when the client's copy matches."""
    tag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    headers = {"Cache-Control": IMMUTABLE if immutable else NO_CACHE, "ETag": tag}
    wanted = request.headers.get("if-none-match")
    if wanted is not None:
        tags = {t.strip().removeprefix("W/") for t in wanted.split(",")}
        if tag in tags or "*" in tags:
            return Response(b"", status_code=HTTP_304_NOT_MODIFIED, headers=headers)
    return Response(body, media_type=media_type, headers=headers)


_ORDERED = msgspec.json.Encoder()


def shaped(model: type[T], value: Any) -> T:
    """VALUE checked against its Struct (a ValidationError, a 500, on any other member)."""
    return msgspec.convert(value, model, strict=True)


def answer(model: type[T], value: Any, *, plain: bool = True) -> bytes:
    """RFC 8785 bytes of an answer, checked against its Struct first: on JCS's fast path
    (the hot read path) unless it holds an open object (`plain=False`)."""
    shaped(model, value)
    return canonical(value, plain=plain)


def ordered_answer(model: type[T], value: Any) -> bytes:
    """An answer that is no signed or canonical document, members in its Struct's order."""
    return _ORDERED.encode(shaped(model, value))
