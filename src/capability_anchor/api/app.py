"""The HTTP API (SPEC §6): `create_app(settings)` is the one factory.

Two `Log` handles per process: a *reader* used only on the event loop (reads are short:
a head, a tile or two; SQLite's WAL lets them run while a write is in progress), and a
*writer* used only from worker threads, serialised by the Log's own lock (a 1,000-record
batch is ~50 ms of hashing and fsync that must not stall the loop).

Every error is `{v, error, note}` with a stable `error` code: the project's exceptions,
Litestar's own (404, 405, validation, body too large) and anything unexpected (no stack
trace or internals ever reach a response). A rejected request changes nothing stored: all
input is validated before the writer is called, and a batch is one transaction.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import anyio
import msgspec
import rfc8785
from litestar import Litestar, Request, Response, get, post
from litestar.exceptions import HTTPException
from litestar.openapi import OpenAPIConfig, ResponseSpec
from litestar.openapi.spec import Components, SecurityScheme
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter
from litestar.status_codes import HTTP_304_NOT_MODIFIED
from litestar.utils.scope.state import ScopeState

from .. import __version__
from ..appendworker import rebuild, replay
from ..clockguard import ClockGuard, monotonic
from ..encoding import hash_from_hex, parse_day
from ..errors import (
    HTTP_STATUS,
    CapabilityAnchorError,
    NotFound,
    UsageError,
)
from ..export import timestamps_document
from ..files import tighten_modes
from ..log import Log
from ..stamping import Stamper, StampResult, TsaConfig
from . import accesslog
from .background import Background
from .bodies import BodyChecker, Busy, WorkerLost
from .edge import ORIGINAL_METHOD, AnchorApp, BodyTimeout
from .ratelimit import RateLimiter
from .settings import Settings

_logger = logging.getLogger("capability_anchor.stamping")
VERSION = "0.2"
IMMUTABLE = "public, max-age=31536000, immutable"
MAX_INT = 2**63 - 1  # SQLite's integers; larger ones are bad requests, not server errors
NO_CACHE = "no-cache"
T = TypeVar("T")

_STATUS = HTTP_STATUS
_CODE_FOR_STATUS = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    429: "rate_limited",
}


# --- request and response bodies (for validation and the OpenAPI document) -----------------


class RecordsBody(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    records: list[dict[str, Any]]


class ProveBody(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    record: dict[str, Any]


class ErrorBody(msgspec.Struct, frozen=True):
    v: str
    error: str
    note: str


def _errors(*statuses: int) -> dict[int, ResponseSpec]:
    """OpenAPI entries for the `{v, error, note}` answers an operation can give."""
    described = {
        400: "bad_request or invalid_record",
        401: "unauthorized: writers need Authorization: Bearer <token>",
        404: "not_found",
        409: "conflict: refused by the log's rules",
        413: "too_large: the body is over 4 MiB (64 KiB for /prove)",
        429: "rate_limited (see Retry-After)",
        503: "unavailable",
    }
    return {
        s: ResponseSpec(data_container=ErrorBody, description=described[s], generate_examples=False)
        for s in statuses
    }


_READ_ERRORS = _errors(400, 404, 429, 503)
_WRITE_ERRORS = _errors(400, 401, 409, 413, 503)
_WRITER_SECURITY: list[dict[str, list[str]]] = [{"bearer": []}]


# --- errors ----------------------------------------------------------------------------------


class ApiError(Exception):
    """An error raised at the HTTP edge itself (auth, limits)."""

    def __init__(self, code: str, note: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(note)
        self.code = code
        self.note = note
        self.headers = headers or {}


MAX_NOTE_CHARS = 300
"""Notes quote input (a day, a name); a long input must not make a long answer."""


def error_response(code: str, note: str, headers: dict[str, str] | None = None) -> Response[bytes]:
    if len(note) > MAX_NOTE_CHARS:
        note = note[: MAX_NOTE_CHARS - 1] + "\u2026"
    body = msgspec.json.encode(ErrorBody(VERSION, code, note))
    return Response(
        body, status_code=_STATUS[code], media_type="application/json", headers=headers or {}
    )


def _code_of(exc: CapabilityAnchorError) -> str:
    """The SPEC §6 `error` member: the class's own (`errors.py` holds the mapping)."""
    return exc.http_error


