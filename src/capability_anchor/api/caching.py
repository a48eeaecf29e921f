"""Answer bytes and their caching (SPEC §6): ETags, `If-None-Match`, and which documents
are immutable (a sealed head, a head at a size, a stamp) and which move (`no-cache`)."""

from __future__ import annotations

import hashlib
from typing import Any

from litestar import Request, Response
from litestar.status_codes import HTTP_304_NOT_MODIFIED

from capability_anchor.strictjson import canonical

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


def proof_json(obj: dict[str, Any]) -> bytes:
    """`canonical_json` for `{v, anchor, proof}` and consistency answers, on the JCS fast
    path: their member names are ASCII and their values strings, integers and lists of them
    (`strictjson.is_plain`). These are the hot read path, and every microsecond on the event
    loop is one readers queue behind."""
    return canonical(obj, plain=True)


__all__ = ["IMMUTABLE", "NO_CACHE", "cached", "canonical_json", "etag", "proof_json"]
