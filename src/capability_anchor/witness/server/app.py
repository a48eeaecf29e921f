"""The witness's HTTP service (`witness serve`): Litestar behind the HTTP edge `web/`. `POST
/add-checkpoint` answers as c2sp.org/tlog-witness says (409 `text/x.tlog.size`); every other refusal
is `{v, error, note}` JSON as the log's API answers; `GET /<hex sha256(origin)>/checkpoint` is the
monitoring view. Store reads and signing run on worker threads (docs/explanation/api-reads.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import anyio.to_thread
import msgspec
from litestar import Request, Response, get, post
from litestar.params import PathParameter

from capability_anchor.head import VERSION
from capability_anchor.metrics import service as metrics
from capability_anchor.web import accesslog
from capability_anchor.web.errors import HANDLERS, ApiError, ErrorBody
from capability_anchor.web.exchange import AnchorApp
from capability_anchor.web.guards import (
    RateLimiter,
    check_length,
    check_metrics,
    check_rate,
    metrics_answer,
)

from .protocol import MAX_BODY, SIZE_CONTENT_TYPE, Refusal, Witness

TEXT = "text/plain; charset=utf-8"
_ENCODER = msgspec.json.Encoder()
_CODES = {400: "bad_request", 403: "forbidden", 404: "not_found", 422: "unprocessable"}


def _handle(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    if not isinstance(exc, Refusal):
        return HANDLERS[Exception](request, exc)  # type: ignore[no-any-return]
    if exc.status == 409:
        # Exactly `text/x.tlog.size` (clients compare it whole): Litestar would append a
        # charset to a text/ media type, an explicit header is sent as given.
        return Response(
            exc.body(),
            status_code=409,
            media_type=SIZE_CONTENT_TYPE,
            headers={"Content-Type": SIZE_CONTENT_TYPE},
        )
    body = _ENCODER.encode(ErrorBody(VERSION, _CODES[exc.status], exc.reason[:300]))
    return Response(body, status_code=exc.status, media_type="application/json")


def _witness(request: Request[Any, Any, Any]) -> Witness:
    witness: Witness = request.app.state["witness"]
    return witness


async def _before(request: Request[Any, Any, Any]) -> None:
    # Indexed, as `api.service.service_of` (decisions/37-base.md).
    state = request.app.state
    if request.route_handler.opt.get("metrics"):
        check_metrics(request, state["metrics_token"])
    else:
        check_rate(request, state["limiter"])
    check_length(request, state["max_body"])


@post("/add-checkpoint", status_code=200, media_type=TEXT)
async def add_checkpoint(request: Request[Any, Any, Any]) -> Response[bytes]:
    body = await request.body()
    limit = request.app.state["max_body"]
    if len(body) > limit:
        raise ApiError("too_large", f"the request body is over {limit} bytes")
    # SQLite and Ed25519 off the event loop; the store serialises the writes itself.
    line = await anyio.to_thread.run_sync(_witness(request).add_checkpoint, body)
    return Response(line.encode("utf-8"), status_code=200, media_type=TEXT)


@get("/{hex_origin:str}/checkpoint", media_type=TEXT)
async def checkpoint(
    request: Request[Any, Any, Any], hex_origin: Annotated[str, PathParameter()]
) -> Response[bytes]:
    note = await anyio.to_thread.run_sync(_witness(request).monitoring, hex_origin)
    return Response(note, media_type=TEXT)


@get("/healthz", media_type=TEXT)
async def healthz() -> str:
    return "ok\n"


@get("/metrics", opt={"metrics": True})
async def metrics_page() -> Response[bytes]:
    """As the log's `/metrics`: public unless `--metrics-token`, never rate limited."""
    return await metrics_answer()


def create_witness_app(
    witness: Witness,
    *,
    rate_limit: int = 100,
    max_body: int = MAX_BODY,
    metrics_token: str | None = None,
) -> AnchorApp:
    async def shutdown(app: Any) -> None:
        witness.close()

    metrics.enable()  # this process serves /metrics: it counts
    handlers: dict[Any, Callable[..., Any]] = {**HANDLERS, Exception: _handle, Refusal: _handle}
    app = AnchorApp(
        route_handlers=[add_checkpoint, checkpoint, healthz, metrics_page],
        before_request=_before,
        exception_handlers=handlers,
        on_shutdown=[shutdown],
        request_max_body_size=max_body,
        openapi_config=None,
        debug=False,
        logging_config=accesslog.litestar_logging(),  # not the root logger: ours (accesslog)
    )
    app.state.witness = witness
    app.state.limiter = RateLimiter(rate_limit) if rate_limit > 0 else None
    app.state.max_body = max_body
    app.state.metrics_token = metrics_token
    app.drain_limit = max_body
    # One access line per request and the start and shutdown events, as the log's service.
    accesslog.install(app)
    return app
