"""A damaged database found while running (issue #21, item 6): a zeroed middle page of
`log.sqlite3` under a running `serve`. The red team's zeroed page took writes with 200 while
the audit called the file malformed: SQLite finds damage only where it reads, and an append
reads the newest leaf and pages its cache already holds.

Here the first finding, by any process (the audit, the service's background scrub, a read
that fails on the page), becomes the data dir's damage mark (`store/damage.py`); from then
on every write is 503 naming the damage and the fix, never 200, reads are 503 or the bytes
they were before, the service refuses to start again, and a passing audit (after the
database is restored from a backup) is what lets it start and take writes again. Real
processes throughout: `serve` with its append worker, the CLI, uvicorn with two workers.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.kit.logkit import run_cli
from tests.kit.obskit import observation
from tests.kit.serverkit import (
    Server,
    ServerFailed,
    clean_env,
    free_port,
    serve_argv,
    serving,
    start,
    uvicorn_argv,
)

DAMAGE_WORDS = "damaged"
FIX_WORDS = "capability-anchor audit"


def _today() -> str:
    return dt.datetime.now(dt.UTC).date().isoformat()


def _grow(server: Server, batches: int = 6) -> None:
    """600 records a few hundred bytes each (a database of ~120 pages), and a head."""
    with server.client() as client:
        for n in range(batches):
            batch = {
                "records": [
                    observation(i, f"a{n}", sub=f"example:a{n}-{i}", pad="x" * 200)
                    for i in range(100)
                ]
            }
            r = client.post("/records", json=batch, headers=server.writer_headers())
            assert r.status_code == 200, r.text
        assert client.post("/checkpoint", headers=server.writer_headers()).status_code == 200


def _reads(server: Server) -> dict[str, bytes]:
    """What a reader gets now, URL by URL: every entry (a page at a time), proofs, keys."""
    day = _today()
    urls = [f"/entries/{day}?start={s}&limit=100" for s in range(0, 600, 100)]
    urls += [f"/proof?day={day}&index={i}" for i in (0, 150, 299, 300, 450, 599)]
    urls += [
        "/keys",
        "/roots",
        "/history/checkpoint",
        f"/roots/{day}/600",
        f"/roots/{day}/tile/0/000",
    ]
    with server.client() as client:
        answers = {url: client.get(url) for url in urls}
    for url, r in answers.items():
        assert r.status_code == 200, (url, r.text)
    return {url: r.content for url, r in answers.items()}


def _backup(data: Path, dest: Path) -> None:
    """A consistent copy of the live database (SQLite's online backup), to restore later."""
    src = sqlite3.connect(data / "log.sqlite3", timeout=30)
    out = sqlite3.connect(dest)
    try:
        src.backup(out)
    finally:
        out.close()
        src.close()


def _zero_middle_page(data: Path) -> int:
    """Fold the WAL into the file (so no newer copy of the page hides the damage), then zero
    the page in the middle of the file, under the running service."""
    db = data / "log.sqlite3"
    conn = sqlite3.connect(db, timeout=30)
    try:
        while conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] != 0:
            time.sleep(0.05)  # a reader of the service holds an older snapshot: again
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        middle = int(conn.execute("PRAGMA page_count").fetchone()[0]) // 2 + 1
    finally:
        conn.close()
    with open(db, "r+b") as f:
        f.seek((middle - 1) * page_size)
        f.write(b"\0" * page_size)
    return middle


def _refused_writes(server: Server) -> None:
    """Every kind of write, several times: 503 naming the damage and the fix, never 200."""
    headers = server.writer_headers()
    with server.client() as client:
        for n in range(4):
            batch = {
                "records": [observation(i, f"z{n}", sub=f"example:z{n}-{i}") for i in range(3)]
            }
            for r in (
                client.post("/records", json=batch, headers=headers),
                client.post("/records?prove=1", json=batch, headers=headers),
                client.post("/checkpoint", headers=headers),
            ):
                assert r.status_code == 503, (r.request.url, r.text)
                note = r.json()["note"]
                assert r.json()["error"] == "unavailable"
                assert DAMAGE_WORDS in note and FIX_WORDS in note, note


def _reads_503_or_same(server: Server, before: dict[str, bytes]) -> None:
    with server.client() as client:
        for url, body in before.items():
            r = client.get(url)
            assert r.status_code in (200, 503), (url, r.text)
            if r.status_code == 200:
                assert r.content == body, url
            else:
                assert DAMAGE_WORDS in r.json()["note"], r.text
        health = client.get("/healthz")
    assert health.status_code == 503 and DAMAGE_WORDS in health.json()["note"], health.text


