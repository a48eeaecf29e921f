"""The HTTP API (SPEC §6) through Litestar's TestClient, on real SQLite files.

Every answer is checked byte for byte where SPEC fixes the bytes (head documents), proofs are
verified with the Merkle kernel against the root of the head the anchor URL names, every
error is `{v, error, note}` with the status of its code and no internals, and every rejected
request is shown to leave the store exactly as it was (all rows of all tables compared).

The service reads the clock its settings give it, the history's (see `apikit.build_history`):
D2 and D1 are sealed, today has an unsealed head at 4 and one uncovered entry. Read-only
tests share one service (`reads`); tests that write get their own.
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from litestar import Request
from litestar.testing import TestClient

from capability_anchor import head as heads
from capability_anchor import leaf, merkle
from capability_anchor.api.app import create_app
from capability_anchor.api.bodies import INLINE_BODY
from capability_anchor.api.guards import MISSING_TOKEN_NOTE, WRONG_TOKEN_NOTE
from capability_anchor.api.settings import Settings
from capability_anchor.errors import StartupCheckFailed
from capability_anchor.keys import KeySet, create_key_file
from capability_anchor.log import Log, utc_day
from capability_anchor.web import guards
from tests.kit.apikit import (
    IMMUTABLE,
    ISS,
    NO_CACHE,
    RESERVED,
    VERSION,
    Clock,
    History,
    SteadyClock,
    assert_error,
    build_history,
    day_start,
    head_claims,
    insert_stamp,
    noon_today,
    rec,
    shift_day,
    snapshot,
    unchanged,
)

MAX_BODY = 4 * 1024 * 1024
BIG = 2**63  # one past SQLite's INTEGER range


@dataclass
class Api:
    client: TestClient[Any]
    h: History

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.h.token}"}

    def reject(
        self, method: str, url: str, code: str | tuple[str, ...], **kwargs: Any
    ) -> dict[str, Any]:
        """Send a request that must be refused with `code`; nothing stored may change."""
        with unchanged(self.h.data):
            response = self.client.request(method, url, **kwargs)
        return assert_error(response, code)

    def table(self, name: str) -> list[tuple[Any, ...]]:
        for sql, rows in snapshot(self.h.data):
            if sql.startswith(f"CREATE TABLE {name} "):
                return rows
        raise AssertionError(f"no table {name}")

    def stored_head(self, day: str, size: int, sealed: bool) -> bytes:
        """The head document as stored (columns: day, tree_size, sealed, root, iat, kid, doc)."""
        for row in self.table("heads"):
            if row[:3] == (day, size, int(sealed)):
                return bytes(row[6])
        raise AssertionError(f"no stored head {day} {size} {sealed}")


@contextlib.contextmanager
def serve(h: History, **settings: Any) -> Iterator[Api]:
    """The app on `h.data` (no background work, no rate limit unless asked), its lifespan
    run by the TestClient: started on entry, shut down (closing the log) on exit."""
    options: dict[str, Any] = {"background": False, "rate_limit": 0, "clock": h.clock, **settings}
    app = create_app(Settings(data_dir=h.data, **options))
    with TestClient(app) as client:
        yield Api(client, h)


@pytest.fixture(scope="module")
def reads(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """One service for tests that only read or are rejected (each rejection is checked to
    change nothing, so they cannot disturb each other)."""
    with serve(build_history(tmp_path_factory.mktemp("reads") / "data")) as api:
        yield api


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with serve(build_history(tmp_path / "data")) as api:
        yield api


@pytest.fixture
def api_any(tmp_path: Path) -> Iterator[Api]:
    """A log created with `records="any"`: it takes any JSON object SPEC §2 allows."""
    with serve(build_history(tmp_path / "data", records="any")) as api:
        yield api


@pytest.fixture
def empty(tmp_path: Path) -> Iterator[Api]:
    """A log initialised now: no entries, no heads."""
    service_clock = noon_today()
    data = tmp_path / "data"
    Log.init(data, iss=ISS, clock=service_clock).close()
    today = utc_day(service_clock())
    h = History(data, shift_day(today, -2), shift_day(today, -1), today, clock=service_clock)
    h.token = (data / "writer-token").read_text().strip()
    with serve(h) as api:
        yield api


def check_proof(
    api: Api, answer: dict[str, Any], record: dict[str, Any], day: str, size: int, sealed: bool
) -> None:
    """A `{anchor, proof}` pair that verifies, and whose anchor URL names a published head of
    that day, size, sealed state and root (SPEC §5)."""
    anchor, proof = answer["anchor"], answer["proof"]
    assert set(anchor) == {"day", "root", "url"}
    assert set(proof) == {"type", "leaf_index", "tree_size", "path"}
    assert proof["type"] == "rfc9162-sha256"
    assert (anchor["day"], proof["tree_size"]) == (day, size)
    want_url = f"{ISS}/roots/{day}" if sealed else f"{ISS}/roots/{day}/{size}"
    assert anchor["url"] == want_url
    merkle.verify_inclusion(
        leaf.leaf_hash(record),
        proof["leaf_index"],
        proof["tree_size"],
        [bytes.fromhex(p) for p in proof["path"]],
        bytes.fromhex(anchor["root"]),
    )
    served = api.client.get(anchor["url"].removeprefix(ISS))
    assert served.status_code == 200
    claims = head_claims(served.content)
    assert (claims["day"], claims["tree_size"], claims["sealed"]) == (day, size, sealed)
    assert claims["root"] == anchor["root"]


# --- public reads --------------------------------------------------------------------------------


def test_healthz(reads: Api) -> None:
    r = reads.client.get("/healthz")
    assert r.status_code == 200
    body = r.json()
    assert body["v"] == VERSION and body["status"] == "ok"


def test_openapi_document(reads: Api) -> None:
    r = reads.client.get("/schema/openapi.json")
    assert r.status_code == 200
    doc = json.loads(r.content)
    assert doc["openapi"].startswith("3.")
    for path in (
        "/healthz",
        "/roots",
        "/roots/latest",
        "/roots/{day}",
        "/roots/{day}/{tree_size}",
        "/roots/{day}/timestamps",
        "/roots/{day}/timestamp",
        "/proof",
        "/consistency",
        "/entries/{day}",
        "/keys",
        "/prove",
        "/records",
        "/checkpoint",
    ):
        assert path in doc["paths"], path


def test_roots_lists_sealed_days_newest_first(reads: Api) -> None:
    h = reads.h
    r = reads.client.get("/roots")
    assert r.status_code == 200
    body = r.json()
    assert (body["v"], body["iss"]) == (VERSION, ISS)
    assert [d["day"] for d in body["days"]] == [h.d1, h.d2]
    for item, size in zip(body["days"], (2, 6), strict=True):
        assert set(item) == {"day", "tree_size", "root", "url"}
        assert item["tree_size"] == size
        assert item["url"] == f"{ISS}/roots/{item['day']}"
        sealed = head_claims(reads.stored_head(item["day"], size, True))
        assert item["root"] == sealed["root"]
        assert sealed["root"] == merkle.root_hash(h.leaf_hashes(item["day"])).hex()
    assert r.headers["cache-control"] == NO_CACHE and r.headers["etag"]


@pytest.mark.parametrize(
    ("query", "days"),
    [
        ("limit=1", ["d1"]),
        ("limit=1000", ["d1", "d2"]),
        ("before={d1}", ["d2"]),
        ("before={d2}", []),
        ("before={today}&limit=1", ["d1"]),
        ("before=2000-01-01", []),
    ],
)
def test_roots_before_and_limit(reads: Api, query: str, days: list[str]) -> None:
    h = reads.h
    r = reads.client.get("/roots?" + query.format(d1=h.d1, d2=h.d2, today=h.today))
    assert r.status_code == 200
    names = {"d1": h.d1, "d2": h.d2}
    assert [d["day"] for d in r.json()["days"]] == [names[d] for d in days]


def test_roots_latest_is_the_newest_sealed_document(reads: Api) -> None:
    r = reads.client.get("/roots/latest")
    assert r.status_code == 200
    assert r.content == reads.stored_head(reads.h.d1, 2, True)
    assert not r.content.endswith(b"\n")
    assert r.headers["content-type"].startswith("application/json")
    assert r.headers["cache-control"] == NO_CACHE and r.headers["etag"]


def test_nothing_sealed_yet(empty: Api) -> None:
    assert empty.client.get("/roots").json()["days"] == []
    empty.reject("GET", "/roots/latest", "not_found")
    empty.reject("GET", f"/roots/{empty.h.today}", "not_found")
    empty.reject("GET", f"/roots/{empty.h.today}/0", "not_found")
    empty.reject("GET", f"/roots/{empty.h.today}/timestamps", "not_found")
    empty.reject("GET", f"/proof?day={empty.h.today}&index=0", "not_found")
    assert empty.client.get(f"/entries/{empty.h.today}").json()["entries"] == []


def test_roots_day_sealed_and_unsealed(reads: Api) -> None:
    h = reads.h
    for day, size in ((h.d2, 6), (h.d1, 2)):
        r = reads.client.get(f"/roots/{day}")
        assert r.status_code == 200
        assert r.content == reads.stored_head(day, size, True)
        assert not r.content.endswith(b"\n")
        assert head_claims(r.content)["sealed"] is True
        assert r.headers["cache-control"] == IMMUTABLE
    r = reads.client.get(f"/roots/{h.today}")
    assert r.status_code == 200
    assert r.content == reads.stored_head(h.today, 4, False)
    assert head_claims(r.content)["sealed"] is False
    assert r.headers["cache-control"] == NO_CACHE and r.headers["etag"]
    reads.reject("GET", f"/roots/{shift_day(h.d2, -1)}", "not_found")
    reads.reject("GET", f"/roots/{shift_day(h.today, 1)}", "not_found")


@pytest.mark.parametrize(
    ("which", "size", "sealed"),
    [("d2", 3, False), ("d2", 5, False), ("d2", 6, True), ("d1", 2, False), ("today", 4, False)],
)
def test_roots_day_size_prefers_unsealed(reads: Api, which: str, size: int, sealed: bool) -> None:
    day = getattr(reads.h, which)
    r = reads.client.get(f"/roots/{day}/{size}")
    assert r.status_code == 200
    assert r.content == reads.stored_head(day, size, sealed)
    claims = head_claims(r.content)
    assert (claims["day"], claims["tree_size"], claims["sealed"]) == (day, size, sealed)
    assert r.headers["cache-control"] == IMMUTABLE


@pytest.mark.parametrize(
    "url",
    ["/roots/{d2}/4", "/roots/{d2}/0", "/roots/{today}/5", "/roots/{d1}/3", "/roots/{d2}/{max}"],
)
def test_roots_day_size_not_found(reads: Api, url: str) -> None:
    h = reads.h
    reads.reject("GET", url.format(d1=h.d1, d2=h.d2, today=h.today, max=2**63 - 1), "not_found")


def test_timestamps_of_days(reads: Api) -> None:
    h = reads.h
    for day in (h.d2, h.d1):
        r = reads.client.get(f"/roots/{day}/timestamps")
        assert r.status_code == 200
        assert r.json() == {"v": VERSION, "day": day, "timestamps": []}
        assert r.headers["cache-control"] == NO_CACHE and r.headers["etag"]
        reads.reject("GET", f"/roots/{day}/timestamp", "not_found")
    for day in (h.today, shift_day(h.d2, -1), shift_day(h.today, 1)):
        reads.reject("GET", f"/roots/{day}/timestamps", "not_found")
        reads.reject("GET", f"/roots/{day}/timestamp", "not_found")


def test_stored_stamps_are_served(api: Api) -> None:
    h = api.h
    empty = api.client.get(f"/roots/{h.d2}/timestamps")
    first, second = b"\x30\x03\x02\x01\x00", b"\x30\x03\x02\x01\x01"
    insert_stamp(h.data, h.d2, "https://tsa-b.example/", first, "2026-01-01T00:00:05Z")
    insert_stamp(h.data, h.d2, "https://tsa-a.example/", second, "2026-01-01T00:00:01Z")
    r = api.client.get(f"/roots/{h.d2}/timestamp")
    assert r.status_code == 200
    assert r.content == first  # the earliest stored, whatever its genTime
    assert r.headers["content-type"] == "application/timestamp-reply"
    assert r.headers["cache-control"] == IMMUTABLE
    r = api.client.get(f"/roots/{h.d2}/timestamps")
    assert r.json() == {
        "v": VERSION,
        "day": h.d2,
        "timestamps": [
            {
                "tsa": "https://tsa-b.example/",
                "token": base64.b64encode(first).decode(),
                "gen_time": "2026-01-01T00:00:05Z",
            },
            {
                "tsa": "https://tsa-a.example/",
                "token": base64.b64encode(second).decode(),
                "gen_time": "2026-01-01T00:00:01Z",
            },
        ],
    }
    assert r.headers["etag"] != empty.headers["etag"]
    stale = api.client.get(
        f"/roots/{h.d2}/timestamps", headers={"If-None-Match": empty.headers["etag"]}
    )
    assert stale.status_code == 200


# --- proofs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("which", "size", "sealed"), [("d2", 6, True), ("d1", 2, True), ("today", 4, False)]
)
def test_proof_by_day_and_index(reads: Api, which: str, size: int, sealed: bool) -> None:
    day = getattr(reads.h, which)
    for index in range(size):
        r = reads.client.get(f"/proof?day={day}&index={index}")
        assert r.status_code == 200
        answer = r.json()
        assert answer["v"] == VERSION
        assert answer["proof"]["leaf_index"] == index
        check_proof(reads, answer, reads.h.records[day][index], day, size, sealed)


@pytest.mark.parametrize(("size", "sealed"), [(3, False), (5, False), (6, True)])
def test_proof_with_tree_size(reads: Api, size: int, sealed: bool) -> None:
    h = reads.h
    for index in range(size):
        r = reads.client.get(f"/proof?day={h.d2}&index={index}&tree_size={size}")
        assert r.status_code == 200
        check_proof(reads, r.json(), h.records[h.d2][index], h.d2, size, sealed)


def test_proof_tree_size_prefers_the_unsealed_head(reads: Api) -> None:
    h = reads.h
    r = reads.client.get(f"/proof?day={h.d1}&index=1&tree_size=2")
    check_proof(reads, r.json(), h.records[h.d1][1], h.d1, 2, False)


@pytest.mark.parametrize(
    "query",
    [
        "day={today}&index=4",  # stored, but no head covers it
        "day={today}&index=5",
        "day={d2}&index=6",
        "day={d2}&index=3&tree_size=3",
        "day={d2}&index=0&tree_size=4",  # no head of that size
        "day={d2}&index={max}",
        "day={before}&index=0",
        "leaf_hash={x}&day={today}",
        "leaf_hash={unknown}",
        "leaf_hash={y}&day={d2}",
        "leaf_hash={x}&day={d2}&tree_size=5",  # covered in D2, but not by the head of size 5
    ],
)
def test_proof_not_found(reads: Api, query: str) -> None:
    h = reads.h
    url = "/proof?" + query.format(
        today=h.today,
        d2=h.d2,
        before=shift_day(h.d2, -1),
        x=leaf.leaf_hash(h.x).hex(),
        y=leaf.leaf_hash(h.y).hex(),
        unknown="ab" * 32,
        max=2**63 - 1,
    )
    reads.reject("GET", url, "not_found")


def test_proof_by_leaf_hash(reads: Api) -> None:
    h = reads.h
    x, y = leaf.leaf_hash(h.x).hex(), leaf.leaf_hash(h.y).hex()
    # X: covered in D2 (sealed), stored but uncovered today: the newest day that covers it.
    r = reads.client.get(f"/proof?leaf_hash={x}")
    assert r.status_code == 200
    check_proof(reads, r.json(), h.x, h.d2, 6, True)
    assert r.json()["proof"]["leaf_index"] == 5
    r = reads.client.get(f"/proof?leaf_hash={x}&day={h.d2}")
    check_proof(reads, r.json(), h.x, h.d2, 6, True)
    # Y: covered in D1 and today: today is the newest.
    r = reads.client.get(f"/proof?leaf_hash={y}")
    check_proof(reads, r.json(), h.y, h.today, 4, False)
    assert r.json()["proof"]["leaf_index"] == 1
    r = reads.client.get(f"/proof?leaf_hash={y}&day={h.d1}")
    check_proof(reads, r.json(), h.y, h.d1, 2, True)
    assert r.json()["proof"]["leaf_index"] == 0
    r = reads.client.get(f"/proof?leaf_hash={y}&day={h.d1}&tree_size=2")
    check_proof(reads, r.json(), h.y, h.d1, 2, False)


def test_consistency_proofs_verify(reads: Api) -> None:
    h = reads.h
    for day, newest in ((h.d2, 6), (h.d1, 2), (h.today, 4)):
        hashes = h.leaf_hashes(day)
        for first in range(1, newest + 1):
            for second in range(first, newest + 1):
                r = reads.client.get(f"/consistency?day={day}&first={first}&second={second}")
                assert r.status_code == 200
                body = r.json()
                assert {k: body[k] for k in ("v", "day", "first", "second")} == {
                    "v": VERSION,
                    "day": day,
                    "first": first,
                    "second": second,
                }
                merkle.verify_consistency(
                    first,
                    second,
                    merkle.root_hash(hashes[:first]),
                    merkle.root_hash(hashes[:second]),
                    [bytes.fromhex(p) for p in body["path"]],
                )
    # The second root is the published one.
    newest_root = head_claims(reads.client.get(f"/roots/{h.today}").content)["root"]
    assert merkle.root_hash(h.leaf_hashes(h.today)[:4]).hex() == newest_root


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("day={d2}&first=0&second=3", "bad_request"),
        # Well-formed sizes that name no proof (first > second, past the newest head): 404.
        ("day={d2}&first=4&second=3", "not_found"),
        ("day={d2}&first=1&second=7", "not_found"),
        ("day={today}&first=1&second=5", "not_found"),  # beyond today's newest head (4)
        ("day={d2}&first=-1&second=3", "bad_request"),
        ("day={d2}&first=a&second=3", "bad_request"),
        ("day={d2}&first=1", "bad_request"),
        ("first=1&second=2", "bad_request"),
        ("day=2026-02-30&first=1&second=2", "bad_request"),
        ("day={before}&first=1&second=1", "not_found"),
    ],
)
def test_consistency_rejects(reads: Api, query: str, code: str) -> None:
    h = reads.h
    url = "/consistency?" + query.format(d2=h.d2, today=h.today, before=shift_day(h.d2, -1))
    reads.reject("GET", url, code)


def test_entries_of_a_day(reads: Api) -> None:
    h = reads.h
    r = reads.client.get(f"/entries/{h.today}")
    assert r.status_code == 200
    body = r.json()
    assert (body["v"], body["day"]) == (VERSION, h.today)
    assert [e["leaf_index"] for e in body["entries"]] == [0, 1, 2, 3, 4]
    for entry, record in zip(body["entries"], h.records[h.today], strict=True):
        assert set(entry) == {"leaf_index", "leaf_hash", "claims"}
        assert entry["leaf_hash"] == leaf.leaf_hash(record).hex()
        assert entry["claims"] == leaf.leaf_claims(record)
    # The reserved members a resolver adds never reach the leaf.
    assert not set(RESERVED) & set(body["entries"][2]["claims"])
    r = reads.client.get(f"/entries/{h.d2}?start=2&limit=3")
    assert [e["leaf_index"] for e in r.json()["entries"]] == [2, 3, 4]
    r = reads.client.get(f"/entries/{h.d2}?start=5&limit=1000")
    assert [e["leaf_index"] for e in r.json()["entries"]] == [5]
    r = reads.client.get(f"/entries/{h.d2}?start=6")
    assert r.json()["entries"] == []
    r = reads.client.get(f"/entries/{h.d2}?limit=1")
    assert [e["leaf_index"] for e in r.json()["entries"]] == [0]


def test_keys_verify_every_head(reads: Api) -> None:
    r = reads.client.get("/keys")
    assert r.status_code == 200
    keyset = KeySet.from_json(r.content)
    jwks = r.json()
    assert len(jwks["keys"]) == 1
    assert jwks["keys"][0]["kty"] == "OKP" and jwks["keys"][0]["crv"] == "Ed25519"
    assert "d" not in jwks["keys"][0]
    heads_rows = reads.table("heads")
    assert len(heads_rows) == 6  # D2: 3, 5, sealed 6; D1: 2, sealed 2; today: 4
    for row in heads_rows:
        doc = heads.parse_document(bytes(row[6]))
        verified = heads.verify_head(doc.jws, keyset)
        assert verified.claims == doc.claims


# --- strict input --------------------------------------------------------------------------------

BAD_DAYS = ["2026-02-30", "2026-13-01", "20261128", "2026-1-01", "2026-11-28T00:00", "x", "-1"]


@pytest.mark.parametrize("bad", BAD_DAYS)
@pytest.mark.parametrize(
    "template",
    [
        "/roots/{bad}",
        "/roots/{bad}/1",
        "/roots/{bad}/timestamps",
        "/roots/{bad}/timestamp",
        "/entries/{bad}",
        "/proof?day={bad}&index=0",
        "/proof?leaf_hash={x}&day={bad}",
        "/consistency?day={bad}&first=1&second=1",
        "/roots?before={bad}",
    ],
)
def test_bad_days(reads: Api, template: str, bad: str) -> None:
    url = template.format(bad=bad, x=leaf.leaf_hash(reads.h.x).hex())
    reads.reject("GET", url, "bad_request")


@pytest.mark.parametrize(
    "template",
    [
        "/roots?limit=0",
        "/roots?limit=1001",
        "/roots?limit=-1",
        "/roots?limit=ten",
        "/roots?limit=1.5",
        "/roots?limit=",
        "/entries/{d2}?limit=0",
        "/entries/{d2}?limit=1001",
        "/entries/{d2}?limit=x",
        "/entries/{d2}?start=-1",
        "/entries/{d2}?start=one",
        "/entries/{d2}?start=0.5",
        "/roots/{d2}/-1",
        "/proof?day={d2}&index=-1",
        "/proof?day={d2}&index=x",
        "/proof?day={d2}&index=0.5",
        "/proof?day={d2}&index=",
        "/proof?day={d2}&index=+1",
        "/proof?day={d2}&index=0&tree_size=-1",
        "/proof?day={d2}&index=0&tree_size=six",
        "/proof?index=0",  # index without day
        "/proof?day={d2}",  # day without index
        "/proof",
        "/proof?tree_size=3",
        "/proof?day={d2}&index=0&leaf_hash={x}",  # both forms
        "/proof?index=0&leaf_hash={x}",
        "/proof?leaf_hash={upper}",
        "/proof?leaf_hash={short}",
        "/proof?leaf_hash={long}",
        "/proof?leaf_hash={nonhex}",
        "/proof?leaf_hash=",
        "/proof?leaf_hash={x}&tree_size=-1",
        "/consistency?day={d2}&first=1&second={huge}",
        "/records?prove=2",
    ],
)
def test_bad_parameters(reads: Api, template: str) -> None:
    x = leaf.leaf_hash(reads.h.x).hex()
    url = template.format(
        d2=reads.h.d2,
        x=x,
        upper=x.upper(),
        short=x[:-1],
        long=x + "0",
        nonhex="g" * 64,
        huge="9" * 40,
    )
    if url.startswith("/records"):
        reads.reject(
            "POST", url, "bad_request", json={"records": [rec("z", 0)]}, headers=reads.auth
        )
    else:
        reads.reject("GET", url, "bad_request")


@pytest.mark.parametrize(
    "url",
    [
        "/nope",
        "/roots/{d2}/6/extra",
        "/roots/{d2}/abc",  # not a size, not `timestamps`: no such resource
        "/roots/{d2}/timestamps/x",
        "/entries",
        "/proofs",
        "/schema/nope.json",
    ],
)
def test_unknown_paths(reads: Api, url: str) -> None:
    url = url.format(d2=reads.h.d2)
    reads.reject("GET", url, "not_found")
    # Litestar matches a POST to /roots/D/abc or /schema/x by its route template first, and
    # answers 405 there; either way it is an error in the SPEC shape and nothing is stored.
    post = ("not_found", "method_not_allowed") if url.endswith(("abc", ".json")) else "not_found"
    reads.reject("POST", url, post, headers=reads.auth, json={"records": [rec("z", 0)]})


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("DELETE", "/roots"),
        ("POST", "/roots"),
        ("PUT", "/roots/{d2}"),
        ("POST", "/roots/latest"),
        ("DELETE", "/roots/{d2}/6"),
        ("POST", "/roots/{d2}/timestamps"),
        ("PATCH", "/keys"),
        ("POST", "/proof"),
        ("POST", "/consistency"),
        ("POST", "/entries/{d2}"),
        ("POST", "/healthz"),
        ("GET", "/prove"),
        ("GET", "/records"),
        ("PUT", "/records"),
        ("DELETE", "/records"),
        ("GET", "/checkpoint"),
    ],
)
def test_wrong_methods(reads: Api, method: str, url: str) -> None:
    body = reads.reject(
        method, url.format(d2=reads.h.d2), "method_not_allowed", headers=reads.auth, json={}
    )
    assert method in body["note"]


# --- caching -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "/roots",
        "/roots?limit=1",
        "/roots/latest",
        "/roots/{today}",
        "/roots/{d2}/timestamps",
        "/roots/{d2}",
        "/roots/{d2}/3",
        "/roots/{d1}/2",
        "/proof?day={d2}&index=1",
        "/entries/{d2}",
        "/keys",
    ],
)
def test_etag_and_304(reads: Api, url: str) -> None:
    url = url.format(d1=reads.h.d1, d2=reads.h.d2, today=reads.h.today)
    r = reads.client.get(url)
    assert r.status_code == 200
    tag = r.headers["etag"]
    assert tag.startswith('"') and tag.endswith('"')
    for sent in (tag, f"W/{tag}", f'"nope", {tag}', "*"):
        again = reads.client.get(url, headers={"If-None-Match": sent})
        assert again.status_code == 304, sent
        assert again.content == b""
        assert again.headers["etag"] == tag
        assert again.headers["cache-control"] == r.headers["cache-control"]
    other = reads.client.get(url, headers={"If-None-Match": '"0123"'})
    assert other.status_code == 200 and other.content == r.content


@pytest.mark.parametrize(
    ("url", "policy"),
    [
        ("/roots", NO_CACHE),
        ("/roots/latest", NO_CACHE),
        ("/roots/{today}", NO_CACHE),
        ("/roots/{d2}/timestamps", NO_CACHE),
        ("/roots/{d2}", IMMUTABLE),
        ("/roots/{d1}", IMMUTABLE),
        ("/roots/{d2}/6", IMMUTABLE),
        ("/roots/{d2}/3", IMMUTABLE),
        ("/roots/{today}/4", IMMUTABLE),
    ],
)
def test_cache_control(reads: Api, url: str, policy: str) -> None:
    r = reads.client.get(url.format(d1=reads.h.d1, d2=reads.h.d2, today=reads.h.today))
    assert r.status_code == 200
    assert r.headers["cache-control"] == policy
    if policy == NO_CACHE:
        assert r.headers["etag"]


def test_etag_changes_with_a_new_checkpoint(api: Api) -> None:
    h, client = api.h, api.client
    urls = [f"/roots/{h.today}", f"/entries/{h.today}"]
    old = {u: client.get(u) for u in urls}
    r = client.post("/records", json={"records": [rec("new", 1)]}, headers=api.auth)
    assert r.status_code == 200
    r = client.post("/checkpoint", headers=api.auth)
    assert r.status_code == 200
    for url in urls:
        new = client.get(url)
        assert new.content != old[url].content
        assert new.headers["etag"] != old[url].headers["etag"]
        stale = client.get(url, headers={"If-None-Match": old[url].headers["etag"]})
        assert stale.status_code == 200 and stale.content == new.content
    assert head_claims(client.get(f"/roots/{h.today}").content)["tree_size"] == 6
    # The head of size 4 is still served, unchanged, at its own URL.
    assert client.get(f"/roots/{h.today}/4").content == old[urls[0]].content


def test_a_new_head_is_served_at_once(api: Api) -> None:
    """The reader keeps each day's newest head (read/reader.py); one the sequencer's process
    publishes is served by the next request, and a proof of an entry it newly covers too."""
    h, client = api.h, api.client
    uncovered = f"/proof?day={h.today}&index=4"
    assert head_claims(client.get(f"/roots/{h.today}").content)["tree_size"] == 4
    assert client.get(uncovered).status_code == 404
    assert client.post("/checkpoint", headers=api.auth).status_code == 200
    assert head_claims(client.get(f"/roots/{h.today}").content)["tree_size"] == 5
    assert client.get(uncovered).json()["proof"]["tree_size"] == 5


# --- writers -------------------------------------------------------------------------------------


BAD_AUTH = {
    "none": lambda t: {},
    "empty": lambda t: {"Authorization": ""},
    "bearer only": lambda t: {"Authorization": "Bearer"},
    "bearer space": lambda t: {"Authorization": "Bearer "},
    "wrong": lambda t: {"Authorization": "Bearer wrong"},
    "longer": lambda t: {"Authorization": f"Bearer {t}x"},
    "prefix": lambda t: {"Authorization": f"Bearer {t[:-1]}"},
    "basic": lambda t: {"Authorization": "Basic " + base64.b64encode(f"w:{t}".encode()).decode()},
    "basic raw": lambda t: {"Authorization": f"Basic {t}"},
    "other scheme": lambda t: {"Authorization": f"Token {t}"},
    "no scheme": lambda t: {"Authorization": t},
    "other header": lambda t: {"X-Token": t},
}


@pytest.mark.parametrize("name", list(BAD_AUTH))
def test_writers_need_the_token(reads: Api, name: str) -> None:
    headers = BAD_AUTH[name](reads.h.token)
    for prove in ("", "?prove=1"):
        reads.reject(
            "POST",
            "/records" + prove,
            "unauthorized",
            json={"records": [rec("z", 1)]},
            headers=headers,
        )
    reads.reject("POST", "/checkpoint", "unauthorized", headers=headers)
    # Authentication comes before the body is looked at.
    reads.reject("POST", "/records", "unauthorized", content=b"not json", headers=headers)


# Which note each refusal gets: no bearer token at all, or one that is not the writer's.
MISSING = {"none", "empty", "bearer only", "bearer space", "basic", "basic raw"}
MISSING |= {"other scheme", "no scheme", "other header"}


@pytest.mark.parametrize("name", list(BAD_AUTH))
def test_attack_a_missing_and_a_wrong_token_get_different_notes_that_reveal_nothing(
    reads: Api, name: str
) -> None:
    token = reads.h.token
    headers = BAD_AUTH[name](token)
    expected = MISSING_TOKEN_NOTE if name in MISSING else WRONG_TOKEN_NOTE
    for method, url in (("POST", "/records"), ("POST", "/checkpoint")):
        body = reads.reject(method, url, "unauthorized", json={"records": []}, headers=headers)
        assert body["note"] == expected
        # Nothing of the token sent or expected: no part of it, and no length.
        note = body["note"]
        assert not any(token[i : i + 4] in note for i in range(len(token) - 3))
        assert "wrong" not in note and str(len(token)) not in note
        assert "writer-token" not in note and "CAPABILITY_ANCHOR" not in note
    assert MISSING_TOKEN_NOTE != WRONG_TOKEN_NOTE


def test_append_with_dedupe_within_and_across_batches(api: Api) -> None:
    h, client = api.h, api.client
    r1, r2, r3 = rec("w", 1), rec("w", 2), rec("w", 3)
    d2_only = h.records[h.d2][0]
    r = client.post("/records", json={"records": [r1, r2, r1, h.x, d2_only]}, headers=api.auth)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"v", "entries"} and body["v"] == VERSION
    got = [(e["day"], e["leaf_index"], e["leaf_hash"], e["duplicate"]) for e in body["entries"]]
    lh = [leaf.leaf_hash(x).hex() for x in (r1, r2, r1, h.x, d2_only)]
    today = h.today
    assert got == [
        (today, 5, lh[0], False),
        (today, 6, lh[1], False),
        (today, 5, lh[0], True),  # twice in one batch
        (today, 4, lh[3], True),  # already stored today
        (today, 7, lh[4], False),  # stored on another day only: dedupe is per day
    ]
    for entry in body["entries"]:
        assert set(entry) == {"day", "leaf_index", "leaf_hash", "duplicate"}
    r = client.post("/records", json={"records": [r2, r3]}, headers=api.auth)
    got = [(e["leaf_index"], e["duplicate"]) for e in r.json()["entries"]]
    assert got == [(6, True), (8, False)]
    listed = client.get(f"/entries/{today}").json()["entries"]
    assert [e["leaf_hash"] for e in listed[5:]] == [lh[0], lh[1], lh[4], leaf.leaf_hash(r3).hex()]
    # A lower-case scheme is the same scheme (RFC 9110 §11.1).
    r = client.post(
        "/records", json={"records": [r3]}, headers={"Authorization": f"bearer {h.token}"}
    )
    assert r.status_code == 200 and r.json()["entries"][0]["duplicate"] is True


def test_append_with_prove(api: Api) -> None:
    h, client = api.h, api.client
    batch = [rec("p", 1), rec("p", 2), rec("p", 1), h.x, h.records[h.today][0]]
    r = client.post("/records?prove=1", json={"records": batch}, headers=api.auth)
    assert r.status_code == 200
    entries = r.json()["entries"]
    assert [(e["leaf_index"], e["duplicate"]) for e in entries] == [
        (5, False),
        (6, False),
        (5, True),
        (4, True),
        (0, True),
    ]
    for entry, record in zip(entries, batch, strict=True):
        assert set(entry) == {"day", "leaf_index", "leaf_hash", "duplicate", "anchor", "proof"}
        assert entry["proof"]["leaf_index"] == entry["leaf_index"]
        check_proof(api, entry, record, h.today, 7, False)
    # The head covering the batch was published (and stored) before the answer.
    assert head_claims(api.stored_head(h.today, 7, False))["root"] == entries[0]["anchor"]["root"]


def test_prove_publishes_a_head_for_duplicates_only(api: Api) -> None:
    """X is stored today but no head covers it: a batch of only X still gets a proof."""
    h = api.h
    r = api.client.post("/records?prove=1", json={"records": [h.x]}, headers=api.auth)
    assert r.status_code == 200
    entry = r.json()["entries"][0]
    assert (entry["leaf_index"], entry["duplicate"]) == (4, True)
    check_proof(api, entry, h.x, h.today, 5, False)


def test_checkpoint(api: Api) -> None:
    h, client = api.h, api.client
    r = client.post("/checkpoint", headers=api.auth)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    assert r.content == api.stored_head(h.today, 5, False)  # the tree grew (X) since 4
    assert not r.content.endswith(b"\n")
    claims = head_claims(r.content)
    assert (claims["day"], claims["tree_size"], claims["sealed"]) == (h.today, 5, False)
    with unchanged(h.data):
        again = client.post("/checkpoint", headers=api.auth)
    assert again.status_code == 200 and again.content == r.content
    assert client.get(f"/roots/{h.today}").content == r.content


def test_checkpoint_of_an_empty_day_is_null(empty: Api) -> None:
    with unchanged(empty.h.data):
        r = empty.client.post("/checkpoint", headers=empty.auth)
    assert r.status_code == 200
    assert r.content == b"null"
    assert r.headers["content-type"].startswith("application/json")


# --- request bodies ------------------------------------------------------------------------------


def nested(depth: int, kind: str = "object") -> dict[str, Any]:
    """A record whose nesting depth (SPEC §2: the top-level object is 1) is `depth`."""
    value: Any = {} if kind == "object" else []
    for _ in range(depth - 2):
        value = {"a": value} if kind == "object" else [value]
    return {"v": VERSION, "deep": value}


def test_depth_32_is_accepted(api_any: Api) -> None:
    api = api_any
    for kind in ("object", "array"):
        r = api.client.post("/records", json={"records": [nested(32, kind)]}, headers=api.auth)
        assert r.status_code == 200, r.text


def test_limits_are_inclusive(api_any: Api) -> None:
    """0.5, 5e-324 and 9007199254740991 are fine (SPEC §2), 1000 records are fine."""
    api = api_any
    body = b'{"records":[{"a":0.5,"b":5e-324,"c":9007199254740991,"d":-9007199254740991}]}'
    r = api.client.post(
        "/records", content=body, headers={**api.auth, "content-type": "application/json"}
    )
    assert r.status_code == 200, r.text
    records = [rec("many", n) for n in range(1000)]
    r = api.client.post("/records", json={"records": records}, headers=api.auth)
    assert r.status_code == 200
    assert len(r.json()["entries"]) == 1000


def _records_body(*records: Any) -> bytes:
    return json.dumps({"records": list(records)}).encode()


GOOD = rec("g", 0)
BAD_BODIES: dict[str, tuple[bytes, str | tuple[str, ...]]] = {
    "no records": (b'{"records":[]}', "bad_request"),
    "1001 records": (_records_body(*[rec("m", n) for n in range(1001)]), "bad_request"),
    "other iss": (
        _records_body(GOOD, {**rec("g", 1), "iss": "https://other.example"}),
        "invalid_record",
    ),
    "float 1e20": (b'{"records":[{"x":1e20}]}', "invalid_record"),
    "int 10^20": (b'{"records":[{"x":100000000000000000000}]}', "invalid_record"),
    "2^53 as float": (b'{"records":[{"x":9007199254740992.0}]}', "invalid_record"),
    "-2^53": (b'{"records":[{"x":-9007199254740992}]}', "invalid_record"),
    "depth 33": (_records_body(GOOD, nested(33)), "invalid_record"),
    "depth 33 arrays": (_records_body(nested(33, "array")), "invalid_record"),
    "leaf over 16384": (_records_body({"x": "a" * 16384}), "invalid_record"),
    "duplicate names in a record": (b'{"records":[{"x":1,"x":2}]}', "bad_request"),
    "duplicate top-level names": (
        b'{"records":[{"x":1}],"records":[{"x":2}]}',
        "bad_request",
    ),
    "unknown top-level member": (b'{"records":[{"x":1}],"extra":1}', "bad_request"),
    "records not an array": (b'{"records":{"x":1}}', "bad_request"),
    "records null": (b'{"records":null}', "bad_request"),
    "no records member": (b"{}", "bad_request"),
    "record not an object": (b'{"records":[{"x":1},1]}', ("bad_request", "invalid_record")),
    "body an array": (b'[{"x":1}]', "bad_request"),
    "not JSON": (b"records: x", "bad_request"),
    "empty body": (b"", "bad_request"),
    "truncated": (b'{"records":[{"x":1}', "bad_request"),
    "trailing garbage": (b'{"records":[{"x":1}]}x', "bad_request"),
    "NaN": (b'{"records":[{"x":NaN}]}', "bad_request"),
    "Infinity": (b'{"records":[{"x":Infinity}]}', "bad_request"),
    "1e400": (b'{"records":[{"x":1e400}]}', "bad_request"),
    "byte order mark": (b'\xef\xbb\xbf{"records":[{"x":1}]}', "bad_request"),
    "not UTF-8": (b'{"records":[{"x":"\xff"}]}', "bad_request"),
    "UTF-16": ('{"records":[{"x":1}]}'.encode("utf-16"), "bad_request"),
}


@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_bad_bodies_are_rejected_and_nothing_is_stored(reads: Api, name: str) -> None:
    content, code = BAD_BODIES[name]
    headers = {**reads.auth, "content-type": "application/json"}
    for prove in ("", "?prove=1"):
        body = reads.reject("POST", "/records" + prove, code, content=content, headers=headers)
    if name == "other iss":
        assert body["note"].startswith("record 2: ")  # the second record, counted from 1
        assert "https://other.example" in body["note"]
    if name.startswith("depth 33"):
        assert "depth" in body["note"]


@pytest.mark.parametrize(
    "content",
    [
        b'{"records":[{"x":"\\ud800"}]}',
        b'{"records":[{"x":"a\\udc00b"}]}',
        b'{"records":[{"\\udfff":1}]}',
    ],
)
def test_lone_surrogates_are_rejected(reads: Api, content: bytes) -> None:
    headers = {**reads.auth, "content-type": "application/json"}
    reads.reject(
        "POST", "/records", ("invalid_record", "bad_request"), content=content, headers=headers
    )
    prove = content.replace(b'{"records":[', b'{"record":').replace(b"]}", b"}")
    reads.reject("POST", "/prove", ("invalid_record", "bad_request"), content=prove)


@pytest.mark.parametrize("url", ["/records", "/prove"])
def test_lone_surrogate_is_an_invalid_record(reads: Api, url: str) -> None:
    key = "records" if url == "/records" else "record"
    one = b'{"x":"\\ud800"}'
    content = b'{"' + key.encode() + b'":' + (b"[" + one + b"]" if key == "records" else one) + b"}"
    headers = {**reads.auth, "content-type": "application/json"}
    reads.reject("POST", url, "invalid_record", content=content, headers=headers)


def test_body_limit_boundary(api: Api) -> None:
    """A body of exactly 4 MiB is accepted (JSON whitespace pads it); one byte more is 413."""
    core = json.dumps({"records": [rec("big", 1)]}).encode()
    exact = core + b" " * (MAX_BODY - len(core))
    headers = {**api.auth, "content-type": "application/json"}
    r = api.client.post("/records", content=exact, headers=headers)
    assert r.status_code == 200, r.text
    api.reject("POST", "/records", "too_large", content=exact + b" ", headers=headers)


def _chunks(data: bytes) -> Iterator[bytes]:
    for start in range(0, len(data), 256 * 1024):
        yield data[start : start + 256 * 1024]


@pytest.mark.parametrize("url", ["/records", "/records?prove=1", "/prove"])
def test_bodies_over_4_mib_are_413(reads: Api, url: str) -> None:
    key = "record" if url == "/prove" else "records"
    value: Any = {"x": "a" * MAX_BODY} if key == "record" else [{"x": "a" * MAX_BODY}]
    big = json.dumps({key: value}).encode()
    assert len(big) > MAX_BODY
    headers = {**reads.auth, "content-type": "application/json"}
    # With Content-Length...
    reads.reject("POST", url, "too_large", content=big, headers=headers)
    # ... and chunked (no Content-Length: the limit is counted while reading).
    with unchanged(reads.h.data):
        r = reads.client.post(url, content=_chunks(big), headers=headers)
    assert "content-length" not in r.request.headers
    assert r.request.headers["transfer-encoding"] == "chunked"
    assert_error(r, "too_large")


@pytest.mark.parametrize("url", ["/records", "/prove"])
def test_deeply_nested_body_is_a_bad_request(reads: Api, url: str) -> None:
    deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
    content = b'{"records":[' + deep + b"]}" if url == "/records" else b'{"record":' + deep + b"}"
    headers = {**reads.auth, "content-type": "application/json"}
    reads.reject("POST", url, ("bad_request", "invalid_record"), content=content, headers=headers)


def test_deeply_nested_body_is_refused_without_storing(reads: Api) -> None:
    """Whatever the status (see the xfail above), nothing is stored and nothing leaks."""
    deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
    headers = {**reads.auth, "content-type": "application/json"}
    with unchanged(reads.h.data):
        r = reads.client.post("/records", content=b'{"records":[' + deep + b"]}", headers=headers)
    assert r.status_code in (400, 503)
    assert_error(r, r.json()["error"])


# --- POST /prove ---------------------------------------------------------------------------------


def test_prove_stored_and_covered_records(reads: Api) -> None:
    h = reads.h
    cases = [
        (h.records[h.d2][0], h.d2, 6, True, 0),
        (h.x, h.d2, 6, True, 5),  # also stored today, but uncovered there
        (h.y, h.today, 4, False, 1),  # newest day that covers it
        (h.records[h.d1][1], h.d1, 2, True, 1),
        (h.records[h.today][2], h.today, 4, False, 2),
        # As a resolver issued it: other reserved members, the same leaf.
        ({**h.records[h.today][3], **RESERVED}, h.today, 4, False, 3),
    ]
    for record, day, size, sealed, index in cases:
        with unchanged(h.data):
            r = reads.client.post("/prove", json={"record": record})
        assert r.status_code == 200, r.text
        answer = r.json()
        assert answer["v"] == VERSION
        assert answer["proof"]["leaf_index"] == index
        check_proof(reads, answer, record, day, size, sealed)


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"record": rec("unknown", 1)}, "not_found"),
        ({"record": {"x": 1}}, "not_found"),
        ({"record": {"x": 1e20}}, "invalid_record"),
        ({"record": nested(33)}, "invalid_record"),
        ({"record": {"x": "a" * 16384}}, "invalid_record"),
        ({"record": 1}, ("bad_request", "invalid_record")),
        ({"record": [1]}, ("bad_request", "invalid_record")),
        ({}, "bad_request"),
        ({"record": {"x": 1}, "extra": 1}, "bad_request"),
        ({"records": [{"x": 1}]}, "bad_request"),
        ([{"x": 1}], "bad_request"),
    ],
)
def test_prove_rejects(reads: Api, body: Any, code: str | tuple[str, ...]) -> None:
    reads.reject("POST", "/prove", code, json=body)


def test_prove_uncovered_record_is_not_found(api: Api) -> None:
    """A record that is stored but that no published head covers yet is 404."""
    fresh = rec("uncovered", 1)
    r = api.client.post("/records", json={"records": [fresh]}, headers=api.auth)
    assert r.status_code == 200
    api.reject("POST", "/prove", "not_found", json={"record": fresh})
    api.reject("GET", f"/proof?leaf_hash={leaf.leaf_hash(fresh).hex()}", "not_found")


@pytest.mark.parametrize(
    "content",
    [b'{"record":{"x":1},"record":{"x":2}}', b'{"record":{"x":1,"x":2}}', b"nope", b""],
)
def test_prove_rejects_malformed_json(reads: Api, content: bytes) -> None:
    reads.reject(
        "POST",
        "/prove",
        "bad_request",
        content=content,
        headers={"content-type": "application/json"},
    )


# --- rate limit ----------------------------------------------------------------------------------


def test_rate_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bucket's clock stands still unless the test moves it: a loaded machine cannot
    refill it between the requests (a wall-clock test failed so), and waiting Retry-After
    is a step of that clock."""
    now = [1000.0]
    monkeypatch.setattr(guards, "time", SimpleNamespace(monotonic=lambda: now[0]))
    h = build_history(tmp_path / "data")
    with serve(h, rate_limit=5) as api:
        statuses = []
        for _ in range(12):
            r = api.client.get("/healthz")
            statuses.append(r.status_code)
            if r.status_code == 429:
                limited = r
        assert statuses[:5] == [200] * 5
        assert 429 in statuses
        with unchanged(h.data):
            r = api.client.get(f"/roots/{h.d2}")
        body = assert_error(r, "rate_limited")
        assert body["note"]
        retry = limited.headers["retry-after"]
        assert retry.isdigit() and int(retry) >= 1
        # POST /prove is public: limited as well; writers never are.
        assert_error(api.client.post("/prove", json={"record": h.x}), "rate_limited")
        for _ in range(10):
            assert api.client.post("/checkpoint", headers=api.auth).status_code == 200
        r = api.client.post("/records", json={"records": [rec("rl", 1)]}, headers=api.auth)
        assert r.status_code == 200
        # A writer with a wrong token is told so, not rate limited.
        assert_error(
            api.client.post("/checkpoint", headers={"Authorization": "Bearer x"}), "unauthorized"
        )
        now[0] += int(retry) + 0.05
        assert api.client.get("/healthz").status_code == 200


