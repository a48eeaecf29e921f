"""The service's configuration: one documented struct, each field with its default and why."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from capability_anchor import envvars as e
from capability_anchor.envvars import DEFAULT_WRITE_QUEUE
from capability_anchor.log.datafiles import check_restored
from capability_anchor.log.writer_token import writer_token
from capability_anchor.store import open as stores


@dataclass(frozen=True)
class Settings:
    data_dir: Path = Path("data")
    """The log's data dir (`--data`, env CAPABILITY_ANCHOR_DATA, else ./data)."""

    public_url: str | None = None
    """Base of anchor URLs; default: the log's `public_url`, else its `iss` (SPEC §5)."""

    checkpoint_interval: float = 60.0
    """Seconds between background checkpoints when the tree grew (SPEC §4 default 60 s)."""

    record_lifetime: int = 24 * 3600
    """Lifetime of `/record` tokens: default 24 h, at most 48 h (Capability Resolution §8)."""

    rate_limit: int = 100
    """Public requests per second per client address; 0 turns limiting off (SPEC §10)."""

    max_body: int = 4 * 1024 * 1024
    """Largest request body accepted; larger ones get 413 (SPEC §6: 4 MiB)."""

    max_prove_body: int = 64 * 1024
    """Largest `POST /prove` body; larger ones get 413. A valid one is a record of at most
    16 KiB of leaf plus its reserved members: its JWS (the leaf in base64, ~22 KiB), a proof
    path of at most 64 hashes (~4.3 KB) and a few short members, ~43 KB in all. 64 KiB leaves
    room for whitespace and bounds what one public request can make the service parse."""

    body_timeout: float = 30.0
    """Seconds from a request's start for its whole body to arrive (`--body-timeout`, env
    CAPABILITY_ANCHOR_BODY_TIMEOUT); a late body gets 400 and the connection is closed."""

    header_timeout: float = 10.0
    """Seconds for a request's header block (`serve --header-timeout`; under uvicorn env
    CAPABILITY_ANCHOR_HEADER_TIMEOUT, read by `web.nodelay`); late: the connection is closed."""

    body_workers: int = 1
    """Processes that check request bodies off the event loop, per lane: public bodies and
    writers' have N each (env CAPABILITY_ANCHOR_BODY_WORKERS); 0 checks them on the loop
    (embedding, tests)."""

    body_queue: int = 16
    """Bodies being checked or waiting at once, per lane; more get 503 `unavailable` (busy)."""

    write_queue: int = DEFAULT_WRITE_QUEUE
    """Records waiting for the log's sequencer to commit them, at most (`--write-queue`, env
    CAPABILITY_ANCHOR_WRITE_QUEUE); a batch that would pass it gets 503 busy, Retry-After 1.
    With body workers (the default) the service starts a sequencer candidate
    (`service/sequencing.py`); with none, appends are group-committed in this process."""

    max_records: int = 1000
    """Records per `POST /records` (SPEC §6: 1-1000, else 400)."""

    tsa: tuple[str, ...] = ()
    """RFC 3161 TSAs that stamp sealed heads (`--tsa`); empty: the data dir's stored ones."""

    tsa_ca: tuple[Path, ...] = ()
    """PEM files of trusted TSA CAs (`--tsa-ca`); empty: the data dir's stored ones."""

    tsa_deadline: float | None = None
    """Total seconds for one TSA exchange (`--tsa-deadline`, default 10, SPEC §7)."""

    tsa_retry: float = 30.0
    """First delay before a TSA that failed is asked again; it doubles per failure up to an
    hour (jittered). Sealing never waits for it."""

    witness_deadline: float = 10.0
    """Total seconds for one witness exchange (`--witness-deadline`, env
    CAPABILITY_ANCHOR_WITNESS_DEADLINE, SPEC §12.3 default 10). A witness that hangs costs
    its own submission this much per round; nothing else waits for it."""

    published: str | None = None
    """The log's public mirror (a URL of a serving log or of a static export) or an export
    folder (`--published`, env CAPABILITY_ANCHOR_PUBLISHED): read at start and before each
    background checkpoint, beside the witnesses' monitoring views, so that a data dir behind
    what was published signs nothing (`published.learn`, SPEC §13.3); a restored copy signs
    only once a reference showed what it holds, `none` saying nothing was published (§14.2)."""
    publish: Path | None = None
    """`--publish DIR` (env CAPABILITY_ANCHOR_PUBLISH): the static read path, exported into
    DIR as the log signs and stores (tiles, entry bundles, heads, stamps, checkpoints; the
    checkpoint last), for any web server or CDN to serve (SPEC §13.6)."""
    metrics_token: str | None = field(default=None, repr=False)
    """Bearer token `/metrics` asks for (`--metrics-token`, env
    CAPABILITY_ANCHOR_METRICS_TOKEN); None: `/metrics` is public."""

    background: bool = True
    """Run checkpoints and sealing in the background (tests of pure request handling turn
    it off). Only one process per data dir does it, whatever the number of workers."""

    writer_token: str | None = field(default=None, repr=False)
    """Bearer token for writers; default env CAPABILITY_ANCHOR_TOKEN, else DIR/writer-token
    (every source checked by `log.writer_token.writer_token`: at least 32 bytes, file 0600)."""

    clock: Callable[[], float] = field(default=time.time, repr=False, compare=False)
    """The wall clock (seconds since the epoch) the service's days and `iat`s come from,
    through its ClockGuard (checked against the monotonic clock): checkpoints, seals, appends
    in this process and in the append workers, stamps, `/record` tokens and the background
    work. `time.time`; tests give a clock of their own (no waiting around midnight)."""

    @classmethod
    def from_env(cls) -> Settings:
        """For `uvicorn capability_anchor.api.asgi:app`: every field from the environment."""

        def value(var: e.EnvVar, default: str) -> str:
            return var.get() or default

        tsa_deadline = e.TSA_DEADLINE.get()
        data_dir = Path(value(e.DATA, "data"))
        if e.STORE.get():
            stores.given(data_dir, e.STORE.get() or "")  # the data dir must be bound to it
        return cls(
            data_dir=data_dir,
            public_url=e.PUBLIC_URL.get() or None,
            checkpoint_interval=float(value(e.CHECKPOINT_INTERVAL, "60")),
            record_lifetime=int(value(e.RECORD_LIFETIME, str(24 * 3600))),
            rate_limit=int(value(e.RATE_LIMIT, "100")),
            body_timeout=float(value(e.BODY_TIMEOUT, "30")),
            header_timeout=float(value(e.HEADER_TIMEOUT, "10")),
            body_workers=int(value(e.BODY_WORKERS, "1")),
            write_queue=int(value(e.WRITE_QUEUE, str(DEFAULT_WRITE_QUEUE))),
            # Space-separated lists: URLs and paths with spaces are not supported here.
            tsa=tuple(value(e.TSA, "").split()),
            tsa_ca=tuple(Path(p) for p in value(e.TSA_CA, "").split()),
            tsa_deadline=float(tsa_deadline) if tsa_deadline else None,
            witness_deadline=float(value(e.WITNESS_DEADLINE, "10")),
            published=e.PUBLISHED.get() or None,
            publish=Path(e.PUBLISH.get() or "") if e.PUBLISH.get() else None,
            metrics_token=e.METRICS_TOKEN.get(),
        )

    def token(self) -> str:
        """The checked writer token (TokenError when unusable: the service must not start);
        a database restored without its key and token is named as such first."""
        check_restored(self.data_dir)
        return writer_token(self.data_dir, self.writer_token)
