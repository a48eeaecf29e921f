"""The SQLite implementation's reads and writes of the log's rows.

Appends stay raw `executemany` (`insert_entries`, `insert_servers`, `insert_tiles`): the
append path is the hot one, and sqlite-utils' `insert_all` builds each chunk's SQL, checks
columns and converts values in Python first. `tools/bench_store_insert.py` measures both on
the same rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence

from capability_anchor.store import queries
from capability_anchor.store.rows import EntryRow, HeadRow, StampRow, TileRow, server_key_digest

from .base import SqliteBase
from .errors import store_error
from .tiles import DAY_TILES, SqliteTiles, edge_partials

HEAD_COLUMNS = "day, tree_size, sealed, root, iat, kid, doc"
# The dedupe index's key: this many bytes of the leaf hash (schema 5, migrations/v5.py). At
# 10^9 entries a probe meets another leaf under its prefix about once in 280,000 probes.
PREFIX = 6


def head_row(row: Sequence[object]) -> HeadRow:
    day, size, sealed, root, iat, kid, doc = row
    return HeadRow(str(day), int(size), bool(sealed), bytes(root), int(iat), str(kid), bytes(doc))  # type: ignore[call-overload]


class SqliteEntries(SqliteTiles):
    """Meta, keys, entries, the `/record` index, tiles."""

    # --- meta and keys ---------------------------------------------------------------------

    def set_meta(self, key: str, value: str) -> None:
        self._exec("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def meta(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self._exec("SELECT key, value FROM meta")}

    def add_key(self, kid: str, jwk_json: str, added: int) -> None:
        self._exec(
            "INSERT OR IGNORE INTO keys (kid, jwk, added) VALUES (?, ?, ?)", (kid, jwk_json, added)
        )

    def signing_keys(self) -> list[tuple[str, str]]:
        return [(str(k), str(j)) for k, j in self._exec("SELECT kid, jwk FROM keys ORDER BY kid")]

    # --- entries ---------------------------------------------------------------------------

    def day_size(self, day: str) -> int:
        row = self._one("SELECT max(leaf_index) FROM entries WHERE day = ?", (day,))
        return 0 if row[0] is None else int(row[0]) + 1

    def existing(self, day: str, leaf_hashes: Sequence[bytes]) -> dict[bytes, int]:
        """Leaf indices of those hashes already stored in `day` (dedupe)."""
        found: dict[bytes, int] = {}
        wanted = set(leaf_hashes)
        for start in range(0, len(leaf_hashes), 500):
            chunk = leaf_hashes[start : start + 500]
            marks = ",".join("?" * len(chunk))
            # The index holds 6-byte prefixes (schema 5): a probe by prefix, then the whole
            # hash compared here. INDEXED BY: the day's primary key must never be scanned.
            for h, i in self._exec(
                "SELECT leaf_hash, leaf_index FROM entries INDEXED BY entries_by_hash "
                f"WHERE substr(leaf_hash, 1, 6) IN ({marks}) AND day = ?",
                (*(h[:PREFIX] for h in chunk), day),
            ):
                if bytes(h) in wanted:
                    found[bytes(h)] = int(i)
        return found

    def insert_entries(
        self, day: str, first_index: int, rows: Sequence[tuple[bytes, bytes]], accepted_at: int
    ) -> None:
        self._execmany(
            "INSERT INTO entries (day, leaf_index, leaf_hash, claims, accepted_at) "
            "VALUES (?, ?, ?, ?, ?)",
            ((day, first_index + n, h, claims, accepted_at) for n, (h, claims) in enumerate(rows)),
        )

    def insert_servers(self, day: str, rows: Iterable[tuple[str, int]]) -> None:
        """Index server records by `sub:<id>` and `url:<canonical url>` for `/record`."""
        self._execmany(
            "INSERT OR IGNORE INTO servers (key, day, leaf_index) VALUES (?, ?, ?)",
            ((server_key_digest(key), day, index) for key, index in rows),
        )

    def iter_servers(self, day: str) -> Iterator[tuple[int, str]]:
        """(leaf_index, key digest) of a day's server index, in index order (for the audit;
        schema 5 stores `server_key_digest` of each key)."""
        for index, key in self._iter(
            "SELECT leaf_index, key FROM servers WHERE day = ? ORDER BY leaf_index, key", (day,)
        ):
            yield int(index), str(key)

    def server_entries(self, key: str, limit: int = 50) -> list[tuple[str, int]]:
        """(day, leaf_index) of a server's entries, newest first."""
        return [
            (str(d), int(i))
            for d, i in self._exec(
                "SELECT day, leaf_index FROM servers WHERE key = ? "
                "ORDER BY day DESC, leaf_index DESC LIMIT ?",
                (server_key_digest(key), limit),
            )
        ]

    def leaf_hashes(self, day: str, start: int, end: int) -> list[bytes]:
        return [
            bytes(h)
            for (h,) in self._exec(
                "SELECT leaf_hash FROM entries WHERE day = ? AND leaf_index >= ? "
                "AND leaf_index < ? ORDER BY leaf_index",
                (day, start, end),
            )
        ]

    def entries(self, day: str, start: int, limit: int) -> list[EntryRow]:
        return [
            EntryRow(day, int(i), bytes(h), bytes(c))
            for i, h, c in self._exec(
                "SELECT leaf_index, leaf_hash, claims FROM entries WHERE day = ? "
                "AND leaf_index >= ? ORDER BY leaf_index LIMIT ?",
                (day, start, limit),
            )
        ]

    def entry(self, day: str, leaf_index: int) -> EntryRow | None:
        rows = self.entries(day, leaf_index, 1)
        return rows[0] if rows and rows[0].leaf_index == leaf_index else None

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

    def accepted_at(self, day: str, leaf_index: int) -> int | None:
        rows = self._exec(
            "SELECT accepted_at FROM entries WHERE day = ? AND leaf_index = ?", (day, leaf_index)
        )
        return int(rows[0][0]) if rows else None

    def find_leaf(self, leaf_hash: bytes) -> list[tuple[str, int]]:
        """Every (day, leaf_index) holding this leaf hash, newest day first."""
        return [
            (str(d), int(i))
            for d, i in self._exec(
                "SELECT day, leaf_index FROM entries INDEXED BY entries_by_hash "
                "WHERE substr(leaf_hash, 1, 6) = ? AND leaf_hash = ? ORDER BY day DESC",
                (leaf_hash[:PREFIX], leaf_hash),
            )
        ]

    def entry_days(self) -> list[str]:
        return [str(d) for (d,) in self._exec("SELECT DISTINCT day FROM entries ORDER BY day")]

    def iter_entries(self, day: str, chunk: int = 10_000) -> Iterator[EntryRow]:
        start = 0
        while True:
            # Paged by the primary key: each page is a fresh query, so a long audit does not
            # hold one read transaction open for minutes.
            rows = self._exec(
                "SELECT leaf_index, leaf_hash, claims FROM entries WHERE day = ? "
                "AND leaf_index >= ? ORDER BY leaf_index LIMIT ?",
                (day, start, chunk),
            )
            for i, h, c in rows:
                yield EntryRow(day, int(i), bytes(h), bytes(c))
            if len(rows) < chunk:
                return
            start = int(rows[-1][0]) + 1

    # --- tiles (sqlite_tiles: the same code as the history's) ------------------------------

    def insert_tiles(
        self, day: str, rows: Iterable[tuple[int, int, int, bytes, bytes | None]]
    ) -> None:
        """Insert tiles (level, index, width, hashes, root); an identical one already stored is
        left alone (tiles are deterministic from the entries)."""
        self._insert_tiles_in(DAY_TILES, (day,), rows)

    def tile(self, day: str, level: int, index: int, min_width: int) -> bytes | None:
        """The narrowest stored version of a tile that holds at least `min_width` hashes."""
        return self._tile_in(DAY_TILES, (day,), level, index, min_width)

    def full_tile_roots(self, day: str, level: int, first: int, count: int) -> list[bytes]:
        return self._full_tile_roots_in(DAY_TILES, (day,), level, first, count)

    def edge_partials(self, day: str, size: int) -> list[bytes]:
        """The partial tile of each level at tree `size`, rebuilt from stored data."""
        return edge_partials(
            size,
            lambda start, end: self.leaf_hashes(day, start, end),
            lambda level, first, count: self.full_tile_roots(day, level, first, count),
            f"day {day}",
        )

    def iter_tiles(self, day: str) -> Iterator[TileRow]:
        return self._iter_tiles_in(DAY_TILES, (day,), day)


