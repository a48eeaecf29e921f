"""The POST operations: `/records` and `/checkpoint` (writers, SPEC §6) and `/prove`.

Litestar never reads a body: `guards.before` checked it and left, in
`request.state.checked_body`, the leaf hash for `/prove` and for `/records` the prepared
`Batch`, which the handler appends."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, post

from capability_anchor.api.caching import answer, ordered_answer
from capability_anchor.api.models import (
    AppendedEntry,
    HeadDocument,
    ProofAnswer,
    ProvedEntry,
    ProvedRecordsAnswer,
    RecordsAnswer,
    documented,
    success,
)
from capability_anchor.api.openapi import count
from capability_anchor.api.service import Batch, service_of
from capability_anchor.errors import StoreError
from capability_anchor.head import VERSION

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
    responses={
        **success(ProofAnswer, "the proof in the newest head covering the record"),
        **documented(404),
    },
)
async def prove(request: Request[Any, Any, Any]) -> Response[bytes]:
    service = service_of(request)
    leaf_hash: bytes = request.state.checked_body
    found = await service.read(service.reader.proof_by_leaf_hash, leaf_hash)
    return Response(answer(ProofAnswer, found), media_type="application/json")


@post(
    "/records",
    summary="Append records (writers)",
    status_code=200,
    opt={"writer": True, "body": "records"},
    responses={
        **success(RecordsAnswer | ProvedRecordsAnswer, "one entry per record, in order"),
        **documented(409, unavailable=_WRITE_UNAVAILABLE),
    },
    security=_WRITER_SECURITY,
)
async def post_records(
    request: Request[Any, Any, Any],
    prove: Annotated[
        int, count(0, 1, "1: publish a head covering the batch and answer each entry's proof")
    ] = 0,
) -> Response[bytes]:
    data: Batch = request.state.checked_body
    value = await service_of(request).append(data, bool(prove))
    if prove:
        entries = ordered_answer(list[ProvedEntry], value)
    else:
        entries = appended_entries(data.hashes, value)
    # `RecordsAnswer`'s envelope, its members in the Struct's order (not a signed document).
    body = b'{"v":"' + VERSION.encode() + b'","entries":' + entries + b"}"
    return Response(body, media_type="application/json")


_ENTRY = b'{"day":"%s","leaf_index":%d,"leaf_hash":"%s","duplicate":%s}'
assert AppendedEntry.__struct_fields__ == ("day", "leaf_index", "leaf_hash", "duplicate")


def appended_entries(hashes: bytes, value: Any) -> bytes:
    """The JSON array of `AppendedEntry` for the batch of leaf hashes `hashes` (joined) and
    its answer `(day, [(index, dup)])`, formatted directly: building a 1,000-record batch's
    Structs on the event loop cost ten times this."""
    day, placed = value
    if not isinstance(day, str) or len(hashes) != 32 * len(placed):
        raise StoreError("the sequencer's answer does not match the batch")
    dayb = day.encode()
    hexed = hashes.hex().encode()
    parts = [
        _ENTRY % (dayb, int(index), hexed[64 * n : 64 * n + 64], b"true" if dup else b"false")
        for n, (index, dup) in enumerate(placed)
    ]
    return b"[" + b",".join(parts) + b"]"


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
