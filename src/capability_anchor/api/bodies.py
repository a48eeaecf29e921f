"""Request bodies, in one place: their OpenAPI schemas and their check (strict parse, shape,
SPEC §2, the record rule, JCS, leaf hashes), read once into `request.state.checked_body`.
`check_body` is pure and picklable both ways, so bodies over `INLINE_BODY` are checked in
worker processes, a bounded lane each for public and writers' bodies (503 busy past it).
Why: docs/explanation/write-path.md."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from litestar import Litestar
from litestar.openapi.spec import Example, OpenAPIMediaType, RequestBody, Schema

from capability_anchor import leaf
from capability_anchor.errors import InvalidRecord
from capability_anchor.log import prepare_records
from capability_anchor.log.handoff import encode_prepared
from capability_anchor.parentdeath import tie_to_parent
from capability_anchor.record.rule import JSON_VALUE, OBSERVATION, json_value_schema, record_schema
from capability_anchor.service.sequencing import Busy

if TYPE_CHECKING:
    pass

_logger = logging.getLogger("capability_anchor.api")


def forkserver_context() -> multiprocessing.context.ForkServerContext:
    """The one forkserver every helper process of the service is started from (body workers,
    the sequencer candidate), which imports what they run before it forks any."""
    context = multiprocessing.get_context("forkserver")
    # forkserver_tie first: the forkserver is tied to this process before it imports
    # anything else.
    context.set_forkserver_preload(
        [
            "capability_anchor.api.forkserver_tie",
            "capability_anchor.api.bodies",
            "capability_anchor.service.sequencer",
        ]
    )
    return context


Outcome = tuple[str, Any]

SHAPES = {"records": '{"records": [...]}', "record": '{"record": {...}}'}


def check_body(
    kind: str,
    body: bytes,
    iss: str,
    max_records: int,
    rule: str = OBSERVATION,
    now: float | None = None,
    namespace: str | None = None,
) -> Outcome:
    """`kind` "record" (`POST /prove`): the leaf hash. "records" (`POST /records`): the
    prepared batch (`(leaf_hash, leaf_bytes, server_keys)` a record) as the sequencer's wire
    encodes it, and its leaf hashes joined (the answer's), each record checked against
    the log's record rule and id namespace (`record/rule.py`) as of the log's clock `now`
    (the service's, read before the body is sent; this process's clock when None). A bad
    record's note counts from 1, like the CLI's `line N`."""
    try:
        parsed = leaf.parse_json(body)
    except InvalidRecord as exc:
        return ("bad_request", str(exc))
    if (
        not isinstance(parsed, dict)
        or set(parsed) != {kind}
        or not isinstance(parsed[kind], list if kind == "records" else dict)
    ):
        return ("bad_request", f"the body must be {SHAPES[kind]}")
    try:
        if kind == "record":
            return ("ok", leaf.leaf_hash(parsed["record"]))
        records = parsed["records"]
        if not 1 <= len(records) <= max_records:
            return ("bad_request", f"send 1 to {max_records} records, not {len(records)}")
        # Every record is valid before any is stored.
        when = time.time() if now is None else now
        prepared = prepare_records(records, iss, rule, now=when, namespace=namespace)
        return ("ok", (encode_prepared(prepared), b"".join(p[0] for p in prepared)))
    except InvalidRecord as exc:
        note = str(exc)
        return (
            "invalid_record",
            f"record {exc.position + 1}: {note}" if exc.position is not None else note,
        )
    except RecursionError:
        return ("bad_request", "the request is nested too deeply")


WORKER_NICENESS = 5


def start_worker() -> None:
    """A worker dies with the service (`parentdeath`), and runs at a lower CPU priority, so a
    busy machine serves the event loop (reads, /healthz) before body checks."""
    tie_to_parent()
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)


def warm_up() -> bool:
    """Run once when a worker starts, so the first request does not pay for it."""
    return True


INLINE_BODY = 8192
"""Bodies of at most this many bytes are checked on the event loop (`BodyChecker.check`)."""
PUBLIC_BUSY_NOTE = (
    "busy: too many public POST /prove bodies are being checked; try again in a second "
    "(writers have capacity of their own)"
)
WRITER_BUSY_NOTE = "busy: too many writer batches are being checked or appended; try again"


class _Lane:
    """Worker processes and a bound of their own, for one kind of caller."""

    def __init__(self, name: str, workers: int, queue: int, busy_note: str) -> None:
        self.name = name
        self.workers = workers
        self.queue = queue
        self.busy_note = busy_note
        self.pending = 0
        self.pool: ProcessPoolExecutor | None = None

    def new_pool(self) -> ProcessPoolExecutor:
        context = forkserver_context()
        return ProcessPoolExecutor(self.workers, mp_context=context, initializer=start_worker)

    def start(self) -> None:
        if self.workers and self.pool is None:
            self.pool = self.new_pool()
            for _ in range(self.workers):
                self.pool.submit(warm_up)

    def stop(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None

    async def run(self, *args: Any) -> Outcome:
        """`check_body(*args)` in a worker of this lane (Busy if the worker dies)."""
        pool = self.pool
        if pool is None:
            return check_body(*args)
        if self.pending >= self.queue:
            raise Busy(self.busy_note)
        self.pending += 1
        try:
            loop = asyncio.get_running_loop()
            try:
                return await loop.run_in_executor(pool, check_body, *args)
            except BrokenProcessPool:
                # A worker died (killed, out of memory): replace the pool (once, however many
                # requests saw it break) and answer 503.
                if self.pool is pool:
                    _logger.error("a %s body-check worker died; starting a new pool", self.name)
                    self.pool = self.new_pool()
                    pool.shutdown(wait=False, cancel_futures=True)
                raise Busy(self.busy_note) from None
        finally:
            self.pending -= 1


class BodyChecker:
    """Two lanes of `workers` processes and room for `queue` bodies each: public bodies
    (`POST /prove`) and writers' (`POST /records`), so a flood of the one never takes what
    the other needs."""

    def __init__(self, workers: int, queue: int) -> None:
        if workers < 0 or queue < 1:
            raise ValueError("body workers must be >= 0 and the queue >= 1")
        self.public = _Lane("public", workers, queue, PUBLIC_BUSY_NOTE)
        self.writers = _Lane("writer", workers, queue, WRITER_BUSY_NOTE)

    def start(self) -> None:
        """Start the workers without waiting for them (a first request waits if need be)."""
        self.public.start()
        self.writers.start()

    def stop(self) -> None:
        self.public.stop()
        self.writers.stop()

    async def check(self, kind: str, body: bytes, *args: Any, writer: bool = False) -> Outcome:
        """`check_body(kind, body, *args)` in the caller's lane (`writer`: an authenticated
        writer), or on the loop for a body of at most INLINE_BODY bytes (cheaper than the
        trip to a worker)."""
        if len(body) <= INLINE_BODY:
            return check_body(kind, body, *args)
        return await (self.writers if writer else self.public).run(kind, body, *args)


_JSON = "application/json"
_REF = "#/components/schemas/"


@dataclass
class RawSchema(Schema):
    """A JSON Schema given whole, as `msgspec.json.schema` wrote it: Litestar's own Schema
    objects cannot hold a `pattern` with msgspec's meaning and a `not` at once without
    re-spelling every keyword."""

    raw: dict[str, Any] = field(default_factory=dict)

    def to_schema(self) -> dict[str, Any]:
        return dict(self.raw)


def install_schemas(app: Litestar, rule: str, namespace: str | None, max_records: int) -> None:
    """Put the record (a component, so `/schema` lists its members), the JSON value it refers
    to, and the two bodies that refer to it, each with an example request, into `app`'s
    OpenAPI document (built here, once)."""
    openapi = app.openapi_schema
    paths = openapi.paths or {}
    if openapi.components.schemas is None:
        openapi.components.schemas = {}
    components = openapi.components.schemas
    components[JSON_VALUE] = RawSchema(raw=json_value_schema(_REF))
    components["Record"] = RawSchema(raw=record_schema(rule, namespace, _REF))
    ref = {"$ref": _REF + "Record"}
    # A record every rule accepts (the observation rule's, in the log's id namespace when it
    # pins one; no `iss`, optional and else the log's): stored as is if a client sends it.
    record = {
        "v": "0.2",
        "sub": f"{namespace or 'example'}:weather",
        "url": "https://weather.example/mcp",
        "status": "ok",
        "checked_at": "2025-01-15T09:30:00Z",
        "evidence": {"method": "tools/list"},
        "name": "Weather",
    }
    items = {"type": "array", "items": ref, "minItems": 1, "maxItems": max_records}
    said = {"description": f"1 to {max_records} records, each valid before any is stored"}
    bodies: dict[str, tuple[str, str, dict[str, Any], dict[str, Any]]] = {
        "/records": ("RecordsBody", "records", items, said),
        "/prove": ("ProveBody", "record", ref, {}),
    }
    for path, (name, member, schema, more) in bodies.items():
        components[name] = RawSchema(
            raw={
                "type": "object",
                "properties": {member: schema},
                "required": [member],
                "additionalProperties": False,
                **more,
            }
        )
        example = {member: [record] if member == "records" else record}
        item = paths.get(path)
        if item is not None and item.post is not None:
            # The body is read by `guards.before`, never by Litestar: it is documented here.
            media = OpenAPIMediaType(
                schema=RawSchema(raw={"$ref": _REF + name}),
                examples={"record": Example(summary="one record", value=example)},
            )
            item.post.request_body = RequestBody(content={_JSON: media}, required=True)
