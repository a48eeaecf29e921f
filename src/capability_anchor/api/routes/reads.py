"""The GET operations of SPEC §6 and of the service itself (`/healthz`, `/metrics`): sealed
days, heads and stamps, proofs, entries, a server's signed record and the keys, served as
stored and signed (which reads leave the loop: docs/explanation/api-reads.md)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request, Response, get
from litestar.response.base import ASGIResponse

from capability_anchor import __version__
from capability_anchor.api.caching import Answer, answer, cached, uncached
from capability_anchor.api.guards import raw_query
from capability_anchor.api.models import (
    ConsistencyAnswer,
    EntriesListing,
    HeadDocument,
    Health,
    Jwks,
    KeyRecords,
    ProofAnswer,
    RootsListing,
    ServerRecord,
    TimestampsDocument,
    documented,
    success,
)
from capability_anchor.api.openapi import (
    BeforeDay,
    Day,
    QueryDay,
    TilePath,
    count,
    path_count,
)
from capability_anchor.api.service import day_param, service_of
from capability_anchor.encoding import hash_from_hex
from capability_anchor.errors import NotFound, UsageError
from capability_anchor.export.days import timestamps_document
from capability_anchor.head import VERSION
from capability_anchor.keys import trust
from capability_anchor.log.issuance import issue_record
from capability_anchor.merkle.tilepath import parse_tile_path
from capability_anchor.read.reader import MAX_INT
from capability_anchor.web.guards import metrics_answer

from .history_routes import TILE, TILE_PATH, tile_response

_HEAD = success(HeadDocument, "the head document, as signed and stored")
_PROOF_INTS = ("index", "tree_size")
_EITHER = "give either day and index, or leaf_hash (and optionally day)"
_RECORD_UNAVAILABLE = (
    "the note says why: a store fault or the damage mark, or the wall and monotonic clocks "
    "disagree (the clock guard: no token is signed meanwhile)"
)


def _health(doc: Health) -> ASGIResponse:
    return ASGIResponse(body=msgspec.json.encode(doc), media_type="application/json")


_HEALTHY = _health(Health(VERSION, "ok", __version__))


@get(
    "/healthz",
    summary="Liveness",
    responses=success(Health, "Request fulfilled, document follows"),
)
async def healthz(request: Request[Any, Any, Any]) -> ASGIResponse:
    # 200 either way: a degraded log still serves every read, so a load balancer keeps it.
    # The healthy answer is made once: Litestar's response building is most of its cost.
    behind = service_of(request).marks.behind
    if behind is not None:
        return _health(Health(VERSION, "degraded", __version__, behind.error().http_note()))
    return _HEALTHY


# --- sealed days, heads and their stamps ------------------------------------------------------


@get(
    "/roots",
    summary="Sealed days, newest first",
    responses={**success(RootsListing, "sealed days"), **documented(304)},
)
async def roots(
    request: Request[Any, Any, Any],
    before: BeforeDay = None,
    limit: Annotated[int, count(1, 1000)] = 100,
) -> Answer:
    service = service_of(request)
    bound = day_param(before) if before is not None else None
    listing = await service.read(service.reader.roots, bound, limit)
    return cached(request, answer(RootsListing, listing), immutable=False)


@get(
    "/roots/latest",
    summary="The newest sealed head document",
    responses={**_HEAD, **documented(304, 404)},
)
async def roots_latest(request: Request[Any, Any, Any]) -> Answer:
    service = service_of(request)
    rows = await service.read(service.reader.store.sealed_heads, None, 1)
    if not rows:
        raise NotFound("no day is sealed yet")
    return cached(request, rows[0].doc, immutable=False)


@get(
    "/roots/{day:str}",
    summary="The sealed head of a day, else its newest unsealed head",
    responses={**_HEAD, **documented(304, 404)},
)
async def roots_day(request: Request[Any, Any, Any]) -> Answer:
    # `day` read from the path, not as Litestar's parameter (its kwargs and signature model
    # cost more than the answer; openapi.DAY_PATH documents it): decisions/37-edge4.md.
    row = service_of(request).reader.head_for(day_param(request.scope["path_params"]["day"]))
    return cached(request, row.doc, immutable=row.sealed)


@get(
    "/roots/{day:str}/{tree_size:int}",
    summary="The head of a day at a size",
    responses={**_HEAD, **documented(304, 404)},
)
async def roots_day_size(
    request: Request[Any, Any, Any], day: Day, tree_size: Annotated[int, path_count(0)]
) -> Answer:
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
async def roots_timestamps(request: Request[Any, Any, Any], day: Day) -> Answer:
    service = service_of(request)
    day = day_param(day)
    if service.reader.store.sealed_head(day) is None:
        raise NotFound(f"day {day} is not sealed")
    stamps = await service.read(service.reader.store.stamps, day)
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
async def roots_timestamp(request: Request[Any, Any, Any], day: Day) -> Answer:
    service = service_of(request)
    stamps = await service.read(service.reader.store.stamps, day_param(day))
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
async def roots_day_tile(request: Request[Any, Any, Any], day: Day, tile: TilePath) -> Answer:
    wanted = parse_tile_path(tile.removeprefix("/"))
    body = service_of(request).reader.read.tiles.day(day_param(day), wanted)
    return tile_response(request, body)


# --- proofs: the hot read path ----------------------------------------------------------------


@get(
    "/proof",
    summary="Inclusion proof of an entry in a published head",
    # Its query (`openapi.QUERY_FORMS`) is read by `raw_query`, not Litestar's parameters.
    responses={
        **success(ProofAnswer, "the proof and the head it is against"),
        **documented(400, 304, 404),
    },
)
async def proof(request: Request[Any, Any, Any]) -> Answer:
    query = raw_query(request.scope, _PROOF_INTS)
    day, index = query.get("day"), query.get("index")
    tree_size, leaf_hash = query.get("tree_size"), query.get("leaf_hash")
    service = service_of(request)
    reader = service.reader
    if leaf_hash is not None:
        if index is not None:
            raise UsageError(_EITHER)
        h = hash_from_hex(leaf_hash, "leaf_hash")
        in_day = day_param(day) if day is not None else None
        found = await service.read(reader.proof_by_leaf_hash, h, in_day, tree_size)
    else:
        if day is None or index is None:
            raise UsageError(_EITHER)
        found = reader.proof(day_param(day), index, tree_size)
    return cached(request, answer(ProofAnswer, found), immutable=False)


@get(
    "/consistency",
    summary="Consistency proof between two sizes of a day",
    responses={**success(ConsistencyAnswer, "the consistency path"), **documented(304, 404)},
)
async def consistency(
    request: Request[Any, Any, Any],
    day: QueryDay,
    first: Annotated[int, count(1)],
    second: Annotated[int, count(1)],
) -> Answer:
    found = service_of(request).reader.consistency(day_param(day), first, second)
    return cached(request, answer(ConsistencyAnswer, found), immutable=False)


# --- entries, keys and a server's record ------------------------------------------------------


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
) -> Answer:
    day = day_param(day)
    service = service_of(request)
    listed = await service.read(service.reader.entries, day, start, limit)
    # Claims are the writer's object (any member name, any number): RFC 8785 itself.
    body = answer(EntriesListing, {"v": VERSION, "day": day, "entries": listed}, plain=False)
    return cached(request, body, immutable=False)


@get(
    "/keys",
    summary="JWKS of every key the log has signed with, less the revoked ones",
    responses={**success(Jwks, "the JWK Set, RFC 8785"), **documented(304)},
)
async def keys(request: Request[Any, Any, Any]) -> Answer:
    service = service_of(request)
    keyset = await service.read(service.reader.published_keys)
    return cached(request, keyset.to_json(), immutable=False)


@get(
    "/keys/records",
    summary="The key rotation records and revocations (key-records.json)",
    responses={
        **success(KeyRecords, "the records in the order stored, RFC 8785"),
        **documented(304),
    },
)
async def key_records(request: Request[Any, Any, Any]) -> Answer:
    """What an export writes to key-records.json (SPEC §13.2): every rotation record and
    revocation, so a client holding an old key follows the log to its current one and
    learns which key was revoked when. Empty `records` until the log has rotated."""
    service = service_of(request)
    rows = await service.read(service.reader.store.key_records)
    tokens = [token for _, _, _, token in rows]
    body = trust.key_records_document(service.reader.iss, tokens)
    return cached(request, body, immutable=False)


@get(
    "/record",
    summary="A signed resolver-2 record of a server (Capability Resolution §6.3)",
    # Its query (`openapi.QUERY_FORMS`) is read by `raw_query`, not Litestar's parameters.
    responses={
        **success(ServerRecord, "the record and its token"),
        **documented(400, 404, unavailable=_RECORD_UNAVAILABLE),
    },
)
async def record(request: Request[Any, Any, Any]) -> Answer:
    query = raw_query(request.scope, ())
    sub, url = query.get("id"), query.get("url")
    service = service_of(request)
    lifetime = service.settings.record_lifetime
    # On the loop: index seeks and a signature, cheaper than a thread hop (decisions/37-loopreads).
    # Open (`ServerRecord`): a record carries what its writer gave it besides the documented
    # members, so it is not shaped by the Struct; tests/integration/test_api_shapes.py holds
    # its members. RFC 8785 already (`jws.record_answer`).
    # Its own iat and exp (reused only while nearly whole, `log.issuance`): never cached.
    return uncached(issue_record(service.reader, sub=sub, url=url, lifetime=lifetime))


@get(
    "/metrics",
    summary="Prometheus metrics",
    description=(
        "Every process of the service summed (uvicorn workers and body workers), and the "
        "log's state read from the store at the scrape. Needs Authorization: Bearer "
        "<metrics token> when the service was started with one; never rate limited."
    ),
    opt={"metrics": True},
    # Its 200; the 401 of a metrics token and the 503 come from `guards.before`.
    responses=success(str, "the Prometheus text exposition format, version 0.0.4", "text/plain"),
    # Bearer with the metrics token when the service has one, else nothing.
    security=[{"metrics": []}, {}],
)
async def metrics_page(request: Request[Any, Any, Any]) -> Response[bytes]:
    return await metrics_answer(service_of(request).collector)