def test_rate_limit_zero_is_off(reads: Api) -> None:
    for _ in range(60):
        assert reads.client.get("/healthz").status_code == 200


# --- conflicts -----------------------------------------------------------------------------------


def test_append_into_a_sealed_day_is_409(tmp_path: Path) -> None:
    """The log's first day is today and today is already sealed (the log's clock ran ahead
    when it sealed): the service, on its own clock, refuses appends with 409."""
    service_clock = noon_today()
    today = utc_day(service_clock())
    clock = Clock(service_clock())
    data = tmp_path / "data"
    with Log.init(data, iss=ISS, clock=clock) as log:
        log.append([rec("s", 0)])
        clock.t = day_start(shift_day(today, 1)) + 60
        (sealed,) = log.seal()
    h = History(data, shift_day(today, -2), shift_day(today, -1), today, clock=service_clock)
    h.token = (data / "writer-token").read_text().strip()
    with serve(h) as api:
        body = api.reject(
            "POST", "/records", "conflict", json={"records": [rec("s", 1)]}, headers=api.auth
        )
        assert today in body["note"]
        api.reject(
            "POST",
            "/records?prove=1",
            "conflict",
            json={"records": [rec("s", 0)]},
            headers=api.auth,
        )
        r = api.client.get(f"/roots/{today}")
        assert r.content == sealed and r.headers["cache-control"] == IMMUTABLE
        assert api.client.get("/roots/latest").content == sealed
        with unchanged(data):
            r = api.client.post("/checkpoint", headers=api.auth)
        assert r.status_code == 200 and r.content == sealed


