"""The OpenAPI document says exactly what the server accepts and answers (SPEC §6): the
parameter annotations carry the pattern or bounds of the server's own check
(tests/e2e/test_openapi_patterns.py holds each to it), and `finish` completes the document
Litestar generates (HEAD, 405, caching headers, the guards' answers, query forms).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Annotated, Any

from litestar import Litestar, Request
from litestar.enums import MediaType, OpenAPIMediaType
from litestar.handlers import HTTPRouteHandler
from litestar.openapi.plugins import OpenAPIRenderPlugin
from litestar.params import PathParameter, QueryParameter

from capability_anchor.merkle.tilepath import MAX_INDEX, MAX_LEVEL
from capability_anchor.merkle.tiles import TILE_WIDTH
from capability_anchor.read.reader import MAX_INT
from capability_anchor.web.guards import MISSING_METRICS_TOKEN_NOTE

from .caching import IMMUTABLE, NO_CACHE
from .guards import MISSING_TOKEN_NOTE, body_limit
from .models import BAD_PARAMETER
from .settings import Settings

# --- patterns (JSON Schema patterns are unanchored searches: each is ^...$) -----------------


def _at_most(bound: str, slots: list[str]) -> str:
    """Digit strings of `len(bound)` digits that are <= `bound`, each digit preceded by the
    separator of its slot (`slots[i]`): one alternative per first digit below the bound."""
    alternatives = []
    for i, digit in enumerate(bound):
        if digit != "0":
            below = "0" if digit == "1" else f"[0-{int(digit) - 1}]"
            rest = "".join(f"{slots[j]}[0-9]" for j in range(i + 1, len(bound)))
            alternatives.append(
                "".join(slots[j] + bound[j] for j in range(i)) + slots[i] + below + rest
            )
    alternatives.append("".join(s + d for s, d in zip(slots, bound, strict=True)))
    return "(?:" + "|".join(alternatives) + ")"


def _tile_index_pattern() -> str:
    """A C2SP tile index as `parse_tile_path` reads it: groups of three digits, all but the
    last prefixed with x, no leading x000 group, at most `MAX_INDEX`."""
    digits = str(MAX_INDEX)
    groups = -(-len(digits) // 3)  # 7 for 2**63 - 1
    padded = digits.rjust(3 * groups, "0")
    first = padded[:3]  # "009": the widest index's first group
    assert first != "000" and first[:2] == "00" and first[2] != "0"
    upper = "x(?:00[1-9]|0[1-9][0-9]|[1-9][0-9]{2})"
    shorter = f"(?:{upper}(?:/x[0-9]{{3}}){{0,{groups - 3}}}/)?[0-9]{{3}}"
    # The widest form: a first group below `first`, or `first` and the rest at most the bound.
    below = f"x00[1-{int(first[2]) - 1}](?:/x[0-9]{{3}}){{{groups - 2}}}/[0-9]{{3}}"
    rest = padded[3:]
    slots = [
        ("/" if i % 3 == 0 else "") + ("x" if i % 3 == 0 and i < len(rest) - 3 else "")
        for i in range(len(rest))
    ]
    widest = f"x{first}" + _at_most(rest, slots)
    return f"(?:{shorter}|{below}|{widest})"


def _tile_pattern() -> str:
    """`<L>/<N>[.p/<W>]` or `entries/<N>[.p/<W>]`, in `parse_tile_path`'s one spelling."""
    assert MAX_LEVEL == 63 and TILE_WIDTH == 256
    level = "(?:[0-9]|[1-5][0-9]|6[0-3]|entries)"
    width = "(?:[1-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])"
    return f"^{level}/{_tile_index_pattern()}(?:\\.p/{width})?$"


DAY_PATTERN = "^(?!0000)[0-9]{4}-[0-9]{2}-[0-9]{2}$"
"""A day's shape; with `format: date` the document says what `parse_day` accepts."""
HASH_PATTERN = "^[0-9a-f]{64}$"
TILE_PATTERN = _tile_pattern()
_PORT = "(?:[0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
HTTPS_URL_PATTERN = f"^https://[a-z0-9-]+(?:\\.[a-z0-9-]+)*(?::{_PORT})?(?:[/?#][!-~]*)?$"
"""An https URL `canonical_url` can put in canonical form: a DNS host, an optional port,
then any path, query or fragment of printable ASCII (which it drops or trims)."""

