"""The HTTP API (SPEC §6): `create_app(settings)` is the one factory. It opens the log (its
self-check runs before any port opens), gives the service one clock, and builds Litestar
around `guards.before`, the exception handlers, the operations of `routes/` and the pages."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from functools import partial
from typing import Any

import msgspec
from litestar import Litestar, Request, Response
from litestar.enums import MediaType, OpenAPIMediaType
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme

from capability_anchor import __version__
from capability_anchor.errors import StoreError, UsageError
from capability_anchor.files import tighten_modes
from capability_anchor.log import MAX_BATCH, Log
from capability_anchor.log.clockguard import ClockGuard
from capability_anchor.log.marks import behind_state
from capability_anchor.log.published import learn
from capability_anchor.log.stamping import Stamper, StampResult, TsaConfig
from capability_anchor.metrics.service import enable, observe, register_state
from capability_anchor.service.background import Background
from capability_anchor.service.sequencing import Busy, SequencerLink, WorkerLost
from capability_anchor.store import open as stores
from capability_anchor.store.damage import refuse_if_damaged
from capability_anchor.web import accesslog
from capability_anchor.web import errors as edge
from capability_anchor.web.exchange import AnchorApp
from capability_anchor.web.guards import RateLimiter, metrics_token
from capability_anchor.witness.client import Witnessing

from .bodies import BodyChecker, forkserver_context, install_schemas
from .guards import before
from .home import front_page
from .openapi import Finished
from .pages import docs_html
from .routes import ROUTES
from .scripts import explorer_js, verify_js
from .service import Service
from .settings import Settings

_logger = logging.getLogger("capability_anchor.stamping")
WORKER_LOST_NOTE = (
    "the writer process stopped before answering: the batch may or may not be stored; "
    "re-sending it is safe (records already stored are answered with duplicate: true)"
)


def _worker_answer(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    """The sequencer's answers: busy, or lost (both 503, Retry-After 1)."""
    note = exc.note if isinstance(exc, Busy) else WORKER_LOST_NOTE
    return edge.error_response("unavailable", note, edge.RETRY_SOON)


def _json(doc: dict[str, Any], _: str) -> bytes:
    return msgspec.json.encode(doc)


def _log_stamp(result: StampResult) -> None:
    observe().stamps.labels("stored" if result.ok else "failed").inc()
    _logger.log(logging.INFO if result.ok else logging.WARNING, "%s", result.describe())


def _open_service(settings: Settings) -> Service:
    # A missing or mistyped data dir is named as the CLI names it, before the token is looked
    # for in it: "no log at DIR", not a missing token file that is only a consequence.
    if not stores.exists(settings.data_dir):
        raise StoreError(
            f"no log at {stores.describe(settings.data_dir)} (run `capability-anchor init` first)"
        )
    # Refused before the log is opened: a service with an unusable token must not start, nor
    # one on a log some process found damaged (store/damage.py names the fix).
    token = settings.token()
    metrics_token(settings.metrics_token)
    if settings.write_queue < MAX_BATCH:
        # Here for both forms: refused by the sequencer, each new candidate would die alike.
        raise UsageError(
            f"--write-queue (env CAPABILITY_ANCHOR_WRITE_QUEUE) must be at least {MAX_BATCH} "
            "(one batch)"
        )
    refuse_if_damaged(settings.data_dir)
    tighten_modes(settings.data_dir, stores.own_files(settings.data_dir))
    # Each Log is closed again if the service cannot be made; from then on, by the service.
    with contextlib.ExitStack() as opened:
        writer = opened.enter_context(Log.open(settings.data_dir, clock=settings.clock))
        reader = opened.enter_context(
            Log.open(settings.data_dir, clock=settings.clock, background_checkpoints=False)
        )
        if settings.public_url:
            writer.public_url = reader.public_url = settings.public_url.rstrip("/")
        # Before the port listens and anything can sign: a data dir behind what was published
        # enters the behind state (SPEC §13.3), and a restored copy that nothing could be
        # compared with is refused, naming `--published` (NotCompared, SPEC §14.2).
        learn(
            writer,
            settings.published,
            publish=settings.publish,
            deadline=settings.witness_deadline,
            before_signing=True,
        )
        # One ClockGuard for every Log of the service: while the clocks disagree, every write
        # and signature fails with ClockDisagrees (503) before anything is stored.
        guard = ClockGuard(settings.data_dir, wall=settings.clock)
        writer.clock = reader.clock = guard.now
        bodies = BodyChecker(settings.body_workers, settings.body_queue)
        limiter = RateLimiter(settings.rate_limit) if settings.rate_limit > 0 else None
        service = Service(settings, reader, writer, token, bodies, guard, limiter)
        if settings.body_workers > 0:
            url = writer.public_url
            service.sequencer = SequencerLink(
                settings.data_dir, settings.write_queue, url, forkserver_context()
            )
        # Checked before the port opens: a TSA without a trusted CA is a usage error (SPEC §7).
        tsa = TsaConfig.resolve(writer.config, settings.tsa, settings.tsa_ca, settings.tsa_deadline)
        if settings.background:
            stamper = None
            if tsa.urls:
                stamper = Stamper(writer, tsa, retry_first=settings.tsa_retry, report=_log_stamp)
            # Witnesses are read from the stored policy at every round (none: nothing to do).
            witnessing = Witnessing(
                writer, settings.checkpoint_interval, deadline=settings.witness_deadline
            )
            service.background = Background(
                writer,
                settings.data_dir,
                settings.checkpoint_interval,
                stamper,
                guard,
                witnessing,
                published=settings.published,
                learn_deadline=settings.witness_deadline,
                scrubber=stores.scrubber(settings.data_dir),
                publish=settings.publish,
            )
        opened.pop_all()
    return service