def test_append_before_the_first_day_is_409(tmp_path: Path) -> None:
    service_clock = noon_today()
    tomorrow = shift_day(utc_day(service_clock()), 1)
    data = tmp_path / "data"
    Log.init(data, iss=ISS, clock=Clock(day_start(tomorrow) + 60)).close()
    h = History(data, tomorrow, tomorrow, tomorrow, clock=service_clock)
    h.token = (data / "writer-token").read_text().strip()
    with serve(h) as api:
        api.reject(
            "POST", "/records", "conflict", json={"records": [rec("f", 0)]}, headers=api.auth
        )
        with unchanged(data):
            r = api.client.post("/checkpoint", headers=api.auth)
        assert r.status_code == 200 and r.content == b"null"


# --- the factory ---------------------------------------------------------------------------------


def test_startup_self_check_refuses_a_replaced_key(tmp_path: Path) -> None:
    h = build_history(tmp_path / "data")
    key_file = h.data / "signing-key.jwk"
    key_file.unlink()
    create_key_file(key_file)
    threads = threading.active_count()
    with unchanged(h.data), pytest.raises(StartupCheckFailed, match="does not verify"):
        create_app(Settings(data_dir=h.data, background=False, rate_limit=0))
    assert threading.active_count() == threads


def test_public_url_setting_names_anchors(tmp_path: Path) -> None:
    h = build_history(tmp_path / "data")
    base = "https://cdn.example/anchor"
    with serve(h, public_url=base + "/") as api:
        r = api.client.get(f"/proof?day={h.d2}&index=0")
        assert r.json()["anchor"]["url"] == f"{base}/roots/{h.d2}"
        r = api.client.get(f"/proof?day={h.today}&index=0")
        assert r.json()["anchor"]["url"] == f"{base}/roots/{h.today}/4"
        assert api.client.get("/roots").json()["days"][0]["url"] == f"{base}/roots/{h.d1}"


