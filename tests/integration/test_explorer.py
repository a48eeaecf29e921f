"""The log explorer on `/` (api/home.py, api/explorer.py), in process: the days (a bounded page,
newest first, sealed or open, stamps), the served checkpoint against the policy's quorum, the
records-per-day chart (an SVG with 90 bars), the record lookup's answers, hostile text, and
`/verify.js` serving the JavaScript verifier's exact bytes. The browser side is
tests/e2e/test_explorer_browser.py."""

from __future__ import annotations

import datetime as dt
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from capability_anchor.api.app import create_app
from capability_anchor.api.explorer import (
    CHART_DAYS,
    DAYS_PAGE,
    DayRow,
    ServedCheckpoint,
    WitnessView,
    chart_svg,
    days_section,
)
from capability_anchor.api.home import Lookup, front_page_html, lookup_html
from capability_anchor.api.pages import CSP
from capability_anchor.api.scripts import EXPLORER, VERIFIER_PLACES
from capability_anchor.api.settings import Settings
from capability_anchor.log import Log
from capability_anchor.note import parse_policy
from capability_anchor.witness.client import submit
from tests.kit.apikit import (
    ISS,
    Clock,
    build_history,
    day_start,
    insert_stamp,
    noon_today,
    rec,
    shift_day,
    wait_clear_of_midnight,
)
from tests.kit.obskit import observation
from tests.kit.witnesskit import TestWitness

HOSTILE = '<script>alert("x")</script><img src=https://evil.example/x onerror=alert(1)>'
SVG = "{http://www.w3.org/2000/svg}"


def _app(data: Path, clock: Any) -> TestClient[Any]:
    return TestClient(create_app(Settings(data_dir=data, background=False, clock=clock)))


def _days(page: str) -> list[tuple[str, str, str, str]]:
    """(day, records, state, stamps) of each row of the days table."""
    table = page.split('<table class="days">', 1)[1].split("</table>", 1)[0]
    rows = []
    for row in table.split('<tr data-day="')[1:]:
        cells = [c.split("</td>", 1)[0] for c in row.split("<td")[1:]]
        rows.append(tuple(c.split(">", 1)[1] for c in cells[:4]))
    return rows  # type: ignore[return-value]


def _chart(page: str) -> ET.Element:
    svg = page.split('<figure class="chart">', 1)[1].split("</svg>", 1)[0] + "</svg>"
    return ET.fromstring(svg)


def _bars(svg: ET.Element) -> list[tuple[str, int, float]]:
    return [
        (r.attrib["data-day"], int(r.attrib["data-count"]), float(r.attrib["height"]))
        for r in svg.iter(f"{SVG}rect")
        if r.attrib.get("class") == "bar"
    ]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Any:
    history = build_history(tmp_path_factory.mktemp("explorer") / "data")
    for tsa, token, gen_time in (
        ("https://tsa.test/", b"\x30\x00", "2026-01-02T00:00:05Z"),
        ("https://tsa2.test/", b"\x30\x01", "2026-01-02T00:00:01Z"),
    ):
        insert_stamp(history.data, history.d1, tsa, token, gen_time)
    return history


@pytest.fixture(scope="module")
def client(history: Any) -> Iterator[TestClient[Any]]:
    with _app(history.data, history.clock) as c:
        yield c


def test_an_empty_log_says_so_everywhere(tmp_path: Path) -> None:
    clock = noon_today()
    Log.init(tmp_path / "data", iss=ISS, clock=clock).close()
    with _app(tmp_path / "data", clock) as c:
        r = c.get("/")
    assert r.status_code == 200 and r.headers["content-security-policy"] == CSP
    assert "No day has a published head yet." in r.text and "No checkpoint yet." in r.text
    bars = _bars(_chart(r.text))
    assert len(bars) == CHART_DAYS and {count for _, count, _ in bars} == {0}


def test_the_days_newest_first_with_size_state_and_stamps(
    client: TestClient[Any], history: Any
) -> None:
    page = client.get("/").text
    assert _days(page) == [
        (history.today, "4", "open", "—"),
        (history.d1, "2", "sealed", "2, first 2026-01-02T00:00:01Z"),
        (history.d2, "6", "sealed", "none yet"),
    ]
    for href in (f"roots/{history.today}/4", f"roots/{history.d1}", f"roots/{history.d2}"):
        assert f'href="{href}"' in page, href
    assert "Older days" not in page and "<script" not in page


def test_the_chart_has_90_bars_of_the_records_per_day(
    client: TestClient[Any], history: Any
) -> None:
    svg = _chart(client.get("/").text)
    assert svg.attrib["role"] == "img"
    assert svg.find(f"{SVG}title") is not None and svg.find(f"{SVG}desc") is not None
    labels = [t.text for t in svg.iter(f"{SVG}text")]
    assert "records" in labels and "day (UTC)" in labels and "6" in labels
    bars = _bars(svg)
    end = dt.date.fromisoformat(history.today)
    assert [day for day, _, _ in bars] == [
        (end - dt.timedelta(days=n)).isoformat() for n in range(CHART_DAYS - 1, -1, -1)
    ]
    counts = {day: count for day, count, _ in bars if count}
    assert counts == {history.d2: 6, history.d1: 2, history.today: 4}
    heights = {day: h for day, _, h in bars}
    assert heights[history.d1] * 3 == pytest.approx(heights[history.d2], abs=0.2)
    assert "12 records in all" in (svg.find(f"{SVG}desc").text or "")  # type: ignore[union-attr]


