"""A day's entries and a server's signed resolver-2 record (SPEC §6 `/entries`, `/record`).

Both read the store on a worker thread (`Service.read`): a listing is up to 1,000 entries,
and a record looks up every entry of a server and signs a token."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import QueryParameter

from capability_anchor.api.caching import NO_CACHE, cached, canonical_answer
from capability_anchor.api.errors import documented
from capability_anchor.api.models import EntriesListing, ServerRecord, success
from capability_anchor.api.openapi import HTTPS_URL_PATTERN, Day, count
from capability_anchor.api.service import day_param, service_of
from capability_anchor.head import VERSION
from capability_anchor.strictjson import canonical

_RECORD_UNAVAILABLE = (
    "the note says why: a store fault or the damage mark, or the wall and monotonic clocks "
    "disagree (the clock guard: no token is signed meanwhile)"
)


@get(
    "/entries/{day:str}",
    summary="Entries of a day",
    responses={**success(EntriesListing, "entries from `start`, in order"), **documented(304, 404)},
)
async def entries(
    request: Request[Any, Any, Any],
    day: Day,
    start: Annotated[int, count(0)] = 0,
    limit: Annotated[int, count(1, 1000)] = 100,
) -> Response[bytes]:
    day = day_param(day)
    service = service_of(request)
    listed = await service.read(service.reader.entries, day, start, limit)
    # Claims are the writer's object (any member name, any number): RFC 8785 itself.
    body = canonical_answer(EntriesListing, {"v": VERSION, "day": day, "entries": listed})
    return cached(request, body, immutable=False)


@get(
    "/record",
    summary="A signed resolver-2 record of a server (Capability Resolution §6.3)",
    responses={
        **success(ServerRecord, "the record and its token"),
        **documented(404, unavailable=_RECORD_UNAVAILABLE),
    },
)
async def record(
    request: Request[Any, Any, Any],
    id: Annotated[str | None, QueryParameter(description="the server ID (matches sub)")] = None,
    url: Annotated[
        str | None,
        QueryParameter(
            description="the server URL, any https form",
            schema_extra={"pattern": HTTPS_URL_PATTERN},
        ),
    ] = None,
) -> Response[bytes]:
    service = service_of(request)
    lifetime = service.settings.record_lifetime
    answer = await service.read(partial(service.reader.record, sub=id, url=url, lifetime=lifetime))
    # Open (`ServerRecord`): a record carries what its writer gave it besides the documented
    # members, so it is not shaped by the Struct; tests/integration/test_api_shapes.py holds
    # its members.
    # A fresh token per request (its own iat and exp): never cached.
    return Response(
        canonical(answer), media_type="application/json", headers={"Cache-Control": NO_CACHE}
    )