TILE_EXAMPLE = "0/000.p/3"

_DAY_SCHEMA = {"pattern": DAY_PATTERN, "format": "date"}
_HASH_SCHEMA = {"pattern": HASH_PATTERN, "minLength": 64, "maxLength": 64}


_DAY = "a UTC day, YYYY-MM-DD"
_QUERY_DAY = QueryParameter(description=_DAY, schema_extra=_DAY_SCHEMA)
Day = Annotated[str, PathParameter(description=_DAY, schema_extra=_DAY_SCHEMA)]
"""The `{day}` of a path."""
DAY_PATH = {"type": "string", **_DAY_SCHEMA, "description": _DAY}
"""The `{day}` path parameter's schema, as Litestar writes `Day`'s: for a handler that reads
it from `path_params` itself (`GET /roots/{day}`), which Litestar documents as a bare string."""
QueryDay = Annotated[str, _QUERY_DAY]
BeforeDay = Annotated[
    str | None,
    QueryParameter(description="exclusive day bound, YYYY-MM-DD", schema_extra=_DAY_SCHEMA),
]
_LEAF_HASH = QueryParameter(description="a leaf hash, 64 lowercase hex", schema_extra=_HASH_SCHEMA)
LeafHash = Annotated[str, _LEAF_HASH]
TilePath = Annotated[
    str,
    PathParameter(
        description="the tile path after tile/",
        # A tile path holds slashes: the example says so, and clients that fill in path
        # parameters (schemathesis among them) then send it, percent-encoded, not refuse it.
        schema_extra={"pattern": TILE_PATTERN, "examples": [TILE_EXAMPLE]},
    ),
]


def count(minimum: int, maximum: int = MAX_INT, description: str | None = None) -> Any:
    """A query integer `minimum..maximum`: Litestar checks the bounds, and the document
    states them as JSON integers (Litestar would write them as floats, and 2**63 - 1 as a
    float is 2**63)."""
    return QueryParameter(
        ge=minimum,
        le=maximum,
        description=description,
        schema_extra={"minimum": minimum, "maximum": maximum},
    )


def path_count(minimum: int, maximum: int = MAX_INT, description: str | None = None) -> Any:
    """A path integer `minimum..maximum`, written in digits (checked by the handler)."""
    return PathParameter(
        description=description,
        schema_extra={"type": "integer", "minimum": minimum, "maximum": maximum},
    )


# --- finishing the generated document ---------------------------------------------------------

ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}
_METHODS = ("get", "put", "post", "delete", "options", "patch", "trace")
METHOD_NOT_ALLOWED = (
    "method_not_allowed: a method this path does not list (the Allow header names the ones it does)"
)

_COUNT = {"type": "integer", "maximum": MAX_INT, "minimum": 0}
PROOF_QUERY = {
    "day": DAY_PATH,
    "index": _COUNT,
    "tree_size": _COUNT,
    "leaf_hash": {
        "type": "string",
        "maxLength": 64,
        "minLength": 64,
        "pattern": HASH_PATTERN,
        "description": "a leaf hash, 64 lowercase hex",
    },
}
"""`GET /proof`'s query members, as Litestar wrote them when it read them."""

RECORD_QUERY = {
    "id": {"type": "string", "description": "the server ID (matches sub)"},
    "url": {
        "type": "string",
        "pattern": HTTPS_URL_PATTERN,
        "description": "the server URL, any https form",
    },
}
"""`GET /record`'s query members, as Litestar wrote them when it read them."""

QUERY_FORMS: dict[str, tuple[str, str, dict[str, Any], dict[str, Any] | None]] = {
    "/record": (
        "server",
        "exactly one of `id` (the server ID, matching `sub`) and `url` (the server URL, any "
        "form https allows; it is put in canonical form)",
        {"oneOf": [{"required": ["id"]}, {"required": ["url"]}]},
        RECORD_QUERY,
    ),
    "/proof": (
        "entry",
        "either `day` and `index` (and optionally `tree_size`), or `leaf_hash` (and "
        "optionally `day` and `tree_size`)",
        {
            "oneOf": [
                {"required": ["day", "index"], "not": {"required": ["leaf_hash"]}},
                {"required": ["leaf_hash"], "not": {"required": ["index"]}},
            ]
        },
        PROOF_QUERY,
    ),
}
"""GET operations whose query parameters come in forms: each becomes one query parameter,
an object exploded into `name=value` pairs (OpenAPI `style: form, explode: true`), whose
schema says which combinations exist; its members are the handler's query parameters, or
those given (a handler that reads its query itself, `guards.raw_query`, declares none)."""


