"""The pages for people: `/` and the docs page `/schema` (api/pages.py).

In process (Litestar's TestClient): what `/` says and how it is cached, that every operation
of the OpenAPI document is on the docs page, and that hostile text is escaped.

In headless Chromium (Debian's `chromium`, installed by `tools/dev.py` when missing), against
a real `capability-anchor serve` on 127.0.0.1: each page is loaded with every host name but
127.0.0.1 unresolvable, its DOM dumped and a 1280x2000 screenshot taken, and Chromium's own
NetLog read back. The page must show its content (the DOM has it; the screenshot is not one
colour, and it has text all the way down where the page is long), and the NetLog must show
that the page asked for nothing outside loopback and that no socket was opened to anything
but 127.0.0.1. A screenshot of an empty page is checked with the same measure, so the measure
can fail.
"""

from __future__ import annotations

import contextlib
import html
import http.server
import json
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from capability_anchor.api.app import create_app
from capability_anchor.api.home import (
    NewestHead,
    ServedCheckpoint,
    front_page_html,
    served_checkpoint,
)
from capability_anchor.api.pages import CSP, docs_html
from capability_anchor.api.settings import Settings
from capability_anchor.log import Log
from capability_anchor.note import parse_policy
from capability_anchor.witness.client import submit
from tests.kit import paths
from tests.kit.apikit import ISS, build_history, noon_today, wait_clear_of_midnight
from tests.kit.obskit import observation
from tests.kit.pngkit import Image, encode
from tests.kit.serverkit import Server, ThreadServer, serving
from tests.kit.systools import ensure_tool
from tests.kit.witnesskit import TestWitness

ROOT = paths.ROOT
CHROMIUM = Path("/usr/bin/chromium")
WINDOW = (1280, 2000)


