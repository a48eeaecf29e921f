"""HTTP details against a real server process on 127.0.0.1 (`capability-anchor serve`, and the
operations guide's production form `uvicorn ... --workers 2`): HEAD, bounded error notes,
bodies read before answering, header and body timeouts, WWW-Authenticate, and the event loop
kept free while hostile bodies arrive at the rate limit."""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar.testing import TestClient

from capability_anchor.api import Settings, create_app
from capability_anchor.log import Log, utc_day
from tests.kit.obskit import observation
from tests.kit.serverkit import HOST, Server, serving, uvicorn_argv


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A serve process with a few entries and a published head; timeouts short for tests."""
    data = tmp_path_factory.mktemp("edge") / "data"
    with serving(data, "--rate-limit", "0", "--header-timeout", "1", "--body-timeout", "1") as srv:
        with srv.client() as client:
            r = client.post(
                "/records",
                json={"records": [observation(i) for i in range(5)]},
                headers=srv.writer_headers(),
            )
            assert r.status_code == 200, r.text
            assert client.post("/checkpoint", headers=srv.writer_headers()).status_code == 200
        yield srv


def raw_exchange(
    port: int, request: bytes, *, timeout: float = 10.0, until_closed: bool = False
) -> bytes:
    """Send all of `request` (headers and body) on one connection, then read until the server
    closes it or (unless `until_closed`) the answer is complete; a reset while sending or
    reading fails the test."""
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.sendall(request)
        if not until_closed:
            return read_response(sock)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        return data


def read_response(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.lower().split(b"\r\n")
        if line.startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def post(path: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: {HOST}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    lines.append("Content-Type: application/json")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


# --- HEAD ------------------------------------------------------------------------------------


def get_routes(server: Server) -> list[str]:
    day = utc_day(time.time())
    return [
        "/healthz",
        "/roots",
        "/roots/latest",  # 404: nothing sealed yet
        f"/roots/{day}",
        f"/roots/{day}/5",
        f"/roots/{day}/timestamps",
        f"/roots/{day}/timestamp",
        f"/proof?day={day}&index=2",
        f"/consistency?day={day}&first=5&second=5",
        f"/entries/{day}",
        "/keys",
        "/record?id=nobody",
        "/schema/openapi.json",
        "/no-such-route",
    ]


def test_head_answers_like_get_without_a_body(server: Server) -> None:
    with server.client() as client:
        for url in get_routes(server):
            got = client.get(url)
            head = client.head(url)
            assert head.status_code == got.status_code, url
            assert head.content == b"", url
            same = {k: v for k, v in got.headers.items() if k != "date"}
            assert {k: v for k, v in head.headers.items() if k != "date"} == same, url
        # A route without GET has no HEAD either.
        assert client.head("/records").status_code == 405
        assert client.head("/prove").status_code == 405


@pytest.fixture(scope="module")
def asgi_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The production form (`uvicorn ... --workers 2`) on an empty log."""
    data = tmp_path_factory.mktemp("edge-asgi") / "data"
    Log.init(data, iss="https://resolver.example").close()
    with _uvicorn(data) as srv:
        yield srv


@pytest.fixture(params=["serve", "uvicorn"])
def either(request: pytest.FixtureRequest) -> Server:
    srv: Server = request.getfixturevalue("server" if request.param == "serve" else "asgi_server")
    return srv