def test_many_days_are_read_a_page_at_a_time(tmp_path: Path) -> None:
    """40 days, each sealed by the next: `/` shows the newest DAYS_PAGE of them and links the
    rest, which `?before=` shows; the store is asked for one page (plus one) of days."""
    last = dt.date.fromisoformat(_today())
    first = (last - dt.timedelta(days=39)).isoformat()
    clock = Clock(day_start(first) + 3600)
    with Log.init(tmp_path / "data", iss=ISS, records="any", clock=clock) as log:
        for n in range(40):
            clock.t = day_start(shift_day(first, n)) + 3600
            log.append([rec("m", k, day=n) for k in range(n % 3 + 1)])
            log.checkpoint()
    days = [shift_day(first, n) for n in range(39, -1, -1)]
    asked: list[int] = []
    with _app(tmp_path / "data", noon_today()) as c:
        store = c.app.state["service"].reader.store
        real = store.head_days

        def spy(before: str | None, limit: int) -> list[str]:
            asked.append(limit)
            return real(before, limit)  # type: ignore[no-any-return]

        store.head_days = spy
        page = c.get("/").text
        shown = _days(page)
        assert [row[0] for row in shown] == days[:DAYS_PAGE]
        assert shown[0][2] == "open" and {row[2] for row in shown[1:]} == {"sealed"}
        assert f'href="?before={days[DAYS_PAGE - 1]}"' in page
        older = c.get(f"/?before={days[DAYS_PAGE - 1]}").text
        assert [row[0] for row in _days(older)] == days[DAYS_PAGE:]
        assert "Older days" not in older
        bad = c.get("/?before=bad")
        assert bad.status_code == 400 and "before: day must be YYYY-MM-DD" in bad.text
        assert [row[0] for row in _days(bad.text)] == days[:DAYS_PAGE]
    assert asked == [DAYS_PAGE + 1, DAYS_PAGE + 1]
    bars = {day: count for day, count, _ in _bars(_chart(page))}
    assert all(bars[shift_day(first, n)] == n % 3 + 1 for n in range(40))


def _today() -> str:
    return dt.datetime.fromtimestamp(noon_today()(), dt.UTC).date().isoformat()


def test_the_page_is_kept_until_the_store_changes(tmp_path: Path) -> None:
    clock = noon_today()
    Log.init(tmp_path / "data", iss=ISS, clock=clock).close()
    with _app(tmp_path / "data", clock) as c:
        first = c.get("/")
        assert c.get("/").headers["etag"] == first.headers["etag"]
        token = (tmp_path / "data" / "writer-token").read_text().strip()
        auth = {"Authorization": f"Bearer {token}"}
        assert c.post("/records", json={"records": [observation(1, "k")]}, headers=auth).is_success
        assert c.post("/checkpoint", headers=auth).is_success
        again = c.get("/")
    assert again.headers["etag"] != first.headers["etag"]
    assert _days(again.text) == [(_today(), "1", "open", "—")]


def _quorum(page: str) -> tuple[str, list[tuple[str, str]]]:
    quorum = page.split('<dd class="quorum"', 1)[1].split("</dd>", 1)[0]
    rows = page.split("<tr data-witness=")[1:]
    return quorum, [(r.split('"')[1], r.split('<td class="', 1)[1].split('"', 1)[0]) for r in rows]


def test_the_checkpoint_against_the_policy_quorum(tmp_path: Path) -> None:
    wait_clear_of_midnight()
    clock = time.time  # the witness dates its cosignatures by the real clock
    data = tmp_path / "data"
    Log.init(data, iss=ISS, clock=clock).close()
    with (
        Log.open(data, clock=clock) as log,
        TestWitness("witness.test/w1", log.read.history.vkey()) as w,
    ):
        log.append([observation(n, "q") for n in range(2)])
        log.checkpoint()
        other = TestWitness("witness.test/w2", log.read.history.vkey())
        met = f"witness w1 {w.vkey} {w.url}\nquorum w1\n".encode()
        both = (
            f"witness w1 {w.vkey} {w.url}\nwitness w2 {other.vkey}\n"
            "group both all w1 w2\nquorum both\n"
        )
        with log.writer.lock, log.store.write():
            log.store.set_policy(met, int(clock()))
        assert submit(log, parse_policy(met).witnesses[0]).result == "cosigned"
    with _app(data, clock) as c:
        quorum, witnesses = _quorum(c.get("/").text)
        assert 'data-met="true"' in quorum and ": met" in quorum
        assert witnesses == [("w1", "cosigned")]
        with Log.open(data, clock=clock) as log, log.writer.lock, log.store.write():
            log.store.set_policy(both.encode(), int(clock()))
        page = c.get("/").text
    quorum, witnesses = _quorum(page)
    assert 'data-met="false"' in quorum and "not met" in quorum and "missing w2" in quorum
    assert witnesses == [("w1", "cosigned"), ("w2", "missing")]
    cosigners = page.split('class="cosigners">', 1)[1].split("</dd>", 1)[0]
    assert cosigners == "<code>witness.test/w1</code>"


