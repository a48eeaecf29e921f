"""Sealed days, head documents and their stamps (SPEC §6 `/roots...`), served as stored and
signed (which reads leave the loop: docs/explanation/api-reads.md).
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get

from capability_anchor.api.caching import answer, cached
from capability_anchor.api.errors import documented
from capability_anchor.api.models import HeadDocument, RootsListing, TimestampsDocument, success
from capability_anchor.api.openapi import BeforeDay, Day, TilePath, count, path_count
from capability_anchor.api.service import day_param, service_of
from capability_anchor.errors import NotFound, UsageError
from capability_anchor.export.days import timestamps_document
from capability_anchor.merkle.tilepath import parse_tile_path
from capability_anchor.read.reader import MAX_INT

from .history_routes import TILE, TILE_PATH, tile_response

_HEAD = success(HeadDocument, "the head document, as signed and stored")


@get(
    "/roots",
    summary="Sealed days, newest first",
    responses={**success(RootsListing, "sealed days"), **documented(304)},
)
async def roots(
    request: Request[Any, Any, Any],
    before: BeforeDay = None,
    limit: Annotated[int, count(1, 1000)] = 100,
) -> Response[bytes]:
    service = service_of(request)
    bound = day_param(before) if before is not None else None
    listing = await service.read(service.reader.roots, bound, limit)
    return cached(request, answer(RootsListing, listing), immutable=False)


@get(
    "/roots/latest",
    summary="The newest sealed head document",
    responses={**_HEAD, **documented(304, 404)},
)
async def roots_latest(request: Request[Any, Any, Any]) -> Response[bytes]:
    service = service_of(request)
    rows = await service.read(service.reader.read.sealed_heads, None, 1)
    if not rows:
        raise NotFound("no day is sealed yet")
    return cached(request, rows[0].doc, immutable=False)


@get(
    "/roots/{day:str}",
    summary="The sealed head of a day, else its newest unsealed head",
    responses={**_HEAD, **documented(304, 404)},
)
async def roots_day(request: Request[Any, Any, Any], day: Day) -> Response[bytes]:
    row = service_of(request).reader.head_for(day_param(day))
    return cached(request, row.doc, immutable=row.sealed)


@get(
    "/roots/{day:str}/{tree_size:int}",
    summary="The head of a day at a size",
    responses={**_HEAD, **documented(304, 404)},
)
async def roots_day_size(
    request: Request[Any, Any, Any], day: Day, tree_size: Annotated[int, path_count(0)]
) -> Response[bytes]:
    if not 0 <= tree_size <= MAX_INT:
        raise UsageError(f"tree_size must be 0..{MAX_INT}")
    row = service_of(request).reader.head_for(day_param(day), tree_size)
    return cached(request, row.doc, immutable=True)


@get(
    "/roots/{day:str}/timestamps",
    summary="RFC 3161 stamps of a sealed day",
    responses={
        **success(TimestampsDocument, "every stored stamp of the day"),
        **documented(304, 404),
    },
)
async def roots_timestamps(request: Request[Any, Any, Any], day: Day) -> Response[bytes]:
    service = service_of(request)
    day = day_param(day)
    if service.reader.read.sealed_head(day) is None:
        raise NotFound(f"day {day} is not sealed")
    stamps = await service.read(service.reader.read.stamps, day)
    body = answer(TimestampsDocument, timestamps_document(day, stamps))
    return cached(request, body, immutable=False)


@get(
    "/roots/{day:str}/timestamp",
    summary="The earliest stored stamp (DER)",
    responses={
        **success(bytes, "an RFC 3161 TimeStampResp (DER)", "application/timestamp-reply"),
        **documented(304, 404),
    },
)
async def roots_timestamp(request: Request[Any, Any, Any], day: Day) -> Response[bytes]:
    service = service_of(request)
    stamps = await service.read(service.reader.read.stamps, day_param(day))
    if not stamps:
        raise NotFound(f"no stamp for {day}")
    return cached(
        request, stamps[0].token, immutable=True, media_type="application/timestamp-reply"
    )


@get(
    "/roots/{day:str}/tile/{tile:path}",
    summary="A tile or entry bundle of a day's tree (C2SP tlog-tiles)",
    description=(
        f"The tile path after tile/: {TILE_PATH}. Partial tiles exist at the sizes of the "
        "day's published heads; 404 past its newest head."
    ),
    responses={**TILE, **documented(304, 404)},
)
async def roots_day_tile(
    request: Request[Any, Any, Any], day: Day, tile: TilePath
) -> Response[bytes]:
    wanted = parse_tile_path(tile.removeprefix("/"))
    body = service_of(request).reader.read.tiles.day(day_param(day), wanted)
    return tile_response(request, body)
