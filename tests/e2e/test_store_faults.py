"""SQLite faults become the project's errors (the integrity issue's point 8).

Real faults on real files: a full disk (a small tmpfs, grown again afterwards), a database
made unwritable under a running process (`chattr +i` on the database and its WAL: the open
descriptors then fail with EPERM, which SQLite reports as an I/O error), a database that is
read-only from the start, and a zeroed page. Each gets a clear message (CLI exit 2, HTTP 503
with a note that says which), no traceback anywhere, nothing acknowledged lost, and writing
resumes without a restart once the fault is gone.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit.obskit import observation
from tests.kit.serverkit import CLI, clean_env, serving

ISS = "https://resolver.example"


def _run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(CLI), *args], input=stdin, capture_output=True, env=clean_env(), timeout=120
    )


def _lines(tag: str, n: int, pad: int = 0) -> bytes:
    return b"".join(
        json.dumps(observation(i, tag, sub=f"example:{tag}-{i}", pad="x" * pad)).encode() + b"\n"
        for i in range(n)
    )


def _batch(tag: str, n: int, pad: int = 0) -> dict[str, object]:
    return {
        "records": [observation(i, tag, sub=f"example:{tag}-{i}", pad="x" * pad) for i in range(n)]
    }


def _subs(data: Path) -> set[str]:
    """The stored records' ids without their namespace (`tag-i`)."""
    conn = sqlite3.connect(f"file:{data / 'log.sqlite3'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT claims FROM entries")
        return {json.loads(c)["sub"].removeprefix("example:") for (c,) in rows}
    finally:
        conn.close()


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs of our own (root only: CI runs as root)."""
    where = tmp_path / "fs"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _grow(fs: Path) -> None:
    subprocess.run(["mount", "-o", "remount,size=64m", str(fs)], check=True)


def test_cli_append_on_a_full_disk_exits_2_and_keeps_what_it_acknowledged(tmpfs: Path) -> None:
    data = tmpfs / "data"
    assert _run("init", "--data", str(data), "--iss", ISS).returncode == 0
    acknowledged: set[str] = set()
    failed = None
    for n in range(200):
        done = _run("append", "--data", str(data), "-", stdin=_lines(f"b{n}", 50, pad=400))
        acknowledged |= {
            f"b{n}-{json.loads(line)['leaf_index'] % 50}" for line in done.stdout.splitlines()
        }
        if done.returncode != 0:
            failed = done
            break
    assert failed is not None, "the 2 MiB disk never filled"
    err = failed.stderr.decode()
    assert failed.returncode == 2, err
    assert "the disk is full" in err, err
    assert "Traceback" not in err
    _grow(tmpfs)
    assert acknowledged <= _subs(data)
    again = _run("append", "--data", str(data), "-", stdin=_lines("after", 5))
    assert again.returncode == 0, again.stderr
    assert _run("audit", "--data", str(data)).returncode == 0


def test_service_on_a_full_disk_answers_503_and_resumes_without_restart(
    tmpfs: Path, tmp_path: Path
) -> None:
    data = tmpfs / "data"
    assert _run("init", "--data", str(data), "--iss", ISS).returncode == 0
    with serving(data, "--checkpoint-interval", "3600", logs=tmp_path / "logs") as server:
        headers = server.writer_headers()
        with server.client() as client:
            acknowledged: set[str] = set()
            refused = None
            for n in range(200):
                r = client.post("/records", json=_batch(f"b{n}", 50, pad=400), headers=headers)
                if r.status_code != 200:
                    refused = (n, r)
                    break
                acknowledged |= {f"b{n}-{i}" for i in range(50)}
            assert refused is not None, "the 2 MiB disk never filled"
            n, r = refused
            assert r.status_code == 503
            assert r.json()["error"] == "unavailable"
            assert "disk is full" in r.json()["note"]
            assert client.get("/healthz").status_code == 200
            _grow(tmpfs)
            again = client.post("/records?prove=1", json=_batch("after", 5), headers=headers)
            assert again.status_code == 200, again.text
        log_text = server.stderr() + server.stdout()
    assert "Traceback" not in log_text, log_text[-3000:]
    stored = _subs(data)
    assert acknowledged <= stored
    assert not {f"b{n}-{i}" for i in range(50)} & stored, "the refused batch is partly stored"
    assert _run("audit", "--data", str(data)).returncode == 0


def _chattr(flag: str, *paths: Path) -> None:
    subprocess.run(["chattr", flag, *map(str, paths)], check=True, capture_output=True)


def test_database_made_unwritable_under_a_running_service(tmp_path: Path) -> None:
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    data = tmp_path / "data"
    assert _run("init", "--data", str(data), "--iss", ISS).returncode == 0
    with serving(data, "--checkpoint-interval", "3600") as server:
        headers = server.writer_headers()
        with server.client() as client:
            assert client.post("/records", json=_batch("a", 5), headers=headers).status_code == 200
            files = [data / "log.sqlite3", data / "log.sqlite3-wal"]
            probe = subprocess.run(["chattr", "+i", str(files[0])], capture_output=True)
            if probe.returncode != 0:
                pytest.skip(f"this file system has no immutable flag: {probe.stderr!r}")
            try:
                _chattr("+i", files[1])
                r = client.post("/records", json=_batch("b", 5), headers=headers)
                assert r.status_code == 503, r.text
                assert "cannot read or write its database" in r.json()["note"]
                # Reads of what is stored go on.
                assert client.get("/entries/" + _today()).status_code == 200
                cli = _run("append", "--data", str(data), "-", stdin=_lines("c", 2))
                assert cli.returncode == 2, cli.stderr
                assert b"Traceback" not in cli.stderr
            finally:
                _chattr("-i", *files)
            r = client.post("/records?prove=1", json=_batch("d", 5), headers=headers)
            assert r.status_code == 200, r.text
        log_text = server.stderr() + server.stdout()
    assert "Traceback" not in log_text, log_text[-3000:]
    stored = _subs(data)
    assert {"a-0", "d-4"} <= stored
    assert not {s for s in stored if s.startswith(("b-", "c-"))}
    assert _run("audit", "--data", str(data)).returncode == 0


def _today() -> str:
    return dt.datetime.now(dt.UTC).date().isoformat()


def test_cli_on_a_read_only_database_exits_2(tmp_path: Path) -> None:
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    data = tmp_path / "data"
    assert _run("init", "--data", str(data), "--iss", ISS).returncode == 0
    db = data / "log.sqlite3"
    probe = subprocess.run(["chattr", "+i", str(db)], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"this file system has no immutable flag: {probe.stderr!r}")
    try:
        done = _run("append", "--data", str(data), "-", stdin=_lines("a", 2))
    finally:
        _chattr("-i", db)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "Traceback" not in err
    assert "read-only" in err or "I/O error" in err or "cannot open" in err, err
    assert "a-0" not in _subs(data)


def _zero_a_page(data: Path) -> int:
    """Fold the WAL into the database, then zero one page of the entries table's b-tree."""
    db = data / "log.sqlite3"
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        root = int(
            conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'entries'").fetchone()[0]
        )
    finally:
        conn.close()
    with open(db, "r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(b"\0" * page_size)
    return root


def test_a_zeroed_page_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert _run("init", "--data", str(data), "--iss", ISS).returncode == 0
    assert _run("append", "--data", str(data), "-", stdin=_lines("a", 300, pad=200)).returncode == 0
    assert _run("checkpoint", "--data", str(data)).returncode == 0
    _zero_a_page(data)
    for args in (
        ("append", "--data", str(data), "-"),
        ("checkpoint", "--data", str(data)),
        ("proof", "--data", str(data), "--day", _today(), "--index", "3"),
        ("export", "--data", str(data), str(tmp_path / "out")),
    ):
        done = _run(*args, stdin=_lines("b", 2))
        err = done.stderr.decode()
        assert "Traceback" not in err, (args, err)
        if done.returncode != 0:
            assert done.returncode in (1, 2), (args, err)
            assert err.strip(), args
    server = None
    try:
        with serving(data, "--checkpoint-interval", "3600") as server:
            with server.client() as client:
                r = client.post("/records", json=_batch("c", 2), headers=server.writer_headers())
                assert r.status_code in (200, 409, 503), r.text
                if r.status_code == 503:
                    assert "damaged" in r.json()["note"]
            log_text = server.stderr() + server.stdout()
            assert "Traceback" not in log_text, log_text[-3000:]
    except Exception as exc:  # refusing to start is fine, with a message and no traceback
        text = str(exc)
        assert "Traceback" not in text, text[-3000:]
        assert "damaged" in text or "malformed" in text, text[-3000:]


def test_a_damaged_database_stops_background_work_once_and_every_request_is_refused(
    tmp_path: Path,
) -> None:
    """Found by the service's first tick (its scrub or its checkpoint): background work
    stops once, and from then on the service answers 503 naming the damage (issue #21:
    a read that does not fail on the damage could still be of a zeroed page)."""
    data = tmp_path / "data"
    assert _run("init", "--data", str(data), "--iss", ISS).returncode == 0
    assert _run("append", "--data", str(data), "-", stdin=_lines("a", 300, pad=200)).returncode == 0
    _zero_a_page(data)  # nothing checkpointed yet: the service's first checkpoint reads it
    # Ready once it answers: its first tick may find the damage before /healthz is asked.
    with serving(data, "--checkpoint-interval", "1", answered=True) as server:
        with server.client() as client:
            time.sleep(3.5)  # three ticks: one that fails, two that no longer run
            for path in ("/keys", "/roots", "/healthz"):
                r = client.get(path)
                assert r.status_code == 503, r.text
                assert "found damaged" in r.json()["note"], r.text
        log_text = server.stderr() + server.stdout()
    assert "Traceback" not in log_text, log_text[-3000:]
    assert log_text.count("background work stopped") == 1, log_text[-3000:]
    assert "restore the database" in log_text, log_text[-3000:]
    assert "retrying at the next tick" not in log_text, log_text[-3000:]