def test_head_keeps_the_connection(either: Server) -> None:
    """HEAD answers are whole (no body to wait for): a second HEAD and a GET on the same
    connection are answered."""
    with socket.create_connection((HOST, either.port), timeout=5) as sock:
        for method in ("HEAD", "HEAD", "GET"):
            sock.sendall(f"{method} /healthz HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
            answer = read_response(sock) if method == "GET" else read_head(sock)
            assert answer.startswith(b"HTTP/1.1 200 OK\r\n"), (method, answer)
            assert (b'"status":"ok"' in answer) == (method == "GET"), (method, answer)


def test_pipelined_requests_are_answered_in_order(either: Server) -> None:
    one = f"HTTP/1.1\r\nHost: {HOST}\r\n"
    sent = f"GET /healthz {one}\r\nHEAD /keys {one}\r\nGET /keys {one}Connection: close\r\n\r\n"
    answers = raw_exchange(either.port, sent.encode(), until_closed=True)
    healthz, rest = answers.split(b"\r\n\r\n", 1)
    assert healthz.startswith(b"HTTP/1.1 200 OK\r\n") and rest.startswith(b'{"v":')
    keys_head, keys = rest.partition(b"}HTTP/1.1 ")[2].split(b"\r\n\r\n", 1)
    assert keys_head.startswith(b"200 OK\r\n") and b"content-length" in keys_head
    assert keys.startswith(b"HTTP/1.1 200 OK\r\n"), keys
    assert b"connection: close" in keys and keys.endswith(b"}"), keys


def read_head(sock: socket.socket) -> bytes:
    """One answer's status line and headers, byte by byte (a HEAD answer has no body)."""
    data = b""
    while not data.endswith(b"\r\n\r\n"):
        chunk = sock.recv(1)
        if not chunk:
            break
        data += chunk
    return data


# --- error notes -----------------------------------------------------------------------------


def test_error_notes_are_bounded(server: Server, tmp_path: Path) -> None:
    # The 70,000-character path, through the server ...
    request = f"GET /roots/{'9' * 70_000} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()
    answer = raw_exchange(server.port, request)
    assert answer.startswith(b"HTTP/1.1 400"), answer[:100]
    assert len(answer) < 1000
    with server.client() as client:
        r = client.get("/roots/" + "9" * 10_000)
    assert r.status_code == 400
    note = r.json()["note"]
    assert len(note) == 300 and note.endswith("\u2026"), note
    assert len(r.content) < 500
    # ... and through the app itself (no server limit on the request line).
    Log.init(tmp_path / "data", iss="https://resolver.example").close()
    app = create_app(Settings(data_dir=tmp_path / "data", background=False, rate_limit=0))
    with TestClient(app) as client:
        r = client.get("/roots/" + "x" * 60_000)
    assert r.status_code == 400
    assert len(r.content) < 500 and r.json()["note"].endswith("\u2026")


# --- bodies are read before the answer -------------------------------------------------------


def test_early_answers_read_the_body_first(server: Server) -> None:
    """Each of these is answered before the app reads the body (or without it reading one);
    the whole body is still read, so the client sees the answer, not a reset, and the
    connection stays usable."""
    big = b'{"records":[' + b",".join([b'{"a":1}'] * 100_000) + b"]}"  # ~800 KB
    token = {"Authorization": f"Bearer {server.token()}"}
    cases = [
        ("/checkpoint", big, token, b"200 OK"),
        ("/records", big, {}, b"401 Unauthorized"),
        ("/records", big, {"Authorization": "Bearer wrong"}, b"401 Unauthorized"),
        ("/prove", b'{"record":{"a":' + b" " * 400_000 + b"1}}", {}, b"413"),
    ]
    for path, body, headers, status in cases:
        with socket.create_connection((HOST, server.port), timeout=10) as sock:
            sock.sendall(post(path, body, headers))
            answer = read_response(sock)
            assert status in answer.split(b"\r\n", 1)[0], (path, answer[:200])
            if b"401" in status:
                assert b"www-authenticate: Bearer" in answer
            # The same connection answers the next request.
            sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
            assert b"200 OK" in read_response(sock)


def test_rate_limited_posts_read_the_body_first(tmp_path: Path) -> None:
    with serving(tmp_path / "data", "--rate-limit", "1") as srv:
        body = b'{"record":{"a":' + b" " * 50_000 + b"1}}"
        with socket.create_connection((HOST, srv.port), timeout=10) as sock:
            answers = []
            for _ in range(3):
                sock.sendall(post("/prove", body))
                answers.append(read_response(sock).split(b"\r\n", 1)[0])
        assert any(b"429" in a for a in answers), answers


# --- timeouts --------------------------------------------------------------------------------


def closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        while True:
            if not sock.recv(4096):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_slow_headers_are_cut_off(server: Server) -> None:
    """Slowloris: 100 connections each trickling a header; with --header-timeout 1 every one
    is closed within a few seconds, and the service answers throughout."""
    socks = []
    for _ in range(100):
        sock = socket.create_connection((HOST, server.port), timeout=5)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        socks.append(sock)
    started = time.monotonic()
    open_socks = list(socks)
    with server.client() as client:
        while open_socks and time.monotonic() - started < 6:
            for sock in list(open_socks):
                try:
                    sock.sendall(b"X")
                except OSError:
                    open_socks.remove(sock)
            assert client.get("/healthz").status_code == 200
            time.sleep(0.2)
    elapsed = time.monotonic() - started
    for sock in socks:
        sock.close()
    print(f"100 slow-header connections closed within {elapsed:.1f} s")
    assert not open_socks, f"{len(open_socks)} slow connections still open after {elapsed:.1f} s"


def test_an_idle_connection_is_closed_after_the_header_timeout(server: Server) -> None:
    with socket.create_connection((HOST, server.port), timeout=5) as sock:
        assert closed_by_server(sock, within=4)


def test_a_slow_body_gets_400_and_the_connection_closes(server: Server) -> None:
    with socket.create_connection((HOST, server.port), timeout=5) as sock:
        sock.sendall(post("/prove", b'{"record":{"a":' + b" " * 1000 + b"1}}")[:-500])
        started = time.monotonic()
        answer = read_response(sock)
        elapsed = time.monotonic() - started
        assert b"400 Bad Request" in answer and b"connection: close" in answer.lower()
        assert b"did not arrive within 1 s" in answer
        assert 0.5 < elapsed < 4
        assert closed_by_server(sock, within=2)


# --- the event loop stays free -----------------------------------------------------------------


def hostile_prove_bodies() -> list[bytes]:
    """The issue's 4 MiB array of zeros (refused by size) and one just under the /prove cap
    (parsed, then refused as too large a leaf): each costs the service real work."""
    just_under = b'{"record":{"a":[' + b",".join([b"0"] * 32_000) + b"]}}"
    assert len(just_under) < 64 * 1024
    return [b'{"record":{"a":[' + b",".join([b"0"] * 2_000_000) + b"]}}", just_under]


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def test_attack_a_server_paused_while_a_body_arrives_does_not_blame_the_client(
    server: Server,
) -> None:
    """The service stopped (SIGSTOP, a frozen VM) after a request's headers, before its
    body, which the client sent at once: resumed past the body's deadline, it answers the
    request, not 400 "did not arrive" (its expired timer ran before its read)."""
    head, _, body = post("/prove", json.dumps({"record": observation(2)}).encode()).partition(
        b"\r\n\r\n"
    )
    with socket.create_connection((HOST, server.port), timeout=10) as sock:
        sock.sendall(head + b"\r\n\r\n")
        time.sleep(0.3)  # the app reads the body now
        os.killpg(server.pid, signal.SIGSTOP)
        try:
            sock.sendall(body)
            time.sleep(2.0)  # past the 1 s body deadline
        finally:
            os.killpg(server.pid, signal.SIGCONT)
        answer = read_response(sock)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]