def iso_time(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


HOSTILE = '<script>alert("x")</script><img src=https://evil.example/x onerror=alert(1)>'


# --- in process ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient[Any], Any]]:
    history = build_history(tmp_path_factory.mktemp("pages") / "data")
    app = create_app(
        Settings(data_dir=history.data, background=False, rate_limit=0, clock=history.clock)
    )
    with TestClient(app) as c:
        yield c, history


def test_front_page_names_the_log_and_its_newest_sealed_day(
    client: tuple[TestClient[Any], Any],
) -> None:
    c, history = client
    listing = c.get("/roots").json()
    newest = listing["days"][0]
    assert newest["day"] == history.d1
    r = c.get("/")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    assert r.headers["content-security-policy"] == CSP
    page = r.text
    for text in (ISS, history.d1, newest["root"], f'href="roots/{history.d1}"'):
        assert text in page
    for href in ("roots", "roots/latest", "keys", "schema", "schema/openapi.json"):
        assert f'href="{href}"' in page
    assert "<script" not in page


def test_front_page_is_cached_like_the_other_moving_documents(
    client: tuple[TestClient[Any], Any],
) -> None:
    c, _ = client
    r = c.get("/")
    assert r.headers["cache-control"] == "no-cache"
    tag = r.headers["etag"]
    again = c.get("/", headers={"If-None-Match": tag})
    assert again.status_code == 304 and again.content == b""
    assert c.get("/", headers={"If-None-Match": '"other"'}).status_code == 200


def test_front_page_of_a_log_with_nothing_sealed(tmp_path: Path) -> None:
    service_clock = noon_today()
    Log.init(tmp_path / "data", iss=ISS, clock=service_clock).close()
    app = create_app(
        Settings(data_dir=tmp_path / "data", background=False, rate_limit=0, clock=service_clock)
    )
    with TestClient(app) as c:
        r = c.get("/")
    assert r.status_code == 200
    assert "No day is sealed yet." in r.text and ISS in r.text
    assert "No head is published yet." in r.text and "No checkpoint yet." in r.text


def test_front_page_of_a_log_with_unsealed_heads_only(tmp_path: Path) -> None:
    # Issue #20: today the page said "No day is sealed yet" and nothing else.
    clock = noon_today()
    Log.init(tmp_path / "data", iss=ISS, clock=clock).close()
    with Log.open(tmp_path / "data", clock=clock) as log:
        log.append([observation(n, "home") for n in range(3)])
        log.checkpoint()
        row = log.store.newest_published()
        assert row is not None and not row.sealed
    app = create_app(Settings(data_dir=tmp_path / "data", background=False, clock=clock))
    with TestClient(app) as c:
        page = c.get("/").text
        note = c.get("/history/checkpoint").text
    today = row.day
    assert "Today&#x27;s newest head" in page or "Today's newest head" in page
    for text in (today, ">3<", row.root.hex(), iso_time(row.iat), f'href="roots/{today}/3"'):
        assert text in page, text
    assert "No day is sealed yet." in page
    checkpoint_root = note.split("\n")[2]
    assert checkpoint_root in page and "nobody yet" in page
    for href in ("history/checkpoint", "history/vkey", "history/policy", "record"):
        assert f'href="{href}"' in page


def test_front_page_names_the_cosigners_of_the_served_checkpoint() -> None:
    origin = "resolver.example/history"
    text = f"{origin}\n7\n{'A' * 43}=\n"
    sig = "AAAAAAAAAAAA"
    note = f"{text}\n— {origin} {sig}\n— witness.test/w1 {sig}\n— {HOSTILE.split()[0]} {sig}\n"
    served = served_checkpoint(note.encode())
    assert served.size == 7 and served.cosigners == ("witness.test/w1", HOSTILE.split()[0])
    page = front_page_html({"iss": ISS, "days": []}, checkpoint=served).decode()
    assert "<code>witness.test/w1</code>" in page
    assert "<script>" not in page


def test_front_page_is_not_an_api_operation(client: tuple[TestClient[Any], Any]) -> None:
    c, _ = client
    assert "/" not in c.get("/schema/openapi.json").json()["paths"]
    r = c.post("/")
    assert r.status_code == 405 and r.json()["error"] == "method_not_allowed"


def test_docs_page_lists_every_operation(client: tuple[TestClient[Any], Any]) -> None:
    c, _ = client
    doc = c.get("/schema/openapi.json").json()
    r = c.get("/schema")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page = r.text
    operations = 0
    for path, item in doc["paths"].items():
        for method, op in item.items():
            operations += 1
            anchor = "op-" + re.sub(r"[^A-Za-z0-9_-]+", "-", f"{method}-{path}").strip("-")
            section = page.split(f'id="{anchor}"', 1)[1].split("</section>", 1)[0]
            assert f">{method.upper()}<" in section, (method, path)
            assert path in section
            assert html.escape(op["summary"]) in section
            for param in op.get("parameters", []):
                assert f"<code>{param['name']}</code>" in section, (path, param["name"])
            for status in op["responses"]:
                assert f"<strong>{status}</strong>" in section, (path, status)
            if "requestBody" in op:
                assert "Request body" in section
            if op.get("security"):
                assert "Authorization" in section
    # SPEC §6, the seven of §12.4, /metrics and /keys/records (issue 21), and HEAD of each GET
    assert operations == 24 + 21
    for name in doc["components"]["schemas"]:
        assert f'id="schema-{name}"' in page
    assert "<script" not in page and html.escape(CSP) in page


def _section(page: str, anchor: str) -> str:
    return page.split(f'id="{anchor}"', 1)[1].split("</section>", 1)[0]


def test_docs_page_shows_the_record_limits_and_the_query_forms(
    client: tuple[TestClient[Any], Any],
) -> None:
    """The records array's bounds and the closed bodies, and each query form's members."""
    c, _ = client
    page = c.get("/schema").text
    records = _section(page, "schema-RecordsBody")
    assert "items ≥ 1" in records and "items ≤ 1000" in records
    assert "no other members" in records
    assert "no other members" in _section(page, "schema-ProveBody")
    record = _section(page, "op-get--record")
    for member in ("server", "id", "url"):
        assert f"<code>{member}</code>" in record, member
    assert "pattern ^https://" in record
    proof = _section(page, "op-get--proof")
    for member in ("entry", "day", "index", "tree_size", "leaf_hash"):
        assert f"<code>{member}</code>" in proof, member
    assert "format date" in proof and "pattern ^[0-9a-f]{64}$" in proof
    assert "≤ 9223372036854775807" in proof


def test_docs_page_shows_each_record_member_written_in_place() -> None:
    """A record item schema written in place (as the observation Struct gives it): its
    members, types, enums and required ones appear under the records array."""
    item = {
        "type": "object",
        "required": ["status", "sub"],
        "properties": {
            "sub": {"type": "string", "pattern": "^[a-z0-9-]{1,32}:.+$"},
            "status": {"type": "string", "enum": ["ok", "down"]},
            "evidence": {"type": "object", "properties": {"method": {"type": "string"}}},
        },
    }
    doc = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {},
        "components": {
            "schemas": {
                "RecordsBody": {
                    "type": "object",
                    "required": ["records"],
                    "properties": {
                        "records": {"type": "array", "items": item, "minItems": 1, "maxItems": 9}
                    },
                }
            }
        },
    }
    section = _section(docs_html(doc, "/schema/openapi.json").decode(), "schema-RecordsBody")
    for member in ("records", "sub", "status", "evidence", "method"):
        assert f"<code>{member}</code>" in section, member
    assert "one of <code>ok</code>, <code>down</code>" in section
    assert "pattern ^[a-z0-9-]{1,32}:.+$" in section
    assert "items ≤ 9" in section
    cell = "(?:[^<]|<code>|</code>)*"  # a type with no table inside
    rows = re.findall(
        f"<tr><td><code>(\\w+)</code></td><td>{cell}</td><td>(yes|no)</td></tr>", section
    )
    assert ("sub", "yes") in rows and ("status", "yes") in rows and ("method", "no") in rows


