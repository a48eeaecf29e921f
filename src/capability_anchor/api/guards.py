"""What every request passes before its handler: writer auth, the public rate limit, one
spelling per integer, and the body checks and limits (SPEC §2, §6, §10).

`before` runs before Litestar resolves a handler's arguments, so before anything could
decode a body. A body is read once, its size checked, and then strictly parsed and
validated (`api/bodies.py`: in a worker process, unless it is small): duplicate names, lone
surrogates, depth and number range are SPEC §2 questions with SPEC §2 answers, and a hostile
body must never reach a recursive decoder. The result is what the handler gets as `data`
(`CheckedBody`): Litestar never decodes a body itself. A checked `POST /records` batch is
handed to the log's sequencer (`api/sequencing.py`), which commits it with the batches of
every other writer.

A rejected request changes nothing stored: all input is validated before the writer is
called, and a batch is one transaction.

Store reads: none. What `before` needs of the log (its iss, record rule, id namespace) is
held in memory by the writer `Log`; the damage mark is one `stat` of the data dir, and
`POST /records` batches are appended by the sequencer, a process of its own.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from litestar import Request
from litestar.dto import AbstractDTO, DTOFieldDefinition
from litestar.typing import FieldDefinition

from capability_anchor.errors import UsageError
from capability_anchor.log.clockguard import monotonic
from capability_anchor.web.errors import ApiError
from capability_anchor.web.guards import (
    MISSING_METRICS_TOKEN_NOTE,
    check_bearer,
    check_length,
    check_metrics,
    check_rate,
)

from .service import Service, service_of
from .settings import Settings

if TYPE_CHECKING:
    from litestar._openapi.schema_generation import SchemaCreator
    from litestar.openapi.spec import Reference, Schema

    from .sequencing import SequencerLink

_logger = logging.getLogger("capability_anchor.stamping")
T = TypeVar("T")

INT_PARAMS = ("index", "tree_size", "start", "limit", "first", "second", "prove", "size")
_DIGITS = re.compile(r"0|[1-9][0-9]{0,18}")


@dataclass(frozen=True, slots=True)
class Appended:
    """A `POST /records` batch the log's sequencer stored: its entries' JSON."""

    entries: bytes


class CheckedBody(AbstractDTO[T]):
    """`data` of a handler with a checked body (`opt={"body": kind}`): what `before` made of
    the body, never a second decode. `CheckedBody[Struct]` documents the body as `Struct`."""

    def decode_bytes(self, value: bytes) -> Any:
        return self.asgi_connection.state.checked_body

    def decode_builtins(self, value: dict[str, Any]) -> Any:
        return self.asgi_connection.state.checked_body

    @classmethod
    def create_for_field_definition(
        cls, field_definition: FieldDefinition, handler_id: str, backend_cls: Any = None
    ) -> None:
        """Nothing to build: no transfer model, since nothing is decoded here."""

    @classmethod
    def create_openapi_schema(
        cls, field_definition: FieldDefinition, handler_id: str, schema_creator: SchemaCreator
    ) -> Reference | Schema:
        return schema_creator.for_field_definition(FieldDefinition.from_annotation(cls.model_type))

    @classmethod
    def generate_field_definitions(
        cls, model_type: type[Any]
    ) -> Generator[DTOFieldDefinition, None, None]:
        yield from ()

    @classmethod
    def detect_nested_field(cls, field_definition: FieldDefinition) -> bool:
        return False


# --- the guards ------------------------------------------------------------------------------


MISSING_TOKEN_NOTE = "this endpoint needs Authorization: Bearer <writer token>"  # noqa: S105
WRONG_TOKEN_NOTE = "the bearer token does not match this log's writer token"  # noqa: S105


def check_writer(request: Request[Any, Any, Any], service: Service) -> None:
    """401 `unauthorized` unless the request carries the writer token. No bearer token at
    all (no header, another scheme, an empty token) and a wrong one get different notes, so
    a client can tell a missing header from a wrong secret; neither says anything about the
    token given or the one expected (not its length, not how much of it matched)."""
    check_bearer(request, service.token, MISSING_TOKEN_NOTE, WRONG_TOKEN_NOTE)


def check_integers(request: Request[Any, Any, Any]) -> None:
    """One spelling per number: Litestar would also take `1.0`, `1e0`, `03` or `+3`, and an
    immutable URL must not have several spellings."""
    query = request.query_params
    # Only the operation's own parameters: one it does not take is ignored like any other
    # unknown name, so it cannot make an operation without parameters answer 400.
    declared = request.route_handler.parsed_fn_signature.parameters
    for name in INT_PARAMS:
        if name not in declared:
            continue
        values = query.getall(name, [])
        if len(values) > 1:
            raise UsageError(f"{name} is given more than once")
        if values and _DIGITS.fullmatch(values[0]) is None:
            raise UsageError(f"{name} must be a non-negative integer written in digits")
    if "tree_size" in request.path_params:
        segment = request.url.path.rstrip("/").rsplit("/", 1)[-1]
        if _DIGITS.fullmatch(segment) is None:
            raise UsageError("tree_size must be a non-negative integer written in digits")


def body_limit(settings: Settings, kind: str | None) -> int:
    return settings.max_prove_body if kind == "record" else settings.max_body


async def read_body(request: Request[Any, Any, Any], limit: int) -> bytes:
    body = await request.body()
    if len(body) > limit:
        raise ApiError("too_large", f"the request body is over {limit} bytes")
    return body


# --- checking bodies -------------------------------------------------------------------------


async def checked_body(request: Request[Any, Any, Any], service: Service, kind: str) -> Any:
    """The body strictly parsed and validated, in a worker process (`api/bodies.py`): the
    leaf hash for "record", the prepared batch for "records"."""
    body = await read_body(request, body_limit(service.settings, kind))
    writer = service.writer
    # The time limit of the record rule is the log's clock, read through the ClockGuard (a
    # disagreeing clock refuses now, as the append would).
    now = service.clock.now() if kind == "records" else None
    code, value = await service.bodies.check(
        kind,
        body,
        writer.iss,
        service.settings.max_records,
        writer.records,
        now,
        writer.id_namespace,
        # Only a request that passed `check_writer` reaches the writers' lane.
        writer=bool(request.route_handler.opt.get("writer")),
    )
    if code != "ok":
        raise ApiError(code, value)
    return value


def prove_flag(request: Request[Any, Any, Any]) -> bool | None:
    """`prove` of POST /records when it is one Litestar will accept (0, 1 or absent), else
    None: the batch is then only checked, and Litestar refuses the parameter."""
    values = request.query_params.getall("prove", [])
    if not values:
        return False
    if len(values) == 1 and values[0] in ("0", "1"):
        return bool(values[0] == "1")
    return None


async def append_by_sequencer(
    request: Request[Any, Any, Any], service: Service, link: SequencerLink, prove: bool
) -> Appended:
    """The body checked (on the loop when small, else in a writers' worker) and handed to the
    log's sequencer (`api/sequencing.py`), which answers once the commit holding it returned.
    The time is read here, through the service's ClockGuard: a disagreeing clock refuses
    (503) before anything is sent, and the sequencer continues this reading."""
    settings = service.settings
    body = await read_body(request, body_limit(settings, "records"))
    now, at_mono = service.clock.now(), monotonic()
    writer = service.writer
    code, value = await service.bodies.check(
        "records",
        body,
        writer.iss,
        settings.max_records,
        writer.records,
        now,
        writer.id_namespace,
        writer=True,
    )
    if code != "ok":
        raise ApiError(code, value)
    return Appended(await link.append(value, prove, now, at_mono))


async def before(request: Request[Any, Any, Any]) -> None:
    """Litestar's `before_request`. Writers are recognised by their handler's `opt`, never
    by the path, which a mount point or an ASGI root_path would change."""
    service = service_of(request)
    # A log found damaged answers nothing from its store, reads included: a read that does
    # not fail on the damage could still be of a page that came back zeroed.
    service.refuse_if_damaged()
    opt = request.route_handler.opt
    if opt.get("writer"):
        check_writer(request, service)
    elif opt.get("metrics"):
        check_metrics(request, service.settings.metrics_token)
    else:
        check_rate(request, service.limiter)
    check_integers(request)
    kind = opt.get("body")
    if kind is None:
        # Nothing here reads a body: what was sent is drained by `edge.guard` (and the
        # connection closed past its limit), so no answer of this operation is a 413.
        return
    check_length(request, body_limit(service.settings, kind))
    handed_prove = prove_flag(request) if kind == "records" else None
    if handed_prove is not None and service.sequencer is not None:
        request.state.checked_body = await append_by_sequencer(
            request, service, service.sequencer, handed_prove
        )
    else:
        request.state.checked_body = await checked_body(request, service, kind)


# --- what the guards can answer, for the OpenAPI document ------------------------------------


@dataclass(frozen=True, slots=True)
class Refusal:
    """An answer `before` (or Litestar's parameter checks behind it) gives instead of the
    handler: its description and the headers that come with it."""

    description: str
    headers: tuple[str, ...] = ()


def _size(limit: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if limit % size == 0:
            return f"{limit // size} {unit}"
    return f"{limit} bytes"


def refusals(opt: Mapping[str, Any], takes_input: bool, settings: Settings) -> dict[int, Refusal]:
    """What `before` can answer an operation whose handler has `opt`, read off the same
    branches: 503 for every one (a store fault, the damage mark), 401 for the writers and a
    `/metrics` with a token, 429 for the rest, 413 and the body checks' 400 for an operation
    that reads a body, and 400 for one with parameters. `openapi.finish` lists exactly these
    on each operation, beside the handler's own answers (`errors.documented`). What the
    settings turn off (no rate limit, no metrics token) is not listed."""
    found = {
        503: Refusal(
            "unavailable: the note says why (a store fault, or the data dir is marked damaged)"
        )
    }
    kind = opt.get("body")
    if kind is not None:
        found[400] = Refusal(
            "bad_request or invalid_record: the note names what is wrong (a parameter, the "
            "body's JSON, a record's member), or the body did not arrive within "
            f"{settings.body_timeout:g} s"
        )
        found[413] = Refusal(f"too_large: the body is over {_size(body_limit(settings, kind))}")
    elif takes_input:
        found[400] = Refusal(
            "bad_request: a parameter is malformed or out of range; the note names it"
        )
    if opt.get("writer"):
        found[401] = Refusal(f"unauthorized: {MISSING_TOKEN_NOTE}", ("WWW-Authenticate",))
    elif opt.get("metrics"):
        if settings.metrics_token is not None:
            found[401] = Refusal(
                f"unauthorized: {MISSING_METRICS_TOKEN_NOTE}", ("WWW-Authenticate",)
            )
    elif settings.rate_limit > 0:
        found[429] = Refusal(
            f"rate_limited: over {settings.rate_limit} requests per second from this address "
            "(--rate-limit); Retry-After says when to come back",
            ("Retry-After",),
        )
    return found


__all__ = [
    "INT_PARAMS",
    "MISSING_TOKEN_NOTE",
    "WRONG_TOKEN_NOTE",
    "Appended",
    "CheckedBody",
    "Refusal",
    "before",
    "body_limit",
    "check_integers",
    "check_writer",
    "refusals",
]