def _restart_refused(data: Path, tmp_path: Path) -> None:
    with pytest.raises(ServerFailed) as refused:
        start(data, logs=tmp_path / "logs")
    text = str(refused.value)
    assert "exited with 2" in text, text
    assert "found damaged" in text and f"capability-anchor audit --data {data}" in text, text
    assert "Traceback" not in text, text


def _restore_and_resume(data: Path, backup: Path, tmp_path: Path) -> None:
    """The fix the notes name: restore, audit (it passes and removes the mark), start."""
    still = run_cli("audit", "--data", data)
    assert still.returncode == 1, still.stderr
    assert (data / "damaged").exists()
    for name in ("log.sqlite3-wal", "log.sqlite3-shm"):
        (data / name).unlink(missing_ok=True)
    backup.replace(data / "log.sqlite3")
    passed = run_cli("audit", "--data", data)
    assert passed.returncode == 0, passed.stderr
    assert "removed the damage mark" in passed.stderr
    assert not (data / "damaged").exists()
    with serving(data, logs=tmp_path / "logs") as again, again.client() as client:
        batch = {"records": [observation(i, "after", sub=f"example:after-{i}") for i in range(3)]}
        r = client.post("/records", json=batch, headers=again.writer_headers())
        assert r.status_code == 200, r.text


def test_a_page_zeroed_under_serve_and_found_by_the_audit_refuses_every_write(
    tmp_path: Path,
) -> None:
    """The red team's order: zero a page, run the audit (malformed), then write."""
    data = tmp_path / "data"
    backup = tmp_path / "backup.sqlite3"
    with serving(data, "--checkpoint-interval", "3600") as server:
        _grow(server)
        before = _reads(server)
        _backup(data, backup)
        _zero_middle_page(data)
        audit = run_cli("audit", "--data", data)
        assert audit.returncode == 1, audit.stderr
        assert "malformed" in audit.stdout + audit.stderr
        assert (data / "damaged").exists()
        _refused_writes(server)
        _reads_503_or_same(server, before)
        log_text = server.stderr()
    assert "Traceback" not in log_text, log_text[-3000:]
    _restart_refused(data, tmp_path)
    _restore_and_resume(data, backup, tmp_path)


def test_a_page_zeroed_under_serve_is_found_by_the_scrub_without_any_request(
    tmp_path: Path,
) -> None:
    """Nobody reads the page and nobody runs the audit: the service's own background scrub
    finds it, and from then on writes are refused."""
    data = tmp_path / "data"
    with serving(data, "--checkpoint-interval", "3600") as server:
        _grow(server)
        before = _reads(server)
        _zero_middle_page(data)
        _wait_until_found(server)
        assert "background scrub" in (data / "damaged").read_text()
        _refused_writes(server)
        _reads_503_or_same(server, before)
        log_text = server.stderr()
    assert "Traceback" not in log_text, log_text[-3000:]
    assert log_text.count("background work stopped") == 1, log_text[-3000:]
    _restart_refused(data, tmp_path)


def _wait_until_found(server: Server) -> None:
    with server.client() as client:
        while client.get("/healthz").status_code == 200:
            assert server.alive()
            time.sleep(0.2)


def test_damage_found_in_one_uvicorn_worker_stops_writes_in_every_worker(tmp_path: Path) -> None:
    """Whichever process finds the damage (a read that fails on the page, in whichever
    worker took it, or the scrub of the worker doing the background work), the mark it
    leaves stops writes in both workers and their append workers."""
    data = tmp_path / "data"
    assert run_cli("init", "--data", data, "--iss", "https://resolver.example").returncode == 0
    port = free_port()
    server = start(
        data, port=port, argv=uvicorn_argv(port, 2), env={"CAPABILITY_ANCHOR_DATA": str(data)}
    )
    try:
        _grow(server)
        before = _reads(server)
        _zero_middle_page(data)
        with server.client() as client:
            for url, body in before.items():
                r = client.get(url)
                assert r.status_code in (200, 503), r.text
                if r.status_code == 200:
                    assert r.content == body, url
        _wait_until_found(server)
        # Many requests: the kernel spreads the connections over both workers.
        for _ in range(3):
            _refused_writes(server)
        _reads_503_or_same(server, before)
    finally:
        server.stop()
        server.kill()
    done = subprocess.run(
        serve_argv(data, free_port(), init=False),
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert done.returncode == 2 and "found damaged" in done.stderr, done.stderr
