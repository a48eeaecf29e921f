"""End to end: `capability-anchor serve` as a real process on a free loopback port, driven over
HTTP with httpx, its answers checked with independent code (the Merkle verifier, joserfc for
the JWS) and its data dir reopened with the library after it stopped.

Servers are started by `serverkit` and always stopped (SIGTERM, then SIGKILL) at teardown.
One server (`shared`) answers the tests that only read or append; tests that need their own
flags, their own data dir or that stop the server start their own. The UTC day is always
taken from the server's answers, never from the test's clock.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import signal
import statistics
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import rfc8785
from joserfc import jws as jose
from joserfc.errors import SecurityWarning
from joserfc.jwk import OKPKey

from capability_anchor import merkle
from capability_anchor.audit import audit_store
from capability_anchor.encoding import b64url_decode
from capability_anchor.errors import VerificationError
from capability_anchor.keys import create_key_file
from capability_anchor.leaf import leaf_hash
from capability_anchor.log import Log
from tests.kit.serverkit import (
    Server,
    accepts_connections,
    free_port,
    launch,
    serving,
    start,
    uvicorn_argv,
)

HEAD_TYP = "capability-anchor+jws"
IMMUTABLE = "public, max-age=31536000, immutable"
MAX_BODY = 4 * 1024 * 1024
_serial = iter(range(10**9))


def record(tag: str = "r") -> dict[str, Any]:
    """A fresh Capability Resolution-like record (unique per call, ~250 bytes of leaf)."""
    n = next(_serial)
    return {
        "v": "0.2",
        "sub": f"urn:agent:{tag}:{n}",
        "url": f"https://api{n % 97}.example/cap/{tag}/{n}",
        "status": "ok",
        "checked_at": "2026-11-30T12:00:00Z",
        "evidence": {"record": "sha256:" + hashlib.sha256(f"{tag}{n}".encode()).hexdigest()},
    }


def assert_error(response: httpx.Response, status: int, error: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"v", "error", "note"}, body
    assert body["v"] == "0.2"
    assert body["error"] == error, body
    assert isinstance(body["note"], str) and body["note"]
    return body


def append(client: httpx.Client, server: Server, records: list[Any], prove: bool = False) -> Any:
    response = client.post(
        "/records", params={"prove": 1} if prove else None, json={"records": records},
        headers=server.writer_headers(),
    )  # fmt: skip
    assert response.status_code == 200, response.text
    return response.json()["entries"]


def verify_entry_proof(rec: dict[str, Any], anchor: dict[str, Any], proof: dict[str, Any]) -> None:
    """The entry's proof verifies with the project's RFC 9162 verifier (raises otherwise)."""
    assert proof["type"] == "rfc9162-sha256"
    merkle.verify_inclusion(
        leaf_hash(rec),
        proof["leaf_index"],
        proof["tree_size"],
        [bytes.fromhex(p) for p in proof["path"]],
        bytes.fromhex(anchor["root"]),
    )


@contextlib.contextmanager
def joserfc_eddsa() -> Iterator[None]:
    # joserfc 1.8 warns (SecurityWarning "EdDSA is deprecated via RFC 9864") whenever the
    # `EdDSA` alg name is used; SPEC §4 mandates that name. Warnings are errors in this
    # project, so exactly that warning is ignored, only around the joserfc call.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="EdDSA is deprecated", category=SecurityWarning)
        yield


def joserfc_claims(token: str, jwks: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(protected header, claims) of a head JWS, verified by joserfc with the served key."""
    kid = json.loads(b64url_decode(token.split(".")[0]))["kid"]
    (jwk,) = [k for k in jwks["keys"] if k["kid"] == kid]
    key = OKPKey.import_key(jwk)
    assert key.thumbprint() == kid  # RFC 7638, computed by joserfc
    with joserfc_eddsa():
        verified = jose.deserialize_compact(token, key, algorithms=["EdDSA"])
    header = dict(verified.protected)
    # The protected header is exactly these members, as JCS bytes (SPEC §4).
    assert header == {"alg": "EdDSA", "kid": kid, "typ": HEAD_TYP}
    assert b64url_decode(token.split(".")[0]) == rfc8785.dumps(header)
    return header, json.loads(verified.payload)


