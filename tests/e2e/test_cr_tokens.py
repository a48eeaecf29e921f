"""Every record token the log signs is a valid CR 0.2 token (SPEC §13.1, issue 20 item 1).

Each rule is tried at its boundary at every door: the library (`Log.append`), the CLI
(`append`, a real process; its clock frozen by libfaketime where the boundary is a time), and
HTTP (`POST /records`, the app with the settings' clock, its body checked and appended in a
worker process; and a real server process). A log that takes any JSON (`--records any`)
stores such records, and `/record` refuses to sign them: 404 naming the rule. The regexes
are the OpenAPI document's patterns: hypothesis holds them to `canonical_url` and to
`datetime`, and jsonschema-rs (an ECMA-262 regex engine) reads them as Python does.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import string
import subprocess
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient

from capability_anchor.api.app import create_app
from capability_anchor.api.bodies import check_body
from capability_anchor.api.settings import Settings
from capability_anchor.errors import InvalidRecord, NotFound, UsageError
from capability_anchor.log import Log
from capability_anchor.log import trust as logtrust
from capability_anchor.record import rule as obs
from capability_anchor.record.urls import canonical_url
from tests.kit.hypo import examples
from tests.kit.logkit import CLI, Clock, raw
from tests.kit.obskit import observation
from tests.kit.serverkit import clean_env, serving
from tests.kit.systools import ensure_tool

ISS = "https://resolver.example"
T = int(dt.datetime(2026, 11, 3, 12, 0, tzinfo=dt.UTC).timestamp())
AT_LIMIT = "2026-11-03T12:05:00Z"  # T + 300 s
PAST_LIMIT = "2026-11-03T12:05:00.000000001Z"
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
ISSUE_URL = "https://WWW.Mixed.Example.COM:443/mcp/?q=1#frag"


def rec(n: int | str = 1, **members: Any) -> dict[str, Any]:
    return observation(n, "t", **{"iss": ISS, "checked_at": "2026-11-03T11:00:00Z", **members})


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    with Log.init(tmp_path / "d", iss=ISS, clock=Clock(float(T))) as opened:
        yield opened


# (what, members that replace a good record's, a piece of the message); each is refused.
REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("sub without a namespace", {"sub": "Not An ID"}, "sub: must be <namespace>:<local>"),
    ("sub with an empty namespace", {"sub": ":x"}, "sub: must be"),
    ("sub with a 33-character namespace", {"sub": "n" * 33 + ":x"}, "sub: must be"),
    ("sub with an upper-case namespace", {"sub": "Example:x"}, "sub: must be"),
    ("sub with an underscore namespace", {"sub": "ex_ample:x"}, "sub: must be"),
    ("sub with an empty local part", {"sub": "example:"}, "sub: must be"),
    ("sub with a 129-character local part", {"sub": "example:" + "l" * 129}, "sub: must be"),
    ("sub with a space", {"sub": "example:a b"}, "sub: must be"),
    ("sub with a tab", {"sub": "example:a\tb"}, "sub: must be"),
    ("sub with a no-break space", {"sub": "example:a\u00a0b"}, "sub: must be"),
    ("sub with a line separator", {"sub": "example:a\u2028b"}, "sub: must be"),
    ("sub with a control character", {"sub": "example:a\x7fb"}, "sub: must be"),
    ("sub with a C1 control character", {"sub": "example:a\x85b"}, "sub: must be"),
    ("sub with a byte order mark", {"sub": "example:\ufeffab"}, "sub: must be"),
    ("sub ending in a newline", {"sub": "example:ab\n"}, "sub: must be"),
    (
        "the issue's url",
        {"url": ISSUE_URL},
        "its canonical form is https://mixed.example.com/mcp",
    ),
    ("url http", {"url": "http://a.example/mcp"}, "(a server URL must use https)"),
    ("url upper-case scheme", {"url": "HTTPS://a.example/mcp"}, "form is https://a.example/mcp"),
    ("url with credentials", {"url": "https://u@a.example/mcp"}, "must not carry credentials"),
    ("url upper-case host", {"url": "https://A.example/mcp"}, "form is https://a.example/mcp"),
    ("url with www.", {"url": "https://www.a.example/mcp"}, "form is https://a.example/mcp"),
    ("url with :443", {"url": "https://a.example:443/mcp"}, "form is https://a.example/mcp"),
    ("url with a query", {"url": "https://a.example/mcp?x=1"}, "form is https://a.example/mcp"),
    ("url with an empty query", {"url": "https://a.example/mcp?"}, "form is https://a.example/mcp"),
    ("url with a fragment", {"url": "https://a.example/mcp#f"}, "form is https://a.example/mcp"),
    (
        "url with a trailing slash",
        {"url": "https://a.example/mcp/"},
        "form is https://a.example/mcp",
    ),
    ("url that is a host and slash", {"url": "https://a.example/"}, "form is https://a.example"),
    ("url with an empty port", {"url": "https://a.example:/mcp"}, "form is https://a.example/mcp"),
    (
        "url with a leading-zero port",
        {"url": "https://a.example:08/m"},
        "form is https://a.example:8/m",
    ),
    (
        "url www. twice",
        {"url": "https://www.www.a.example/m"},
        'form "https://www.a.example/m" is not',
    ),
    ("url with a space", {"url": "https://a.example/m p"}, "is not one either"),
    ("url with a non-ASCII host", {"url": "https://b\u00fccher.example/m"}, "is not one either"),
    ("url with only www.", {"url": "https://www./m"}, "(a server URL needs a host)"),
    ("a need member", {"need": "send an email"}, "need: a record must not carry need"),
    ("a constraints member", {"constraints": "no_sign_in"}, "constraints: a record must not"),
    ("a null need member", {"need": None}, "need: a record must not carry"),
    (
        "checked_at a nanosecond past the limit",
        {"checked_at": PAST_LIMIT},
        "checked_at: must be no later",
    ),
    ("checked_at a second past the limit", {"checked_at": "2026-11-03T12:05:01Z"}, "12:05:00Z"),
    ("the issue's checked_at in 2030", {"checked_at": "2030-01-01T00:00:00Z"}, "§9.6"),
    (
        "first_seen a day after checked_at",
        {"checked_at": "2026-11-02T23:59:59Z", "first_seen": "2026-11-03"},
        "first_seen: must be no later than the day of checked_at, 2026-11-02",
    ),
]

# (what, members): each is accepted, at the boundary of a rule above.
ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    ("a 32-character namespace", {"sub": "n" * 32 + ":x"}),
    ("a 1-character namespace", {"sub": "-:x"}),
    ("a 128-character local part", {"sub": "example:" + "l" * 128}),
    ("a local part with colons and non-ASCII", {"sub": "example:a:b/\u00e9\U0001f600"}),
    ("a port other than 443", {"url": "https://a.example:8443/mcp"}),
    ("port 4430", {"url": "https://a.example:4430/mcp"}),
    ("a host only", {"url": "https://a.example"}),
    ("a host named www", {"url": "https://www/mcp"}),
    ("a host starting with www but no dot", {"url": "https://wwwa.example/mcp"}),
    ("an IPv6 literal", {"url": "https://[2001:db8::1]/mcp"}),
    ("an IPv4 address", {"url": "https://192.0.2.1:8443/mcp"}),
    ("percent-encoding and an inner double slash", {"url": "https://a.example/a%2F//b"}),
    ("checked_at at the limit", {"checked_at": AT_LIMIT}),
    ("checked_at at the limit with zeros", {"checked_at": "2026-11-03T12:05:00.000Z"}),
    ("first_seen on the day of checked_at", {"first_seen": "2026-11-03", "checked_at": AT_LIMIT}),
    ("a member named needs", {"needs": "x", "constraint": 1}),
]


@pytest.mark.parametrize(("what", "members", "piece"), REFUSED, ids=[r[0] for r in REFUSED])
def test_attack_the_library_door_refuses_a_token_cr_0_2_forbids(
    log: Log, what: str, members: dict[str, Any], piece: str
) -> None:
    with pytest.raises(InvalidRecord) as caught:
        log.append([rec(0), {**rec(1), **members}])
    assert piece in str(caught.value)
    assert caught.value.position == 1
    assert log.store.day_size(log.today()) == 0  # rejected means nothing stored


@pytest.mark.parametrize(("what", "members"), ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_the_library_door_takes_each_rule_at_its_boundary(
    log: Log, what: str, members: dict[str, Any]
) -> None:
    record = {**rec(1), **members}
    (result,) = log.append([record])
    assert log.entries(result.day)[0]["claims"] == record  # stored as posted
    log.checkpoint()
    assert log.record(sub=record["sub"])["sub"] == record["sub"]  # and /record signs it


def test_the_time_limit_is_the_whole_second_the_log_stores(tmp_path: Path) -> None:
    # The clock reads T + 0.9: acceptance is stored as the second T, and the limit follows it.
    with Log.init(tmp_path / "d", iss=ISS, clock=Clock(T + 0.9)) as log:
        log.append([rec(1, checked_at=AT_LIMIT)])
        with pytest.raises(InvalidRecord, match="checked_at"):
            log.append([rec(2, checked_at="2026-11-03T12:05:00.5Z")])


# --- the pinned namespace ---


def cli(*args: object, env: dict[str, str] | None = None, stdin: str | None = None) -> Any:
    return subprocess.run(
        [str(CLI), *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(env),
        check=False,
    )


def test_init_id_namespace_pins_sub_in_the_signed_config(tmp_path: Path) -> None:
    data = tmp_path / "d"
    made = cli("init", "--data", data, "--iss", ISS, "--id-namespace", "example")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["id_namespace"] == "example"
    with Log.open(data) as log:
        assert log.id_namespace == "example"
        assert json.loads(log.store.meta()["config"])["id_namespace"] == "example"
    good = json.dumps(observation(1, sub="example:a"))
    assert cli("append", "--data", data, "-", stdin=good + "\n").returncode == 0
    other = json.dumps(observation(2, sub="other:a"))
    refused = cli("append", "--data", data, "-", stdin=other + "\n")
    assert refused.returncode == 1
    assert "line 1: sub: must be example:<local>, in this log's id namespace example" in (
        refused.stderr
    )
    # The config is signed: changing the namespace behind the log's back is caught at open.
    with raw(data) as conn:
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'config'",
            (json.dumps({"records": "observation", "id_namespace": "other"}),),
        )
    assert cli("append", "--data", data, "-", stdin=other + "\n").returncode != 0


@pytest.mark.parametrize("bad", ["", "Example", "a_b", "n" * 33, "a:b", "é"])
def test_init_refuses_a_namespace_cr_does_not_allow(tmp_path: Path, bad: str) -> None:
    made = cli("init", "--data", tmp_path / "d", "--iss", ISS, "--id-namespace", bad)
    assert made.returncode == 2
    assert "an id namespace must be 1 to 32 of a-z, 0-9 and -" in made.stderr
    assert not (tmp_path / "d" / "log.sqlite3").exists()


# --- the CLI door, its clock frozen at T ---


@pytest.fixture(scope="module")
def frozen() -> dict[str, str]:
    lib = ensure_tool(LIBFAKETIME, "faketime", "libfaketime", timeout=600)
    return {
        "LD_PRELOAD": str(lib),
        "FAKETIME": "2026-11-03 12:00:00",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


def test_the_cli_door_at_each_boundary(tmp_path: Path, frozen: dict[str, str]) -> None:
    data = tmp_path / "d"
    assert cli("init", "--data", data, "--iss", ISS, env=frozen).returncode == 0
    lines = "".join(json.dumps({**rec(n), **m}) + "\n" for n, (_, m) in enumerate(ACCEPTED))
    done = cli("append", "--data", data, "-", stdin=lines, env=frozen)
    assert done.returncode == 0, done.stderr
    for what, members, piece in REFUSED:
        lines = json.dumps(rec("x")) + "\n\n" + json.dumps({**rec("y"), **members}) + "\n"
        done = cli("append", "--data", data, "-", stdin=lines, env=frozen)
        assert done.returncode == 1, what
        assert "line 3: " in done.stderr and piece in done.stderr, (what, done.stderr)
    with Log.open(data) as log:
        assert log.store.day_size("2026-11-03") == len(ACCEPTED)


# --- the HTTP door ---


@pytest.fixture
def app_client(tmp_path: Path) -> Iterator[tuple[TestClient[Any], dict[str, str]]]:
    """The app on a log whose clock reads T: the body is checked and appended in a worker
    process, as `serve` does, with the service's time."""
    data = tmp_path / "d"
    Log.init(data, iss=ISS, clock=Clock(float(T))).close()
    settings = Settings(data_dir=data, background=False, body_workers=1, clock=lambda: float(T))
    with TestClient(create_app(settings)) as client:
        token = (data / "writer-token").read_text().strip()
        yield client, {"Authorization": f"Bearer {token}"}