@pytest.mark.parametrize("form", ["serve", "uvicorn"])
def test_healthz_stays_fast_while_hostile_bodies_arrive(tmp_path: Path, form: str) -> None:
    data = tmp_path / "data"
    Log.init(data, iss="https://resolver.example").close()
    ctx = serving(data) if form == "serve" else _uvicorn(data)
    bodies = hostile_prove_bodies()
    stop = threading.Event()
    outcomes: dict[int, int] = {}
    sent_at: list[float] = []
    refusals: list[float] = []

    with ctx as srv:

        def attack() -> None:
            # The default rate limit is 100/s per address: send at it.
            with httpx.Client(base_url=srv.url, timeout=30) as client:
                n = 0
                while not stop.is_set():
                    body = bodies[0 if n % 4 == 0 else 1]
                    started = time.perf_counter()
                    r = client.post(
                        "/prove", content=body, headers={"Content-Type": "application/json"}
                    )
                    if n % 4 == 0:
                        refusals.append(time.perf_counter() - started)
                    outcomes[r.status_code] = outcomes.get(r.status_code, 0) + 1
                    sent_at.append(started)
                    n += 1
                    time.sleep(max(0.0, 0.04 - (time.perf_counter() - started)))

        # Four senders pacing 100/s between them: the default rate limit per address.
        attackers = [threading.Thread(target=attack) for _ in range(4)]
        for attacker in attackers:
            attacker.start()
        latencies = []
        try:
            # From another loopback address, so the attacker's rate limit is not ours.
            transport = httpx.HTTPTransport(local_address="127.0.0.2")
            with httpx.Client(base_url=srv.url, timeout=30, transport=transport) as client:
                time.sleep(0.5)
                deadline = time.monotonic() + 6
                while time.monotonic() < deadline:
                    started = time.perf_counter()
                    assert client.get("/healthz").status_code == 200
                    latencies.append(time.perf_counter() - started)
                    time.sleep(0.02)
        finally:
            stop.set()
            for attacker in attackers:
                attacker.join()
        assert "Traceback" not in srv.stderr()
    p50, p99 = statistics.median(latencies), percentile(latencies, 0.99)
    rate = len(sent_at) / (max(sent_at) - min(sent_at))
    print(
        f"{form}: /healthz p50 {p50 * 1000:.1f} ms p99 {p99 * 1000:.1f} ms max "
        f"{max(latencies) * 1000:.1f} ms over {len(latencies)} requests; hostile /prove "
        f"answers {outcomes} ({rate:.0f}/s); 4 MiB body refused in median "
        f"{statistics.median(refusals) * 1000:.1f} ms (max {max(refusals) * 1000:.1f} ms)"
    )
    assert set(outcomes) <= {400, 413, 429, 503}, outcomes
    assert outcomes.get(413, 0) > 0 and outcomes.get(400, 0) > 0, outcomes
    # Generous bounds for a shared 2-core machine; the goals (50 ms, 100 ms) are in the bench.
    assert p99 < 0.5, latencies
    assert statistics.median(refusals) < 0.5


