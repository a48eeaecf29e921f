"""The floors the write benchmarks measure the log against (issue #23), in the same process run.

- **fast floor**: compact sorted-keys JSON, SHA-256, `executemany` into a WAL table with a
  UNIQUE dedupe index, one transaction per 1,000 records, `synchronous = FULL` (the log's
  setting). What storing a record could cost with nothing but the bytes, the hash and the
  dedupe: no record rule, no tree, no tiles, no index for `/record`.
- **single-row floor**: the same table, one record per durable commit: what one request per
  commit could reach with no HTTP and no log around it.

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

FLOOR_BATCH = 1000
SYNCHRONOUS = "FULL"  # the log's (store/sqlite/engine.py)

_SCHEMA = (
    "CREATE TABLE floor (id INTEGER PRIMARY KEY, leaf_hash BLOB NOT NULL, data BLOB NOT NULL)",
    "CREATE UNIQUE INDEX floor_by_hash ON floor (leaf_hash)",
)
_INSERT = "INSERT OR IGNORE INTO floor (leaf_hash, data) VALUES (?, ?)"


def open_floor(path: Path) -> sqlite3.Connection:
    """A fresh WAL database with the floor's table, `synchronous` as the log's."""
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        leftover.unlink(missing_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {SYNCHRONOUS}")
    for statement in _SCHEMA:
        conn.execute(statement)
    return conn


def _row(record: Any) -> tuple[bytes, bytes]:
    data = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(b"\x00" + data).digest(), data


def fast_floor(records: Sequence[Any], folder: Path, name: str = "fast-floor.sqlite3") -> float:
    """Records per second of the fast floor over `records` (a fresh database each call)."""
    conn = open_floor(folder / name)
    try:
        start = time.perf_counter()
        for at in range(0, len(records), FLOOR_BATCH):
            rows = [_row(r) for r in records[at : at + FLOOR_BATCH]]
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(_INSERT, rows)
            conn.execute("COMMIT")
        return len(records) / (time.perf_counter() - start)
    finally:
        conn.close()


def single_row_floor(
    records: Sequence[Any], folder: Path, name: str = "single-row-floor.sqlite3"
) -> float:
    """Records per second with one record per durable commit (a fresh database each call)."""
    conn = open_floor(folder / name)
    try:
        start = time.perf_counter()
        for record in records:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(_INSERT, _row(record))
            conn.execute("COMMIT")
        return len(records) / (time.perf_counter() - start)
    finally:
        conn.close()


def floor_bytes_per_record(records: Sequence[Any], folder: Path) -> float:
    """Bytes of the fast floor's database file per record, after a full checkpoint."""
    path = folder / "floor-bytes.sqlite3"
    fast_floor(records, folder, path.name)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return path.stat().st_size / max(1, len(records))