def check_head_document(
    response: httpx.Response, jwks: dict[str, Any], iss: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A head document: JCS bytes, no trailing newline; claims = the verified JWS payload."""
    assert response.status_code == 200, response.text
    doc = response.json()
    assert response.content == rfc8785.dumps(doc)
    _, claims = joserfc_claims(doc["jws"], jwks)
    assert {k: v for k, v in doc.items() if k != "jws"} == claims
    assert set(claims) == {"v", "iss", "day", "tree_size", "root", "sealed", "prev", "iat"}
    assert claims["v"] == "0.2"
    assert claims["iss"] == iss
    assert isinstance(claims["iat"], int)
    return doc, claims


def iss_of(server: Server) -> str:
    # `serve` on an empty data dir initialises the log with iss http://host:port.
    return server.url


# --- the shared server ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # --checkpoint-interval 1: background checkpoints come within a couple of seconds.
    # --rate-limit 0: these tests make many requests; the limit has its own server.
    data = tmp_path_factory.mktemp("shared") / "data"
    with serving(data, "--checkpoint-interval", "1", "--rate-limit", "0") as server:
        yield server


@pytest.fixture
def client(shared: Server) -> Iterator[httpx.Client]:
    with shared.client() as c:
        yield c


def test_first_start_initialises_the_log_and_answers(shared: Server, client: httpx.Client) -> None:
    token_path = shared.data / "writer-token"
    stderr = shared.stderr()
    assert "initialised a log" in stderr
    assert str(token_path) in stderr  # the operator is told where the writer token is
    assert token_path.stat().st_mode & 0o077 == 0
    assert (shared.data / "log.sqlite3").exists()
    health = client.get("/healthz")
    assert health.status_code == 200
    assert health.json()["status"] == "ok"
    jwks = client.get("/keys").json()
    assert len(jwks["keys"]) == 1
    listing = client.get("/roots").json()
    assert listing == {"v": "0.2", "iss": iss_of(shared), "days": []}
    assert_error(client.get("/roots/latest"), 404, "not_found")


def test_writers_need_the_token(shared: Server, client: httpx.Client) -> None:
    rec = record("auth")
    body = {"records": [rec]}
    assert_error(client.post("/records", json=body), 401, "unauthorized")
    bad = {"Authorization": "Bearer " + "x" * 43}
    assert_error(client.post("/records", json=body, headers=bad), 401, "unauthorized")
    assert_error(client.post("/checkpoint"), 401, "unauthorized")
    # Nothing of the refused requests was stored: the record is new when the writer sends it.
    (entry,) = append(client, shared, [rec])
    assert entry["leaf_hash"] == leaf_hash(rec).hex()
    assert entry["duplicate"] is False
    (again,) = append(client, shared, [rec])
    assert again == {**entry, "duplicate": True}


def test_prove_entries_verify_and_match_get_proof(shared: Server, client: httpx.Client) -> None:
    records = [record("prove") for _ in range(37)]
    entries = append(client, shared, records, prove=True)
    assert len(entries) == len(records)
    indices = [e["leaf_index"] for e in entries]
    assert indices == list(range(indices[0], indices[0] + len(records)))
    for rec, entry in zip(records, entries, strict=True):
        assert entry["leaf_hash"] == leaf_hash(rec).hex()
        anchor, proof = entry["anchor"], entry["proof"]
        assert set(anchor) == {"day", "root", "url"}
        assert set(proof) == {"type", "leaf_index", "tree_size", "path"}
        assert anchor["day"] == entry["day"]
        assert proof["leaf_index"] == entry["leaf_index"]
        assert proof["tree_size"] > indices[-1]  # the head covers the whole batch
        assert anchor["url"] == f"{iss_of(shared)}/roots/{anchor['day']}/{proof['tree_size']}"
        verify_entry_proof(rec, anchor, proof)
    # GET /proof against the same head gives the same answer; so does the leaf-hash lookup.
    entry = entries[5]
    size = entry["proof"]["tree_size"]
    by_index = client.get(
        "/proof", params={"day": entry["day"], "index": entry["leaf_index"], "tree_size": size}
    ).json()
    assert by_index == {"v": "0.2", "anchor": entry["anchor"], "proof": entry["proof"]}
    by_hash = client.get(
        "/proof", params={"leaf_hash": entry["leaf_hash"], "day": entry["day"], "tree_size": size}
    ).json()
    assert by_hash == by_index
    # A wrong leaf does not verify against the served proof.
    with pytest.raises(VerificationError):
        verify_entry_proof(records[6], entry["anchor"], entry["proof"])


def test_heads_verify_with_joserfc_and_match_the_anchor(
    shared: Server, client: httpx.Client
) -> None:
    records = [record("head") for _ in range(5)]
    entries = append(client, shared, records, prove=True)
    anchor, proof = entries[-1]["anchor"], entries[-1]["proof"]
    day, size = anchor["day"], proof["tree_size"]
    jwks = client.get("/keys").json()
    iss = iss_of(shared)

    at_size = client.get(f"/roots/{day}/{size}")
    assert at_size.headers["cache-control"] == IMMUTABLE
    doc, claims = check_head_document(at_size, jwks, iss)
    assert (claims["day"], claims["tree_size"], claims["root"]) == (day, size, anchor["root"])
    assert claims["sealed"] is False  # the /roots/<day>/<size> url form says unsealed
    assert claims["prev"] is None  # the log's first day
    assert anchor["url"].endswith(f"/roots/{day}/{size}")

    newest = client.get(f"/roots/{day}")
    assert newest.headers["cache-control"] == "no-cache"
    _, latest = check_head_document(newest, jwks, iss)
    assert latest["day"] == day and latest["sealed"] is False
    assert latest["tree_size"] >= size
    # Conditional GET: the same bytes answer 304 to their ETag.
    etag = newest.headers["etag"]
    again = client.get(f"/roots/{day}", headers={"If-None-Match": etag})
    assert again.status_code in (200, 304)  # 200 only if a checkpoint came in between
    if again.status_code == 304:
        assert again.content == b""
    # The newest head extends the anchored one (RFC 9162 consistency, verified here).
    if latest["tree_size"] > size:
        path = client.get(
            "/consistency", params={"day": day, "first": size, "second": latest["tree_size"]}
        ).json()["path"]
        merkle.verify_consistency(
            size,
            latest["tree_size"],
            bytes.fromhex(anchor["root"]),
            bytes.fromhex(latest["root"]),
            [bytes.fromhex(p) for p in path],
        )
    # A head that does not exist.
    assert_error(client.get(f"/roots/{day}/{10**9}"), 404, "not_found")
    # joserfc refuses the head under another key (the check above is not vacuous).
    other = OKPKey.generate_key("Ed25519")
    with joserfc_eddsa(), pytest.raises(Exception, match="signature"):
        jose.deserialize_compact(doc["jws"], other, algorithms=["EdDSA"])


def test_background_checkpoint_covers_new_entries(shared: Server, client: httpx.Client) -> None:
    records = [record("bg") for _ in range(20)]
    entries = append(client, shared, records)  # no prove: only the background publishes
    day = entries[0]["day"]
    needed = max(e["leaf_index"] for e in entries) + 1
    deadline = time.monotonic() + 8.0  # interval 1 s + a 1 s tick, with room for a busy box
    covering: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = client.get(f"/roots/{day}")
        if response.status_code == 200 and response.json()["tree_size"] >= needed:
            covering = response.json()
            break
        time.sleep(0.1)
    assert covering, f"no head of {day} covered {needed} entries within 8 s"
    assert covering["sealed"] is False
    jwks = client.get("/keys").json()
    _, claims = joserfc_claims(covering["jws"], jwks)
    assert claims["tree_size"] >= needed
    for rec, entry in zip(records, entries, strict=True):
        answer = client.get("/proof", params={"day": day, "index": entry["leaf_index"]}).json()
        size = answer["proof"]["tree_size"]
        assert size >= needed
        assert answer["anchor"]["url"] == f"{iss_of(shared)}/roots/{day}/{size}"
        verify_entry_proof(rec, answer["anchor"], answer["proof"])


def test_body_limits(shared: Server, client: httpx.Client) -> None:
    writer = shared.writer_headers()
    before = append(client, shared, [record("limit")])[0]
    huge = b'{"records":[{"x":"' + b"a" * MAX_BODY + b'"}]}'
    json_type = {"content-type": "application/json"}
    response = client.post("/records", content=huge, headers=writer | json_type)
    assert_error(response, 413, "too_large")
    # Also without a Content-Length (chunked): the limit holds while the body streams in.
    chunked = client.post("/records", content=iter([huge]), headers=writer | json_type)
    assert_error(chunked, 413, "too_large")
    assert_error(client.post("/prove", content=huge, headers=json_type), 413, "too_large")
    too_many = {"records": [record("many") for _ in range(1001)]}
    assert_error(client.post("/records", json=too_many, headers=writer), 400, "bad_request")
    assert_error(client.post("/records", json={"records": []}, headers=writer), 400, "bad_request")
    # None of the refused requests stored anything: the next entry takes the next index.
    after = append(client, shared, [record("limit")])[0]
    assert (after["day"], after["leaf_index"]) == (before["day"], before["leaf_index"] + 1)


def test_errors_are_json_with_a_stable_code(shared: Server, client: httpx.Client) -> None:
    assert_error(client.get("/nowhere"), 404, "not_found")
    assert_error(client.delete("/roots"), 405, "method_not_allowed")
    assert_error(client.get("/roots/not-a-day"), 400, "bad_request")
    assert_error(client.get("/proof", params={"day": "2026-01-01"}), 400, "bad_request")
    writer = shared.writer_headers()
    bad_json = client.post(
        "/records", content=b'{"records":[{"a":1,"a":2}]}', headers=writer
    )  # duplicate member names: SPEC §2
    assert bad_json.status_code == 400
    assert bad_json.json()["error"] in ("bad_request", "invalid_record")


# --- servers of their own ----------------------------------------------------------------------


def test_rate_limit_applies_to_public_requests_not_writers(tmp_path: Path) -> None:
    with serving(tmp_path / "data", "--rate-limit", "5") as server, server.client() as client:
        time.sleep(1.1)  # the readiness probe took a token; let the bucket refill (cap 5)
        statuses: list[int] = []
        limited: httpx.Response | None = None
        began = time.monotonic()
        for _ in range(30):
            response = client.get("/roots")
            statuses.append(response.status_code)
            if response.status_code == 429 and limited is None:
                limited = response
        elapsed = time.monotonic() - began
        assert set(statuses) <= {200, 429}
        assert statuses[:5] == [200] * 5, statuses
        assert statuses.count(200) <= 5 + int(elapsed * 5) + 1, (statuses, elapsed)
        assert limited is not None
        assert_error(limited, 429, "rate_limited")
        assert int(limited.headers["retry-after"]) >= 1
        # Writers are not limited, even from an address whose public bucket is empty: writes
        # interleaved with public GETs that are still refused all succeed.
        public: list[int] = []
        for _ in range(10):
            public.append(client.get("/roots").status_code)
            append(client, server, [record("rl")])
        assert public[0] == 429, public
        time.sleep(int(limited.headers["retry-after"]) + 0.1)
        assert client.get("/roots").status_code == 200


def test_sigterm_during_a_batch_loses_nothing_acknowledged(tmp_path: Path) -> None:
    data = tmp_path / "data"
    records = [record("term") for _ in range(1000)]
    payload = json.dumps({"records": records}).encode()
    server = start(data)
    sent = threading.Event()
    outcome: dict[str, Any] = {}

    def body() -> Iterator[bytes]:
        yield payload
        sent.set()  # resumed once the last byte was handed to the socket

    def post() -> None:
        try:
            with server.client(timeout=20.0) as c:
                response = c.post(
                    "/records",
                    content=body(),
                    headers=server.writer_headers()
                    | {"content-type": "application/json", "content-length": str(len(payload))},
                )
                outcome["status"] = response.status_code
                outcome["body"] = response.content
        except httpx.TransportError as exc:  # the connection closed under it: allowed
            outcome["error"] = exc
        finally:
            sent.set()

    thread = threading.Thread(target=post)
    try:
        thread.start()
        assert sent.wait(10.0)
        server.signal(signal.SIGTERM)
        code = server.wait(10.0)
        thread.join(20.0)
        assert not thread.is_alive()
        # Exit 0, or the SIGTERM uvicorn re-raises after its graceful shutdown (see
        # test_serve_exits_0_on_sigterm) -- never a crash.
        assert code in (0, -signal.SIGTERM), (code, server.stderr())
        assert "Traceback" not in server.stderr()
        # The app's shutdown ran: the log was closed (SQLite removes the WAL on last close).
        assert not (data / "log.sqlite3-wal").exists()
    finally:
        server.kill()
        thread.join(20.0)
    assert "status" in outcome or "error" in outcome, outcome

    with Log.open(data, background_checkpoints=False) as log:
        day = log.today()
        stored = {e.leaf_index: e.leaf_hash.hex() for e in log.store.entries(day, 0, 2000)}
        if outcome.get("status") == 200:
            entries = json.loads(outcome["body"])["entries"]
            assert len(entries) == len(records)
            for rec, entry in zip(records, entries, strict=True):
                assert entry["leaf_hash"] == leaf_hash(rec).hex()
                with log.store.read():
                    where = log.store.existing(entry["day"], [bytes.fromhex(entry["leaf_hash"])])
                assert where == {bytes.fromhex(entry["leaf_hash"]): entry["leaf_index"]}
        else:
            # Not acknowledged: the batch is one transaction, so all of it or none is stored.
            assert "status" not in outcome or outcome["status"] != 200, outcome
        assert len(stored) in (0, len(records)), len(stored)
        report = audit_store(log)
        assert report.ok, report.problems
        count = len(stored)

    # A restart on the same data dir carries on: indices continue after the stored ones.
    with serving(data, port=server.port) as again, again.client() as client:
        (entry,) = append(client, again, [record("after")])
        assert entry["leaf_index"] == count


def test_serve_exits_0_on_sigterm(tmp_path: Path) -> None:
    server = start(tmp_path / "data")
    try:
        assert server.stop() == 0
    finally:
        server.kill()


def test_startup_self_check_runs_before_the_port_opens(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    with serving(data, port=port) as server, server.client() as client:
        append(client, server, [record("key")], prove=True)  # a head is published
    key_file = data / "signing-key.jwk"
    key_file.unlink()
    create_key_file(key_file)  # another key: it cannot verify the published head

    server = launch(data, port=port)
    accepted = 0
    try:
        deadline = time.monotonic() + 20.0
        while server.alive() and time.monotonic() < deadline:
            accepted += accepts_connections(port, timeout=0.05)
            time.sleep(0.01)
        code = server.wait(0.1)
    finally:
        server.kill()
    stderr = server.stderr()
    assert code is not None and code != 0, (code, stderr)
    assert code == 1, stderr  # a refused operation (SPEC §10), not a crash or usage error
    assert "key" in stderr and "does not verify the newest published head" in stderr, stderr
    assert "Traceback" not in stderr
    assert accepted == 0, "the port accepted connections before the self-check refused"
    assert not accepts_connections(port)


def test_production_workers_answer_keep_alive_requests_promptly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    Log.init(data, iss="https://resolver.example").close()
    port = free_port()
    env = {"CAPABILITY_ANCHOR_DATA": str(data)}
    with (
        serving(data, argv=uvicorn_argv(port, 2), env=env, port=port) as server,
        server.client() as client,
    ):
        assert client.get("/keys").status_code == 200  # the connection is open and warm
        took = []
        for _ in range(15):
            began = time.perf_counter()
            assert client.get("/keys").status_code == 200
            took.append(time.perf_counter() - began)
    # `serve` answers these in well under a millisecond; 20 ms leaves room for a busy machine.
    assert statistics.median(took) < 0.020, took
