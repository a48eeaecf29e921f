"""The OpenAPI request bodies of `POST /records` and `POST /prove`, from the door's Struct.

A record's schema depends on the log's record rule and id namespace, so it is
`record.rule.record_schema` (msgspec, from the Struct `check_record` converts to), put into
the app's document once it is built; the `any` rule keeps bare objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from litestar import Litestar
from litestar.openapi.spec import Example, RequestBody, Schema

from capability_anchor.record.rule import JSON_VALUE, json_value_schema, record_schema

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


RECORD = "Record"


def records_body(max_records: int, ref: str = _REF) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "records": {
                "type": "array",
                "items": {"$ref": ref + RECORD},
                "minItems": 1,
                "maxItems": max_records,
            }
        },
        "required": ["records"],
        "additionalProperties": False,
        "description": f"1 to {max_records} records, each valid before any is stored",
    }


def prove_body(ref: str = _REF) -> dict[str, Any]:
    """`{record}`: a record the log holds has the log's rule (reserved members aside)."""
    return {
        "type": "object",
        "properties": {"record": {"$ref": ref + RECORD}},
        "required": ["record"],
        "additionalProperties": False,
    }


def example_record(namespace: str | None) -> dict[str, Any]:
    """A record every rule accepts (the observation rule's, in the log's id namespace when it
    pins one; no `iss`, which is optional and else must be the log's): the request example
    of both bodies, so a user and a schema-driven client have one that is stored as is."""
    return {
        "v": "0.2",
        "sub": f"{namespace or 'example'}:weather",
        "url": "https://weather.example/mcp",
        "status": "ok",
        "checked_at": "2025-01-15T09:30:00Z",
        "evidence": {"method": "tools/list"},
        "name": "Weather",
    }


def install(app: Litestar, rule: str, namespace: str | None, max_records: int) -> None:
    """Put the record (a component, so `/schema` lists its members), the two bodies that
    refer to it, each with an example request, and the JSON value it refers to into `app`'s
    OpenAPI document (built here, once)."""
    openapi = app.openapi_schema
    paths = openapi.paths or {}
    if openapi.components.schemas is None:
        openapi.components.schemas = {}
    components = openapi.components.schemas
    components[JSON_VALUE] = RawSchema(raw=json_value_schema(_REF))
    components[RECORD] = RawSchema(raw=record_schema(rule, namespace, _REF))
    record = example_record(namespace)
    bodies = {
        "/records": ("RecordsBody", records_body(max_records), {"records": [record]}),
        "/prove": ("ProveBody", prove_body(), {"record": record}),
    }
    for path, (name, body, example) in bodies.items():
        components[name] = RawSchema(raw=body)
        item = paths.get(path)
        post = item.post if item is not None else None
        if post is None or not isinstance(post.request_body, RequestBody):
            continue
        media = post.request_body.content.get(_JSON)
        if media is not None:
            media.schema = RawSchema(raw={"$ref": _REF + name})
            media.examples = {"record": Example(summary="one record", value=example)}
