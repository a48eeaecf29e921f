"""What every request passes before its handler, checks only (SPEC §2, §6, §10): writer
auth, the public rate limit, one spelling per integer, body limits and the body check
(`api/bodies.py`). Nothing here stores: docs/explanation/write-path.md."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from litestar import Request

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

from .service import Batch, Service, service_of
from .settings import Settings

INT_PARAMS = ("index", "tree_size", "start", "limit", "first", "second", "prove", "size")
_DIGITS = re.compile(r"0|[1-9][0-9]{0,18}")


# --- the guards ------------------------------------------------------------------------------


MISSING_TOKEN_NOTE = "this endpoint needs Authorization: Bearer <writer token>"  # noqa: S105
WRONG_TOKEN_NOTE = "the bearer token does not match this log's writer token"  # noqa: S105


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


async def checked_body(request: Request[Any, Any, Any], service: Service, kind: str) -> Any:
    """The body strictly parsed and checked: the leaf hash for "record", the `Batch` for
    "records"."""
    limit = body_limit(service.settings, kind)
    body = await request.body()
    if len(body) > limit:
        raise ApiError("too_large", f"the request body is over {limit} bytes")
    writer = service.writer
    # The record rule's time limit is the log's clock, read through the ClockGuard (a
    # disagreeing clock refuses now, as the append would); the sequencer continues it.
    now = service.clock.now() if kind == "records" else None
    at_mono = monotonic()
    code, value = await service.bodies.check(
        kind,
        body,
        writer.iss,
        service.settings.max_records,
        writer.records,
        now,
        writer.id_namespace,
        # Only a request that passed the writer token check reaches the writers' lane.
        writer=bool(request.route_handler.opt.get("writer")),
    )
    if code != "ok":
        raise ApiError(code, value)
    return value if now is None else Batch(value, now, at_mono)


async def before(request: Request[Any, Any, Any]) -> None:
    """Litestar's `before_request`. Writers are recognised by their handler's `opt`, never
    by the path, which a mount point or an ASGI root_path would change."""
    service = service_of(request)
    # A log found damaged answers nothing from its store, reads included: a read that does
    # not fail on the damage could still be of a page that came back zeroed.
    service.refuse_if_damaged()
    opt = request.route_handler.opt
    if opt.get("writer"):
        # A missing and a wrong token get different notes; neither tells of the token.
        check_bearer(request, service.token, MISSING_TOKEN_NOTE, WRONG_TOKEN_NOTE)
    elif opt.get("metrics"):
        check_metrics(request, service.settings.metrics_token)
    else:
        check_rate(request, service.limiter)
    check_integers(request)
    kind = opt.get("body")
    if kind is None:
        # Nothing here reads a body: what was sent is drained by `AnchorApp` (and the
        # connection closed past its limit), so no answer of this operation is a 413.
        return
    check_length(request, body_limit(service.settings, kind))
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
    """What `before` can answer an operation whose handler has `opt`, read off its branches
    (what the settings turn off is not listed), for `openapi.finish` to document."""
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
