"""The POST operations: `/records` and `/checkpoint` (writers, SPEC §6) and `/prove`.

Each body arrives as `data` already checked by `guards.before` (`CheckedBody`): for
`/prove` the leaf hash, for `/records` the prepared batch, or the batch a worker process
already appended (`Appended`).
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, post
from litestar.params import Body

from capability_anchor.api.caching import answer, ordered_answer
from capability_anchor.api.errors import documented
from capability_anchor.api.guards import Appended, CheckedBody
from capability_anchor.api.models import (
    HeadDocument,
    ProofAnswer,
    ProveBody,
    ProvedRecordsAnswer,
    RecordsAnswer,
    RecordsBody,
    success,
)
from capability_anchor.api.openapi import count
from capability_anchor.api.service import service_of
from capability_anchor.head import VERSION
from capability_anchor.log import Prepared

_WRITER_SECURITY: list[dict[str, list[str]]] = [{"bearer": []}]
_WRITE_UNAVAILABLE = (
    "the note says why: a store fault or the damage mark, the wall and monotonic clocks "
    "disagree (the clock guard), the log is behind what it published, or (with Retry-After) "
    "the write queue is full or the sequencer was lost"
)


@post(
    "/prove",
    summary="Proof for a record, by its leaf",
    status_code=200,
    opt={"body": "record"},
    dto=CheckedBody[ProveBody],
    return_dto=None,
    responses={
        **success(ProofAnswer, "the proof in the newest head covering the record"),
        **documented(404),
    },
)
async def prove(request: Request[Any, Any, Any], data: Annotated[bytes, Body()]) -> Response[bytes]:
    """`data`: the record's leaf hash."""
    service = service_of(request)
    found = await service.read(service.reader.proof_by_leaf_hash, data)
    return Response(answer(ProofAnswer, found), media_type="application/json")


@post(
    "/records",
    summary="Append records (writers)",
    status_code=200,
    opt={"writer": True, "body": "records"},
    dto=CheckedBody[RecordsBody],
    return_dto=None,
    responses={
        **success(RecordsAnswer | ProvedRecordsAnswer, "one entry per record, in order"),
        **documented(409, unavailable=_WRITE_UNAVAILABLE),
    },
    security=_WRITER_SECURITY,
)
async def post_records(
    request: Request[Any, Any, Any],
    data: Annotated[list[Prepared] | Appended, Body()],
    prove: Annotated[
        int, count(0, 1, "1: publish a head covering the batch and answer each entry's proof")
    ] = 0,
) -> Response[bytes]:
    if isinstance(data, Appended):  # by a worker process, in guards.before
        # Its entries were encoded there from `AppendedEntry`/`ProvedEntry`; this is the
        # envelope of `RecordsAnswer` around them, its members in the Struct's order.
        body = b'{"v":"' + VERSION.encode() + b'","entries":' + data.entries + b"}"
        return Response(body, media_type="application/json")
    service = service_of(request)
    writer = service.writer

    def run() -> list[dict[str, Any]]:
        if prove:
            # The batch, a head covering it and each entry's proof: one transaction, so the
            # answer is either all of it, durable, or an error with nothing stored.
            return writer.append_and_prove(data)
        return [r.to_json() for r in writer.append_prepared(data)]

    # One clock verdict for the whole request: a jump after the append must not make its
    # checkpoint refuse (a 503 for a stored batch); see ClockGuard.pinned.
    out = await service.write(service.clock.pinned(run))
    # Not a signed document, so no need for canonical JSON: msgspec is ~50x faster here.
    model = ProvedRecordsAnswer if prove else RecordsAnswer
    body = ordered_answer(model, {"v": VERSION, "entries": out})
    return Response(body, media_type="application/json")


@post(
    "/checkpoint",
    summary="Publish today's head if the tree grew (writers)",
    status_code=200,
    opt={"writer": True},
    responses={
        **success(
            HeadDocument | None, "today's newest head document, or null when today has no entries"
        ),
        **documented(409, unavailable=_WRITE_UNAVAILABLE),
    },
    security=_WRITER_SECURITY,
)
async def post_checkpoint(request: Request[Any, Any, Any]) -> Response[bytes]:
    service = service_of(request)
    doc = await service.write(service.writer.checkpoint)
    return Response(doc if doc is not None else b"null", media_type="application/json")
