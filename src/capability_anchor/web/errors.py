"""Every error answer of both services is `{v, error, note}` (SPEC §6) with a stable `error`:
the project's exceptions by their own `http_error` and `http_note()` (`errors.py`), the edge's
(`ApiError`), Litestar's and anything unexpected mapped here; no internals reach an answer."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException

from capability_anchor.errors import CapabilityAnchorError, StoreBusy
from capability_anchor.head import VERSION
from capability_anchor.metrics.service import observe

from .exchange import ORIGINAL_METHOD, BodyTimeout, OtherSpelling

HTTP_STATUS: dict[str, int] = {
    "bad_request": 400,
    "invalid_record": 400,
    "unauthorized": 401,
    "not_found": 404,
    "method_not_allowed": 405,
    "conflict": 409,
    "too_large": 413,
    "rate_limited": 429,
    "unavailable": 503,
}
"""SPEC §6 `error` member -> HTTP status, for the project's errors (`http_error`) and
the edge's own alike."""

MAX_NOTE_CHARS = 300
"""Notes quote input (a day, a name); a long input must not make a long answer."""

UNAVAILABLE_NOTE = "the service cannot answer right now"
RETRY_SOON = {"Retry-After": "1"}
# Litestar's own refusals (below 500) by their status; a 400 is `bad_request`.
_CODE_FOR_STATUS = {s: c for c, s in HTTP_STATUS.items() if c != "invalid_record"}


class ErrorBody(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Every error answer (SPEC §6): a stable `error` code and a note for people."""

    v: str
    error: str
    note: str


class ApiError(Exception):
    """An error raised at the HTTP edge itself (auth, limits)."""

    def __init__(self, code: str, note: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(note)
        self.code = code
        self.note = note
        self.headers = headers or {}


_ENCODER = msgspec.json.Encoder()


def error_response(code: str, note: str, headers: dict[str, str] | None = None) -> Response[bytes]:
    if len(note) > MAX_NOTE_CHARS:
        note = note[: MAX_NOTE_CHARS - 1] + "\u2026"
    body = _ENCODER.encode(ErrorBody(VERSION, code, note))
    return Response(
        body, status_code=HTTP_STATUS[code], media_type="application/json", headers=headers or {}
    )


def handle(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    """The one exception handler (see `HANDLERS`)."""
    if isinstance(exc, ApiError):
        return error_response(exc.code, exc.note, exc.headers)
    if isinstance(exc, OtherSpelling):
        # Nothing may keep this answer: the one spelling can exist later, or already does.
        return error_response("not_found", str(exc), {"Cache-Control": "no-store"})
    if isinstance(exc, BodyTimeout):
        return error_response("bad_request", str(exc), {"Connection": "close"})
    if isinstance(exc, CapabilityAnchorError):
        if isinstance(exc, StoreBusy):
            observe().store_busy.inc()  # the store raises; the edge that answers counts
        # A 503 the same request may get past without an operator (a lock wait that ran
        # out, a database coming back) says when to try again.
        soon = exc.http_error == "unavailable" and exc.retryable
        return error_response(exc.http_error, exc.http_note(), RETRY_SOON if soon else None)
    if isinstance(exc, RecursionError):
        return error_response("bad_request", "the request is nested too deeply")
    if isinstance(exc, HTTPException) and exc.status_code < 500:
        code = _CODE_FOR_STATUS.get(exc.status_code, "bad_request")
        if code == "not_found":
            note = "no such resource"
        elif code == "method_not_allowed":
            note = f"{request.scope.get(ORIGINAL_METHOD, request.method)} is not allowed here"
        elif code == "too_large":
            note = "the request body is too large"
        else:
            note = _safe_detail(exc)
        return error_response(code, note, exc.headers)
    if isinstance(exc, HTTPException):
        return error_response("unavailable", UNAVAILABLE_NOTE)
    request.logger.exception("unexpected error")
    return error_response("unavailable", UNAVAILABLE_NOTE)


def _safe_detail(exc: HTTPException) -> str:
    extra = exc.extra
    if isinstance(extra, list) and extra and isinstance(extra[0], dict):
        key = extra[0].get("key")
        message = extra[0].get("message")
        if key and message:
            return f"{key}: {message}"
    # Litestar ends some details with " for path <the raw path and query>": the client's own
    # URL, echoed with any parameter names it made up; the parameter named is enough.
    return _FOR_PATH.sub("", str(exc.detail or "bad request")) or "bad request"


_FOR_PATH = re.compile(r" for path \S*$")

HANDLERS: dict[Any, Callable[..., Any]] = {Exception: handle}
"""Litestar's exception-handler map: every error answer is `handle`'s (Litestar looks a
handler up along the exception's classes)."""
