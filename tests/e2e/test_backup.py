"""`capability-anchor backup DEST` with real processes: a backup taken while four HTTP writers
post to a real `serve` holds every record acknowledged before it began; `audit --data DEST`
passes; `serve --data DEST --published none` runs from it and goes on appending; and a
database restored alone is refused, naming the files it lacks.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from capability_anchor.log.marks import RESTORED_FILE
from tests.kit.logkit import run_cli
from tests.kit.obskit import observation
from tests.kit.serverkit import serving

WRITERS = 4
BATCH = 20


class Acked:
    """Every leaf hash a writer was answered 2xx for, with when the answer came."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.hashes: list[tuple[float, str]] = []
        self.errors: list[str] = []

    def before(self, t: float) -> set[str]:
        with self.lock:
            return {h for at, h in self.hashes if at < t}


def _writer(url: str, token: str, w: int, stop: threading.Event, acked: Acked) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, timeout=60.0) as client:
        b = 0
        while not stop.is_set():
            tag = f"w{w}-b{b}"
            b += 1
            body = {"records": [observation(n, tag) for n in range(BATCH)]}
            try:
                r = client.post("/records", json=body, headers=headers)
            except httpx.HTTPError as exc:
                acked.errors.append(f"{tag}: {exc!r}")
                continue
            answered = time.monotonic()
            if r.status_code == 200:
                with acked.lock:
                    acked.hashes += [(answered, e["leaf_hash"]) for e in r.json()["entries"]]
            else:
                acked.errors.append(f"{tag}: {r.status_code} {r.text[:200]}")


def _stored(data: Path) -> set[str]:
    conn = sqlite3.connect(f"{(data / 'log.sqlite3').resolve().as_uri()}?mode=ro", uri=True)
    try:
        return {bytes(h).hex() for (h,) in conn.execute("SELECT leaf_hash FROM entries")}
    finally:
        conn.close()


def _audit_ok(data: Path) -> dict[str, Any]:
    done = run_cli("audit", "--data", data, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_backup_during_four_writers_holds_every_acknowledged_record(tmp_path: Path) -> None:
    data, dest = tmp_path / "data", tmp_path / "backup"
    acked = Acked()
    stop = threading.Event()
    with serving(data, "--checkpoint-interval", "1") as server:
        token = server.token()
        threads = [
            threading.Thread(target=_writer, args=(server.url, token, w, stop, acked))
            for w in range(WRITERS)
        ]
        for t in threads:
            t.start()
        try:
            while len(acked.before(time.monotonic())) < 400:  # writing well under way
                time.sleep(0.05)
            began = time.monotonic()
            done = run_cli("backup", dest, "--data", data, "--json", timeout=300)
            ended = time.monotonic()
            while len(acked.before(time.monotonic())) <= len(acked.before(ended)):
                time.sleep(0.05)  # the writers went on after the backup
        finally:
            stop.set()
            for t in threads:
                t.join()
    assert done.returncode == 0, done.stderr
    assert not acked.errors, acked.errors[:3]
    result = json.loads(done.stdout)
    stored = _stored(dest)
    assert acked.before(began) <= stored
    assert result["records"] == len(stored)
    assert len(stored) < len(acked.before(float("inf")))  # some came after the copy
    assert sorted(result["files"]) == ["log.sqlite3", "signing-key.jwk", "writer-token"]
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o700
    for name in os.listdir(dest):
        assert stat.S_IMODE(os.stat(dest / name).st_mode) == 0o600, name
    assert not [n for n in os.listdir(dest) if n.endswith(".partial")]

    assert (dest / RESTORED_FILE).exists()  # the copy is marked (test_restored_copy.py)
    _audit_ok(dest)
    # The restore: serve from the copy, append, and the audit still passes. Nothing of this
    # log was published anywhere but by the process the test stopped: the operator says so.
    with (
        serving(dest, "--checkpoint-interval", "1", "--published", "none") as server,
        server.client() as client,
    ):
        r = client.post(
            "/records",
            json={"records": [observation(n, "after") for n in range(50)]},
            headers=server.writer_headers(),
        )
        assert r.status_code == 200, r.text
        assert r.json()["entries"][0]["leaf_index"] == result["records"]
    report = _audit_ok(dest)
    assert report["ok"] is True
    assert len(_stored(dest)) == result["records"] + 50


def _small_log(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    assert run_cli("init", "--data", data, "--iss", "https://resolver.example").returncode == 0
    records = tmp_path / "r.jsonl"
    records.write_text("".join(json.dumps(observation(n)) + "\n" for n in range(7)))
    assert run_cli("append", "--data", data, records).returncode == 0
    assert run_cli("checkpoint", "--data", data).returncode == 0
    return data


def test_backup_prints_history_size_root_and_day_sizes(tmp_path: Path) -> None:
    data = _small_log(tmp_path)
    done = run_cli("backup", tmp_path / "b", "--data", data, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["history_size"] >= 1
    assert len(bytes.fromhex(result["history_root"])) == 32
    assert list(result["days"].values()) == [7]
    text = run_cli("backup", tmp_path / "t", "--data", data)
    assert text.returncode == 0
    assert f"history size {result['history_size']}, root {result['history_root']}" in text.stdout
    assert ": 7 records" in text.stdout


def test_backup_copies_every_rotated_and_pending_key_file(tmp_path: Path) -> None:
    data = _small_log(tmp_path)
    assert run_cli("rotate-key", "--data", data).returncode == 0
    keys = sorted(p.name for p in data.iterdir() if p.name.startswith("signing-key"))
    assert len(keys) >= 2
    done = run_cli("backup", tmp_path / "b", "--data", data, "--json")
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(done.stdout)["files"]) == sorted(
        ["log.sqlite3", "writer-token", *keys]
    )
    for name in keys:
        assert (tmp_path / "b" / name).read_bytes() == (data / name).read_bytes()
    _audit_ok(tmp_path / "b")


def test_backup_refuses_a_non_empty_dest(tmp_path: Path) -> None:
    data = _small_log(tmp_path)
    dest = tmp_path / "b"
    dest.mkdir()
    (dest / "something").write_text("x")
    done = run_cli("backup", dest, "--data", data)
    assert done.returncode == 2
    assert "not empty" in done.stderr
    assert os.listdir(dest) == ["something"]


def test_backup_of_a_data_dir_missing_its_token_is_an_error(tmp_path: Path) -> None:
    data = _small_log(tmp_path)
    (data / "writer-token").unlink()
    done = run_cli("backup", tmp_path / "b", "--data", data)
    assert done.returncode == 2
    assert "writer-token" in done.stderr
    assert not (tmp_path / "b" / "log.sqlite3").exists()


@pytest.mark.parametrize("command", ["serve", "audit"])
def test_restoring_only_the_database_names_the_missing_files(tmp_path: Path, command: str) -> None:
    data = _small_log(tmp_path)
    only = tmp_path / "only-db"
    only.mkdir(mode=0o700)
    (only / "log.sqlite3").write_bytes((data / "log.sqlite3").read_bytes())
    args = ["--port", "1"] if command == "serve" else []
    done = run_cli(command, "--data", only, *args, timeout=60)
    assert done.returncode == 2
    assert "signing-key.jwk, writer-token" in done.stderr
    assert "capability-anchor backup" in done.stderr
