"""Starting and stopping the service as an operator does, with real processes on 127.0.0.1:
no implicit log, a taken port, "serving on" only once connections work, `tools/dev.py run`
forwarding signals, and the access and event log in both forms."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.kit import paths
from tests.kit.logkit import run_cli
from tests.kit.obskit import observation
from tests.kit.serverkit import (
    CLI,
    HOST,
    accepts_connections,
    clean_env,
    free_port,
    launch,
    serve_argv,
    serving,
    uvicorn_argv,
)

ROOT = paths.ROOT
DEV = ROOT / "tools" / "dev.py"


def _record(n: int) -> dict[str, object]:
    return observation(n)


def _exits(server_proc: subprocess.Popen[bytes], timeout: float = 20) -> int:
    try:
        return server_proc.wait(timeout)
    except subprocess.TimeoutExpired:
        server_proc.kill()
        server_proc.wait()
        raise


def test_serve_on_a_missing_data_dir_is_exit_2_and_creates_nothing(tmp_path: Path) -> None:
    data = tmp_path / "nope"
    port = free_port()
    server = launch(data, port=port, argv=serve_argv(data, port, init=False))
    try:
        code = _exits(server.proc)
    finally:
        server.kill()
    assert code == 2
    err = server.stderr()
    assert err.splitlines() == [
        f"capability-anchor: no log at {data}/log.sqlite3 (run `capability-anchor init` "
        "first, or `serve --init`)"
    ]
    # The same message as the other commands give.
    assert f"no log at {data}/log.sqlite3" in run_cli("checkpoint", "--data", data).stderr
    assert not data.exists()


def test_serve_init_creates_once_then_uses_the_log(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    argv = [*serve_argv(data, port, init=False), "--init", "--iss", "https://resolver.example"]
    with serving(data, port=port, argv=argv) as server, server.client() as client:
        assert "initialised a log" in server.stderr()
        assert client.get("/healthz").status_code == 200
    with serving(data, port=port, argv=serve_argv(data, port, init=False)) as again:
        assert "initialised" not in again.stderr()
        with again.client() as client:
            keys = client.get("/keys").json()["keys"]
    assert len(keys) == 1
    done = run_cli("audit", "--data", data)
    assert done.returncode == 0, done.stderr
    # --iss without --init would be silently ignored: it is refused instead.
    refused = subprocess.run(
        [*serve_argv(data, free_port(), init=False), "--iss", "https://x.example"],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=30,
        check=False,
    )
    assert refused.returncode == 2
    assert "--iss is only for --init" in refused.stderr


def test_a_taken_port_is_exit_2_with_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert run_cli("init", "--iss", "https://resolver.example", "--data", data).returncode == 0
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            serve_argv(data, port, init=False),
            capture_output=True,
            text=True,
            env=clean_env(),
            timeout=60,
            check=False,
        )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"capability-anchor: port {port} on {HOST} is taken (address already in use)"
    ]


def test_serving_on_is_printed_once_connections_are_accepted(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    server = launch(data, port=port)
    try:
        deadline = time.monotonic() + 30
        while "serving on" not in server.stderr():
            assert server.alive(), server.stderr()
            assert time.monotonic() < deadline, server.stderr()
            # Before the line, nothing listens.
            assert not accepts_connections(port, timeout=0.05) or "serving on" in server.stderr()
            time.sleep(0.01)
        assert f"serving on http://{HOST}:{port}" in server.stderr()
        # At once, without retrying: the socket listens before the line is printed.
        with socket.create_connection((HOST, port), timeout=5):
            pass
        with httpx.Client(base_url=server.url, timeout=10) as client:
            assert client.get("/healthz").status_code == 200
        assert server.stop() == 0
    finally:
        server.kill()


def _dev_run(data: Path, port: int, logs: Path) -> tuple[subprocess.Popen[bytes], Path]:
    err = logs / f"dev-{port}.err"
    with open(err, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, str(DEV), "run", "--data", str(data), "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=clean_env(),
            start_new_session=True,
        )
    return proc, err


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie waiting to be reaped by init is gone as a server.
    return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_dev_run_forwards_signals_and_exits_with_the_servers_code(
    tmp_path: Path, sig: signal.Signals
) -> None:
    data = tmp_path / "data"
    assert run_cli("init", "--iss", "https://resolver.example", "--data", data).returncode == 0
    port = free_port()
    proc, err = _dev_run(data, port, tmp_path)
    try:
        deadline = time.monotonic() + 60
        while "serving on" not in err.read_text():
            assert proc.poll() is None, err.read_text()
            assert time.monotonic() < deadline, err.read_text()
            time.sleep(0.05)
        (server_pid,) = _children(proc.pid)
        # The server has a process group of its own: a terminal's Ctrl-C reaches only
        # dev.py, which forwards it once.
        assert os.getpgid(server_pid) == server_pid
        proc.send_signal(sig)
        code = _exits(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = err.read_text()
    assert code == 0, text
    assert "Traceback" not in text
    assert f"{sig.name} received" in text
    assert "stopped (pid" in text
    deadline = time.monotonic() + 5
    while not _gone(server_pid):
        assert time.monotonic() < deadline, "the server outlived dev.py run"
        time.sleep(0.05)


def test_dev_run_passes_init_only_for_the_default_data_dir() -> None:
    dev = paths.tool("dev")
    env = os.environ.pop("CAPABILITY_ANCHOR_DATA", None)
    try:
        assert dev.run_argv([])[1:] == ["serve", "--init"]
        assert dev.run_argv(["--port", "9"])[1:] == ["serve", "--init", "--port", "9"]
        assert dev.run_argv(["--data", "/var/lib/nope"])[1:] == ["serve", "--data", "/var/lib/nope"]
        assert dev.run_argv(["--data=x"])[1:] == ["serve", "--data=x"]
    finally:
        if env is not None:
            os.environ["CAPABILITY_ANCHOR_DATA"] = env


def _lines(text: str) -> list[dict[str, object]]:
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def _requests(lines: list[dict[str, object]]) -> list[dict[str, object]]:
    return [x for x in lines if x.get("event") == "request"]


def test_access_and_event_log_as_json_lines(tmp_path: Path) -> None:
    data = tmp_path / "data"
    args = ("--log-format", "json", "--rate-limit", "3", "--checkpoint-interval", "1")
    with serving(data, *args) as server, server.client() as client:
        auth = server.writer_headers()
        ok = client.post("/records?prove=1", json={"records": [_record(1)]}, headers=auth)
        assert ok.status_code == 200
        assert client.post("/records", json={"records": [_record(4)]}, headers=auth).is_success
        assert client.post("/records", json={"records": [_record(2)]}).status_code == 401
        big = b'{"records":[' + b" " * (4 * 1024 * 1024) + b"]}"
        assert client.post("/records", content=big, headers=auth).status_code == 413
        # Another log's iss: invalid under every record rule set.
        other = {**_record(3), "iss": "https://other.example"}
        bad = client.post("/records", json={"records": [other]}, headers=auth)
        assert bad.status_code == 400
        long_hash = "a" * 64
        client.get(f"/proof?day=2026-12-01&leaf_hash={long_hash}&junk={'z' * 500}")
        statuses = [client.get("/healthz").status_code for _ in range(6)]
        assert 429 in statuses
        # A background checkpoint comes within a couple of seconds.
        deadline = time.monotonic() + 20
        while "checkpoint: published a head" not in server.stderr():
            assert time.monotonic() < deadline, server.stderr()
            time.sleep(0.1)
        assert server.stop() == 0
        text = server.stderr()
    lines = _lines(text)
    for line in lines:
        assert isinstance(line["ts"], str) and str(line["ts"]).endswith("Z")
        assert line["level"] in ("info", "warning", "error")
    requests = _requests(lines)
    posts = [r for r in requests if r["method"] == "POST"]
    assert [r["status"] for r in posts] == [200, 200, 401, 413, 400]
    assert posts[0]["path"] == "/records?prove=1"
    for r in posts[1:]:
        assert r["path"] == "/records"
        assert r["client"] == HOST
        assert isinstance(r["ms"], float | int) and r["ms"] >= 0
    assert "error" not in posts[0]
    assert posts[2]["error"] == "unauthorized"
    assert posts[3]["error"] == "too_large"
    assert posts[4]["error"] == "invalid_record" and "record" in str(posts[4]["note"])
    proof = next(r for r in requests if str(r["path"]).startswith("/proof"))
    assert long_hash in str(proof["path"])  # a leaf hash is kept whole
    assert "z" * 17 not in str(proof["path"])  # a long value is cut
    limited = [r for r in requests if r["status"] == 429]
    assert limited and all(r["error"] == "rate_limited" for r in limited)
    events = [str(x["msg"]) for x in lines if x.get("event") != "request"]
    assert any(m.startswith("prove: published a head of") for m in events)
    # The background checkpoint covers the record appended without ?prove=1.
    assert any(m.startswith("checkpoint: published a head of") for m in events)
    assert any(m.startswith("SIGTERM received") for m in events)
    assert any(m.startswith("shutting down") for m in events)
    assert events[-1].startswith("stopped (pid")
    # Uvicorn's own access log stays off: ours replaces it.
    assert '"POST /records HTTP/1.1"' not in text


def test_plain_access_log_by_default(tmp_path: Path) -> None:
    with serving(tmp_path / "data") as server, server.client() as client:
        client.get("/roots")
        client.head("/roots")
        client.get("/nothing-here")
        assert server.stop() == 0
        text = server.stderr()
    assert f' info {HOST} "GET /roots" 200 ' in text
    assert f' info {HOST} "HEAD /roots" 200 ' in text
    assert f' warning {HOST} "GET /nothing-here" 404 ' in text
    assert "not_found: no such resource" in text
    assert " info service: stopped (pid " in text


def test_the_uvicorn_form_logs_each_request_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert run_cli("init", "--iss", "https://resolver.example", "--data", data).returncode == 0
    port = free_port()
    env = {"CAPABILITY_ANCHOR_DATA": str(data), "CAPABILITY_ANCHOR_LOG_FORMAT": "json"}
    # uvicorn's access log is on by default here (no --no-access-log): ours must replace it.
    argv = [a for a in uvicorn_argv(port, 1) if a not in ("--log-level", "warning")]
    with serving(data, port=port, argv=argv, env=env) as server, server.client() as client:
        client.get("/roots")
        assert client.post("/checkpoint").status_code == 401
        # uvicorn itself re-raises SIGTERM after its shutdown (-15 with one worker): its
        # exit code is uvicorn's business; the log lines are ours.
        server.stop()
        text = server.stderr()
    requests = _requests(_lines(text))
    assert [(r["method"], r["path"], r["status"]) for r in requests if r["path"] != "/healthz"] == [
        ("GET", "/roots", 200),
        ("POST", "/checkpoint", 401),
    ]
    assert '"GET /roots HTTP/1.1"' not in text
    assert any(str(x.get("msg", "")).startswith("stopped") for x in _lines(text))


@pytest.mark.parametrize("form", ["serve", "uvicorn"])
def test_every_access_line_is_written_before_the_process_stops(tmp_path: Path, form: str) -> None:
    """Access lines are written in batches (web/accesslog.py): SIGTERM right after the last
    answer loses none of them, in either form. 300 is past one batch's size."""
    data = tmp_path / "data"
    assert run_cli("init", "--iss", "https://resolver.example", "--data", data).returncode == 0
    port = free_port()
    env = {"CAPABILITY_ANCHOR_DATA": str(data), "CAPABILITY_ANCHOR_RATE_LIMIT": "0"}
    argv = uvicorn_argv(port, 1) if form == "uvicorn" else None
    with serving(data, "--rate-limit", "0", port=port, argv=argv, env=env) as server:
        with server.client() as client:
            for n in range(300):
                assert client.get(f"/roots?limit={n % 9 + 1}").status_code == 200
        server.stop()
        text = server.stderr()
    sent = [f'"GET /roots?limit={n % 9 + 1}" 200 ' for n in range(300)]
    logged = [line for line in text.splitlines() if '"GET /roots?' in line]
    assert len(logged) == 300 and all(s in line for s, line in zip(sent, logged, strict=True))
    assert logged[-1] in text.split("stopped (pid")[0]


def test_a_bad_log_format_is_a_usage_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert run_cli("init", "--iss", "https://resolver.example", "--data", data).returncode == 0
    done = subprocess.run(
        [str(CLI), "serve", "--data", str(data), "--log-format", "xml"],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert "invalid choice: 'xml'" in done.stderr


def test_published_and_sealed_heads_are_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from capability_anchor.log import Log
    from tests.kit.logkit import DAY1, DAY2, ISS, Clock, at

    caplog.set_level(logging.INFO, "capability_anchor.heads")
    clock = Clock(at(DAY1, 60))
    with Log.init(tmp_path / "data", iss=ISS, clock=clock) as log:
        log.append([_record(0), _record(1)])
        log.checkpoint()
        log.checkpoint()  # did not grow: no head, no line
        clock.set(DAY2, 60)
        log.seal()
    lines = [r.getMessage() for r in caplog.records if r.name == "capability_anchor.heads"]
    assert lines == [
        f"checkpoint: published a head of {DAY1} at tree size 2",
        f"sealed {DAY1} at tree size 2",
    ]
