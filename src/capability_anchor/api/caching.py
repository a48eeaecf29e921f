"""Answer bytes and their caching (SPEC §6): ETags, `If-None-Match`, and which documents
are immutable (a sealed head, a head at a size, a stamp) and which move (`no-cache`).

An answer built per request is checked against its Struct (`api/models.py`, the one
definition the OpenAPI document is generated from too) and then encoded: `answer` on JCS's
fast path for the plain documents, `canonical_answer` in full RFC 8785 for those holding an
open object, `ordered_answer` in the Struct's order for the one that is not a canonical
document (`POST /records`)."""

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


def etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def cached(
    request: Request[Any, Any, Any],
    body: bytes,
    *,
    immutable: bool,
    media_type: str = "application/json",
) -> Response[bytes]:
    """A 200 with the caching SPEC §6 asks for, or a 304 when the client's copy matches."""
    tag = etag(body)
    headers = {"Cache-Control": IMMUTABLE if immutable else NO_CACHE, "ETag": tag}
    wanted = request.headers.get("if-none-match")
    if wanted is not None:
        tags = {t.strip().removeprefix("W/") for t in wanted.split(",")}
        if tag in tags or "*" in tags:
            return Response(b"", status_code=HTTP_304_NOT_MODIFIED, headers=headers)
    return Response(body, media_type=media_type, headers=headers)


def canonical_json(obj: Any) -> bytes:
    """RFC 8785 bytes: one spelling per document, so its ETag is stable."""
    return canonical(obj)


_ORDERED = msgspec.json.Encoder()


def shaped(model: type[T], value: Any) -> T:
    """A reader's answer (plain JSON values) as its Struct: `msgspec.ValidationError` (a
    500, a bug) when it holds a member the Struct does not name or lacks one it does."""
    return msgspec.convert(value, model, strict=True)


def answer(model: type[T], value: Any) -> bytes:
    """RFC 8785 bytes of an answer whose member names are ASCII and whose values are
    strings, integers, booleans and lists of them (`strictjson.is_plain`), checked against
    its Struct first: JCS's fast path, several times faster than the general one on the hot
    read path (`/proof`, `/consistency`), where every microsecond on the event loop is one
    readers queue behind. The Struct check refuses any member the Struct does not name, so
    the bytes are exactly the documented shape."""
    shaped(model, value)
    return canonical(value, plain=True)


def canonical_answer(model: type[T], value: Any) -> bytes:
    """RFC 8785 bytes of an answer holding an open object (a record's claims: any member
    name, any number), checked against its Struct first. The value itself is encoded: the
    strict check converts nothing and these Structs have no defaults, so the Struct's own
    builtins would be the same value, made again."""
    shaped(model, value)
    return canonical_json(value)


def ordered_answer(model: type[T], value: Any) -> bytes:
    """An answer that is no signed or canonical document, members in its Struct's order."""
    return _ORDERED.encode(shaped(model, value))


__all__ = [
    "IMMUTABLE",
    "NO_CACHE",
    "answer",
    "cached",
    "canonical_answer",
    "canonical_json",
    "etag",
    "ordered_answer",
    "shaped",
]
