"""Each operation of the OpenAPI document (and of `/schema`, which renders it) lists the errors
that operation can give, and each write carries an example request (issue #35 item 9).

What a new user met: every error row on every operation (413 "the body is over 4 MiB" on
`GET /healthz`, the writer-token 401 on `/metrics`) and no request examples. The errors the
guards give are now derived from each handler's `opt` (`guards.refusals`), the ones its
handler gives are listed by the route (`errors.documented`); these tests hold the document to
the answers of the real app, in process, on a real SQLite log.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from capability_anchor.api.app import create_app
from capability_anchor.api.guards import MISSING_TOKEN_NOTE
from capability_anchor.api.settings import Settings
from capability_anchor.log import Log
from capability_anchor.web.guards import MISSING_METRICS_TOKEN_NOTE

METRICS_TOKEN = "m" * 40


@pytest.fixture
def app_client(tmp_path: Path) -> Iterator[tuple[TestClient[Any], dict[str, Any], str]]:
    """The app with its rate limit on (the default) and a metrics token, its document, and
    the writer token."""
    data = tmp_path / "data"
    Log.init(data, iss="https://resolver.example").close()
    token = (data / "writer-token").read_text().strip()
    settings = Settings(
        data_dir=data, background=False, body_workers=0, metrics_token=METRICS_TOKEN
    )
    with TestClient(create_app(settings)) as client:
        doc = client.get("/schema/openapi.json").json()
        yield client, doc, token


def _statuses(doc: dict[str, Any], method: str, path: str) -> dict[str, str]:
    responses = doc["paths"][path][method]["responses"]
    return {status: r["description"] for status, r in responses.items()}


def test_healthz_lists_no_body_limit_no_parameter_error_and_no_token(
    app_client: tuple[TestClient[Any], dict[str, Any], str],
) -> None:
    client, doc, _ = app_client
    for method in ("get", "head"):
        assert set(_statuses(doc, method, "/healthz")) == {"200", "405", "429", "503"}
    # ... and the service agrees: a GET's body is not its business, nor a parameter it
    # does not take.
    r = client.request(
        "GET", "/healthz?index=x", content=b"x" * 4096, headers={"content-length": "4096"}
    )
    assert r.status_code == 200, r.text


def test_a_get_with_a_declared_body_over_the_limit_is_not_a_413(
    app_client: tuple[TestClient[Any], dict[str, Any], str],
) -> None:
    client, doc, _ = app_client
    big = b"x" * (4 * 1024 * 1024 + 1)
    assert client.request("GET", "/roots", content=big).status_code == 200
    assert "413" not in _statuses(doc, "get", "/roots")


def test_metrics_401_names_the_metrics_token_not_the_writer_token(
    app_client: tuple[TestClient[Any], dict[str, Any], str],
) -> None:
    client, doc, _ = app_client
    statuses = _statuses(doc, "get", "/metrics")
    assert MISSING_METRICS_TOKEN_NOTE in statuses["401"]
    assert "writer" not in statuses["401"]
    assert not {"400", "413", "429"} & set(statuses)  # never rate limited, no input
    r = client.get("/metrics")
    assert r.status_code == 401 and r.json()["note"] == MISSING_METRICS_TOKEN_NOTE


def test_each_body_limit_is_its_own_operations(
    app_client: tuple[TestClient[Any], dict[str, Any], str],
) -> None:
    _, doc, _ = app_client
    with_413 = {
        (method, path): r["413"]["description"]
        for path, item in doc["paths"].items()
        for method, op in item.items()
        for r in [op["responses"]]
        if "413" in r
    }
    assert with_413 == {
        ("post", "/records"): "too_large: the body is over 4 MiB",
        ("post", "/prove"): "too_large: the body is over 64 KiB",
    }


def test_the_writer_token_401_and_the_rate_limit_429_are_where_the_guards_put_them(
    app_client: tuple[TestClient[Any], dict[str, Any], str],
) -> None:
    _, doc, _ = app_client
    for path, item in doc["paths"].items():
        for method, op in item.items():
            statuses = _statuses(doc, method, path)
            writer = {"bearer": []} in op.get("security", [])
            public = path != "/metrics" and not writer
            assert ("429" in statuses) == public, (method, path)
            assert ("401" in statuses) == (writer or path == "/metrics"), (method, path)
            if writer:
                assert MISSING_TOKEN_NOTE in statuses["401"]
            # Every error answer is `{v, error, note}`; a HEAD has no body.
            for status, response in op["responses"].items():
                if status >= "400" and method != "head":
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (path, status)


def _example(doc: dict[str, Any], path: str) -> Any:
    body = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    (example,) = body["examples"].values()
    return example["value"]


def test_every_write_operation_has_an_example_request_the_log_accepts(
    app_client: tuple[TestClient[Any], dict[str, Any], str],
) -> None:
    client, doc, token = app_client
    auth = {"Authorization": f"Bearer {token}"}
    records = _example(doc, "/records")
    r = client.post("/records?prove=1", content=json.dumps(records), headers=auth)
    assert r.status_code == 200, r.text
    r = client.post("/prove", content=json.dumps(_example(doc, "/prove")))
    assert r.status_code == 200, r.text
    # /schema shows one example request for each write (POST) operation, with its token.
    page = client.get("/schema").text
    posts = [path for path, item in doc["paths"].items() if "post" in item]
    assert sorted(posts) == ["/checkpoint", "/prove", "/records"]
    for path in posts:
        anchor = "op-post-" + path.replace("/", "-")
        section = page.split(f'id="{anchor}"', 1)[1].split("</section>", 1)[0]
        assert section.count("<h4>Example request</h4>") == 1, path
        assert f"POST {path} HTTP/1.1" in section
        if path != "/prove":
            assert "Authorization: Bearer &lt;writer token&gt;" in section
    assert "&quot;records&quot;: [" in page