def test_without_a_policy_there_is_no_quorum(client: TestClient[Any]) -> None:
    assert '<dt>Quorum</dt><dd class="note">no witness policy</dd>' in client.get("/").text


# --- the record lookup ------------------------------------------------------------------------


def test_a_lookup_shows_the_record_and_loads_the_checks(client: TestClient[Any]) -> None:
    r = client.get("/", params={"id": "example:a-1"})
    assert r.status_code == 200 and r.headers["cache-control"] == "no-cache"
    assert r.headers["content-security-policy"] == CSP and "etag" not in r.headers
    page = r.text
    assert 'data-query="id=example%3Aa-1"' in page and 'href="record?id=example%3Aa-1"' in page
    members = page.split('<dl id="record-members">', 1)[1].split("</dl>", 1)[0]
    for name in ("sub", "url", "anchor", "proof", "jws", "iat", "exp"):
        assert f"<dt>{name}</dt>" in members, name
    assert "example:a-1" in members
    assert (
        page.count("<script") == 1 and '<script type="module" src="explorer.js"></script>' in page
    )
    assert 'value="example:a-1"' in page  # the form keeps what was asked
    by_url = client.get("/", params={"url": "https://WWW.s1.a.example/mcp/"})
    assert by_url.status_code == 200 and 'data-query="url=https' in by_url.text


@pytest.mark.parametrize(
    ("query", "status", "text"),
    [
        ({"id": "example:a-1", "url": "https://s1.a.example/mcp"}, 400, "not both"),
        ({"id": "", "url": " "}, 400, "one of them"),
        ({"url": "http://s1.a.example/mcp"}, 400, "https"),
        ({"url": "https://user@x.example/"}, 400, ""),
        ({"id": "example:nobody"}, 404, "no entry"),
    ],
)
def test_a_bad_lookup_says_why_on_the_page(
    client: TestClient[Any], query: dict[str, str], status: int, text: str
) -> None:
    r = client.get("/", params=query)
    assert r.status_code == status and r.headers["content-type"].startswith("text/html")
    message = r.text.split('<p class="error">', 1)[1].split("</p>", 1)[0]
    assert text in message and message
    assert "<script" not in r.text and '<table class="days">' in r.text


def test_a_hostile_lookup_is_escaped(client: TestClient[Any]) -> None:
    for query in ({"id": HOSTILE}, {"url": f"https://x.example/{HOSTILE}"}, {"before": HOSTILE}):
        r = client.get("/", params=query)
        assert r.status_code in (400, 404), query
        assert "<img" not in r.text and "<script>" not in r.text, query


def test_hostile_text_is_escaped_in_every_part() -> None:
    checkpoint = ServedCheckpoint(
        1, HOSTILE, (HOSTILE,), HOSTILE, False, HOSTILE, (WitnessView(HOSTILE, HOSTILE, HOSTILE),)
    )
    rows = [DayRow(HOSTILE, 1, True, 2, HOSTILE)]
    pages = [
        front_page_html(
            {"iss": HOSTILE, "days": []},
            checkpoint=checkpoint,
            days=days_section(rows, HOSTILE),
            chart=chart_svg([(HOSTILE, 3)]),
            lookup=lookup_html(Lookup(404, message=HOSTILE)),
        ).decode(),
        lookup_html(Lookup(200, HOSTILE, {HOSTILE: HOSTILE, "n": [HOSTILE]})),
    ]
    for page in pages:
        assert "<img" not in page and "<script>" not in page and "&lt;script&gt;" in page
        assert '"<' not in page.replace('="<', "")
    ET.fromstring(
        chart_svg([(HOSTILE, 3)]).split('<figure class="chart">')[1].split("<figcaption>")[0]
    )


# --- the scripts ------------------------------------------------------------------------------


def test_verify_js_is_the_verifier_byte_for_byte(client: TestClient[Any]) -> None:
    source = VERIFIER_PLACES[0]
    assert source == Path(__file__).resolve().parents[2] / "src" / "verify-js" / "verify.mjs"
    r = client.get("/verify.js")
    assert r.status_code == 200 and r.content == source.read_bytes()
    assert r.headers["content-type"] == "text/javascript; charset=utf-8"
    assert r.headers["cache-control"] == "no-cache"
    assert client.get("/verify.js", headers={"If-None-Match": r.headers["etag"]}).status_code == 304
    page = client.get("/explorer.js")
    assert page.content == EXPLORER.read_bytes() and b'from "./verify.js"' in page.content
    assert page.headers["content-type"] == "text/javascript; charset=utf-8"


def test_the_scripts_are_no_api_operations(client: TestClient[Any]) -> None:
    paths = client.get("/schema/openapi.json").json()["paths"]
    assert not {"/", "/verify.js", "/explorer.js"} & set(paths)