def test_the_old_renderers_are_gone_and_the_json_stays(
    client: tuple[TestClient[Any], Any],
) -> None:
    """Litestar's default renderers (Swagger UI, Redoc, Elements, RapiDoc) load from CDNs."""
    c, _ = client
    for path in ("/schema/swagger", "/schema/redoc", "/schema/elements", "/schema/rapidoc"):
        assert c.get(path).status_code == 404
    r = c.get("/schema/openapi.json")
    assert r.status_code == 200 and r.json()["openapi"].startswith("3.")


def test_hostile_text_is_escaped() -> None:
    page = front_page_html(
        {
            "iss": HOSTILE,
            "days": [{"day": f'"{HOSTILE}', "tree_size": HOSTILE, "root": HOSTILE, "url": "x"}],
        },
        NewestHead(HOSTILE, 1, HOSTILE, 0, False),
        ServedCheckpoint(1, HOSTILE, (HOSTILE,)),
        HOSTILE,
    ).decode()
    doc = {
        "openapi": HOSTILE,
        "info": {"title": HOSTILE, "version": HOSTILE},
        "paths": {
            f"/x/{HOSTILE}": {
                "get": {
                    "summary": HOSTILE,
                    "description": HOSTILE,
                    "parameters": [
                        {
                            "name": HOSTILE,
                            "in": HOSTILE,
                            "schema": {"type": HOSTILE, "enum": [HOSTILE], "default": HOSTILE},
                            "description": HOSTILE,
                        }
                    ],
                    "responses": {HOSTILE: {"description": HOSTILE, "content": {HOSTILE: {}}}},
                    "security": [{HOSTILE: []}],
                }
            },
            "javascript:alert(1)": {"get": {"summary": "x", "responses": {}}},
            "//evil.example/x": {"get": {"summary": "x", "responses": {}}},
        },
        "components": {
            "schemas": {HOSTILE: {"properties": {HOSTILE: {"$ref": f"#/x/{HOSTILE}"}}}},
            "securitySchemes": {HOSTILE: {"type": HOSTILE}},
        },
    }
    docs = docs_html(doc, f"/{HOSTILE}").decode()
    for text in (page, docs):
        assert "<script" not in text and "<img" not in text
        assert "&lt;script&gt;" in text
        # A quote in a value never closes an attribute.
        assert '"<' not in text.replace('="<', "")
    # Only a plain path of this server becomes a link.
    assert 'href="javascript:' not in docs and 'href="//' not in docs


# --- the PNG reader the browser tests rely on ------------------------------------------------


@pytest.mark.parametrize("channels", [3, 4])
def test_png_reader_undoes_every_filter(channels: int) -> None:
    width = 9
    rows = [
        bytes((x * 37 + y * 11 + x * y) % 256 for x in range(width * channels)) for y in range(10)
    ]
    image = Image.decode(encode(width, rows, channels, [y % 5 for y in range(10)]))
    assert (image.width, image.height) == (width, 10)
    assert list(image.rows) == rows


# --- in headless Chromium ------------------------------------------------------------------------


@dataclass
class Socket:
    kind: str  # "tcp" or "udp"
    address: str  # host:port it was connected to
    sent: int  # bytes written to it


@dataclass
class Visit:
    url: str
    dom: str
    shot: Image
    requests: list[tuple[str, str]]  # (url, initiator) of every URL request the NetLog shows
    sockets: list[Socket]
    shot_path: Path = Path()


@pytest.fixture(scope="module")
def chromium() -> Path:
    return ensure_tool(CHROMIUM, "chromium", "Chromium", timeout=900)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    wait_clear_of_midnight()  # `serve` reads the system clock: no Settings.clock to give it
    history = build_history(tmp_path_factory.mktemp("browser") / "data", service_clock=time.time)
    with serving(history.data, "--checkpoint-interval", "3600") as s:
        yield s


