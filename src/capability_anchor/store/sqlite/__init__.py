"""The SQLite engine: one database file in a data dir, reached through `store.open`; the only
package that imports `sqlite3` or `sqlite_utils`. `SqliteStore` spells the reads SQLite's
indexes answer its own way; its parts: `base` (connections, transactions, errors), `audit`,
`engine` (opening, the scrub), `schema` and `migrations/`, `wal`, and `witness`."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from capability_anchor.store.interface import Store
from capability_anchor.store.rows import EntryRow

from .audit import SqliteAudit
from .base import DB_NAME, store_error

# The dedupe index's key (schema 5, `migrations/v5.py`): this many bytes of the leaf hash,
# compared whole here. At 10^9 entries a probe meets another leaf under its prefix about
# once in 280,000 probes.
PREFIX = 6


class SqliteStore(SqliteAudit):
    """One SQLite database in a data dir (`base.SqliteBase` holds the connections)."""

    def existing(self, day: str, leaf_hashes: Sequence[bytes]) -> dict[bytes, int]:
        found: dict[bytes, int] = {}
        wanted = set(leaf_hashes)
        for start in range(0, len(leaf_hashes), 500):
            chunk = leaf_hashes[start : start + 500]
            marks = ",".join("?" * len(chunk))
            # INDEXED BY: the day's primary key must never be scanned.
            for h, i in self._exec(
                "SELECT leaf_hash, leaf_index FROM entries INDEXED BY entries_by_hash "
                f"WHERE substr(leaf_hash, 1, 6) IN ({marks}) AND day = ?",
                (*(h[:PREFIX] for h in chunk), day),
            ):
                if bytes(h) in wanted:
                    found[bytes(h)] = int(i)
        return found

    def find_leaf(self, leaf_hash: bytes) -> list[tuple[str, int]]:
        return [
            (str(d), int(i))
            for d, i in self._exec(
                "SELECT day, leaf_index FROM entries INDEXED BY entries_by_hash "
                "WHERE substr(leaf_hash, 1, 6) = ? AND leaf_hash = ? ORDER BY day DESC",
                (leaf_hash[:PREFIX], leaf_hash),
            )
        ]

    def entries_containing(self, day: str, start: int, needle: str, limit: int) -> list[EntryRow]:
        # SQLite's lower() folds ASCII letters only, as bytes.lower does.
        return [
            EntryRow(str(d), int(i), bytes(h), bytes(c))
            for d, i, h, c in self._exec(
                "SELECT day, leaf_index, leaf_hash, claims FROM entries WHERE day = ? AND "
                "leaf_index >= ? AND instr(lower(CAST(claims AS TEXT)), ?) > 0 "
                "ORDER BY leaf_index DESC LIMIT ?",
                (day, start, needle, limit),
            )
        ]

    def execute_raw(self, sql: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]:
        """Run SQL as given, on the writer connection in autocommit: only tests use this, to
        show the triggers firing and to tamper as an attacker with file access would."""
        with self._write_lock:
            try:
                return [tuple(r) for r in self._writer.execute(sql, params).fetchall()]
            except sqlite3.Error as exc:
                raise store_error(exc, "raw SQL failed") from None


__all__ = ["DB_NAME", "PREFIX", "SqliteStore"]

# Checked by mypy: only a class with no abstract method left may be assigned here.
_IMPLEMENTS: type[Store] = SqliteStore