class SqliteHeads(SqliteBase):
    """Heads, stamps, key trust, and raw SQL for the tests that play the attacker."""

    # --- heads -----------------------------------------------------------------------------

    def insert_head(self, head: HeadRow) -> None:
        self._exec(
            f"INSERT INTO heads ({HEAD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (head.day, head.tree_size, int(head.sealed), head.root, head.iat, head.kid, head.doc),
        )

    def _heads(
        self, where: str, params: Sequence[object], order: str, limit: int | None = None
    ) -> list[HeadRow]:
        sql = f"SELECT {HEAD_COLUMNS} FROM heads WHERE {where} ORDER BY {order}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [head_row(r) for r in self._exec(sql, params)]

    def heads(self, day: str) -> list[HeadRow]:
        return self._heads("day = ?", (day,), "tree_size, sealed")

    def all_heads(self) -> list[HeadRow]:
        return self._heads("1", (), "day, tree_size, sealed")

    def head(self, day: str, tree_size: int, sealed: bool) -> HeadRow | None:
        rows = self._heads(
            "day = ? AND tree_size = ? AND sealed = ?", (day, tree_size, int(sealed)), "day"
        )
        return rows[0] if rows else None

    def sealed_head(self, day: str) -> HeadRow | None:
        rows = self._heads("day = ? AND sealed = 1", (day,), "day")
        return rows[0] if rows else None

    def newest_head(self, day: str) -> HeadRow | None:
        """The sealed head of the day, else its largest unsealed head. Two queries that the
        primary key (day, tree_size, sealed) answers: one `ORDER BY sealed DESC, tree_size
        DESC` sorted every head of the day, documents and all (1,440 a day at one a minute)."""
        return self.sealed_head(day) or self.newest_unsealed(day)

    def newest_unsealed(self, day: str) -> HeadRow | None:
        rows = self._heads("day = ? AND sealed = 0", (day,), "tree_size DESC", 1)
        return rows[0] if rows else None

    def has_head_between(self, day: str, low: int, high: int) -> bool:
        row = self._one(
            "SELECT 1 FROM heads WHERE day = ? AND tree_size >= ? AND tree_size < ? LIMIT 1",
            (day, low, high),
        )
        return row is not None

    def sealed_heads(self, before: str | None = None, limit: int | None = None) -> list[HeadRow]:
        """Sealed heads, newest day first, optionally only days before `before`."""
        if before is None:
            return self._heads("sealed = 1", (), "day DESC", limit)
        return self._heads("sealed = 1 AND day < ?", (before,), "day DESC", limit)

    def last_sealed_day(self) -> str | None:
        row = self._one("SELECT max(day) FROM heads WHERE sealed = 1")
        return None if row[0] is None else str(row[0])

    def newest_published(self) -> HeadRow | None:
        rows = self._heads("1", (), "day DESC, sealed DESC, tree_size DESC", 1)
        return rows[0] if rows else None

    def newest_covering(self, day: str, leaf_index: int) -> HeadRow | None:
        """The newest head of `day` that covers `leaf_index`, if any."""
        rows = self._heads(
            "day = ? AND tree_size > ?", (day, leaf_index), "sealed DESC, tree_size DESC", 1
        )
        return rows[0] if rows else None

    # --- stamps ----------------------------------------------------------------------------

    def insert_stamp(self, stamp: StampRow, added: int) -> None:
        self._exec(
            "INSERT INTO stamps (day, tsa, token, gen_time, added) VALUES (?, ?, ?, ?, ?)",
            (stamp.day, stamp.tsa, stamp.token, stamp.gen_time, added),
        )

    def stamps(self, day: str) -> list[StampRow]:
        """Stamps of a day in the order they were stored: the first is "the earliest stored"
        (SPEC §6), which no later stamp can displace, whatever its genTime."""
        return [
            StampRow(str(d), str(t), bytes(tok), str(g))
            for d, t, tok, g in self._exec(
                "SELECT day, tsa, token, gen_time FROM stamps WHERE day = ? ORDER BY rowid",
                (day,),
            )
        ]

    # --- raw access, for tests that play the attacker ---------------------------------------

    def execute_raw(self, sql: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]:
        """Run SQL as given, on the writer connection in autocommit. Only tests use this, to
        show the triggers firing and to tamper with a copy the way an attacker with file access
        would."""
        with self._write_lock:
            try:
                return [tuple(r) for r in self._writer.execute(sql, params).fetchall()]
            except sqlite3.Error as exc:
                raise store_error(exc, "raw SQL failed") from None

    # --- key trust: rotation records and signed settings (trust.py, logtrust.py) -------------

    def clear_meta(self, key: str) -> None:
        self._exec("DELETE FROM meta WHERE key = ?", (key,))

    def add_key_record(self, signer: str, kid: str, token: str, added: int) -> None:
        self._exec(
            "INSERT INTO key_records (signer, kid, jws, added) VALUES (?, ?, ?, ?)",
            (signer, kid, token, added),
        )

    def key_records(self) -> list[tuple[int, str, str, str]]:
        """(id, signer kid, endorsed kid, compact JWS) of every rotation record, in order."""
        return [
            (int(i), str(s), str(k), str(j))
            for i, s, k, j in self._exec("SELECT id, signer, kid, jws FROM key_records ORDER BY id")
        ]

    def add_settings(self, kid: str, token: str, added: int) -> None:
        self._exec("INSERT INTO settings (kid, jws, added) VALUES (?, ?, ?)", (kid, token, added))

    def settings_statements(self) -> list[tuple[int, str, str]]:
        """(id, signer kid, compact JWS) of every settings statement, oldest first."""
        return [
            (int(i), str(k), str(j))
            for i, k, j in self._exec("SELECT id, kid, jws FROM settings ORDER BY id")
        ]

    def added_times(self) -> dict[str, dict[int, int]]:
        """`added` of every settings statement and rotation record, by table and id."""
        return {
            table: {int(i): int(a) for i, a in self._exec(f"SELECT id, added FROM {table}")}
            for table in ("settings", "key_records")
        }

    def key_rows(self) -> list[tuple[str, str, int]]:
        return queries.key_rows(self._exec(queries.KEY_ROWS.format(c="")))

    def accepted_runs(self, day: str) -> list[tuple[int, int, int]]:
        return queries.accepted_runs(self._exec(queries.ACCEPTED_RUNS.format(p="?"), (day,)))

    @property
    def head_reuse_s(self) -> float:
        return 0.0  # a head read is microseconds in the process

    def wake_signer(self) -> None:
        return None  # one writer, one signer: nobody else to wake

    def signature_wanted(self) -> bool:
        return False

    def lease_holder(self) -> str | None:
        return None  # the sequencer's lock file is the only lease, one per data dir