def _netlog(path: Path) -> tuple[list[tuple[str, str]], list[Socket]]:
    """The URL requests and the sockets in a NetLog (Chromium's --log-net-log JSON)."""
    log = json.loads(path.read_text())
    names = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    requests: list[tuple[str, str]] = []
    sockets: dict[int, Socket] = {}
    for event in log["events"]:
        name, params = names.get(event["type"]), event.get("params", {})
        source = event["source"]["id"]
        if name == "URL_REQUEST_START_JOB" and "url" in params:
            requests.append((params["url"], params.get("initiator", "")))
        elif name == "TCP_CONNECT_ATTEMPT" and "address" in params:
            sockets[source] = Socket("tcp", params["address"], 0)
        elif name == "UDP_CONNECT" and "address" in params:
            sockets[source] = Socket("udp", params["address"], 0)
        elif name in ("SOCKET_BYTES_SENT", "UDP_BYTES_SENT") and source in sockets:
            sockets[source].sent += int(params.get("byte_count", 0))
    return requests, list(sockets.values())


def visit(chromium: Path, url: str, tmp: Path, *, budget_ms: int | None = None) -> Visit:
    """`budget_ms`: virtual time the page's scripts get before the DOM and screenshot."""
    tmp.mkdir(parents=True, exist_ok=True)
    shot, netlog = tmp / "screenshot.png", tmp / "netlog.json"
    argv = [
        str(chromium),
        "--headless",
        "--no-sandbox",  # as root there is no other way; the pages are our own
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",  # containers often have a tiny /dev/shm
        f"--user-data-dir={tmp / 'profile'}",
        # No host name resolves except 127.0.0.1: an outside load could only fail.
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        f"--log-net-log={netlog}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        f"--screenshot={shot}",
        "--dump-dom",
        *([f"--virtual-time-budget={budget_ms}"] if budget_ms else []),
        url,
    ]
    done = subprocess.run(argv, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    requests, sockets = _netlog(netlog)
    return Visit(url, done.stdout.decode(), Image.read(shot), requests, sockets, shot)


class _Links(HTMLParser):
    """Every URL the DOM could make the browser fetch or follow, and its style sheets."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_style = tag == "style"
        for name, value in attrs:
            if name in ("src", "href", "action", "srcset", "poster", "data") and value is not None:
                self.urls.append(value)
            if name == "style" and value is not None:
                self.styles.append(value)

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)


def assert_offline(page: Visit) -> None:
    """Nothing in the DOM points outside the page's own origin; the page asked for nothing
    else; no TCP connection was tried and no UDP datagram sent to anything but 127.0.0.1."""
    origin = "/".join(page.url.split("/", 3)[:3])
    links = _Links()
    links.feed(page.dom)
    absolute = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*:|//)")
    assert [u for u in links.urls if absolute.match(u) and u != "data:,"] == []
    assert not any("url(" in s or "@import" in s for s in links.styles)
    # Chromium's own services (the updater, sign-in) also show up, with no initiator; the
    # resolver rule refuses them, and the sockets below show they never left.
    asked = [u for u, initiator in page.requests if initiator == origin or u == page.url]
    assert asked and all(u.startswith(origin + "/") for u in asked), page.requests
    loopback = [s for s in page.sockets if s.address.startswith("127.0.0.1:")]
    assert any(s.kind == "tcp" and s.sent > 0 for s in loopback), page.sockets
    # A UDP connect() sends nothing: Chromium's resolver probes routes that way (to Google's
    # public DNS address), so only UDP sockets that sent bytes count.
    left = [s for s in page.sockets if s not in loopback and (s.kind == "tcp" or s.sent > 0)]
    assert left == [], left


def assert_not_blank(shot: Image, *, min_ink: float, lower_half_ink: float = 0.0) -> None:
    """Not (nearly) one colour: a blank page is one colour, with no row holding two."""
    assert (shot.width, shot.height) == WINDOW
    colours = shot.colours()
    dominant = colours.most_common(1)[0][1] / (shot.width * shot.height)
    inked = [row != row[: shot.channels] * shot.width for row in shot.rows]
    assert dominant < 0.97, f"{dominant:.1%} of the screenshot is one colour"
    assert len(colours) > 50, f"only {len(colours)} colours: no text was drawn"
    assert sum(inked) / shot.height >= min_ink, f"only {sum(inked)} rows have ink"
    lower = inked[shot.height // 2 :]
    assert sum(lower) / len(lower) >= lower_half_ink, "the lower half is empty"


# What /schema was before: Litestar's Redoc page, its script from a CDN.
CDN_PAGE = b"""<!DOCTYPE html><html><head><title>docs</title>
<script src="https://cdn.jsdelivr.net/npm/redoc@next/bundles/redoc.standalone.js"></script>
</head><body><redoc spec-url="/schema/openapi.json"></redoc></body></html>"""


@contextlib.contextmanager
def static_page(body: bytes) -> Iterator[str]:
    """One HTML page on a loopback port (a thread of this process)."""

    def answer(request: http.server.BaseHTTPRequestHandler) -> None:
        request.send_response(200)
        request.send_header("Content-Type", "text/html; charset=utf-8")
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)

    server = ThreadServer(answer)
    try:
        yield server.url + "/"
    finally:
        server.close()


def test_the_checks_catch_a_renderer_loaded_from_a_cdn(chromium: Path, tmp_path: Path) -> None:
    """The issue's white page, reproduced: both checks must fail on it."""
    with static_page(CDN_PAGE) as url:
        page = visit(chromium, url, tmp_path)
    # The page itself asked for the script (its origin is the initiator), and was refused.
    script = "https://cdn.jsdelivr.net/npm/redoc@next/bundles/redoc.standalone.js"
    assert (script, url.rstrip("/")) in page.requests
    with pytest.raises(AssertionError):
        assert_offline(page)
    with pytest.raises(AssertionError, match="one colour"):
        assert_not_blank(page.shot, min_ink=0.05)
    assert page.shot.rows_with_ink() == 0


def test_front_page_renders_offline_in_chromium(
    chromium: Path, server: Server, tmp_path: Path
) -> None:
    with server.client() as c:
        newest = c.get("/roots").json()["days"][0]
    page = visit(chromium, server.url + "/", tmp_path)
    for text in (ISS, newest["day"], newest["root"], "/schema/openapi.json", "/keys"):
        assert text in page.dom
    assert_offline(page)
    assert_not_blank(page.shot, min_ink=0.08)


def test_front_page_of_unsealed_heads_with_a_cosigned_checkpoint_in_chromium(
    chromium: Path, tmp_path: Path
) -> None:
    """A log with unsealed heads only (today's), a witness policy and a cosignature from a
    real witness on loopback: the page shows the head, the checkpoint and its cosigner."""
    wait_clear_of_midnight()  # `serve` reads the system clock
    data = tmp_path / "data"
    Log.init(data, iss=ISS).close()
    with Log.open(data) as log, TestWitness("witness.test/w1", log.read.history.vkey()) as w:
        for k in range(2):
            log.append([observation(n, f"h{k}") for n in range(2)])
            log.checkpoint()
        policy = f"witness w1 {w.vkey} {w.url}\nquorum w1\n".encode()
        with log.writer.lock, log.store.write():
            log.store.set_policy(policy, int(log.clock()))
        assert submit(log, parse_policy(policy).witnesses[0]).result == "cosigned"
        head = log.store.newest_published()
        size = log.store.history_size()
        assert head is not None and not head.sealed and log.store.sealed_heads() == []
        with serving(data, "--checkpoint-interval", "3600") as server:
            page = visit(chromium, server.url + "/", tmp_path / "chromium")
            with server.client() as c:
                note = c.get("/history/checkpoint").text
    dom = page.dom
    assert "Today's newest head" in dom
    for text in (head.day, f">{head.tree_size}<", head.root.hex(), iso_time(head.iat)):
        assert text in dom, text
    assert f">{size} heads<" in dom and note.split("\n")[2] in dom
    cosigners = dom.split('class="cosigners">', 1)[1].split("</dd>", 1)[0]
    assert cosigners == "<code>witness.test/w1</code>"
    for href in ("history/checkpoint", "history/vkey", "history/policy", "record"):
        assert f'href="{href}"' in dom, href
    assert "No day is sealed yet." in dom  # one line of the page, no longer all of it
    assert_offline(page)
    assert_not_blank(page.shot, min_ink=0.15)


def test_docs_page_renders_offline_in_chromium(
    chromium: Path, server: Server, tmp_path: Path
) -> None:
    with server.client() as c:
        doc = c.get("/schema/openapi.json").json()
    page = visit(chromium, server.url + "/schema", tmp_path)
    for path, item in doc["paths"].items():
        for method, op in item.items():
            assert f">{path}</" in page.dom, path
            # The DOM as Chromium serialises it: only &, < and > escaped in text.
            assert html.escape(op["summary"], quote=False) in page.dom, (method, path)
    assert_offline(page)
    # The operations fill the window: text from top to bottom.
    assert_not_blank(page.shot, min_ink=0.5, lower_half_ink=0.5)