def _handle(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    if isinstance(exc, ApiError):
        return error_response(exc.code, exc.note, exc.headers)
    if isinstance(exc, BodyTimeout):
        return error_response("bad_request", str(exc), {"Connection": "close"})
    if isinstance(exc, Busy):
        return error_response(
            "unavailable", "busy: too many request bodies are being checked", {"Retry-After": "1"}
        )
    if isinstance(exc, WorkerLost):
        return error_response("unavailable", WORKER_LOST_NOTE, {"Retry-After": "1"})
    if isinstance(exc, CapabilityAnchorError):
        return error_response(_code_of(exc), exc.http_note())
    if isinstance(exc, RecursionError):
        return error_response("bad_request", "the request is nested too deeply")
    if isinstance(exc, HTTPException):
        code = _CODE_FOR_STATUS.get(exc.status_code, "bad_request")
        if exc.status_code >= 500:
            return error_response("unavailable", "the service cannot answer right now")
        note = {
            "not_found": "no such resource",
            "method_not_allowed": f"{request.scope.get(ORIGINAL_METHOD, request.method)} "
            "is not allowed here",
            "too_large": "the request body is too large",
        }.get(code, _safe_detail(exc))
        return error_response(code, note, exc.headers)
    request.logger.exception("unexpected error")
    return error_response("unavailable", "the service cannot answer right now")


def _safe_detail(exc: HTTPException) -> str:
    extra = exc.extra
    if isinstance(extra, list) and extra and isinstance(extra[0], dict):
        key = extra[0].get("key")
        message = extra[0].get("message")
        if key and message:
            return f"{key}: {message}"
    return str(exc.detail or "bad request")


# --- caching ---------------------------------------------------------------------------------


def _etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def cached(
    request: Request[Any, Any, Any],
    body: bytes,
    *,
    immutable: bool,
    media_type: str = "application/json",
) -> Response[bytes]:
    """A 200 with the caching SPEC §6 asks for, or a 304 when the client's copy matches."""
    tag = _etag(body)
    headers = {"Cache-Control": IMMUTABLE if immutable else NO_CACHE, "ETag": tag}
    wanted = request.headers.get("if-none-match")
    if wanted is not None:
        tags = {t.strip().removeprefix("W/") for t in wanted.split(",")}
        if tag in tags or "*" in tags:
            return Response(b"", status_code=HTTP_304_NOT_MODIFIED, headers=headers)
    return Response(body, media_type=media_type, headers=headers)


def _json(obj: Any) -> bytes:
    data: bytes = rfc8785.dumps(obj)
    return data


def _proof_json(obj: dict[str, Any]) -> bytes:
    """`_json` for `{v, anchor, proof}` and consistency answers, ~4x faster: their member
    names are ASCII and their values strings, integers and lists of them, where plain
    sorted `json.dumps` is byte-identical to RFC 8785 (see `leaf._walk`). These are the
    hot read path, and every microsecond on the event loop is one readers queue behind."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


# --- the service -----------------------------------------------------------------------------


@dataclass
class Service:
    settings: Settings
    reader: Log
    writer: Log
    token: str
    bodies: BodyChecker
    background: Background | None = None

    async def write(self, call: Callable[[], T]) -> T:
        """Run a writer call on a worker thread (the Log serialises writers itself)."""
        return await anyio.to_thread.run_sync(call)

    def close(self) -> None:
        self.reader.close()
        self.writer.close()


def _service(request: Request[Any, Any, Any]) -> Service:
    service: Service = request.app.state.service
    return service


def _check_writer(request: Request[Any, Any, Any], service: Service) -> None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    # Constant-time comparison: the time taken says nothing about how much of a guess was right.
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        token.strip().encode(), service.token.encode()
    ):
        raise ApiError(
            "unauthorized",
            "writers need Authorization: Bearer <token>",
            {"WWW-Authenticate": 'Bearer realm="capability-anchor"'},
        )


async def _checked_body(request: Request[Any, Any, Any], service: Service, kind: str) -> Any:
    """Read, strictly parse and validate a POST body before Litestar decodes it: duplicate
    names, lone surrogates, depth and number range are SPEC §2 questions with SPEC §2
    answers (and a hostile body must never reach a recursive decoder). The size limit comes
    first; the parse and everything after it run in a worker process (`api/bodies.py`)."""
    body = await request.body()
    limit = _body_limit(service.settings, kind)
    if len(body) > limit:
        raise ApiError("too_large", f"the request body is over {limit} bytes")
    code, value = await service.bodies.check(
        kind, body, service.writer.iss, service.settings.max_records, service.writer.records
    )
    if code != "ok":
        raise ApiError(code, value)
    return value


def _body_limit(settings: Settings, kind: str | None) -> int:
    return settings.max_prove_body if kind == "record" else settings.max_body


def _day(value: str) -> str:
    return parse_day(value).isoformat()


# --- public reads ----------------------------------------------------------------------------


@get("/healthz", summary="Liveness", responses=_READ_ERRORS)
async def healthz() -> dict[str, str]:
    return {"v": VERSION, "status": "ok", "version": __version__}


@get("/roots", summary="Sealed days, newest first", responses=_READ_ERRORS)
async def roots(
    request: Request[Any, Any, Any],
    before: Annotated[str | None, QueryParameter(description="exclusive day bound")] = None,
    limit: Annotated[int, QueryParameter(ge=1, le=1000)] = 100,
) -> Response[bytes]:
    service = _service(request)
    listing = service.reader.roots(_day(before) if before is not None else None, limit)
    return cached(request, _json(listing), immutable=False)


@get("/roots/latest", summary="The newest sealed head document", responses=_READ_ERRORS)
async def roots_latest(request: Request[Any, Any, Any]) -> Response[bytes]:
    rows = _service(request).reader.read.sealed_heads(None, 1)
    if not rows:
        raise NotFound("no day is sealed yet")
    return cached(request, rows[0].doc, immutable=False)


@get(
    "/roots/{day:str}",
    summary="The sealed head of a day, else its newest unsealed head",
    responses=_READ_ERRORS,
)
async def roots_day(request: Request[Any, Any, Any], day: FromPath[str]) -> Response[bytes]:
    row = _service(request).reader.head_for(_day(day))
    return cached(request, row.doc, immutable=row.sealed)


@get(
    "/roots/{day:str}/{tree_size:int}",
    summary="The head of a day at a size",
    responses=_READ_ERRORS,
)
async def roots_day_size(
    request: Request[Any, Any, Any], day: FromPath[str], tree_size: FromPath[int]
) -> Response[bytes]:
    if not 0 <= tree_size <= MAX_INT:
        raise UsageError(f"tree_size must be 0..{MAX_INT}")
    row = _service(request).reader.head_for(_day(day), tree_size)
    return cached(request, row.doc, immutable=True)


@get(
    "/roots/{day:str}/timestamps", summary="RFC 3161 stamps of a sealed day", responses=_READ_ERRORS
)
async def roots_timestamps(request: Request[Any, Any, Any], day: FromPath[str]) -> Response[bytes]:
    reader = _service(request).reader
    day = _day(day)
    if reader.read.sealed_head(day) is None:
        raise NotFound(f"day {day} is not sealed")
    body = _json(timestamps_document(day, reader.read.stamps(day)))
    return cached(request, body, immutable=False)


@get(
    "/roots/{day:str}/timestamp", summary="The earliest stored stamp (DER)", responses=_READ_ERRORS
)
async def roots_timestamp(request: Request[Any, Any, Any], day: FromPath[str]) -> Response[bytes]:
    stamps = _service(request).reader.read.stamps(_day(day))
    if not stamps:
        raise NotFound(f"no stamp for {day}")
    return cached(
        request, stamps[0].token, immutable=True, media_type="application/timestamp-reply"
    )


@get("/proof", summary="Inclusion proof of an entry in a published head", responses=_READ_ERRORS)
async def proof(
    request: Request[Any, Any, Any],
    day: Annotated[str | None, QueryParameter()] = None,
    index: Annotated[int | None, QueryParameter(ge=0, le=MAX_INT)] = None,
    tree_size: Annotated[int | None, QueryParameter(ge=0, le=MAX_INT)] = None,
    leaf_hash: Annotated[str | None, QueryParameter()] = None,
) -> Response[bytes]:
    reader = _service(request).reader
    if leaf_hash is not None:
        if index is not None:
            raise UsageError("give either day and index, or leaf_hash (and optionally day)")
        h = hash_from_hex(leaf_hash, "leaf_hash")
        answer = reader.proof_by_leaf_hash(h, _day(day) if day is not None else None, tree_size)
    else:
        if day is None or index is None:
            raise UsageError("give either day and index, or leaf_hash (and optionally day)")
        answer = reader.proof(_day(day), index, tree_size)
    return cached(request, _proof_json(answer), immutable=False)


@get("/consistency", summary="Consistency proof between two sizes of a day", responses=_READ_ERRORS)
async def consistency(
    request: Request[Any, Any, Any],
    day: FromQuery[str],
    first: Annotated[int, QueryParameter(ge=0, le=MAX_INT)],
    second: Annotated[int, QueryParameter(ge=0, le=MAX_INT)],
) -> Response[bytes]:
    answer = _service(request).reader.consistency(_day(day), first, second)
    return cached(request, _proof_json(answer), immutable=False)


@get("/entries/{day:str}", summary="Entries of a day", responses=_READ_ERRORS)
async def entries(
    request: Request[Any, Any, Any],
    day: FromPath[str],
    start: Annotated[int, QueryParameter(ge=0, le=MAX_INT)] = 0,
    limit: Annotated[int, QueryParameter(ge=1, le=1000)] = 100,
) -> Response[bytes]:
    day = _day(day)
    listed = _service(request).reader.entries(day, start, limit)
    return cached(request, _json({"v": VERSION, "day": day, "entries": listed}), immutable=False)


@get(
    "/record",
    summary="A signed resolver-2 record of a server (Capability Resolution §6.3)",
    responses=_READ_ERRORS,
)
async def record(
    request: Request[Any, Any, Any],
    id: Annotated[str | None, QueryParameter(description="the server ID (matches sub)")] = None,
    url: Annotated[str | None, QueryParameter(description="the server URL, any form")] = None,
) -> Response[bytes]:
    service = _service(request)
    answer = service.reader.record(sub=id, url=url, lifetime=service.settings.record_lifetime)
    return Response(
        _json(answer), media_type="application/json", headers={"Cache-Control": NO_CACHE}
    )


@get("/keys", summary="JWKS of every key the log has signed with", responses=_READ_ERRORS)
async def keys(request: Request[Any, Any, Any]) -> Response[bytes]:
    return cached(request, _service(request).reader.keyset().to_json(), immutable=False)


@post(
    "/prove",
    summary="Proof for a record, by its leaf",
    status_code=200,
    opt={"body": "record"},
    responses={**_READ_ERRORS, **_errors(413)},
)
async def prove(request: Request[Any, Any, Any], data: JSONBody[ProveBody]) -> Response[bytes]:
    h: bytes = request.state.checked_body
    answer = _service(request).reader.proof_by_leaf_hash(h)
    return Response(_proof_json(answer), media_type="application/json")


# --- writers ---------------------------------------------------------------------------------


@post(
    "/records",
    summary="Append records (writers)",
    status_code=200,
    opt={"writer": True, "body": "records"},
    responses=_WRITE_ERRORS,
    security=_WRITER_SECURITY,
)
async def post_records(
    request: Request[Any, Any, Any],
    data: JSONBody[RecordsBody],
    prove: Annotated[int, QueryParameter(ge=0, le=1)] = 0,
) -> Response[bytes]:
    service = _service(request)
    appended = getattr(request.state, "appended", None)
    if appended is not None:  # by a worker process, in _before: the entries' JSON
        body = b'{"v":"' + VERSION.encode() + b'","entries":' + appended + b"}"
        return Response(body, media_type="application/json")
    writer = service.writer
    prepared = request.state.checked_body

    def run() -> list[dict[str, Any]]:
        if prove:
            # The batch, a head covering it and each entry's proof: one transaction, so the
            # answer is either all of it, durable, or an error with nothing stored.
            return writer.append_and_prove(prepared)
        return [r.to_json() for r in writer.append_prepared(prepared)]

    # One clock verdict for the whole request: a jump after the append must not make its
    # checkpoint refuse (a 503 for a stored batch); see ClockGuard.pinned.
    out = await service.write(request.app.state.clock_guard.pinned(run))
    # Not a signed document, so no need for canonical JSON: msgspec is ~50x faster here.
    body = msgspec.json.encode({"v": VERSION, "entries": out})
    return Response(body, media_type="application/json")


WORKER_LOST_NOTE = (
    "the writer process stopped before answering: the batch may or may not be stored; "
    "re-sending it is safe (records already stored are answered with duplicate: true)"
)


def _prove_flag(request: Request[Any, Any, Any]) -> bool | None:
    """`prove` of POST /records when it is one Litestar will accept (0, 1 or absent), else
    None: the batch is then only checked, and Litestar refuses the parameter."""
    values = request.query_params.getall("prove", [])
    if not values:
        return False
    if len(values) == 1 and values[0] in ("0", "1"):
        return bool(values[0] == "1")
    return None


async def _append_in_worker(
    request: Request[Any, Any, Any], service: Service, prove: bool
) -> bytes:
    """Body check and append in a worker process (`appendworker.py`), so the append holds no
    GIL readers need. The time is read here, through the service's ClockGuard: a
    disagreeing clock refuses (503) before the body is even sent."""
    body = await request.body()
    limit = _body_limit(service.settings, "records")
    if len(body) > limit:
        raise ApiError("too_large", f"the request body is over {limit} bytes")
    now, at_mono = request.app.state.clock_guard.now(), monotonic()
    code, value = await service.bodies.append(
        body,
        service.writer.iss,
        service.settings.max_records,
        service.settings.data_dir,
        prove,
        now,
        at_mono,
        service.settings.public_url.rstrip("/") if service.settings.public_url else None,
    )
    if code == "ok":
        # The body was strictly checked and stored: Litestar's own decode of it for
        # post_records' `data` would only hold the event loop (~ms per batch) for nothing.
        ScopeState.from_scope(request.scope).json = {"records": []}
        entries: bytes = value[0]
        replay(value[1])
        return entries
    if code == "error":
        raise rebuild(value)
    if code == "crash":
        _logger.error("appending in a worker process failed:\n%s", value)
        raise ApiError("unavailable", "the service cannot answer right now")
    raise ApiError(code, value)


@post(
    "/checkpoint",
    summary="Publish today's head if the tree grew (writers)",
    status_code=200,
    opt={"writer": True},
    responses=_WRITE_ERRORS,
    security=_WRITER_SECURITY,
)
async def post_checkpoint(request: Request[Any, Any, Any]) -> Response[bytes]:
    service = _service(request)
    doc = await service.write(service.writer.checkpoint)
    return Response(doc if doc is not None else b"null", media_type="application/json")


# --- guards: auth and the public rate limit ---------------------------------------------------


_INT_PARAMS = ("index", "tree_size", "start", "limit", "first", "second", "prove")
_DIGITS = re.compile(r"0|[1-9][0-9]{0,18}")


def _check_integers(request: Request[Any, Any, Any]) -> None:
    """One spelling per number: Litestar would also take `1.0`, `1e0`, `03` or `+3`, and an
    immutable URL must not have several spellings."""
    query = request.query_params
    for name in _INT_PARAMS:
        values = query.getall(name, [])
        if len(values) > 1:
            raise UsageError(f"{name} is given more than once")
        if values and _DIGITS.fullmatch(values[0]) is None:
            raise UsageError(f"{name} must be a non-negative integer written in digits")
    if "tree_size" in request.path_params:
        segment = request.url.path.rstrip("/").rsplit("/", 1)[-1]
        if _DIGITS.fullmatch(segment) is None:
            raise UsageError("tree_size must be a non-negative integer written in digits")


async def _before(request: Request[Any, Any, Any]) -> None:
    """Runs before Litestar resolves a handler's arguments (so before any body decoding).
    Writers are recognised by their handler's `opt`, never by the path, which a mount point
    or an ASGI root_path would change."""
    service = _service(request)
    opt = request.route_handler.opt
    if opt.get("writer"):
        _check_writer(request, service)
    else:
        limiter: RateLimiter | None = request.app.state.limiter
        if limiter is not None:
            client = request.client.host if request.client else "unknown"
            wait = limiter.check(client)
            if wait > 0:
                raise ApiError(
                    "rate_limited",
                    f"over {limiter.rate} requests per second",
                    {"Retry-After": str(max(1, int(wait + 0.999)))},
                )
    _check_integers(request)
    kind = opt.get("body")
    limit = _body_limit(service.settings, kind)
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise ApiError("too_large", f"the request body is over {limit} bytes")
    worker_prove = _prove_flag(request) if kind == "records" else None
    if worker_prove is not None and service.bodies.appends:
        # Checked AND appended in one call to a worker process, here: before Litestar
        # decodes the body for post_records, as for every other checked body.
        request.state.checked_body = None
        request.state.appended = await _append_in_worker(request, service, worker_prove)
    elif kind is not None:
        request.state.checked_body = await _checked_body(request, service, kind)


# --- the factory -----------------------------------------------------------------------------


def _log_stamp(result: StampResult) -> None:
    _logger.log(logging.INFO if result.ok else logging.WARNING, "%s", result.describe())


def _guard_clocks(settings: Settings, *logs: Log) -> ClockGuard:
    """Every Log of the service reads the time through one ClockGuard (see clockguard.py):
    while the wall clock disagrees with the monotonic clock, every append path (`POST
    /records` with or without `prove=1`), checkpoint, seal, stamp and `/record` token fails
    with ClockDisagrees (503) before anything is stored."""
    guard = ClockGuard(settings.data_dir)
    for log in logs:
        log.clock = guard.now
    return guard


def create_app(settings: Settings) -> Litestar:
    """Open the log (running its start-up self-check, before any port opens) and build the
    app around it."""
    # Refused before the log is opened: a service with an unusable token must not start.
    token = settings.token()
    tighten_modes(settings.data_dir)
    writer = Log.open(settings.data_dir)
    try:
        reader = Log.open(settings.data_dir, background_checkpoints=False)
    except BaseException:
        writer.close()
        raise
    if settings.public_url:
        writer.public_url = reader.public_url = settings.public_url.rstrip("/")
    guard = _guard_clocks(settings, writer, reader)
    bodies = BodyChecker(settings.body_workers, settings.body_queue)
    service = Service(settings, reader, writer, token, bodies)
    try:
        # Checked before the port opens: a TSA without a trusted CA is a usage error (SPEC §7).
        tsa = TsaConfig.resolve(writer.config, settings.tsa, settings.tsa_ca, settings.tsa_deadline)
    except BaseException:
        service.close()
        raise
    if settings.background:
        stamper = None
        if tsa.urls:
            stamper = Stamper(writer, tsa, retry_first=settings.tsa_retry, report=_log_stamp)
        service.background = Background(
            writer, settings.data_dir, settings.checkpoint_interval, stamper, guard
        )

    async def startup(app: Litestar) -> None:
        bodies.start()
        if service.background is not None:
            await service.background.start()

    async def shutdown(app: Litestar) -> None:
        if service.background is not None:
            await service.background.stop()
        bodies.stop()
        service.close()

    from .pages import DocsPage, front_page  # pages.py builds on this module: no import cycle

    limiter = RateLimiter(settings.rate_limit) if settings.rate_limit > 0 else None
    handlers: dict[Any, Callable[..., Any]] = {
        Exception: _handle,
        HTTPException: _handle,
        ApiError: _handle,
        CapabilityAnchorError: _handle,
        404: _handle,
        405: _handle,
    }
    app = AnchorApp(
        route_handlers=[
            front_page,
            healthz,
            roots,
            roots_latest,
            roots_day,
            roots_day_size,
            roots_timestamps,
            roots_timestamp,
            proof,
            consistency,
            entries,
            keys,
            record,
            prove,
            post_records,
            post_checkpoint,
        ],
        before_request=_before,
        exception_handlers=handlers,
        on_startup=[startup],
        on_shutdown=[shutdown],
        openapi_config=OpenAPIConfig(
            title="capability-anchor",
            version=__version__,
            path="/schema",
            render_plugins=[DocsPage()],
            components=Components(
                security_schemes={"bearer": SecurityScheme(type="http", scheme="bearer")}
            ),
        ),
        request_max_body_size=settings.max_body,
        debug=False,
        logging_config=accesslog.litestar_logging(),  # not the root logger: ours (accesslog)
    )
    app.state.service = service
    app.state.clock_guard = guard
    app.state.limiter = limiter
    app.body_timeout = settings.body_timeout
    app.drain_limit = settings.max_body
    accesslog.install(app)  # access and event log lines (api/accesslog.py)
    return app
