"""`capability-anchor serve`, the HTTP service with its background work, and what `witness serve`
shares with it: the socket bound here (a taken port is exit 2 with one line), the access and event
log (`web/accesslog.py`), a clean exit 0 on SIGTERM or SIGINT once in-flight requests are done."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capability_anchor.envvars import DEFAULT_WRITE_QUEUE, METRICS_TOKEN, PUBLISH, TOKEN
from capability_anchor.errors import StoreError, UsageError
from capability_anchor.jws import MAX_RECORD_LIFETIME

from .common import EXIT_OK
from .operator_base import (
    PROG,
    add_data,
    add_published,
    add_tsa,
    add_witness_deadline,
    data_dir,
    published_of,
)

if TYPE_CHECKING:
    import socket

# Imported inside functions: the API ~850 ms, the log ~380 ms, the HTTP edge (`web`) 60-320 ms
# (python -X importtime after `cli.operator`, min of 7 runs, 2026-12-05): `--help` and every
# other command would pay them.


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    add_data(p)
    p.add_argument(
        "--init",
        action="store_true",
        help="create the log in --data if there is none (without it, a missing log is exit 2)",
    )
    p.add_argument(
        "--iss",
        metavar="ORIGIN",
        default=None,
        help="with --init: the new log's resolver origin (default: http://HOST:PORT)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=int, default=8000, help="TCP port to listen on")
    p.add_argument("--public-url", metavar="URL", help="base of anchor URLs (default: iss)")
    p.add_argument(
        "--checkpoint-interval",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds between background checkpoints (when the tree grew)",
    )
    p.add_argument(
        "--record-lifetime",
        type=int,
        default=24 * 3600,
        metavar="S",
        help=f"lifetime of /record tokens in seconds, at most {MAX_RECORD_LIFETIME}",
    )
    add_tsa(p)
    add_witness_deadline(p)
    add_published(p)
    p.add_argument(
        "--publish",
        metavar="DIR",
        default=None,
        help="export the static read path into DIR as the log grows (tiles, entry bundles, "
        "heads, stamps, the checkpoint last), for nginx or a CDN (default: "
        "$CAPABILITY_ANCHOR_PUBLISH, else none)",
    )
    p.add_argument(
        "--rate-limit",
        type=int,
        default=100,
        metavar="N",
        help="public requests per second per client address, 0 = off",
    )
    p.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds for a request's headers",
    )
    p.add_argument(
        "--body-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds for a request's body",
    )
    p.add_argument(
        "--body-workers",
        type=int,
        default=1,
        metavar="N",
        help="processes checking request bodies, per lane: public (/prove) and writers "
        "(0: on the event loop, and appends committed in this process, without a sequencer)",
    )
    p.add_argument(
        "--write-queue",
        type=int,
        default=DEFAULT_WRITE_QUEUE,
        metavar="N",
        help="records waiting for the log's sequencer to commit them, at most; a batch that "
        "would pass it is answered 503 busy, with Retry-After",
    )
    add_edge_arguments(p)


def add_edge_arguments(p: argparse.ArgumentParser) -> None:
    """`--metrics-token` and `--log-format`, for `serve` and `witness serve` alike."""
    p.add_argument(
        "--metrics-token",
        metavar="TOKEN",
        default=None,
        help="/metrics answers only requests with Authorization: Bearer TOKEN "
        "(default: $CAPABILITY_ANCHOR_METRICS_TOKEN, else /metrics is public)",
    )

    p.add_argument(
        "--log-format",
        choices=("plain", "json"),
        default=None,
        help="access and event log lines on stderr: plain text or JSON Lines "
        "(default: $CAPABILITY_ANCHOR_LOG_FORMAT, else plain)",
    )


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(EXIT_OK)


def bind(host: str, port: int) -> Any:
    """The listening socket, bound here so a taken port is a one-line usage error (exit 2)
    and "serving on" is printed only once connections can be made."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        # As uvicorn does: a restart may reuse the port while old connections linger in
        # TIME_WAIT (a port another process listens on is still refused).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(f"port {port} on {host} is taken (address already in use)") from None
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def cmd_serve(args: argparse.Namespace) -> int:
    from capability_anchor.api import Settings, create_app
    from capability_anchor.log import Log
    from capability_anchor.log.writer_token import TOKEN_FILE
    from capability_anchor.metrics import service as metrics
    from capability_anchor.store import open as stores

    # Until uvicorn takes the signals over (and after it gives them back), a Ctrl-C or
    # SIGTERM during start-up is a quiet exit too, not a KeyboardInterrupt traceback.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _exit_cleanly)
    data = data_dir(args.data)
    if not 0 < args.record_lifetime <= MAX_RECORD_LIFETIME:
        raise UsageError(
            f"--record-lifetime must be 1..{MAX_RECORD_LIFETIME} seconds "
            f"({MAX_RECORD_LIFETIME // 3600} h)"
        )
    if not (args.header_timeout > 0 and args.body_timeout > 0 and args.body_workers >= 0):
        raise UsageError("--header-timeout and --body-timeout must be > 0, --body-workers >= 0")
    if args.iss is not None and not args.init:
        raise UsageError("--iss is only for --init (a log keeps the iss it was made with)")
    token = edge_token(args)
    # Never a new log unless told to (`--init`): a mistyped --data would otherwise start a
    # new log with a new key and iss, silently forking the resolver.
    create = not stores.exists(data)
    if not create and args.iss is not None:
        print(f"{PROG}: --iss ignored: a log exists in {data}", file=sys.stderr)
    if create and not args.init:
        raise StoreError(
            f"no log at {stores.describe(data)} (run `capability-anchor init` first, or "
            "`serve --init`)"
        )
    # Bound, not yet listening: a taken port is refused before a log is created or opened,
    # and no connection is accepted before the log's self-check and the token check pass.
    sock = bind(args.host, args.port)
    try:
        if create:
            iss = args.iss or f"http://{url_host(args.host)}:{args.port}"
            Log.init(data, iss=iss, public_url=args.public_url, store=args.store).close()
            print(f"{PROG}: initialised a log in {data} (iss {iss})", file=sys.stderr)
        publish = args.publish or PUBLISH.get()
        settings = Settings(
            data_dir=data,
            public_url=args.public_url,
            checkpoint_interval=args.checkpoint_interval,
            record_lifetime=args.record_lifetime,
            rate_limit=args.rate_limit,
            tsa=tuple(args.tsa),
            tsa_ca=tuple(Path(p) for p in args.tsa_ca),
            tsa_deadline=args.tsa_deadline,
            witness_deadline=args.witness_deadline,
            published=published_of(args),
            publish=Path(publish) if publish else None,
            header_timeout=args.header_timeout,
            body_timeout=args.body_timeout,
            body_workers=args.body_workers,
            write_queue=args.write_queue,
            metrics_token=token,
        )
        # Before the log opens anything that counts: this process's metrics, and those of
        # the body workers it starts, go to a new folder of its own (metrics.py).
        metrics.prepare(own=True)
        # The log is opened and self-checked here, before the socket listens.
        app = create_app(settings)
        # Said once the token is known to be usable: a refusal is then the only line.
        where = f"env {TOKEN.name}" if TOKEN.is_set() else str(data / TOKEN_FILE)
        print(f"{PROG}: writer token in {where}", file=sys.stderr)
        run_on(sock, app, header_timeout=settings.header_timeout)
    finally:
        sock.close()
    return EXIT_OK