def _plain(schema: dict[str, Any]) -> dict[str, Any]:
    """A query value is never null: `oneOf [T, null]` (an optional parameter) is T."""
    alternatives = schema.get("oneOf")
    if isinstance(alternatives, list):
        kept = [s for s in alternatives if s != {"type": "null"}]
        if len(kept) == 1:
            rest = {k: v for k, v in schema.items() if k != "oneOf"}
            return {**kept[0], **rest}
    return schema


# What Litestar writes after an operation's parameters (`litestar.openapi.spec.Operation`).
_AFTER_PARAMETERS = ("requestBody", "responses", "callbacks", "deprecated", "security", "servers")


def _query_form(
    operation: dict[str, Any],
    name: str,
    description: str,
    rule: dict[str, Any],
    members: dict[str, Any] | None,
) -> None:
    params = operation.get("parameters", [])
    query = [p for p in params if p.get("in") == "query"]
    schema = {
        "type": "object",
        "properties": copy.deepcopy(members)
        if members is not None
        else {p["name"]: _plain(p["schema"]) for p in query},
        "additionalProperties": False,
        **rule,
    }
    after = {k: operation.pop(k) for k in _AFTER_PARAMETERS if k in operation}
    operation["parameters"] = [p for p in params if p.get("in") != "query"] + [
        {
            "name": name,
            "in": "query",
            "required": True,
            "style": "form",
            "explode": True,
            "description": description,
            "schema": schema,
        }
    ]
    operation.update(after)  # in Litestar's order, as when Litestar listed the parameters


CACHING_HEADERS = {
    "ETag": {
        "description": "the answer's entity tag, for If-None-Match",
        "required": True,
        "schema": {"type": "string", "pattern": '^"[0-9a-f]{32}"$'},
    },
    "Cache-Control": {
        "description": "`public, max-age=31536000, immutable` (a document that never changes) "
        "or `no-cache` (revalidate: it moves)",
        "required": True,
        "schema": {"type": "string", "enum": [IMMUTABLE, NO_CACHE]},
    },
}


def _head(get: dict[str, Any]) -> dict[str, Any]:
    """HEAD of a GET: the same parameters and statuses, the same headers, no body."""
    head = copy.deepcopy(get)
    head["summary"] = f"{get.get('summary', '')} (headers only)"
    if "operationId" in head:
        head["operationId"] = "Head" + head["operationId"]
    for response in head.get("responses", {}).values():
        response.pop("content", None)
    return head


def _refusal(description: str, *headers: str) -> dict[str, Any]:
    schema = {"schema": {"type": "string"}, "required": True}
    return {
        "description": description,
        **({"headers": dict.fromkeys(headers, schema)} if headers else {}),
        "content": {"application/json": {"schema": ERROR_REF}},
    }


