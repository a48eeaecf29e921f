"""Every environment variable the package reads, with its default and meaning: code reads one only
through its `EnvVar` (`DATA.get()`), and docs/reference/environment.md is generated from `VARIABLES`
(tools/env_table.py; tests/unit/test_envvars.py). Imports nothing of the package."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class EnvVar:
    name: str
    default: str
    """What applies when the variable is unset (as the table shows it)."""
    meaning: str
    read_by: str

    def get(self, env: Mapping[str, str] | None = None) -> str | None:
        """The value as set (an empty string included), or None when unset."""
        return (os.environ if env is None else env).get(self.name)

    def is_set(self, env: Mapping[str, str] | None = None) -> bool:
        return self.get(env) is not None

    def set(self, value: str) -> None:
        """Set it for this process and the ones it starts (`metrics.prepare`)."""
        os.environ[self.name] = value


_SERVICE = "the ASGI form (`uvicorn capability_anchor.api.asgi:app`)"

DATA = EnvVar(
    "CAPABILITY_ANCHOR_DATA",
    "`./data`",
    "the log's data dir, when `--data` is not given",
    f"every operator command but `demo`; {_SERVICE}",
)
STORE = EnvVar(
    "CAPABILITY_ANCHOR_STORE",
    "the data dir's `store-url`, else its SQLite database",
    "the store URL (`postgresql://USER@HOST/DBNAME`), when `--store` is not given: `init` "
    "binds the data dir to it, every other command checks it is the data dir's",
    f"every operator command that opens a log; {_SERVICE}",
)
TOKEN = EnvVar(
    "CAPABILITY_ANCHOR_TOKEN",
    "the file `DATA/writer-token`",
    "the writer token (at least 32 visible ASCII bytes); set but empty is refused",
    f"`serve`, `init`, {_SERVICE}",
)
PUBLIC_URL = EnvVar(
    "CAPABILITY_ANCHOR_PUBLIC_URL",
    "the log's `public_url`, else its `iss`",
    "base of anchor URLs (as `serve --public-url`)",
    _SERVICE,
)
CHECKPOINT_INTERVAL = EnvVar(
    "CAPABILITY_ANCHOR_CHECKPOINT_INTERVAL",
    "`60`",
    "seconds between background checkpoints when the tree grew (`--checkpoint-interval`)",
    _SERVICE,
)
RECORD_LIFETIME = EnvVar(
    "CAPABILITY_ANCHOR_RECORD_LIFETIME",
    "`86400`",
    "lifetime of `/record` tokens in seconds, at most 172800 (`--record-lifetime`)",
    _SERVICE,
)
RATE_LIMIT = EnvVar(
    "CAPABILITY_ANCHOR_RATE_LIMIT",
    "`100`",
    "public requests per second per client address, 0 = off (`--rate-limit`)",
    _SERVICE,
)
BODY_TIMEOUT = EnvVar(
    "CAPABILITY_ANCHOR_BODY_TIMEOUT",
    "`30`",
    "seconds for a request's whole body (`--body-timeout`)",
    _SERVICE,
)
HEADER_TIMEOUT = EnvVar(
    "CAPABILITY_ANCHOR_HEADER_TIMEOUT",
    "`10`",
    "seconds for a request's header block (`--header-timeout`)",
    f"{_SERVICE} and its `--http capability_anchor.web.nodelay:NoDelayProtocol`",
)
BODY_WORKERS = EnvVar(
    "CAPABILITY_ANCHOR_BODY_WORKERS",
    "`1`",
    "processes per lane (public bodies, writers) that check request bodies, 0 = on the event "
    "loop (`--body-workers`)",
    _SERVICE,
)
DEFAULT_WRITE_QUEUE = 16384
"""Records waiting for a commit at most, by default: 256 connections of one-record requests use
256 of it, 16 batches of 1,000 fill it (`service.sequencer`)."""
WRITE_QUEUE = EnvVar(
    "CAPABILITY_ANCHOR_WRITE_QUEUE",
    f"`{DEFAULT_WRITE_QUEUE}`",
    "records waiting for the log's sequencer to commit them, at most; a batch that would "
    "pass it is answered 503 busy with Retry-After (`--write-queue`)",
    _SERVICE,
)
TSA = EnvVar(
    "CAPABILITY_ANCHOR_TSA",
    "the TSAs stored by `init --tsa`",
    "RFC 3161 TSA URLs, space-separated (`--tsa`)",
    _SERVICE,
)
TSA_CA = EnvVar(
    "CAPABILITY_ANCHOR_TSA_CA",
    "the CAs stored by `init --tsa-ca`",
    "PEM files of trusted TSA CAs, space-separated (`--tsa-ca`)",
    _SERVICE,
)
TSA_DEADLINE = EnvVar(
    "CAPABILITY_ANCHOR_TSA_DEADLINE",
    "`10`",
    "total seconds for one TSA exchange (`--tsa-deadline`)",
    _SERVICE,
)
WITNESS_DEADLINE = EnvVar(
    "CAPABILITY_ANCHOR_WITNESS_DEADLINE",
    "`10`",
    "total seconds for one witness exchange (`--witness-deadline`)",
    _SERVICE,
)
PUBLISHED = EnvVar(
    "CAPABILITY_ANCHOR_PUBLISHED",
    "none",
    "the public mirror (URL) or an export folder the log checks itself against before it "
    "signs (`--published`); the value `none` states that nothing was ever published (a "
    "restored copy then signs without a comparison)",
    f"`serve`, `checkpoint`, `seal`, `cosign`, {_SERVICE}",
)
PUBLISH = EnvVar(
    "CAPABILITY_ANCHOR_PUBLISH",
    "none",
    "a folder the service exports the static read path into as the log grows (tiles, entry "
    "bundles, heads, stamps, the checkpoint last), for any web server (`--publish`)",
    f"`serve`, {_SERVICE}",
)
LOG_FORMAT = EnvVar(
    "CAPABILITY_ANCHOR_LOG_FORMAT",
    "`plain`",
    "access and event log lines on stderr: `plain` or `json` (`--log-format`)",
    f"`serve`, `witness serve`, {_SERVICE}",
)
METRICS_TOKEN = EnvVar(
    "CAPABILITY_ANCHOR_METRICS_TOKEN",
    "none: `/metrics` is public",
    "Bearer token `/metrics` asks for (`--metrics-token`); set but empty is refused",
    f"{_SERVICE}, `witness serve`",
)
PROMETHEUS_MULTIPROC_DIR = EnvVar(
    "PROMETHEUS_MULTIPROC_DIR",
    "a private folder made at each start",
    "prometheus-client's multiprocess folder; the operator's own (emptied by them before "
    "each start) is used by the ASGI form, never by `serve`",
    f"{_SERVICE}, and the processes the service starts",
)
WITNESS_DATA = EnvVar(
    "CAPABILITY_ANCHOR_WITNESS_DATA",
    "`./witness-data`",
    "the witness's data dir, when `--data` is not given",
    "`capability-anchor witness …`",
)
_PROXY = (
    "the HTTP clients (httpx; urllib in `monitor`) of `verify-proof`, `monitor`, TSAs, witnesses"
)
HTTP_PROXY = EnvVar("HTTP_PROXY", "none", "proxy for http:// URLs", _PROXY)
HTTPS_PROXY = EnvVar("HTTPS_PROXY", "none", "proxy for https:// URLs", _PROXY)
ALL_PROXY = EnvVar("ALL_PROXY", "none", "proxy for both, when the one above is unset", _PROXY)
NO_PROXY = EnvVar("NO_PROXY", "none", "hosts reached without a proxy", _PROXY)

# Every EnvVar above, in the order defined (the table's order).
VARIABLES: tuple[EnvVar, ...] = tuple(v for v in dict(globals()).values() if isinstance(v, EnvVar))


def markdown_table() -> str:
    """The docs' table of `VARIABLES`, as tools/env_table.py writes it."""
    rows = ["| variable | default (unset) | meaning | read by |", "|---|---|---|---|"]
    rows += [f"| `{v.name}` | {v.default} | {v.meaning} | {v.read_by} |" for v in VARIABLES]
    return "\n".join(rows) + "\n"