def _uvicorn(data: Path) -> Any:
    from tests.kit.serverkit import free_port

    port = free_port()
    return serving(
        data,
        port=port,
        argv=uvicorn_argv(port, 2),
        env={"CAPABILITY_ANCHOR_DATA": str(data)},
    )


def test_a_body_checked_in_the_worker_gives_the_same_answers(server: Server) -> None:
    with server.client() as client:
        r = client.post("/prove", content=b'{"record":{"a":1,"a":2}}')
        assert r.status_code == 400
        assert r.json()["note"] == "invalid JSON: duplicate member name 'a'"
        r = client.post(
            "/records",
            content=json.dumps({"records": [observation(1), observation(2, b=1e300)]}),
            headers=server.writer_headers(),
        )
        assert r.status_code == 400 and r.json()["error"] == "invalid_record"
        # Counted from 1, like the CLI's `line N`.
        assert r.json()["note"].startswith("record 2: invalid record at /b: number 1e+300")


def test_expect_continue_gets_a_final_answer_without_the_body(server: Server) -> None:
    """curl sends `Expect: 100-continue` for large bodies: a 413 goes out at once, without
    asking for (or waiting for) the 4 MiB, and the connection is not reused."""
    headers = (
        f"POST /prove HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {4 * 1024 * 1024}\r\nExpect: 100-continue\r\n\r\n"
    ).encode()
    with socket.create_connection((HOST, server.port), timeout=5) as sock:
        started = time.monotonic()
        sock.sendall(headers)
        answer = read_response(sock)
        assert time.monotonic() - started < 1
        assert answer.startswith(b"HTTP/1.1 413"), answer[:100]
        assert b"100 Continue" not in answer
        assert b"connection: close" in answer.lower()


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def test_a_killed_body_worker_is_replaced(tmp_path: Path) -> None:
    import os
    import signal

    with serving(tmp_path / "data", "--rate-limit", "0") as srv:
        with srv.client() as client:
            assert client.post("/prove", json={"record": {"a": 1}}).status_code == 404
            # The forkserver is the server's child; the workers are the forkserver's.
            workers = [w for f in children(srv.pid) for w in children(f)]
            assert workers, "no body-check worker found"
            for worker in workers:
                os.kill(worker, signal.SIGKILL)
            time.sleep(0.5)
            codes = [client.post("/prove", json={"record": {"a": 1}}).status_code for _ in range(3)]
        assert codes[-1] == 404 and set(codes) <= {404, 503}, codes
        assert "Traceback" not in srv.stderr()


