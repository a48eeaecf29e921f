"""Records are Capability Resolution 0.2 observations by default (`observation.py`).

Every member and rule is refused with a message naming both, at every door: the library
(`Log.append`), the CLI (`append`, `line N`) and HTTP (`POST /records`, `record N`, checked in
a worker process of a real server). `init --records any` opts out, the choice is covered by
the signed settings statement, and `/record`'s 404 says why nothing matched.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from capability_anchor.errors import InvalidRecord, NotFound, StartupCheckFailed, UsageError
from capability_anchor.log import Log
from capability_anchor.log import trust as logtrust
from capability_anchor.record.rule import Observation, check_record, rules_of
from tests.kit.logkit import Clock, raw
from tests.kit.obskit import observation
from tests.kit.serverkit import serving

ISS = "https://resolver.example"
CLI = Path(sys.executable).parent / "capability-anchor"
GOOD = observation(1)


def without(*members: str) -> dict[str, Any]:
    return {k: v for k, v in GOOD.items() if k not in members}


SUB_RULE = (
    "sub: must be <namespace>:<local> (Capability Resolution §4): a namespace of 1 to 32 of "
    "a-z, 0-9 and -, then a local part of 1 to 128 characters, none of them whitespace or a "
    "control character"
)

BAD: list[tuple[str, object, str]] = [
    # (what, record, the whole message)
    (
        "the issue's {name: nothing}",
        {"name": "nothing"},
        "missing members v, sub, url, status, checked_at, evidence: a Capability Resolution "
        "observation needs v, sub, url, status, checked_at, evidence",
    ),
    (
        "the README's old example",
        {"v": "0.2", "sub": "example:1"},
        "missing members url, status, checked_at, evidence: a Capability Resolution "
        "observation needs v, sub, url, status, checked_at, evidence",
    ),
    (
        "one missing member",
        without("evidence"),
        "missing member evidence: a Capability Resolution observation needs v, sub, url, "
        "status, checked_at, evidence",
    ),
    ("v 0.3", {**GOOD, "v": "0.3"}, 'v: must be "0.2", got "0.3"'),
    ("v a number", {**GOOD, "v": 0.2}, 'v: must be "0.2", got 0.2'),
    ("sub empty", {**GOOD, "sub": ""}, SUB_RULE + ', got ""'),
    ("sub a number", {**GOOD, "sub": 7}, SUB_RULE + ", got 7"),
    (
        "url not a url",
        {**GOOD, "url": "not a url"},
        'url: must be a canonical https server URL (Capability Resolution §4), got "not a url" '
        "(a server URL must use https)",
    ),
    (
        "url http",
        {**GOOD, "url": "http://s.example/mcp"},
        "url: must be a canonical https server URL (Capability Resolution §4), got "
        '"http://s.example/mcp" (a server URL must use https)',
    ),
    (
        "url with credentials",
        {**GOOD, "url": "https://u:p@s.example/mcp"},
        "url: must be a canonical https server URL (Capability Resolution §4), got "
        '"https://u:p@s.example/mcp" (a server URL must not carry credentials)',
    ),
    (
        "url without a host",
        {**GOOD, "url": "https:///mcp"},
        "url: must be a canonical https server URL (Capability Resolution §4), got "
        '"https:///mcp" (a server URL needs a host)',
    ),
    (
        "url with a bad port",
        {**GOOD, "url": "https://s.example:99999/mcp"},
        "url: must be a canonical https server URL (Capability Resolution §4), got "
        '"https://s.example:99999/mcp" (not a URL: Port out of range 0-65535)',
    ),
    (
        "url with surrounding space",
        {**GOOD, "url": " https://s.example/mcp"},
        "url: must be a canonical https server URL (Capability Resolution §4), got "
        '" https://s.example/mcp"; its canonical form is https://s.example/mcp',
    ),
    (
        "url an object",
        {**GOOD, "url": {"href": "https://s.example"}},
        "url: must be a canonical https server URL (Capability Resolution §4), got "
        '{"href": "https://s.example"}',
    ),
    (
        "status maybe",
        {**GOOD, "status": "maybe"},
        'status: must be one of ok, sign_in, down, unknown, got "maybe"',
    ),
    (
        "status upper-case",
        {**GOOD, "status": "OK"},
        'status: must be one of ok, sign_in, down, unknown, got "OK"',
    ),
    (
        "status null",
        {**GOOD, "status": None},
        "status: must be one of ok, sign_in, down, unknown, got null",
    ),
    *(
        (
            f"checked_at {value!r}",
            {**GOOD, "checked_at": value},
            "checked_at: must be RFC 3339 UTC, YYYY-MM-DDTHH:MM:SS[.fraction]Z, got "
            + json.dumps(value, ensure_ascii=False),
        )
        for value in (
            "yesterday",
            "2026-10-28",
            "2026-10-28T10:05:00",  # no zone
            "2026-10-28T10:05:00+00:00",  # an offset, not Z
            "2026-10-28T10:05:00+02:00",
            "2026-10-28 10:05:00Z",  # a space, not T
            "2026-10-28t10:05:00z",  # lower case
            "2026-10-28T10:05Z",  # no seconds
            "2026-10-28T10:05:00.Z",  # an empty fraction
            "2026-10-28T10:05:00.1234567890Z",  # over nanoseconds
            "2026-02-30T10:05:00Z",  # not a real day
            "2026-10-28T24:00:00Z",
            "2026-10-28T10:60:00Z",
            "2026-10-28T10:05:60Z",  # leap seconds are not accepted
            "\uff12026-10-28T10:05:00Z",  # a full-width digit
            "2026-10-28T10:05:00Z\n",
        )
    ),
    (
        "checked_at a number",
        {**GOOD, "checked_at": 1793188800},
        "checked_at: must be RFC 3339 UTC, YYYY-MM-DDTHH:MM:SS[.fraction]Z, got 1793188800",
    ),
    ("evidence a list", {**GOOD, "evidence": []}, "evidence: must be an object, got []"),
    ("evidence a string", {**GOOD, "evidence": "x"}, 'evidence: must be an object, got "x"'),
    ("evidence null", {**GOOD, "evidence": None}, "evidence: must be an object, got null"),
    ("name null", {**GOOD, "name": None}, "name: must be a string when present, got null"),
    ("name a number", {**GOOD, "name": 5}, "name: must be a string when present, got 5"),
    (
        "first_seen not a real date",
        {**GOOD, "first_seen": "2026-02-30"},
        'first_seen: must be a date YYYY-MM-DD when present, got "2026-02-30"',
    ),
    (
        "first_seen a time",
        {**GOOD, "first_seen": "2026-10-02T00:00:00Z"},
        'first_seen: must be a date YYYY-MM-DD when present, got "2026-10-02T00:00:00Z"',
    ),
    (
        "first_seen a number",
        {**GOOD, "first_seen": 20261002},
        "first_seen: must be a date YYYY-MM-DD when present, got 20261002",
    ),
    ("an array", [GOOD], "a record must be a JSON object"),
]


@pytest.fixture
def log(tmp_path: Path) -> Any:
    with Log.init(tmp_path / "d", iss=ISS, clock=Clock(1793188800.0)) as opened:
        yield opened


@pytest.mark.parametrize(("what", "record", "message"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_observation_is_refused_naming_member_and_rule(
    log: Log, what: str, record: object, message: str
) -> None:
    with pytest.raises(InvalidRecord) as caught:
        log.append([GOOD, record])
    if isinstance(record, list):  # SPEC §2 speaks first: a record is an object
        assert "object" in str(caught.value)
    else:
        assert str(caught.value) == message
    assert caught.value.position == 1  # 0-based in the library
    assert log.store.day_size(log.today()) == 0  # nothing of the batch is stored


GOOD_ONES: list[tuple[str, dict[str, Any]]] = [
    ("the minimal one", GOOD),
    ("with iss", {**GOOD, "iss": ISS}),
    ("with name and first_seen", {**GOOD, "name": "Mail", "first_seen": "2025-10-02"}),
    ("an empty name", {**GOOD, "name": ""}),
    ("a leap day", {**GOOD, "first_seen": "2024-02-29", "checked_at": "2024-02-29T23:59:59Z"}),
    ("milliseconds", {**GOOD, "checked_at": "2026-10-28T10:05:00.123Z"}),
    ("one fractional digit", {**GOOD, "checked_at": "2026-10-28T10:05:00.5Z"}),
    ("nanoseconds", {**GOOD, "checked_at": "2026-10-28T10:05:00.123456789Z"}),
    *((f"status {s}", {**GOOD, "status": s}) for s in ("ok", "sign_in", "down", "unknown")),
    ("a url with a port", {**GOOD, "url": "https://mail.example.com:8443/mcp"}),
    ("an IPv6 url", {**GOOD, "url": "https://[2001:db8::1]/mcp"}),
    ("an empty evidence", {**GOOD, "evidence": {}}),
    ("a nested evidence", {**GOOD, "evidence": {"a": [1, {"b": None}], "record": "x"}}),
    ("extra members", {**GOOD, "x-note": [1, 2], "expires_hint": None, "needs": {}}),
    (
        "the §6.3 example's members",
        {
            "v": "0.2",
            "iss": ISS,
            "sub": "example:abcdefghijklmnop",
            "url": "https://mail.example.com/mcp",
            "name": "Mail",
            "status": "ok",
            "checked_at": "2026-10-28T10:05:00Z",
            "first_seen": "2026-10-02",
            "evidence": {"record": "...", "method": "..."},
        },
    ),
]


@pytest.mark.parametrize(("what", "record"), GOOD_ONES, ids=[g[0] for g in GOOD_ONES])
def test_a_good_observation_is_stored_as_given(log: Log, what: str, record: dict[str, Any]) -> None:
    (result,) = log.append([record])
    (entry,) = log.entries(result.day)
    assert entry["claims"] == record  # stored as given: the url is not rewritten


def test_the_struct_is_what_msgspec_checks() -> None:
    import msgspec

    checked = msgspec.convert(GOOD, type=Observation, strict=True)
    assert checked.status == "ok" and checked.name is msgspec.UNSET
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({**GOOD, "status": "maybe"}, type=Observation, strict=True)
    check_record({"anything": [1]}, "any", now=0)
    with pytest.raises(UsageError, match="records must be one of observation, any"):
        check_record(GOOD, "cr", now=0)


def test_the_iss_rule_still_holds(log: Log) -> None:
    with pytest.raises(InvalidRecord, match="is not this log's issuer"):
        log.append([{**GOOD, "iss": "https://other.example"}])


# --- the record rule in the data dir ---------------------------------------------------------


def cli(*args: object, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), *map(str, args)], input=stdin, capture_output=True, text=True, timeout=60
    )


def test_init_stores_the_rule_and_any_takes_what_spec_2_allows(tmp_path: Path) -> None:
    strict, loose = tmp_path / "strict", tmp_path / "loose"
    made = cli("init", "--data", strict, "--iss", ISS)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["records"] == "observation"
    made = cli("init", "--data", loose, "--iss", ISS, "--records", "any")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["records"] == "any"
    wrong = cli("init", "--data", tmp_path / "x", "--iss", ISS, "--records", "cr")
    assert wrong.returncode == 2 and "invalid choice" in wrong.stderr
    with Log.open(strict) as a, Log.open(loose) as b:
        assert (a.records, b.records) == ("observation", "any")
        assert a.config["records"] == "observation" and b.config["records"] == "any"
    # Anything SPEC §2 allows: the records, scalars deep inside, an empty object.
    lines = [
        {"name": "nothing"},
        {**GOOD, "v": "0.3"},
        {**GOOD, "status": "maybe"},
        {**GOOD, "checked_at": "yesterday"},
        {**GOOD, "url": "not a url"},
        {"v": "0.2", "sub": "example:1"},
        {},
        {"n": 9007199254740991, "x": 5e-324, "s": "\u20ac", "deep": [[[{"a": None}]]]},
    ]
    text = "".join(json.dumps(r) + "\n" for r in lines)
    added = cli("append", "-", "--data", loose, stdin=text)
    assert added.returncode == 0, added.stderr
    assert len(added.stdout.splitlines()) == len(lines)
    # ... and SPEC §2 still refuses what it refuses, rule or no rule.
    refused = cli("append", "-", "--data", loose, stdin='{"a":1,"a":2}\n')
    # Malformed JSON (a duplicate name) is exit 2 in every command
    # (docs/explanation/decisions/19-up-to-19.md).
    assert refused.returncode == 2 and "line 1: " in refused.stderr
    assert "duplicate" in refused.stderr
    # The strict log refuses each of the first six, naming the line.
    for record in lines[:6]:
        out = cli("append", "-", "--data", strict, stdin=json.dumps(record) + "\n")
        assert out.returncode == 1 and out.stdout == ""
        assert out.stderr.startswith("capability-anchor: line 1: "), out.stderr
    with Log.open(strict) as a:
        assert a.store.entry_days() == []


def test_the_cli_counts_physical_lines_from_1(tmp_path: Path) -> None:
    data = tmp_path / "d"
    assert cli("init", "--data", data, "--iss", ISS).returncode == 0
    rows = [observation(1), None, observation(2), None, {**observation(3), "status": "maybe"}]
    text = "".join(("" if r is None else json.dumps(r)) + "\n" for r in rows)
    text += json.dumps(observation(4)) + "\n"
    out = cli("append", "-", "--data", data, stdin=text)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr == (
        "capability-anchor: line 5: "
        'status: must be one of ok, sign_in, down, unknown, got "maybe"\n'
    )


def test_changing_the_rule_by_raw_sql_is_caught(tmp_path: Path) -> None:
    data = tmp_path / "d"
    Log.init(data, iss=ISS).close()
    for config in ({"records": "any"}, {}):  # loosened, or removed (which reads as "any")
        with raw(data) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('config', ?)",
                (json.dumps(config),),
            )
        with pytest.raises(StartupCheckFailed, match=r"meta\.config\.records differs"):
            Log.open(data)
    audited = cli("audit", "--data", data)
    assert audited.returncode == 1 and "meta.config.records differs" in audited.stderr


def test_a_log_from_before_the_rule_keeps_accepting_what_it_did(tmp_path: Path) -> None:
    """A data dir whose signed config has no `records` (every log made before this rule)
    reads as "any": an upgrade must not start refusing its writers."""
    data = tmp_path / "d"
    with Log.init(data, iss=ISS) as log, log.store.write():
        log.store.set_meta("config", json.dumps({}))
        logtrust.sign_settings(log, log.key, "upgrade")  # as such a log's statement says
    with Log.open(data) as log:
        assert log.records == "any"
        log.append([{"v": "0.2", "sub": "example:1"}])
    assert rules_of({})[0] == "any"
    with pytest.raises(UsageError, match="names records 'strict'"):
        rules_of({"records": "strict"})


# --- HTTP -----------------------------------------------------------------------------------


def test_http_counts_records_from_1_in_a_real_server(tmp_path: Path) -> None:
    data = tmp_path / "d"
    assert cli("init", "--data", data, "--iss", ISS).returncode == 0
    bad = {**observation(3), "checked_at": "yesterday"}
    with serving(data, "--rate-limit", "0") as server, server.client() as client:
        r = client.post(
            "/records",
            json={"records": [observation(1), observation(2), bad, observation(4)]},
            headers=server.writer_headers(),
        )
        assert r.status_code == 400, r.text
        assert r.json() == {
            "v": "0.2",
            "error": "invalid_record",
            "note": "record 3: checked_at: must be RFC 3339 UTC, "
            'YYYY-MM-DDTHH:MM:SS[.fraction]Z, got "yesterday"',
        }
        r = client.post(
            "/records", json={"records": [{"name": "nothing"}]}, headers=server.writer_headers()
        )
        assert r.status_code == 400 and r.json()["note"].startswith("record 1: missing members")
        ok = client.post(
            "/records", json={"records": [observation(1)]}, headers=server.writer_headers()
        )
        assert ok.status_code == 200, ok.text
        assert client.get(f"/entries/{ok.json()['entries'][0]['day']}").json()["entries"][0][
            "claims"
        ] == observation(1)


def test_http_on_a_log_that_takes_any_json(tmp_path: Path) -> None:
    data = tmp_path / "d"
    assert cli("init", "--data", data, "--iss", ISS, "--records", "any").returncode == 0
    with serving(data, "--rate-limit", "0") as server, server.client() as client:
        r = client.post(
            "/records",
            json={"records": [{"name": "nothing"}, {"v": "0.3"}]},
            headers=server.writer_headers(),
        )
        assert r.status_code == 200, r.text
        r = client.post(
            "/records", json={"records": [{"a": 1}, {"b": 1e300}]}, headers=server.writer_headers()
        )
        assert r.status_code == 400 and r.json()["error"] == "invalid_record"
        assert r.json()["note"].startswith("record 2: invalid record at /b: number 1e+300")


# --- /record's 404 ----------------------------------------------------------------------------


def test_the_404_note_says_why_nothing_matched(tmp_path: Path) -> None:
    clock = Clock(1793188800.0)
    with Log.init(tmp_path / "d", iss=ISS, records="any", clock=clock) as log:
        with pytest.raises(NotFound) as none:
            log.record(sub="example:1")
        assert str(none.value) == (
            "no entry with that id (an entry is served only when it has all of v, iss, sub, "
            "url, status, checked_at, evidence)"
        )
        # The README's old example: stored, but it lacks what /record needs.
        log.append([{"v": "0.2", "sub": "example:1"}])
        log.checkpoint()
        with pytest.raises(NotFound) as lacking:
            log.record(sub="example:1")
        assert str(lacking.value) == (
            "the newest entry with that id lacks iss, url, status, checked_at, evidence; "
            "/record serves only entries with all of v, iss, sub, url, status, checked_at, "
            "evidence"
        )
        # A valid observation without iss is accepted, and the note names iss.
        log.append([observation(2, sub="example:2")])
        log.checkpoint()
        with pytest.raises(NotFound, match=r"^the newest entry with that url lacks iss;"):
            log.record(url="https://S2.x.example/mcp/")
        # Complete but not covered yet: under the index's chunk and over it.
        log.append([observation(3, iss=ISS, sub="example:3")])
        uncovered = (
            "entries with that id exist, but no published head covers them yet (the next "
            "checkpoint will: the service publishes one every checkpoint interval, a writer at "
            "once with POST /checkpoint)"
        )
        with pytest.raises(NotFound) as waiting:
            log.record(sub="example:3")
        assert str(waiting.value) == uncovered
        log.append([observation(n, iss=ISS) for n in range(100, 300)])  # indexed in chunks
        with pytest.raises(NotFound, match="no published head covers them yet"):
            log.record(sub="example:x-100")
        log.checkpoint()
        assert log.record(sub="example:3")["sub"] == "example:3"


def test_the_404_note_over_http(tmp_path: Path) -> None:
    data = tmp_path / "d"
    assert cli("init", "--data", data, "--iss", ISS).returncode == 0
    with serving(data, "--rate-limit", "0") as server, server.client() as client:
        r = client.post(
            "/records", json={"records": [observation(1)]}, headers=server.writer_headers()
        )
        assert r.status_code == 200
        assert client.post("/checkpoint", headers=server.writer_headers()).status_code == 200
        got = client.get("/record", params={"id": "example:x-1"})
        assert got.status_code == 404
        assert got.json()["error"] == "not_found"
        assert got.json()["note"].startswith("the newest entry with that id lacks iss;")
        nothing = client.get("/record", params={"id": "example:nope" + "x" * 5000})
        assert nothing.status_code == 404
        assert nothing.json()["note"].startswith("no entry with that id (")
        assert len(nothing.json()["note"]) < 200  # the query is never echoed
