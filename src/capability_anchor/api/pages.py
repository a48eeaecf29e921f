"""The pages for people: `/schema` (the OpenAPI document as plain HTML) here, `/` in
`home.py`. Self-contained (no font or outside load, no inline script; scripts only from this
origin; a CSP of `default-src 'none'`), so they render with no network; values HTML-escaped.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

HTML = "text/html; charset=utf-8"
CSP = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_METHODS = ("get", "head", "post", "put", "patch", "delete")
_CONSTRAINTS = (
    ("minimum", "≥ "),
    ("maximum", "≤ "),
    ("minLength", "length ≥ "),
    ("maxLength", "length ≤ "),
    ("minItems", "items ≥ "),
    ("maxItems", "items ≤ "),
    ("pattern", "pattern "),
    ("format", "format "),
    ("default", "default "),
)
_NOT_ID = re.compile(r"[^A-Za-z0-9_-]+")

_STYLE = """
body { margin: 0; font: 16px/1.5 system-ui, sans-serif; color: #1b1f24; background: #fff; }
header { background: #17324d; color: #fff; padding: 1.2em 2em; }
header h1 { margin: 0; font-size: 1.6em; }
header p { margin: .3em 0 0; color: #cfe0f1; }
main { padding: 1em 2em 3em; max-width: 70em; }
h2 { border-bottom: 2px solid #d0d7de; padding-bottom: .2em; }
a { color: #0b5cad; }
code, .path { font-family: ui-monospace, monospace; }
code.hash { word-break: break-all; background: #f3f5f7; padding: .1em .3em; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .3em 1em; }
dt { font-weight: 600; }
dd { margin: 0; }
table { border-collapse: collapse; margin: .5em 0 1em; }
th, td { border: 1px solid #d0d7de; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #eef2f6; }
.op { border: 1px solid #d0d7de; border-radius: 6px; margin: 1.2em 0; padding: 0 1em .5em; }
.op h3 { margin: .6em 0; font-size: 1.1em; }
.method { display: inline-block; min-width: 4em; text-align: center; color: #fff;
  border-radius: 4px; padding: .1em .4em; margin-right: .5em; font-size: .85em; }
.get { background: #1f7a3f; } .head { background: #4b6b57; } .post { background: #1d5fa8; }
.put, .patch { background: #8a5a00; } .delete { background: #a8261d; }
.note { color: #57606a; }
pre { background: #f3f5f7; padding: .6em .8em; overflow-x: auto; }
ul.toc { list-style: none; padding: 0; }
ul.toc li { margin: .2em 0; }
td.num { text-align: right; }
.PASS, .cosigned { color: #1f7a3f; font-weight: 600; }
.FAIL, .failed, .missing, .error { color: #a8261d; font-weight: 600; }
.SKIP { color: #57606a; font-weight: 600; }
form.lookup input { width: 16em; }
figure.chart { margin: 0; }
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _page(title: str, heading: str, subtitle: str, body: str) -> bytes:
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{_e(CSP)}">'
        # An empty icon: otherwise the browser asks for /favicon.ico, a JSON 404.
        '<link rel="icon" href="data:,">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head>"
        f"<body><header><h1>{_e(heading)}</h1><p>{subtitle}</p></header>"
        f"<main>{body}</main></body></html>\n"
    ).encode()


# --- /schema ----------------------------------------------------------------------------------


def _schema_type(schema: Mapping[str, Any]) -> str:
    """A one-line HTML description of a JSON Schema: `integer (≥ 0, default 0)`,
    `array of object`, a link to a component, `string | null`."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        return f'<a href="#schema-{_e(_NOT_ID.sub("-", name))}">{_e(name)}</a>'
    alternatives = schema.get("oneOf") or schema.get("anyOf")
    # With a type, oneOf is a rule over that type's values (a query form's), not a union.
    if isinstance(alternatives, list) and "type" not in schema:
        text = " | ".join(_schema_type(s) for s in alternatives if isinstance(s, Mapping))
    else:
        kind = schema.get("type", "any")
        text = " | ".join(map(_e, kind)) if isinstance(kind, list) else _e(kind)
        items = schema.get("items")
        if kind == "array" and isinstance(items, Mapping):
            text = f"array of {_schema_type(items)}"
        extra = schema.get("additionalProperties")
        if kind == "object" and isinstance(extra, Mapping) and extra:
            text = f"object of {_schema_type(extra)}"
    if schema.get("additionalProperties") is False:
        text += ", no other members"
    if "enum" in schema and isinstance(schema["enum"], list):
        text += " one of " + ", ".join(f"<code>{_e(v)}</code>" for v in schema["enum"])
    limits = [f"{word}{_e(schema[key])}" for key, word in _CONSTRAINTS if key in schema]
    return text + (f" ({', '.join(limits)})" if limits else "")


def _members(schema: Mapping[str, Any]) -> str:
    """A table of an object's members (name, type and limits, required), with the members
    of any object written in place inside it, all the way down."""
    required = set(schema.get("required", []))
    props = schema.get("properties", {})
    rows = []
    for prop, spec in props.items() if isinstance(props, Mapping) else ():
        if not isinstance(spec, Mapping):
            continue
        kind = _schema_type(spec) + _parameter_members(spec)
        rows.append((f"<code>{_e(prop)}</code>", kind, "yes" if prop in required else "no"))
    return _table(("Member", "Type", "Required"), rows) if rows else ""


def _table(head: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    """Cells are HTML already (escaped by the caller)."""
    heading = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{heading}</tr>{body}</table>"


def _content(content: object) -> str:
    if not isinstance(content, Mapping) or not content:
        return ""
    return "; ".join(
        f"<code>{_e(media)}</code> {_schema_type(spec.get('schema', {}))}"
        for media, spec in content.items()
        if isinstance(spec, Mapping)
    )


def _operation(method: str, path: str, op: Mapping[str, Any], anchor: str) -> str:
    # Only a plain GET path is a page to follow (and only one on this server).
    linked = method == "get" and "{" not in path and path.startswith("/") and "//" not in path
    shown = f'<a href="{_e(path)}">{_e(path)}</a>' if linked else _e(path)
    parts = [
        f'<section class="op" id="{_e(anchor)}"><h3><span class="method {_e(method)}">'
        f'{_e(method.upper())}</span><span class="path">{shown}</span></h3>',
        f"<p>{_e(op.get('summary', ''))}</p>",
    ]
    if op.get("description"):
        parts.append(f"<p>{_e(op['description'])}</p>")
    if op.get("security"):
        names = ", ".join(_e(name) for req in op["security"] for name in req)
        parts.append(f"<p><strong>Authorization</strong>: {names} (<code>Bearer</code> token)</p>")
    params = [p for p in op.get("parameters", []) if isinstance(p, Mapping)]
    if params:
        rows = [
            (
                f"<code>{_e(p.get('name', ''))}</code>",
                _e(p.get("in", "")),
                "yes" if p.get("required") else "no",
                _schema_type(p.get("schema", {})) + _parameter_members(p.get("schema", {})),
                _e(p.get("description", "")),
            )
            for p in params
        ]
        parts.append("<h4>Parameters</h4>")
        parts.append(_table(("Name", "In", "Required", "Type", "Description"), rows))
    body = op.get("requestBody")
    if isinstance(body, Mapping):
        required = " (required)" if body.get("required") else ""
        parts.append(f"<h4>Request body{required}</h4><p>{_content(body.get('content'))}</p>")
    if method not in ("get", "head"):
        parts.append(_example_request(method, path, op))
    responses = op.get("responses", {})
    if isinstance(responses, Mapping) and responses:
        answers = [
            (
                f"<strong>{_e(status)}</strong>",
                _e(r.get("description", "")),
                _content(r.get("content")),
            )
            # Numeric order, `default` and other names last.
            for status, r in sorted(
                responses.items(), key=lambda i: (not str(i[0]).isdigit(), str(i[0]))
            )
            if isinstance(r, Mapping)
        ]
        parts.append("<h4>Responses</h4>")
        parts.append(_table(("Status", "Description", "Body"), answers))
    parts.append("</section>")
    return "".join(parts)


def _example_request(method: str, path: str, op: Mapping[str, Any]) -> str:
    """A write as it goes over the wire: the request line, the Authorization its security
    asks for, and the body's example, if any."""
    lines = [f"{method.upper()} {path} HTTP/1.1"]
    names = [name for req in op.get("security", []) for name in req]
    if names:
        token = "writer token" if names[0] == "bearer" else f"{names[0]} token"
        lines.append(f"Authorization: Bearer <{token}>")
    # The first example of a JSON request body, if it has one.
    body = op.get("requestBody")
    content = body.get("content") if isinstance(body, Mapping) else None
    media = content.get("application/json") if isinstance(content, Mapping) else None
    examples = media.get("examples") if isinstance(media, Mapping) else None
    for example in examples.values() if isinstance(examples, Mapping) else ():
        if isinstance(example, Mapping) and "value" in example:
            lines += ["Content-Type: application/json", "", json.dumps(example["value"], indent=2)]
            break
    return f"<h4>Example request</h4><pre><code>{_e(chr(10).join(lines))}</code></pre>"


def _parameter_members(schema: object) -> str:
    """The members of an object written in place that `schema` is or holds as its items (a
    record's, a query form's parameters); a `$ref` has none here."""
    if not isinstance(schema, Mapping):
        return ""
    items = schema.get("items")
    return _members(
        items if schema.get("type") == "array" and isinstance(items, Mapping) else schema
    )


def docs_html(doc: Mapping[str, Any], openapi_json: str) -> bytes:
    """Every operation of an OpenAPI 3 document (method, path, summary, parameters, request
    body, responses), then its component schemas."""
    info = doc.get("info", {})
    title = str(info.get("title", "API"))
    operations: list[tuple[str, str, Mapping[str, Any], str]] = []
    for path, item in doc.get("paths", {}).items():
        for method in _METHODS:
            op = item.get(method) if isinstance(item, Mapping) else None
            if isinstance(op, Mapping):
                anchor = "op-" + _NOT_ID.sub("-", f"{method}-{path}").strip("-")
                operations.append((method, str(path), op, anchor))
    toc = "".join(
        f'<li><a href="#{_e(anchor)}"><span class="method {_e(method)}">{_e(method.upper())}'
        f'</span><span class="path">{_e(path)}</span></a> {_e(op.get("summary", ""))}</li>'
        for method, path, op, anchor in operations
    )
    schemes = doc.get("components", {}).get("securitySchemes", {})
    auth = "".join(
        f"<li><code>{_e(name)}</code>: {_e(s.get('type', ''))} {_e(s.get('scheme', ''))}</li>"
        for name, s in schemes.items()
        if isinstance(s, Mapping)
    )
    components = doc.get("components", {}).get("schemas", {})
    body = (
        '<p>Served by this log, from its <a href="/">front page</a>; the machine-readable form is '
        f'<a href="{_e(openapi_json)}"><code>{_e(openapi_json)}</code></a>. Errors are '
        "<code>{v, error, note}</code> with a stable <code>error</code> code.</p>"
        f'<h2>Operations</h2><ul class="toc">{toc}</ul>'
        + (f"<h2>Authorization</h2><ul>{auth}</ul>" if auth else "")
        + "".join(_operation(*operation) for operation in operations)
        + "<h2>Schemas</h2>"
        + "".join(
            f'<section id="{_e("schema-" + _NOT_ID.sub("-", str(n)))}"><h3>{_e(n)}</h3>'
            f"<p>{_schema_type(s)}</p>{_members(s)}</section>"
            for n, s in components.items()
            if isinstance(s, Mapping)
        )
    )
    version = f"OpenAPI {_e(doc.get('openapi', ''))}, version {_e(info.get('version', ''))}"
    return _page(f"{title}: HTTP API", f"{title} HTTP API", version, body)
