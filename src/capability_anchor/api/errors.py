"""The API's own error answers beside the edge's (`web/errors.py`): the sequencer busy or a
writer lost, and the OpenAPI entries of the errors a handler gives."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from litestar import Request, Response
from litestar.openapi import ResponseSpec

from capability_anchor.service.sequencing import Busy, WorkerLost
from capability_anchor.web import errors as edge
from capability_anchor.web.errors import RETRY_SOON, ErrorBody, error_response

WORKER_LOST_NOTE = (
    "the writer process stopped before answering: the batch may or may not be stored; "
    "re-sending it is safe (records already stored are answered with duplicate: true)"
)


def _worker_answer(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    if isinstance(exc, Busy):
        return error_response("unavailable", exc.note, RETRY_SOON)
    return error_response("unavailable", WORKER_LOST_NOTE, RETRY_SOON)


HANDLERS: dict[Any, Callable[..., Any]] = {
    **edge.HANDLERS,
    Busy: _worker_answer,
    WorkerLost: _worker_answer,
}
"""Litestar's exception-handler map: the edge's, and the body workers' two answers."""


# --- the OpenAPI side ------------------------------------------------------------------------


def documented(*statuses: int, unavailable: str | None = None) -> dict[int, ResponseSpec]:
    """OpenAPI entries for what the handler itself answers besides 200 (304, 404, 409, its
    503 reasons); the guards' answers and 405 are added by `openapi.finish`."""
    described = {
        304: "not modified: If-None-Match names the answer's current ETag (no body)",
        404: "not_found: the log holds no such thing (yet); the note says what is missing",
        409: "conflict: refused by the log's rules (a sealed day, a day before the log's first)",
    }
    specs = {
        s: ResponseSpec(
            data_container=None if s == 304 else ErrorBody,
            description=described[s],
            generate_examples=False,
        )
        for s in statuses
    }
    if unavailable is not None:
        specs[503] = ResponseSpec(
            data_container=ErrorBody,
            description=f"unavailable: {unavailable}",
            generate_examples=False,
        )
    return specs