# --- bugs found (strict xfail: they start passing when fixed) ------------------------------------


@pytest.mark.parametrize(
    "template",
    [
        "/roots/{d2}/{big}",
        "/proof?day={d2}&index=0&tree_size={big}",
        "/proof?leaf_hash={x}&tree_size={big}",
        "/entries/{d2}?start={big}",
    ],
)
def test_integers_beyond_sqlite_are_bad_requests(reads: Api, template: str) -> None:
    url = template.format(d2=reads.h.d2, big=BIG, x=leaf.leaf_hash(reads.h.x).hex())
    reads.reject("GET", url, "bad_request")


@pytest.mark.parametrize("workers", [0, 1])
def test_bodies_are_decoded_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """A POST body is parsed by the strict check only (in this process when it is small or
    there are no body workers, else in a worker): Litestar never decodes one, and the
    handler's `data` is what the check made of it."""
    h = build_history(tmp_path / "data")
    parsed: list[bytes] = []
    decoded: list[str] = []
    strict_parse, litestar_json = leaf.parse_json, Request.json

    def counted_parse(body: bytes) -> Any:
        parsed.append(body)
        return strict_parse(body)

    async def counted_json(self: Request[Any, Any, Any]) -> Any:
        decoded.append(self.url.path)
        return await litestar_json(self)

    monkeypatch.setattr(leaf, "parse_json", counted_parse)
    monkeypatch.setattr(Request, "json", counted_json)
    with serve(h, body_workers=workers) as api:
        r = api.client.post("/prove", json={"record": h.x})
        assert r.status_code == 200 and r.json()["anchor"]["day"] == h.d2
        for prove in (0, 1):
            r = api.client.post(
                f"/records?prove={prove}", json={"records": [rec("once", prove)]}, headers=api.auth
            )
            assert r.status_code == 200 and r.json()["entries"][0]["duplicate"] is False
        big = {"record": {**h.x, "pad": "x" * INLINE_BODY}}
        assert api.client.post("/prove", json=big).status_code == 404
    assert decoded == []
    # Small bodies are checked on the loop; a worker's parses (the big body's) are its own.
    assert len(parsed) == (4 if workers == 0 else 3)


