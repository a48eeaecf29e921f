"""Schema-driven fuzzing of the HTTP API with schemathesis (bounded and deterministic).

The app's own OpenAPI document (`/schema/openapi.json`) drives schemathesis's generators
against the ASGI app in process, with the writer token on every request so the writers are
exercised too. Each operation (every GET's HEAD included) runs in two generation modes
(data that fits the schema, and data that does not) and two variants: everything generated,
and the `day` parameter pinned to a real sealed day (a generated day is a real calendar day,
but nearly never one this log has, so without it most requests would stop at a 404).

Checked for every request:
- no 5xx;
- every non-2xx answer is `{v, error, note}` with the status of its code and no internals
  (a HEAD answer: no body at all);
- a non-2xx answer changed nothing stored (every row of every table, before and after);
- unpinned, outside the record bodies: every check of schemathesis itself.

30 examples per operation, mode and variant, `derandomize=True` and no example database:
the same requests on every run. Then schemathesis's own command line, `--checks all`, runs
against `capability-anchor serve` on loopback (`test_schemathesis_checks_all_finds_nothing`),
as a new user would run it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from litestar.testing import TestClient
from schemathesis import GenerationMode
from schemathesis.python import asgi

from capability_anchor.api.app import create_app
from capability_anchor.api.settings import Settings
from capability_anchor.log import Log

# The record formats' generators, registered in process too.
from tests.kit import (
    paths,
    schemathesis_hooks,  # noqa: F401
)
from tests.kit.apikit import (
    History,
    assert_error_parts,
    build_history,
    insert_stamp,
    rec,
    snapshot,
    wait_clear_of_midnight,
)
from tests.kit.serverkit import clean_env, serving

MAX_EXAMPLES = 30

# Every operation SPEC §6 defines (each with a `day` parameter or not); every GET also has
# its HEAD (served by `edge.guard`, documented by `openapi.finish`).
GETS: list[tuple[str, bool]] = [
    ("/healthz", False),
    ("/roots", False),
    ("/roots/latest", False),
    ("/roots/{day}", True),
    ("/roots/{day}/{tree_size}", True),
    ("/roots/{day}/timestamps", True),
    ("/roots/{day}/timestamp", True),
    ("/roots/{day}/tile/{tile}", True),
    ("/history/tile/{tile}", False),
    ("/history/checkpoint", False),
    ("/history/checkpoint/{size}", False),
    ("/history/proof", False),
    ("/history/vkey", False),
    ("/history/policy", False),
    ("/proof", True),
    ("/consistency", True),
    ("/entries/{day}", True),
    ("/keys", False),
    ("/keys/records", False),
    ("/record", False),
    ("/metrics", False),
]
OPERATIONS: list[tuple[str, str, bool]] = [
    *((method, path, has_day) for path, has_day in GETS for method in ("GET", "HEAD")),
    ("POST", "/prove", False),
    ("POST", "/records", False),
    ("POST", "/checkpoint", False),
]
# Nothing to mutate in negative mode: no input at all.
NO_NEGATIVE = {
    "/healthz",
    "/metrics",
    "/roots/latest",
    "/keys",
    "/keys/records",
    "/checkpoint",
    "/history/checkpoint",
    "/history/vkey",
    "/history/policy",
}
RECORD_BODIES = "^/(records|prove)$"
"""The operations whose request bodies hold records: each record's schema comes from the
observation Struct (`observation.py`), not from this side of the document."""
# With the day pinned, nothing else to mutate.
DAY_ONLY = {"/roots/{day}", "/roots/{day}/timestamps", "/roots/{day}/timestamp"}


@dataclass
class Target:
    history: History
    schema: Any
    headers: dict[str, str]


@pytest.fixture
def target(tmp_path: Path) -> Iterator[Target]:
    """A fresh log and app per test: loading the schema starts the app's lifespan in
    schemathesis's ASGI portal, and schemathesis's pytest plugin ends every lifespan at each
    test's teardown (`shutdown_lifespans`, which runs the app's shutdown and closes the log),
    so an app cannot outlive the test that loaded it."""
    history = build_history(tmp_path / "data")
    app = create_app(
        Settings(data_dir=history.data, background=False, rate_limit=0, clock=history.clock)
    )
    try:
        schema = schemathesis.openapi.from_asgi("/schema/openapi.json", app)
        yield Target(history, schema, {"Authorization": f"Bearer {history.token}"})
    finally:
        asgi.shutdown_lifespans()


def test_the_schema_lists_exactly_the_fuzzed_operations(target: Target) -> None:
    listed = {
        (result.ok().method.upper(), result.ok().path)
        for result in target.schema.get_all_operations()
    }
    assert listed == {(method, path) for method, path, _ in OPERATIONS}


def _named_fields(doc: dict[str, Any], schema: dict[str, Any], top: bool = True) -> list[str]:
    """Where `schema` (a JSON body's, `$ref`s followed) fails to name its fields: a body
    that is not an object with properties (`null` aside, for "nothing yet"), and anywhere
    inside it a bare object or a schema with no type. An object open by design (a record's
    claims: the writer's JSON object) passes only with a description saying so."""
    ref = schema.get("$ref")
    if ref is not None:
        name = ref.removeprefix("#/components/schemas/")
        return _named_fields(doc, doc["components"]["schemas"][name], top)
    if "oneOf" in schema:
        return [p for s in schema["oneOf"] for p in _named_fields(doc, s, top)]
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties") or {}
        if not properties:
            return [] if not top and schema.get("description") else ["a bare object"]
        return [
            f"{name}: {problem}"
            for name, sub in properties.items()
            for problem in _named_fields(doc, sub, top=False)
        ]
    if kind == "null":
        return []
    if top:
        return [f"a body that is not an object: {schema}"]
    if kind == "array":
        return _named_fields(doc, schema.get("items") or {}, top=False)
    if kind in ("string", "integer", "boolean"):
        return []
    return [f"no type: {schema}"]


def test_every_success_body_is_documented_field_by_field(target: Target) -> None:
    """Every 2xx answer of every operation has a content schema; a JSON one names its
    members (a `$ref` to a Struct's component, no bare `object`), all the way down."""
    doc = target.schema.raw_schema
    missing = []
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                if not status.startswith("2") or method == "head":
                    continue
                content = response.get("content") or {}
                if not content:
                    missing.append(f"{method.upper()} {path} {status}: no content")
                for media_type, media in content.items():
                    schema = media.get("schema") or {}
                    if media_type == "application/json":
                        for problem in _named_fields(doc, schema):
                            missing.append(f"{method.upper()} {path} {status}: {problem}")
                    elif not schema:
                        missing.append(f"{method.upper()} {path} {status}: no schema")
    assert not missing, missing
    listed = {(m.upper(), p) for p, item in doc["paths"].items() for m in item}
    assert listed == {(method, path) for method, path, _ in OPERATIONS}


CACHED = {path for path, _ in GETS} - {"/healthz", "/record", "/metrics"}
"""The GETs answered through `caching.cached`, with an ETag and 304 on a match."""


def test_every_status_an_operation_can_answer_is_documented(target: Target) -> None:
    """304 on the cached GETs, 401 only and always on the writers (this app has no metrics
    token), no 429 (its rate limit is off), 405 and 503 everywhere, 400 where there is input,
    413 only where there is a body (issue #35: each operation's own errors), and each GET's
    HEAD with the same statuses and no body."""
    doc = target.schema.raw_schema
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            statuses = set(operation["responses"])
            writer = {"bearer": []} in operation.get("security", [])
            has_body = "requestBody" in operation
            assert {"405", "503"} <= statuses, (method, path)
            assert ("400" in statuses) == bool(has_body or operation.get("parameters")), path
            assert ("413" in statuses) == has_body, (method, path)
            assert ("304" in statuses) == (path in CACHED and method in ("get", "head")), path
            assert ("401" in statuses) == writer, (method, path)
            assert "429" not in statuses, (method, path)
            assert operation["responses"]["405"]["headers"]["Allow"]["required"]
        if "get" in item:
            get, head = item["get"], item["head"]
            assert set(head["responses"]) == set(get["responses"]), path
            assert head.get("parameters") == get.get("parameters"), path
        else:
            assert "head" not in item, path


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def test_integer_bounds_are_integers_inside_int64(target: Target) -> None:
    doc = target.schema.raw_schema
    bounds = [
        (key, node[key])
        for node in _walk(doc)
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
        if key in node and not isinstance(node[key], dict)
    ]
    assert bounds
    for key, value in bounds:
        assert type(value) is int and -(2**63) <= value <= 2**63 - 1, (key, value)
    parameters = {
        (path, p["name"]): p["schema"]
        for path, item in doc["paths"].items()
        for p in item.get("get", {}).get("parameters", [])
    }
    # A positive size starts at 1: the server refuses 0.
    consistency = {name: parameters[("/consistency", name)] for name in ("first", "second")}
    assert all(s["minimum"] == 1 for s in consistency.values())
    assert parameters[("/history/checkpoint/{size}", "size")]["minimum"] == 1


def test_the_request_bodies_are_closed_and_bounded(target: Target) -> None:
    schemas = target.schema.raw_schema["components"]["schemas"]
    records = schemas["RecordsBody"]
    assert records["additionalProperties"] is False
    assert (
        records["properties"]["records"]["minItems"],
        records["properties"]["records"]["maxItems"],
    ) == (1, 1000)
    assert schemas["ProveBody"]["additionalProperties"] is False


OPEN_OBJECTS = {"ServerRecord"}
"""Documented members are all there, and others may be: a record carries what its writer
gave it (`n`, `name`, ...) besides the members `/record` needs."""


def _mismatches(doc: dict[str, Any], schema: dict[str, Any], value: Any, where: str) -> list[str]:
    """Where `value` (a real answer) differs from `schema`: a documented member missing, an
    undocumented one present, a JSON type other than the documented one."""
    ref = schema.get("$ref")
    if ref is not None:
        name = ref.removeprefix("#/components/schemas/")
        return _mismatches(doc, {**doc["components"]["schemas"][name], "title": name}, value, where)
    if "oneOf" in schema:
        tries = [_mismatches(doc, s, value, where) for s in schema["oneOf"]]
        return [] if any(not t for t in tries) else [p for t in tries for p in t]
    kind = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
    if kind == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, types[kind])
    if not ok:
        return [f"{where}: {type(value).__name__}, documented {kind}"]
    if kind == "array":
        return [
            p
            for i, v in enumerate(value)
            for p in _mismatches(doc, schema["items"], v, f"{where}[{i}]")
        ]
    if kind != "object" or "properties" not in schema:
        return []
    properties = schema["properties"]
    problems = [f"{where}: no {m}" for m in schema.get("required", []) if m not in value]
    if schema.get("title") not in OPEN_OBJECTS:
        problems += [f"{where}: undocumented {m}" for m in value if m not in properties]
    return problems + [
        p
        for m, v in value.items()
        if m in properties
        for p in _mismatches(doc, properties[m], v, f"{where}.{m}")
    ]


def test_real_answers_have_exactly_the_documented_members(tmp_path: Path) -> None:
    """One real 200 of every operation against its documented schema, member by member."""
    h = build_history(tmp_path / "data")
    insert_stamp(h.data, h.d2, "https://tsa.example", b"0\x00", "2026-01-01T00:00:00Z")
    auth = {"Authorization": f"Bearer {h.token}"}
    with Log.open(h.data, background_checkpoints=False) as log:
        with log.store.write():
            log.store.set_policy(b"quorum none\n", 0)
        first_head = next(log.store.iter_history()).leaf_hash.hex()
    calls: list[tuple[str, str, str, dict[str, Any]]] = [
        ("GET", "/healthz", "/healthz", {}),
        ("GET", "/roots", "/roots", {}),
        ("GET", "/roots/latest", "/roots/latest", {}),
        ("GET", "/roots/{day}", f"/roots/{h.d2}", {}),
        ("GET", "/roots/{day}/{tree_size}", f"/roots/{h.today}/4", {}),
        ("GET", "/roots/{day}/timestamps", f"/roots/{h.d2}/timestamps", {}),
        ("GET", "/roots/{day}/timestamp", f"/roots/{h.d2}/timestamp", {}),
        ("GET", "/roots/{day}/tile/{tile}", f"/roots/{h.d2}/tile/0/000.p/6", {}),
        ("GET", "/roots/{day}/tile/{tile}", f"/roots/{h.d2}/tile/entries/000.p/6", {}),
        ("GET", "/history/tile/{tile}", "/history/tile/0/000.p/3", {}),
        ("GET", "/history/checkpoint", "/history/checkpoint", {}),
        ("GET", "/history/checkpoint/{size}", "/history/checkpoint/2", {}),
        ("GET", "/history/proof", f"/history/proof?leaf_hash={first_head}", {}),
        ("GET", "/history/vkey", "/history/vkey", {}),
        ("GET", "/history/policy", "/history/policy", {}),
        ("GET", "/proof", f"/proof?day={h.d2}&index=1", {}),
        ("GET", "/consistency", f"/consistency?day={h.d2}&first=3&second=6", {}),
        ("GET", "/entries/{day}", f"/entries/{h.today}", {}),
        ("GET", "/keys", "/keys", {}),
        ("GET", "/keys/records", "/keys/records", {}),
        ("GET", "/record", "/record?id=example:a-0", {}),
        ("GET", "/metrics", "/metrics", {}),
        ("POST", "/prove", "/prove", {"json": {"record": h.x}}),
        ("POST", "/records", "/records", {"json": {"records": [rec("doc", 0)]}}),
        ("POST", "/records", "/records?prove=1", {"json": {"records": [rec("doc", 1)]}}),
        ("POST", "/checkpoint", "/checkpoint", {}),
    ]
    app = create_app(Settings(data_dir=h.data, background=False, rate_limit=0, clock=h.clock))
    with TestClient(app) as client:
        doc = client.get("/schema/openapi.json").json()
        problems = []
        for method, template, url, extra in calls:
            r = client.request(method, url, headers=auth, **extra)
            assert r.status_code == 200, (url, r.text)
            media_type = r.headers["content-type"].split(";")[0]
            content = doc["paths"][template][method.lower()]["responses"]["200"]["content"]
            assert list(content) == [media_type], (url, list(content))
            if media_type == "application/json":
                schema = content[media_type]["schema"]
                problems += _mismatches(doc, schema, r.json(), f"{method} {url}")
    assert not problems, problems


def _cases() -> Iterator[Any]:
    for method, path, has_day in OPERATIONS:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            if mode is GenerationMode.NEGATIVE and path in NO_NEGATIVE:
                continue
            for pinned in (False, True) if has_day else (False,):
                if pinned and mode is GenerationMode.NEGATIVE and path in DAY_ONLY:
                    continue
                name = f"{method} {path} {mode.value}{' real-day' if pinned else ''}"
                yield pytest.param(method, path, mode, pinned, id=name)


@pytest.mark.parametrize(("method", "path", "mode", "pinned"), list(_cases()))
def test_operation(
    target: Target, method: str, path: str, mode: GenerationMode, pinned: bool
) -> None:
    operation = target.schema[path][method]
    history = target.history
    fixed: dict[str, Any] = {}
    if pinned:
        where = "path_parameters" if "{day}" in path else "query"
        fixed[where] = {"day": history.d2}
    strategy = operation.as_strategy(generation_mode=mode, **fixed)
    seen: dict[int, int] = {}

    @given(case=strategy)
    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        before = snapshot(history.data)
        response = case.call(headers=target.headers)
        status = response.status_code
        seen[status] = seen.get(status, 0) + 1
        where = f"{case.method} {case.formatted_path} query={case.query} body={case.body!r:.300}"
        assert status < 500, f"{status} for {where}: {response.content[:300]!r}"
        if not 200 <= status < 300 and case.method == "HEAD":
            assert not response.content, f"{status} for {where}: a body"
        elif not 200 <= status < 300:
            content_type = (response.headers.get("content-type") or [None])[0]
            inputs = {**(case.path_parameters or {}), **(case.query or {})}
            echoed = [str(v) for v in inputs.values()]
            assert_error_parts(status, content_type, response.content, echoed=echoed)
        if not 200 <= status < 300:
            assert snapshot(history.data) == before, f"{status} for {where} changed the store"
        if not pinned and not re.fullmatch(RECORD_BODIES, path):
            # (The record bodies: this harness sends the writer token with every case, which
            # turns schemathesis's negative "no Authorization" cases into accepted ones; the
            # command-line run below checks them with schemathesis's own headers.)
            # schemathesis's own checks too (conformance, ST202, negative data rejected). Not
            # with the day pinned: it replaces a generated day that schemathesis counts on.
            case.validate_response(response, headers=target.headers)

    run()
    assert sum(seen.values()) > 0
    if mode is GenerationMode.POSITIVE and method == "POST" and path != "/prove":
        # The writers' accepted requests left a log that still opens and passes its self-check.
        asgi.shutdown_lifespans()
        with Log.open(history.data, background_checkpoints=False) as log:
            log.self_check()
            assert log.store.last_sealed_day() == history.d1


# --- schemathesis's own command line, every check, against a real server ---------------------

SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
CLI_SEED = "20"
CLI_EXAMPLES = "30"
ALL_PHASES = "examples,coverage,fuzzing,stateful"
# schemathesis's coverage phase draws boundary values from each member's pattern and does not
# use registered formats, so for a record it pairs any first_seen with any checked_at: the one
# rule between two members (first_seen <= the day of checked_at) that no JSON Schema can say.
# The record bodies run every other phase, with the formats' generators
# (docs/explanation/decisions/19-up-to-19.md).
RECORD_PHASES = "examples,fuzzing,stateful"
# The record schema's own formats, registered as a schema-driven client would (crkit).
HOOKS = {
    "SCHEMATHESIS_HOOKS": "tests.kit.schemathesis_hooks",
    "PYTHONPATH": os.pathsep.join(filter(None, [str(paths.ROOT), os.environ.get("PYTHONPATH")])),
}


def schemathesis_run(
    url: str, token: str, work: Path, *select: str, phases: str = ALL_PHASES
) -> dict[str, Any]:
    """`schemathesis run --checks all` over the operations `select` names, with the writer
    token, every generation mode and phase, a fixed seed, bounded examples and no example
    database; its JSON report. Run in `work`, so that no project configuration is read and
    nothing is written into the checkout."""
    report = work / "schemathesis.json"
    argv = [
        str(SCHEMATHESIS),
        "run",
        f"{url}/schema/openapi.json",
        "--checks",
        "all",
        "--mode",
        "all",
        "--phases",
        phases,
        "--header",
        f"Authorization: Bearer {token}",
        "--seed",
        CLI_SEED,
        "--max-examples",
        CLI_EXAMPLES,
        "--generation-database",
        "none",
        "--workers",
        "1",
        "--continue-on-failure",
        "--no-color",
        "--report",
        "json",
        "--report-json-path",
        str(report),
        *select,
    ]
    done = subprocess.run(  # the timeout only ends a hang; nothing here is timed
        argv, cwd=work, env=clean_env(HOOKS), capture_output=True, text=True, timeout=900
    )
    assert report.exists(), done.stdout + done.stderr
    result: dict[str, Any] = json.loads(report.read_text())
    result["output"] = done.stdout[-20000:]
    result["returncode"] = done.returncode
    return result


@pytest.mark.parametrize(
    ("select", "expected", "phases"),
    [
        pytest.param(
            ("--exclude-path-regex", RECORD_BODIES), 43, ALL_PHASES, id="every-other-operation"
        ),
        pytest.param(("--include-path-regex", RECORD_BODIES), 2, RECORD_PHASES, id="record-bodies"),
    ],
)
def test_schemathesis_checks_all_finds_nothing(
    tmp_path: Path, select: tuple[str, ...], expected: int, phases: str
) -> None:
    """What a new user runs (issue 20): schemathesis `--checks all` (ST202 schema-valid
    request rejected, the negative-data and conformance checks, unsupported methods, ignored
    auth) over every operation, HEAD included, read and write with the token, against
    `capability-anchor serve` on loopback: 0 failures, 0 errors, every operation tested."""
    wait_clear_of_midnight()
    history = build_history(tmp_path / "data")
    with serving(history.data, "--rate-limit", "0") as server:
        result = schemathesis_run(server.url, history.token, tmp_path, *select, phases=phases)
    operations = result["operations"]
    assert (operations["selected"], operations["tested"]) == (expected, expected), result["output"]
    assert result["failures"] == [], result["output"]
    assert result["errors"] == [], result["output"]
    assert (result["complete"], result["returncode"]) == (True, 0), result["output"]
    # What the writers stored leaves a log that still opens and passes its self-check.
    with Log.open(history.data, background_checkpoints=False) as log:
        log.self_check()