def test_the_production_form_takes_its_timeouts_from_the_environment(tmp_path: Path) -> None:
    data = tmp_path / "data"
    Log.init(data, iss="https://resolver.example").close()
    from tests.kit.serverkit import free_port

    port = free_port()
    env = {
        "CAPABILITY_ANCHOR_DATA": str(data),
        "CAPABILITY_ANCHOR_HEADER_TIMEOUT": "1",
        "CAPABILITY_ANCHOR_BODY_TIMEOUT": "1",
    }
    with serving(data, port=port, argv=uvicorn_argv(port, 2), env=env) as srv:
        with socket.create_connection((HOST, srv.port), timeout=5) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            started = time.monotonic()
            assert closed_by_server(sock, within=4)
            assert time.monotonic() - started < 3
        with socket.create_connection((HOST, srv.port), timeout=5) as sock:
            sock.sendall(post("/prove", b'{"record":{"a":' + b" " * 1000 + b"1}}")[:-500])
            answer = read_response(sock)
            assert b"400 Bad Request" in answer and b"did not arrive within 1 s" in answer


def test_a_full_body_queue_answers_busy() -> None:
    """The pool itself (real worker processes): with room for one body, a second one sent
    while the first is being checked is refused at once, and the next one is checked. (The
    second is over INLINE_BODY: a smaller one is checked on the loop, never queued.)"""
    import asyncio

    from capability_anchor.api.bodies import INLINE_BODY, BodyChecker, Busy

    slow = b'{"records":[' + b",".join([b'{"a":1}'] * 200_000) + b"]}"
    big = b'{"record":{"a":1,"pad":"' + b"x" * INLINE_BODY + b'"}}'

    async def run() -> tuple[str, str, str]:
        checker = BodyChecker(workers=1, queue=1)
        checker.start()
        try:
            first = asyncio.create_task(checker.check("records", slow, "https://x.example", 1000))
            await asyncio.sleep(0.05)
            try:
                await checker.check("record", big, "https://x.example", 1000)
                second = "checked"
            except Busy:
                second = "busy"
            code, _ = await first
            third, _ = await checker.check("record", b'{"record":{"a":1}}', "https://x", 1000)
            return code, second, third
        finally:
            checker.stop()

    assert asyncio.run(run()) == ("bad_request", "busy", "ok")