def _log_on(tmp_path: Path, clock: SteadyClock, today: str) -> History:
    data = tmp_path / "data"
    with Log.init(data, iss=ISS, clock=clock) as log:
        log.append([rec("clock", 0)])
    h = History(data, shift_day(today, -2), shift_day(today, -1), today, clock=clock)
    h.token = (data / "writer-token").read_text().strip()
    return h


@pytest.mark.parametrize("workers", [0, 1])
def test_appends_and_heads_take_the_settings_clock(tmp_path: Path, workers: int) -> None:
    """Days and `iat`s come from `Settings.clock`, in this process and in an append worker
    (which is given its time by the service's ClockGuard), not from the system clock."""
    today = "2031-05-17"
    clock = SteadyClock(day_start(today) + 43200)
    h = _log_on(tmp_path, clock, today)
    with serve(h, body_workers=workers) as api:
        for prove in (0, 1):
            r = api.client.post(
                f"/records?prove={prove}", json={"records": [rec("clock", 1)]}, headers=api.auth
            )
            assert r.status_code == 200, r.text
            assert r.json()["entries"][0]["day"] == today
        r = api.client.post("/checkpoint", headers=api.auth)
        claims = head_claims(r.content)
        assert claims["day"] == today
        assert day_start(today) + 43200 <= claims["iat"] <= clock() + 1