def create_app(settings: Settings) -> Litestar:
    """Open the log and build the app around it."""
    enable()  # this process serves /metrics: it counts (metrics.py)
    # The behind state is a data-dir file every worker reads (published.py), so each scrape
    # reads it where it is answered.
    register_state(
        "behind_published", lambda log: behind_state(log.data_dir) is not None, default=True
    )
    service = _open_service(settings)

    watching: list[asyncio.Task[None]] = []

    async def startup(app: Litestar) -> None:
        watching.append(asyncio.create_task(service.marks.run()))
        service.bodies.start()
        if service.sequencer is not None:
            # The drivers' warnings of the candidate in this service's log format.
            fmt = accesslog.configured_format()
            service.sequencer.start(
                None if fmt is None else partial(accesslog.configure_drivers, fmt)
            )
        if service.background is not None:
            await service.background.start()

    async def shutdown(app: Litestar) -> None:
        if service.background is not None:
            await service.background.stop()
        if service.sequencer is not None:
            await service.sequencer.close()
            service.sequencer.stop()
        service.bodies.stop()
        for task in watching:
            task.cancel()
        service.close()

    app = AnchorApp(
        route_handlers=[front_page, verify_js, explorer_js, *ROUTES],
        before_request=before,
        exception_handlers={**edge.HANDLERS, Busy: _worker_answer, WorkerLost: _worker_answer},
        on_startup=[startup],
        on_shutdown=[shutdown],
        openapi_config=OpenAPIConfig(
            title="capability-anchor",
            version=__version__,
            path="/schema",
            render_plugins=[
                Finished("/", MediaType.HTML, docs_html),  # /schema, for people
                Finished("/openapi.json", OpenAPIMediaType.OPENAPI_JSON, _json),
            ],
            components=Components(
                security_schemes={
                    "bearer": SecurityScheme(type="http", scheme="bearer"),
                    "metrics": SecurityScheme(
                        type="http",
                        scheme="bearer",
                        description="the metrics token, when the service has one",
                    ),
                }
            ),
        ),
        request_max_body_size=settings.max_body,
        debug=False,
        logging_config=accesslog.litestar_logging(),  # not the root logger: ours (accesslog)
    )
    app.state.service = service
    # The record bodies of the OpenAPI document are the log's own rule (api/bodies.py).
    install_schemas(app, service.writer.records, service.writer.id_namespace, settings.max_records)
    app.body_timeout = settings.body_timeout
    app.drain_limit = settings.max_body
    # Access and event log lines, and the request metrics (web/accesslog.py); a refused
    # POST /records is also counted by its error code.
    accesslog.install(app, writes=("POST", "/records"))
    return app