def test_expect_continue_bodies_that_are_read_keep_the_connection(server: Server) -> None:
    body = json.dumps({"records": [observation(i, "e") for i in range(3)]}).encode()
    headers = (
        f"POST /records HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {server.token()}\r\n"
        f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n"
    ).encode()
    with socket.create_connection((HOST, server.port), timeout=5) as sock:
        sock.sendall(headers)
        interim = b""
        while b"\r\n\r\n" not in interim:
            interim += sock.recv(4096)
        assert interim.startswith(b"HTTP/1.1 100"), interim
        sock.sendall(body)
        answer = read_response(sock)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        assert b"connection: close" not in answer.lower()
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
        assert b"200 OK" in read_response(sock)


def test_proof_answers_are_rfc8785_bytes(tmp_path: Path) -> None:
    """`/proof`, `/prove` and `/consistency` answers skip the rfc8785 package; their bytes
    must not change."""
    import rfc8785

    from capability_anchor.api.caching import answer as _answer
    from capability_anchor.api.models import ConsistencyAnswer, ProofAnswer

    with Log.init(tmp_path / "data", iss="https://resolver.example", records="any") as log:
        log.public_url = "https://r\u00e9solver.example/anchor"
        results = log.append([{"n": i, "s": "\u20ac\n"} for i in range(300)])
        log.checkpoint()
        answers = [log.proof(r.day, r.leaf_index) for r in results[::37]]
        answers.append(log.proof_by_leaf_hash(results[5].leaf_hash))
        answers.append(log.consistency(results[0].day, 7, 300))
    for answer in answers:
        model = ConsistencyAnswer if "first" in answer else ProofAnswer
        assert _answer(model, answer) == rfc8785.dumps(answer)


# --- one spelling per path -------------------------------------------------------------------


def slash_aliases(server: Server, client: httpx.Client) -> list[tuple[str, str]]:
    """(method, path with a trailing slash) over every route family, the spelling without
    the slash being a real resource for the GETs that can have one."""
    day = utc_day(time.time())
    size = client.get(f"/roots/{day}").json().get("tree_size", 5)
    gets = [
        "/healthz",
        "/roots",
        "/roots/latest",
        f"/roots/{day}",
        f"/roots/{day}/{size}",
        f"/roots/{day}/timestamps",
        f"/roots/{day}/timestamp",
        f"/roots/{day}/tile/0/000.p/{size}",
        f"/entries/{day}",
        "/keys",
        "/record",
        "/proof",
        "/consistency",
        "/history/checkpoint",
        "/history/checkpoint/1",
        "/history/tile/0/000",
        "/history/tile/0/000.p/1",
        "/history/proof",
        "/history/vkey",
        "/history/policy",
        "/metrics",
        "/schema",
        "/schema/openapi.json",
    ]
    posts = ["/records", "/checkpoint", "/prove"]
    return (
        [("GET", f"{p}/") for p in gets]
        + [("POST", f"{p}/") for p in posts]
        + [
            ("GET", f"/roots/{day}//"),
        ]
    )


def test_attack_trailing_slash_aliases_are_404_and_never_cached(server: Server) -> None:
    # The red team's finding: /history/tile/0/000/ answered 200 with immutable caching, a
    # second cacheable copy of every resource. Every alias is now one uncacheable 404.
    with server.client() as client:
        assert client.get("/history/tile/0/000.p/1").status_code == 200  # the one spelling
        for method, path in slash_aliases(server, client):
            for sent in (method, "HEAD") if method == "GET" else (method,):
                answer = client.request(sent, path, headers=server.writer_headers())
                assert answer.status_code == 404, (sent, path, answer.text)
                assert answer.headers["cache-control"] == "no-store", path
                assert "etag" not in answer.headers, path
                if sent != "HEAD":
                    body = answer.json()
                    assert body["error"] == "not_found", path
                    assert f"its one spelling is {path.rstrip('/') or '/'}," in body["note"]
        # The home page is `/` itself, and keeps answering; `//` (which httpx would read as
        # a network-path reference) is sent by hand.
        assert client.get("/").status_code == 200
    answer = raw_exchange(server.port, b"GET // HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 404 ") and b"cache-control: no-store" in answer.lower()