def test_background_seals_by_the_settings_clock(tmp_path: Path) -> None:
    """The background work seals a day when the settings' clock passes its midnight."""
    today = "2031-05-17"
    clock = SteadyClock(day_start(shift_day(today, 1)) - 1.5)
    h = _log_on(tmp_path, clock, today)
    with serve(h, background=True, checkpoint_interval=3600.0) as api:
        deadline = time.monotonic() + 30
        r = api.client.get(f"/roots/{today}")
        while time.monotonic() < deadline and r.headers.get("cache-control") != IMMUTABLE:
            time.sleep(0.1)
            r = api.client.get(f"/roots/{today}")
        claims = head_claims(r.content)
        assert (claims["day"], claims["sealed"], claims["tree_size"]) == (today, True, 1)


def test_writers_need_the_token_under_a_root_path(tmp_path: Path) -> None:
    h = build_history(tmp_path / "data")
    app = create_app(Settings(data_dir=h.data, background=False, rate_limit=0, clock=h.clock))
    with TestClient(app, root_path="/anchor") as client:
        before = snapshot(h.data)
        r = client.post("/anchor/records", json={"records": [rec("intruder", 1)]})
        assert r.status_code == 401, f"{r.status_code}: an unauthenticated append: {r.text}"
        assert_error(r, "unauthorized")
        assert snapshot(h.data) == before