def test_the_http_door_at_each_boundary(app_client: tuple[TestClient[Any], dict[str, str]]) -> None:
    client, headers = app_client
    records = [{**rec(n), **members} for n, (_, members) in enumerate(ACCEPTED)]
    for prove in ("0", "1"):
        got = client.post(f"/records?prove={prove}", json={"records": records}, headers=headers)
        assert got.status_code == 200, got.text
    for what, members, piece in REFUSED:
        body = {"records": [rec("x"), {**rec("y"), **members}]}
        got = client.post("/records", json=body, headers=headers)
        assert got.status_code == 400, what
        answer = got.json()
        assert answer["error"] == "invalid_record", what
        assert answer["note"].startswith("record 2: ") and piece in answer["note"], what
    entries = client.get("/entries/2026-11-03", params={"limit": 1000}).json()["entries"]
    assert len(entries) == len(ACCEPTED)  # nothing of a refused batch is stored


def test_a_real_server_refuses_the_issues_records(tmp_path: Path) -> None:
    data = tmp_path / "d"
    assert cli("init", "--data", data, "--iss", ISS).returncode == 0
    now = dt.datetime.now(dt.UTC)
    tomorrow = (now + dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    issue = [
        ({"url": ISSUE_URL}, "its canonical form is https://mixed.example.com/mcp"),
        ({"sub": "Not An ID"}, "sub: must be <namespace>:<local>"),
        ({"need": "send an email", "constraints": "no_sign_in"}, "need and constraints"),
        ({"checked_at": tomorrow}, "checked_at: must be no later than"),
    ]
    with serving(data, "--rate-limit", "0") as server, server.client() as client:
        for members, piece in issue:
            body = {"records": [{**observation(1, "s", iss=ISS), **members}]}
            got = client.post("/records", json=body, headers=server.writer_headers())
            assert got.status_code == 400
            assert got.json()["error"] == "invalid_record"
            assert piece in got.json()["note"]
        assert client.get(f"/entries/{now.date().isoformat()}").json()["entries"] == []


# --- /record never signs a stored entry that breaks a rule ---


def stored_then_asked(log: Log, record: dict[str, Any]) -> str:
    log.append([record])
    log.checkpoint()
    with pytest.raises(NotFound) as caught:
        log.record(sub=record["sub"])
    return str(caught.value)


@pytest.mark.parametrize(("what", "members", "piece"), REFUSED, ids=[r[0] for r in REFUSED])
def test_attack_a_log_that_takes_any_json_gets_no_token_for_a_bad_record(
    tmp_path: Path, what: str, members: dict[str, Any], piece: str
) -> None:
    with Log.init(tmp_path / "d", iss=ISS, records="any", clock=Clock(float(T))) as log:
        note = stored_then_asked(log, {**rec(1), **members})
        assert "is no Capability Resolution 0.2 record (SPEC §13.1)" in note
        assert "/record signs no token for it" in note and piece in note


def test_attack_a_bad_sub_stored_before_the_rule_is_not_signed(tmp_path: Path) -> None:
    with Log.init(tmp_path / "d", iss=ISS, records="any", clock=Clock(float(T))) as log:
        note = stored_then_asked(log, rec(1, sub="Not An ID"))
        assert "sub: must be <namespace>:<local>" in note


def _pre_rule_log(data: Path, clock: Clock) -> Log:
    """A log as made before the record rule existed: no `records` member in its signed
    config (as test_observation builds one)."""
    with Log.init(data, iss=ISS, clock=clock) as log, log.store.write():
        log.store.set_meta("config", json.dumps({}))
        logtrust.sign_settings(log, log.key, "upgrade")
    return Log.open(data, clock=clock)


def test_attack_an_old_log_with_a_future_checked_at_gets_no_token(tmp_path: Path) -> None:
    clock = Clock(float(T))
    with _pre_rule_log(tmp_path / "d", clock) as log:
        assert log.records == "any"
        # Stored under the old rule: the issue's checked_at in 2030, with iat today.
        note = stored_then_asked(log, rec(1, checked_at="2030-01-01T00:00:00Z"))
        assert "checked_at: must be no later than the log's time of acceptance + 300 s" in note
        # The limit is the stored acceptance time, to the second.
        log.append([rec(2, checked_at=AT_LIMIT)])
        log.checkpoint()
        assert log.record(sub=rec(2)["sub"])["checked_at"] == AT_LIMIT


def test_attack_a_bad_newest_entry_is_404_never_an_older_one(tmp_path: Path) -> None:
    """An older valid observation is superseded: signing it would state an old status as the
    newest one the log holds."""
    with Log.init(tmp_path / "d", iss=ISS, records="any", clock=Clock(float(T))) as log:
        log.append([rec(1, status="ok")])
        log.checkpoint()
        assert log.record(sub=rec(1)["sub"])["status"] == "ok"
        note = stored_then_asked(log, rec(1, status="down", url="https://www.s1.t.example/mcp"))
        assert "its canonical form is https://s1.t.example/mcp" in note
        with pytest.raises(NotFound, match="signs no token"):
            log.record(url="https://s1.t.example/mcp")


def test_attack_a_bad_stored_entry_over_http(tmp_path: Path) -> None:
    data = tmp_path / "d"
    assert cli("init", "--data", data, "--iss", ISS, "--records", "any").returncode == 0
    with serving(data, "--rate-limit", "0") as server, server.client() as client:
        body = {"records": [observation(1, "h", iss=ISS, need="send an email")]}
        assert client.post(
            "/records?prove=1", json=body, headers=server.writer_headers()
        ).is_success
        got = client.get("/record", params={"id": "example:h-1"})
        assert got.status_code == 404
        assert got.json()["error"] == "not_found"
        assert "need: a record must not carry need or constraints" in got.json()["note"]


# --- /record 404 notes are true ---


def test_right_after_a_1000_record_post_the_note_says_the_entry_exists(tmp_path: Path) -> None:
    data = tmp_path / "d"
    assert cli("init", "--data", data, "--iss", ISS).returncode == 0
    args = ("--rate-limit", "0", "--checkpoint-interval", "3600")
    with serving(data, *args) as server, server.client() as client:
        body = {"records": [observation(n, "k", iss=ISS) for n in range(1000)]}
        assert client.post("/records", json=body, headers=server.writer_headers()).is_success
        for n in (42, 0, 999):
            got = client.get("/record", params={"id": f"example:k-{n}"})
            assert got.status_code == 404
            assert got.json()["note"].startswith(
                "entries with that id exist, but no published head covers them yet (the "
                "next checkpoint will"
            ), got.json()["note"]
        got = client.get("/record", params={"url": "https://s42.k.example/mcp"})
        assert "entries with that url exist" in got.json()["note"]
        absent = client.get("/record", params={"id": "example:k-1000"})
        assert absent.json()["note"].startswith("no entry with that id")
        assert client.post("/checkpoint", headers=server.writer_headers()).is_success
        assert client.get("/record", params={"id": "example:k-42"}).status_code == 200


# --- the regexes are the canonical forms ---

URL = re.compile(obs.URL_PATTERN)
_label = st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
_host = st.lists(_label, min_size=1, max_size=4).map(".".join)
_segment = st.text(string.ascii_letters + string.digits + "-._~!$&'()*+,;=:@%", max_size=6)


@st.composite
def server_urls(draw: st.DrawFn) -> str:
    """https URLs in every §4 spelling: case, www., credentials, ports, query, fragment and
    trailing slashes, over LDH hosts, IPv4 and IPv6 literals and RFC 3986 paths."""
    host = draw(
        st.one_of(
            _host,
            st.ip_addresses(v=4).map(str),
            st.ip_addresses(v=6).map(lambda a: f"[{a}]"),
        )
    )
    if draw(st.booleans()):
        host = "www." + host
    if draw(st.booleans()):
        host = "".join(c.upper() if draw(st.booleans()) else c for c in host)
    port = draw(st.one_of(st.none(), st.just(443), st.integers(1, 65535)))
    path = "".join("/" + s for s in draw(st.lists(_segment, max_size=3)))
    path = path.replace("%", "%25")
    url = draw(st.sampled_from(["https", "HTTPS", "Https"])) + "://"
    if draw(st.integers(0, 9)) == 0:
        url += "user@"
    url += host + ("" if port is None else f":{port}") + path
    url += draw(st.sampled_from(["", "/", "//", "?q=1", "#f", "?", "/?x#y"]))
    return url


@settings(max_examples=examples(400), suppress_health_check=[HealthCheck.too_slow])
@given(st.from_regex(obs.URL_PATTERN))
def test_every_url_the_pattern_accepts_is_its_own_canonical_form(url: str) -> None:
    assert canonical_url(url) == url


@settings(max_examples=examples(400))
@given(server_urls())
def test_the_pattern_accepts_a_url_exactly_when_it_is_canonical(url: str) -> None:
    try:
        canonical = canonical_url(url)
    except UsageError:
        assert not URL.search(url)
        return
    assert bool(URL.search(url)) == (canonical == url)
    if canonical.lower().startswith("https://www.") and not canonical.startswith("https://[www"):
        return  # www.www.host: §4 strips one www., so that form is not a fixed point
    assert URL.search(canonical), canonical


@settings(max_examples=examples(300))
@given(st.from_regex(obs.DAY_PATTERN))
def test_every_day_the_pattern_accepts_is_a_real_date(day: str) -> None:
    assert dt.date.fromisoformat(day).isoformat() == day


@given(st.dates(min_value=dt.date(1, 1, 1)))
def test_every_real_date_matches_the_day_pattern(day: dt.date) -> None:
    assert re.search(obs.DAY_PATTERN, day.isoformat())
    assert re.search(obs.CHECKED_AT_PATTERN, day.isoformat() + "T23:59:59.5Z")


@settings(max_examples=examples(300))
@given(st.from_regex(obs.CHECKED_AT_PATTERN))
def test_every_checked_at_the_pattern_accepts_is_a_real_instant(value: str) -> None:
    dt.datetime.fromisoformat(value[:19])
    assert value.endswith("Z")


@settings(max_examples=examples(300))
@given(st.from_regex(obs.sub_pattern()))
def test_every_sub_the_pattern_accepts_has_no_whitespace_or_control(sub: str) -> None:
    namespace, _, local = sub.partition(":")
    assert 1 <= len(namespace) <= 32 and 1 <= len(local) <= obs.LOCAL_MAX
    assert not any(c.isspace() or unicodedata.category(c) == "Cc" for c in local)


# --- the schema is the door's Struct ---

# The time rules are the `cr-` formats, which a validator without them ignores.
_TIMES = {"checked_at", "first_seen"}
SAMPLES = [
    *(({**rec(1), **m}, True) for _, m in ACCEPTED if not _TIMES & set(m)),
    *(({**rec(1), **m}, False) for _, m, _piece in REFUSED if not _TIMES & set(m)),
]


@pytest.mark.parametrize(("record", "valid"), SAMPLES)
def test_an_ecma_262_validator_reads_the_schema_as_the_door(
    record: dict[str, Any], valid: bool
) -> None:
    """jsonschema-rs (Rust, ECMA-262 regexes) agrees with the door on every sample whose
    verdict a regex gives."""
    validator = jsonschema_rs.validator_for(obs.record_schema("observation"))
    assert validator.is_valid(record) == valid
    door = obs.token_problem(record, accepted_at=T) is None
    assert door == valid


def _body(doc: dict[str, Any], path: str) -> dict[str, Any]:
    """The request body schema of `POST path`, its component looked up."""
    media = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    name = media["schema"]["$ref"].rsplit("/", 1)[-1]
    return dict(doc["components"]["schemas"][name])


def _openapi(tmp_path: Path, **init: Any) -> tuple[dict[str, Any], str]:
    data = tmp_path / "d"
    Log.init(data, iss=ISS, **init).close()
    with TestClient(create_app(Settings(data_dir=data, background=False, body_workers=0))) as c:
        return c.get("/schema/openapi.json").json(), c.get("/schema").text


def test_the_openapi_bodies_are_the_records_rule(tmp_path: Path) -> None:
    doc, page = _openapi(tmp_path, id_namespace="example")
    body = _body(doc, "/records")
    array = body["properties"]["records"]
    assert (array["minItems"], array["maxItems"]) == (1, 1000)
    assert array["items"] == {"$ref": "#/components/schemas/Record"}
    item = doc["components"]["schemas"]["Record"]
    assert item["required"] == list(obs.REQUIRED)
    assert item["properties"]["url"]["pattern"] == obs.URL_PATTERN
    assert item["properties"]["sub"]["pattern"] == obs.sub_pattern("example")
    assert item["properties"]["status"]["enum"] == sorted(obs.STATUSES)
    assert item["properties"]["checked_at"]["format"] == "cr-checked-at"
    assert item["properties"]["first_seen"]["format"] == "cr-first-seen"
    assert item["not"] == {"anyOf": [{"required": ["need"]}, {"required": ["constraints"]}]}
    assert item == obs.record_schema("observation", "example", "#/components/schemas/")
    assert body["additionalProperties"] is False
    prove = _body(doc, "/prove")
    assert prove["properties"]["record"] == {"$ref": "#/components/schemas/Record"}
    assert prove["additionalProperties"] is False
    # The /schema page lists the record's members and the batch's limits.
    assert 'id="schema-Record"' in page and "<code>checked_at</code>" in page
    assert "items ≥ 1, items ≤ 1000" in page and "format cr-checked-at" in page


def test_a_log_that_takes_any_json_keeps_bare_objects(tmp_path: Path) -> None:
    doc, _ = _openapi(tmp_path, records="any")
    item = doc["components"]["schemas"]["Record"]
    assert item["type"] == "object" and "properties" not in item and "required" not in item


def test_record_schema_is_msgspecs_schema_of_the_struct() -> None:
    import msgspec

    generated = msgspec.json.schema(obs.Observation)["$defs"]["Observation"]
    ours = obs.record_schema("observation")
    added = ("not", "description", "additionalProperties", "$defs", "properties")
    assert {k: v for k, v in ours.items() if k not in added} == {
        k: v for k, v in generated.items() if k not in added
    }
    evidence = ours["properties"].pop("evidence")
    assert ours["properties"] == {
        k: v for k, v in generated["properties"].items() if k != "evidence"
    }
    assert evidence == {"type": "object", "additionalProperties": {"$ref": "#/$defs/JsonValue"}}


@pytest.mark.parametrize("namespace", [None, "example"])
def test_what_schemathesis_generates_from_the_body_the_door_accepts(
    tmp_path: Path, namespace: str | None
) -> None:
    """No "schema-valid request rejected" (ST202): every batch schemathesis draws from the
    OpenAPI body (with crkit's strategies for the two formats) passes SPEC §2 and the rule."""
    import schemathesis

    from tests.kit import crkit

    for name, strategy in crkit.formats().items():
        schemathesis.openapi.format(name, strategy)
    data = tmp_path / "d"
    Log.init(data, iss=ISS, id_namespace=namespace).close()
    with TestClient(create_app(Settings(data_dir=data, background=False, body_workers=0))) as c:
        doc = c.get("/schema/openapi.json").json()
    operation = schemathesis.openapi.from_dict(doc)["/records"]["POST"]
    refused: list[str] = []

    @settings(max_examples=examples(150), deadline=None, suppress_health_check=list(HealthCheck))
    @given(operation.as_strategy())
    def draw(case: Any) -> None:
        got = check_body(
            "records",
            json.dumps(case.body).encode(),
            ISS,
            1000,
            "observation",
            time.time(),
            namespace,
        )
        if got[0] != "ok":
            refused.append(str(got))

    draw()
    assert refused == []
