"""Resolver-2 records (SPEC §6 /record, Capability Resolution §6.3 and §8): the newest
covered observation of a server, re-issued with anchor and proof and signed."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from capability_anchor import jws, leaf, merkle
from capability_anchor.api import Settings, create_app
from capability_anchor.errors import NotFound, UsageError
from capability_anchor.log import Log
from capability_anchor.record.urls import canonical_url
from capability_anchor.store import server_key_digest

ISS = "https://resolver.example"
T0 = dt.datetime(2026, 11, 2, 12, 0, tzinfo=dt.UTC).timestamp()


@pytest.mark.parametrize(
    ("given", "want"),
    [
        ("https://Mail.Example.COM/mcp", "https://mail.example.com/mcp"),
        ("https://www.example.com/mcp/", "https://example.com/mcp"),
        ("https://example.com:443/mcp", "https://example.com/mcp"),
        ("https://example.com:8443/mcp", "https://example.com:8443/mcp"),
        ("https://example.com/mcp?x=1#frag", "https://example.com/mcp"),
        ("https://example.com/MCP///", "https://example.com/MCP"),
        ("https://example.com", "https://example.com"),
    ],
)
def test_canonical_urls(given: str, want: str) -> None:
    assert canonical_url(given) == want


@pytest.mark.parametrize(
    "bad", ["http://example.com/mcp", "https://user:pw@example.com/mcp", "https:///mcp", "mcp", 5]
)
def test_non_canonicalisable_urls(bad: object) -> None:
    with pytest.raises(UsageError):
        canonical_url(bad)


def server(n: int, status: str = "ok", **extra: Any) -> dict[str, Any]:
    return {
        "v": "0.2",
        "iss": ISS,
        "sub": f"example:{n}",
        "url": f"https://s{n}.example/mcp",
        "name": f"S{n}",
        "status": status,
        "checked_at": "2026-11-02T10:00:00Z",
        "evidence": {"method": f"{ISS}/method"},
        **extra,
    }


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


def check_record(rec: dict[str, Any], log: Log, at: int) -> dict[str, Any]:
    claims = jws.verify_record_token(rec["jws"], log.keyset(), iss=ISS, at=at)
    assert claims == {k: v for k, v in rec.items() if k not in ("jws", "expires")}
    p = claims["proof"]
    merkle.verify_inclusion(
        leaf.leaf_hash(claims),
        p["leaf_index"],
        p["tree_size"],
        [bytes.fromhex(h) for h in p["path"]],
        bytes.fromhex(claims["anchor"]["root"]),
    )
    expires = dt.datetime.fromtimestamp(claims["exp"], dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert rec["expires"] == expires
    return claims


def test_newest_covered_observation_by_id_and_url(tmp_path: Path) -> None:
    clock = Clock()
    with Log.init(tmp_path / "d", iss=ISS, clock=clock) as log:
        log.append([server(1), server(2)])
        with pytest.raises(NotFound):
            log.record(sub="example:1")  # not covered by any head yet
        log.checkpoint()
        clock.t += 60
        log.append([server(1, status="down", checked_at="2026-11-02T11:00:00Z")])
        # The newer observation is not covered yet: the covered one is served.
        first = check_record(log.record(sub="example:1"), log, int(clock.t))
        assert first["status"] == "ok" and first["anchor"]["url"].endswith("/2026-11-02/2")
        log.checkpoint()
        newest = check_record(log.record(url="https://S1.example/mcp"), log, int(clock.t))
        assert newest["status"] == "down" and newest["proof"]["tree_size"] == 3
        assert newest["exp"] - newest["iat"] == 24 * 3600
        short = log.record(sub="example:2", lifetime=600)
        assert short["exp"] - short["iat"] == 600
        clock.t += 86400
        log.seal()
        sealed = check_record(log.record(sub="example:2"), log, int(clock.t))
        assert sealed["anchor"]["url"] == f"{ISS}/roots/2026-11-02"
        with pytest.raises(NotFound):
            log.record(sub="example:3")
        with pytest.raises(UsageError):
            log.record(sub="example:1", lifetime=172801)
        with pytest.raises(UsageError):
            log.record()


def test_records_without_the_required_members_are_not_served(tmp_path: Path) -> None:
    # A log that accepts any JSON (`init --records any`) stores such a record; /record
    # still serves only entries with every member it needs, and says which are missing.
    with Log.init(tmp_path / "d", iss=ISS, records="any") as log:
        partial = server(7)
        del partial["evidence"]
        log.append([partial])
        log.checkpoint()
        with pytest.raises(NotFound, match=r"lacks evidence; /record serves only"):
            log.record(sub="example:7")


def test_record_over_http(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Log.init(data, iss=ISS) as log:
        log.append([server(1)])
        log.checkpoint()
    app = create_app(Settings(data_dir=data, background=False, rate_limit=0))
    with TestClient(app) as client, Log.open(data) as log:
        got = client.get("/record", params={"id": "example:1"})
        assert got.status_code == 200
        assert got.headers["cache-control"] == "no-cache"
        check_record(got.json(), log, int(dt.datetime.now(dt.UTC).timestamp()))
        by_url = client.get("/record", params={"url": "https://s1.example/mcp"})
        assert by_url.json()["sub"] == "example:1"
        for params in ({}, {"id": "example:1", "url": "https://s1.example/mcp"}):
            bad = client.get("/record", params=params)
            assert bad.status_code == 400 and bad.json()["error"] == "bad_request"
        assert client.get("/record", params={"url": "http://s1.example/mcp"}).status_code == 400
        missing = client.get("/record", params={"id": "example:9"})
        assert missing.status_code == 404 and missing.json()["error"] == "not_found"


@pytest.mark.parametrize(
    ("tamper", "problem"),
    [
        (
            f"DELETE FROM servers WHERE key = '{server_key_digest('sub:example:1')}'",
            "server index has",
        ),
        (
            "INSERT INTO servers (key, day, leaf_index) "
            f"VALUES ('{server_key_digest('sub:example:1')}', '2026-11-02', 1)",
            "server index has",
        ),
        (
            "INSERT INTO servers (key, day, leaf_index) "
            f"VALUES ('{server_key_digest('sub:x')}', '2026-11-02', 9)",
            "which is not stored",
        ),
    ],
    ids=["index_row_deleted", "index_points_at_another_server", "index_row_for_no_entry"],
)
def test_audit_checks_the_record_index(tmp_path: Path, tamper: str, problem: str) -> None:
    import sqlite3

    from capability_anchor.audit import audit_store

    clock = Clock()
    data = tmp_path / "d"
    with Log.init(data, iss=ISS, clock=clock) as log:
        log.append([server(1), server(2)])
        log.checkpoint()
        assert audit_store(log).ok
    conn = sqlite3.connect(data / "log.sqlite3", isolation_level=None)
    try:
        conn.execute("DROP TRIGGER servers_no_delete")
        conn.execute(tamper)
    finally:
        conn.close()
    with Log.open(data, clock=clock) as log:
        report = audit_store(log)
    assert not report.ok
    assert any(problem in p for p in report.problems), report.problems
