"""The floors the write benchmarks measure the log against (issues #23 and #37), in the same
process run.

- **SPEC floor**: a bare-sqlite3 store of what the SPEC requires of each stored record: the
  engine's own schema (its migrations run on a fresh file: the same tables, the append-only
  triggers and the `/record` index), its page size, WAL and `synchronous`; per record
  compact sorted-keys JSON, its SHA-256 leaf hash and the digests of its two `/record` keys;
  `executemany` of 1,000 entries and their index rows per transaction. No record rule, no
  tree, no tiles, no heads.
- **single-row floor**: one record per durable commit into a one-table WAL store: what one
  request per commit could reach with no HTTP and no log around it.

Both write to a fresh SQLite file under `folder`; they return records per second.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from capability_anchor.store import server_key_digest
from capability_anchor.store.sqlite.base import CACHE_KIB, PAGE_SIZE, durable
from capability_anchor.store.sqlite.schema import migrate

FLOOR_BATCH = 1000
DAY = "2026-11-30"  # benchkit.CHECKED_AT's day: one day's entries, as a log's day

_INSERT_ENTRY = (
    "INSERT INTO entries (day, leaf_index, leaf_hash, claims, accepted_at) VALUES (?, ?, ?, ?, ?)"
)
_INSERT_SERVER = "INSERT INTO servers (key, day, leaf_index) VALUES (?, ?, ?)"
_SINGLE_SCHEMA = (
    "CREATE TABLE floor (id INTEGER PRIMARY KEY, leaf_hash BLOB NOT NULL, data BLOB NOT NULL)",
    "CREATE UNIQUE INDEX floor_by_hash ON floor (leaf_hash)",
)


def _fresh(path: Path, *, as_the_log: bool) -> sqlite3.Connection:
    """A fresh WAL database, `synchronous = FULL`; `as_the_log`: the log's page and cache size."""
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        leftover.unlink(missing_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    if as_the_log:
        conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    durable(conn)  # the log's WAL, synchronous = FULL and foreign keys
    return conn


def open_spec_floor(path: Path) -> sqlite3.Connection:
    """A fresh database with the log's schema, made by the engine's own migrations."""
    conn = _fresh(path, as_the_log=True)
    conn.execute("BEGIN IMMEDIATE")
    migrate(conn, 0, conn.execute)
    conn.execute("COMMIT")
    return conn


def _leaf(record: Any) -> tuple[bytes, bytes]:
    data = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(b"\x00" + data).digest(), data


def spec_floor(records: Sequence[Any], folder: Path, name: str = "spec-floor.sqlite3") -> float:
    """Records per second of the SPEC floor over `records` (a fresh database each call)."""
    conn = open_spec_floor(folder / name)
    try:
        start = time.perf_counter()
        for at in range(0, len(records), FLOOR_BATCH):
            now = int(time.time())
            entries, servers = [], []
            for n, record in enumerate(records[at : at + FLOOR_BATCH], at):
                leaf_hash, data = _leaf(record)
                entries.append((DAY, n, leaf_hash, data, now))
                servers.append((server_key_digest("sub:" + record["sub"]), DAY, n))
                servers.append((server_key_digest("url:" + record["url"]), DAY, n))
            servers.sort()
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(_INSERT_ENTRY, entries)
            conn.executemany(_INSERT_SERVER, servers)
            conn.execute("COMMIT")
        return len(records) / (time.perf_counter() - start)
    finally:
        conn.close()


def single_row_floor(
    records: Sequence[Any], folder: Path, name: str = "single-row-floor.sqlite3"
) -> float:
    """Records per second with one record per durable commit (a fresh database each call)."""
    conn = _fresh(folder / name, as_the_log=False)
    try:
        for statement in _SINGLE_SCHEMA:
            conn.execute(statement)
        start = time.perf_counter()
        for record in records:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT OR IGNORE INTO floor (leaf_hash, data) VALUES (?, ?)", _leaf(record)
            )
            conn.execute("COMMIT")
        return len(records) / (time.perf_counter() - start)
    finally:
        conn.close()


def floor_bytes_per_record(records: Sequence[Any], folder: Path) -> float:
    """Bytes of the SPEC floor's database file per record, after a full checkpoint."""
    path = folder / "floor-bytes.sqlite3"
    spec_floor(records, folder, path.name)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return path.stat().st_size / max(1, len(records))