def test_405_carries_allow(reads: Api) -> None:
    r = reads.client.delete("/roots")
    assert_error(r, "method_not_allowed")
    assert "GET" in r.headers["allow"]


@pytest.mark.parametrize("template", ["/roots?before=", "/proof?leaf_hash={x}&day="])
def test_empty_day_is_a_bad_request(reads: Api, template: str) -> None:
    reads.reject("GET", template.format(x=leaf.leaf_hash(reads.h.x).hex()), "bad_request")


@pytest.mark.parametrize(
    "template", ["/proof?day={d2}&index=1e0", "/proof?day={d2}&index=1.0", "/roots?limit=5.0"]
)
def test_float_spellings_of_integers_are_bad_requests(reads: Api, template: str) -> None:
    reads.reject("GET", template.format(d2=reads.h.d2), "bad_request")


def test_openapi_documents_the_error_shape(reads: Api) -> None:
    doc = json.loads(reads.client.get("/schema/openapi.json").content)
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if method == "head":  # a HEAD answer has no body
                    assert "content" not in response, (path, status)
                elif status.startswith(("4", "5")):
                    schema = response["content"]["application/json"]["schema"]
                    if "$ref" in schema:
                        name = schema["$ref"].rsplit("/", 1)[-1]
                        schema = doc["components"]["schemas"][name]
                    props = set(schema.get("properties", {}))
                    assert props == {"v", "error", "note"}, (method, path, status, props)
