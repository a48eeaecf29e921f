"""A day's entries and a server's signed resolver-2 record (SPEC §6 `/entries`, `/record`)."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import QueryParameter

from capability_anchor.api.caching import NO_CACHE, cached, canonical_json
from capability_anchor.api.errors import CACHED_READ_ERRORS, READ_ERRORS
from capability_anchor.api.models import EntriesListing, ServerRecord, success
from capability_anchor.api.openapi import HTTPS_URL_PATTERN, Day, count
from capability_anchor.api.service import day_param, service_of
from capability_anchor.head import VERSION


@get(
    "/entries/{day:str}",
    summary="Entries of a day",
    responses={**success(EntriesListing, "entries from `start`, in order"), **CACHED_READ_ERRORS},
)
async def entries(
    request: Request[Any, Any, Any],
    day: Day,
    start: Annotated[int, count(0)] = 0,
    limit: Annotated[int, count(1, 1000)] = 100,
) -> Response[bytes]:
    day = day_param(day)
    listed = service_of(request).reader.entries(day, start, limit)
    body = canonical_json({"v": VERSION, "day": day, "entries": listed})
    return cached(request, body, immutable=False)


@get(
    "/record",
    summary="A signed resolver-2 record of a server (Capability Resolution §6.3)",
    responses={**success(ServerRecord, "the record and its token"), **READ_ERRORS},
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
    answer = service.reader.record(sub=id, url=url, lifetime=service.settings.record_lifetime)
    # A fresh token per request (its own iat and exp): never cached.
    return Response(
        canonical_json(answer), media_type="application/json", headers={"Cache-Control": NO_CACHE}
    )
