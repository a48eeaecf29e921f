"""What every request passes before its handler, checks only (SPEC §2, §6, §10): writer
auth, the public rate limit, one spelling per integer, body limits and the body check
(`api/bodies.py`). Nothing here stores: docs/explanation/write-path.md."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from litestar import Request

from capability_anchor.errors import UsageError
from capability_anchor.log.clockguard import monotonic
from capability_anchor.read.reader import MAX_INT
from capability_anchor.web.errors import ApiError
from capability_anchor.web.guards import check_bearer, check_length, check_metrics, check_rate

from .service import Batch, Service, service_of
from .settings import Settings

INT_PARAMS = ("index", "tree_size", "start", "limit", "first", "second", "prove", "size")
_DIGITS = re.compile(r"0|[1-9][0-9]{0,18}")
_INTS = "capability_anchor.integers"


# --- the guards ------------------------------------------------------------------------------


MISSING_TOKEN_NOTE = "this endpoint needs Authorization: Bearer <writer token>"  # noqa: S105
WRONG_TOKEN_NOTE = "the bearer token does not match this log's writer token"  # noqa: S105


def integer_params(handler: Any) -> tuple[str, ...]:
    """The integer parameters `handler`'s operation takes (its own: one it does not take is
    ignored like any other unknown name, so it cannot make an operation answer 400). Worked
    out once per route and kept in its `opt`: most routes take none and skip the check."""
    names: tuple[str, ...] | None = handler.opt.get(_INTS)
    if names is None:
        declared = handler.parsed_fn_signature.parameters
        names = handler.opt[_INTS] = tuple(n for n in INT_PARAMS if n in declared)
    return names


def check_integers(request: Request[Any, Any, Any], names: tuple[str, ...]) -> None:
    """One spelling per number: Litestar would also take `1.0`, `1e0`, `03` or `+3`, and an
    immutable URL must not have several spellings."""
    query = request.query_params
    for name in names:
        _one_spelling(name, query.getall(name, []))
    if "tree_size" in request.path_params:
        segment = request.url.path.rstrip("/").rsplit("/", 1)[-1]
        if _DIGITS.fullmatch(segment) is None:
            raise UsageError("tree_size must be a non-negative integer written in digits")


def _one_spelling(name: str, values: list[str]) -> None:
    """An integer parameter given at most once, in digits only."""
    if len(values) > 1:
        raise UsageError(f"{name} is given more than once")
    if values and _DIGITS.fullmatch(values[0]) is None:
        raise UsageError(f"{name} must be a non-negative integer written in digits")


def raw_query(scope: Any, ints: tuple[str, ...]) -> dict[str, Any]:
    """The query as Litestar would hand it to a handler, read from the raw query string (its
    parsing and signature model cost more than a hot read's own work; decisions/37-reads4):
    names and values as `parse_qsl` reads them, the last of a repeated name; the integer
    parameters `ints` checked as `check_integers` does, then bounded as Litestar would (its
    note), as ints."""
    found: dict[str, list[str]] = {}
    for pair in scope.get("query_string", b"").decode("latin-1").split("&"):
        if pair:
            name, _, value = pair.partition("=")
            if "%" in pair or "+" in pair:
                name, value = unquote(name.replace("+", " ")), unquote(value.replace("+", " "))
            found.setdefault(name, []).append(value)
    for name in ints:
        _one_spelling(name, found.get(name, []))
    query: dict[str, Any] = {name: values[-1] for name, values in found.items()}
    for name in ints:
        if name in query:
            query[name] = number = int(query[name])
            if number > MAX_INT:
                raise UsageError(f"{name}: Expected `int` <= {MAX_INT}")
    return query


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
    if now is None:
        return value
    prepared, hashes = value
    return Batch(prepared, hashes, now, at_mono)


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
    names = integer_params(request.route_handler)
    if names:
        check_integers(request, names)
    kind = opt.get("body")
    if kind is None:
        # Nothing here reads a body: what was sent is drained by `AnchorApp` (and the
        # connection closed past its limit), so no answer of this operation is a 413.
        return
    check_length(request, body_limit(service.settings, kind))
    request.state.checked_body = await checked_body(request, service, kind)