def _size(limit: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if limit % size == 0:
            return f"{limit // size} {unit}"
    return f"{limit} bytes"


def _guarded(operation: dict[str, Any], handler: HTTPRouteHandler, settings: Settings) -> None:
    """Add what `guards.before` (or Litestar's parameter checks behind it) can answer this
    operation instead of its handler, read off the branches `before` takes on the handler's
    `opt`: each operation lists only its own (no 413 without a body, no writer-token 401 on
    `/metrics`), and nothing the settings turn off. A status the handler documents itself
    keeps its fuller description; one Litestar made up (its 400 of a validation error, in a
    body we never send) is replaced."""
    opt = handler.opt
    found = {
        503: _refusal(
            "unavailable: the note says why (a store fault, or the data dir is marked damaged)"
        )
    }
    kind = opt.get("body")
    if kind is not None:
        found[400] = _refusal(
            "bad_request or invalid_record: the note names what is wrong (a parameter, the "
            "body's JSON, a record's member), or the body did not arrive within "
            f"{settings.body_timeout:g} s"
        )
        found[413] = _refusal(f"too_large: the body is over {_size(body_limit(settings, kind))}")
    elif operation.get("parameters") or operation.get("requestBody"):
        found[400] = _refusal(BAD_PARAMETER)
    if opt.get("writer"):
        found[401] = _refusal(f"unauthorized: {MISSING_TOKEN_NOTE}", "WWW-Authenticate")
    elif opt.get("metrics"):
        if settings.metrics_token is not None:
            found[401] = _refusal(f"unauthorized: {MISSING_METRICS_TOKEN_NOTE}", "WWW-Authenticate")
    elif settings.rate_limit > 0:
        found[429] = _refusal(
            f"rate_limited: over {settings.rate_limit} requests per second from this address "
            "(--rate-limit); Retry-After says when to come back",
            "Retry-After",
        )
    own = {str(status) for status in handler.responses or {}}
    responses = operation.setdefault("responses", {})
    for status, refusal in found.items():
        if str(status) not in own:
            responses[str(status)] = refusal


_BARE_DAY = ("path", "day", {"type": "string"})
"""How Litestar lists a `{day}` the handler reads itself (no `Day` parameter)."""


def _day_path(parameter: dict[str, Any]) -> dict[str, Any]:
    """A bare `{day}` path parameter documented as `Day`, its members in Litestar's order."""
    day = {"name": "day", "in": "path", "schema": copy.deepcopy(DAY_PATH), "description": _DAY}
    return day | {k: v for k, v in parameter.items() if k not in day}


def finish(generated: dict[str, Any], app: Litestar) -> dict[str, Any]:
    """The OpenAPI document `app` serves, made from Litestar's (which is not changed)."""
    doc = copy.deepcopy(generated)
    # `AppendedEntry` refuses unknown members, and says so: else a proved entry would also be
    # a plain one, and `POST /records`'s `oneOf` would hold twice. (The request bodies are
    # closed by `bodies.install_schemas`.)
    doc["components"]["schemas"]["AppendedEntry"]["additionalProperties"] = False
    # Every operation's handler, by (path, method) as the document names them.
    handlers = {
        (route.path_format, str(method).lower()): handler
        for route in app.routes
        for handler in getattr(route, "route_handlers", ())
        if isinstance(handler, HTTPRouteHandler)
        for method in handler.http_methods
    }
    settings: Settings = app.state.service.settings
    for path, item in doc.get("paths", {}).items():
        for method in _METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            handler = handlers.get((path, method))
            if handler is not None:
                _guarded(operation, handler, settings)
            for n, parameter in enumerate(operation.get("parameters", [])):
                if parameter.get("in") == "query" and not parameter.get("required"):
                    parameter["schema"] = _plain(parameter["schema"])
                elif tuple(parameter.get(k) for k in ("in", "name", "schema")) == _BARE_DAY:
                    operation["parameters"][n] = _day_path(parameter)
            if method == "get" and path in QUERY_FORMS:
                _query_form(operation, *QUERY_FORMS[path])
            responses = operation.setdefault("responses", {})
            responses["405"] = _refusal(METHOD_NOT_ALLOWED, "Allow")
            # An operation that can answer 304 answers through `caching.cached`.
            for status in ("200", "304") if "304" in responses else ():
                responses[status].setdefault("headers", {}).update(copy.deepcopy(CACHING_HEADERS))
        if "get" in item:
            item["head"] = _head(item["get"])
    return doc


class Finished(OpenAPIRenderPlugin):
    """A form of the finished document at `path` (under `/schema`): `render(doc, json_path)`
    made once (the document does not change while the app runs)."""

    def __init__(
        self,
        path: str,
        media_type: MediaType | OpenAPIMediaType,
        render: Callable[[dict[str, Any], str], bytes],
    ) -> None:
        super().__init__(path=path, media_type=media_type, favicon="", style="")
        self._render = render
        self._rendered: bytes | None = None

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        if self._rendered is None:
            doc = finish(openapi_schema, request.app)
            self._rendered = self._render(doc, self.get_openapi_json_route(request))
        return self._rendered
