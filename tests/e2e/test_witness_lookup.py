"""The witness's monitoring endpoint (`GET /<hex SHA-256 of the origin>/checkpoint`) finds
its log by a keyed lookup (witness schema version 2, `origin_hashes`), not by hashing every
configured origin per request: a log added by `witness add-log` while `witness serve` runs
is found at once, a version 1 store is migrated with a row for each log it had, and with
20,000 logs a lookup still costs what it does with one."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from capability_anchor.keys import SigningKey, create_key_file
from capability_anchor.note import (
    TYPE_ED25519,
    Checkpoint,
    NoteSigner,
    format_vkey,
    sign_checkpoint,
)
from capability_anchor.store import open as stores
from capability_anchor.store.sqlite.witness import MIGRATIONS, WITNESS_DB_NAME
from capability_anchor.store.witness import WITNESS_SCHEMA_VERSION
from capability_anchor.witness.server.protocol import KEY_FILE, Refusal, Witness
from tests.kit.serverkit import CLI, free_port, start


def hashed(origin: str) -> str:
    return hashlib.sha256(origin.encode()).hexdigest()


def witness_cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(CLI), "witness", *args, "--data", str(data)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


class OneLeafLog:
    """A log of one leaf, its checkpoint signed with our `note` (the witness under test is
    what is checked here, not the note format: test_witness_server.py does that by hand)."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.signer = NoteSigner(origin, SigningKey.generate())
        self.vkey = format_vkey(origin, TYPE_ED25519, self.signer.key.public.raw)

    def note(self) -> bytes:
        root = hashlib.sha256(b"\x00leaf").digest()
        return sign_checkpoint(Checkpoint(self.origin, 1, root), self.signer)

    def request(self) -> bytes:
        return b"old 0\n\n" + self.note()


def test_a_log_added_while_serving_is_found_by_its_hash(tmp_path: Path) -> None:
    data = tmp_path / "witness"
    assert witness_cli(data, "init", "--name", "witness.test/lookup").returncode == 0
    first = OneLeafLog("first.example/log")
    assert (
        witness_cli(data, "add-log", "--origin", first.origin, "--vkey", first.vkey).returncode == 0
    )
    port = free_port()
    argv = [str(CLI), "witness", "serve", "--data", str(data), "--port", str(port)]
    server = start(data, port=port, argv=[*argv, "--rate-limit", "0"], logs=tmp_path)
    try:
        late = OneLeafLog("late.example/log")  # configured by another process, after start
        added = witness_cli(data, "add-log", "--origin", late.origin, "--vkey", late.vkey)
        assert added.returncode == 0, added.stderr
        with httpx.Client(base_url=server.url, timeout=10) as client:
            for log in (first, late):
                url = f"/{hashed(log.origin)}/checkpoint"
                assert client.get(url).status_code == 404  # configured, nothing cosigned yet
                answer = client.post("/add-checkpoint", content=log.request())
                assert answer.status_code == 200, answer.text
                got = client.get(url)
                assert got.status_code == 200, got.text
                assert got.content == log.note() + answer.content
            for path in (hashed("unknown.example/log"), "not-hex", hashed(first.origin).upper()):
                refused = client.get(f"/{path}/checkpoint")
                assert refused.status_code == 404, refused.text
                assert set(json.loads(refused.content)) == {"v", "error", "note"}
    finally:
        server.stop()


def v1_store(data: Path, origins: list[str]) -> None:
    """A witness data dir as version 1 wrote it (its schema script, which is never edited)."""
    data.mkdir()
    conn = sqlite3.connect(data / WITNESS_DB_NAME, isolation_level=None)
    try:
        conn.executescript(MIGRATIONS[1])
        conn.execute("PRAGMA user_version=1")
        conn.execute("BEGIN")
        conn.execute("INSERT INTO meta VALUES ('name', 'witness.test/v1')")
        conn.executemany(
            "INSERT INTO logs VALUES (?, ?, 0)",
            [(o, format_vkey(o, TYPE_ED25519, bytes(32))) for o in origins],
        )
        conn.execute("COMMIT")
    finally:
        conn.close()
    create_key_file(data / KEY_FILE)


def test_a_version_1_store_is_migrated_with_a_hash_for_every_log(tmp_path: Path) -> None:
    origins = [f"log{n}.example/history" for n in range(5)]
    v1_store(tmp_path / "w", origins)
    for _ in range(2):  # the second open finds the newest version and changes nothing
        store = stores.open_witness(tmp_path / "w")
        try:
            for origin in origins:
                found = store.log_by_hash(hashed(origin))
                assert found is not None and found.origin == origin
            assert store.log_by_hash(hashed("other.example/history")) is None
        finally:
            store.close()
    conn = sqlite3.connect(tmp_path / "w" / WITNESS_DB_NAME)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (WITNESS_SCHEMA_VERSION,)
        assert conn.execute("SELECT count(*) FROM origin_hashes").fetchone() == (5,)
        for statement in ("UPDATE origin_hashes SET hash = hash", "DELETE FROM origin_hashes"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute(statement)
    finally:
        conn.close()


def test_a_lookup_costs_the_same_with_20000_logs(tmp_path: Path) -> None:
    """200 lookups among 20,000 logs in well under a second: hashing and reading every
    origin per request (the version 1 scan) took 11 s here (55 ms a request)."""
    origins = [f"log{n}.example/history" for n in range(20_000)]
    v1_store(tmp_path / "w", origins)
    witness = Witness.open(tmp_path / "w")  # migrates: 20,000 rows in one transaction
    try:
        wanted = [hashed(origins[n]) for n in range(0, 20_000, 100)]
        start_s = time.perf_counter()
        for name in wanted:
            with pytest.raises(Refusal) as refused:  # configured, nothing cosigned
                witness.monitoring(name)
            assert refused.value.status == 404
        elapsed = time.perf_counter() - start_s
    finally:
        witness.close()
    assert elapsed < 1.0, f"{len(wanted)} lookups took {elapsed:.2f} s"