def edge_token(args: argparse.Namespace) -> str | None:
    """Set the access and event log's `--log-format`; the metrics token (the option, else the
    environment), checked: a usage error."""
    from capability_anchor.web import accesslog
    from capability_anchor.web.guards import metrics_token

    accesslog.configure(args.log_format)
    given = args.metrics_token if args.metrics_token is not None else METRICS_TOKEN.get()
    return metrics_token(given)


def run_on(sock: socket.socket, app: object, *, header_timeout: float, prog: str = PROG) -> None:
    """Serve `app` with uvicorn on `sock` (bound, not yet listening) until a signal stops it:
    `serve` and `witness serve` both."""
    import uvicorn

    from capability_anchor.web.nodelay import Server, with_header_timeout

    config = uvicorn.Config(
        app,  # type: ignore[arg-type]
        log_level="warning",
        # Ours (web/accesslog.py) replaces uvicorn's access log.
        access_log=False,
        timeout_graceful_shutdown=30,
        # The production form's protocol and loop (web/nodelay.py).
        http=with_header_timeout(header_timeout),
        loop="uvloop",
    )
    server = Server(config)
    # From "serving on" on, a signal that comes before uvicorn has taken the signals over
    # stops the server as uvicorn's own handler would (start, then at once a clean
    # shutdown, logged), rather than a SystemExit out of a half-started event loop.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, server.handle_exit)
    sock.listen(config.backlog)
    host, port = sock.getsockname()[:2]
    # Connections made from now on wait in the backlog until uvicorn accepts them.
    print(f"{prog}: serving on http://{url_host(host)}:{port}", file=sys.stderr, flush=True)
    # uvicorn stops accepting on SIGTERM/SIGINT and lets in-flight requests (and batches)
    # finish before the app's shutdown closes the log; then it re-raises the signal it
    # caught to the handler that was in place before it (ours): a clean exit 0.
    server.run(sockets=[sock])


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
