"""Meta, keys, key trust, entries and the `/record` index."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from capability_anchor.store.rows import EntryRow, HeadRow, server_key_digest

from . import SqlBase

HEAD_COLUMNS = "day, tree_size, sealed, root, iat, kid, doc"

# Every day that has entries, ascending, one primary-key probe per day: `DISTINCT day` reads
# the whole table on both engines (decisions/36-store.md has the figures).
DAYS = """WITH RECURSIVE days (day) AS (
    SELECT min(day) FROM entries
    UNION ALL
    SELECT (SELECT min(e.day) FROM entries e WHERE e.day > days.day) FROM days
    WHERE days.day IS NOT NULL
)"""


def head_row(row: Any) -> HeadRow:
    day, size, sealed, root, iat, kid, doc = row
    return HeadRow(str(day), int(size), bool(sealed), bytes(root), int(iat), str(kid), bytes(doc))


class SqlRows(SqlBase):
    # --- meta, keys and key trust --------------------------------------------------------

    def set_meta(self, key: str, value: str) -> None:
        self._exec(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def clear_meta(self, key: str) -> None:
        self._exec("DELETE FROM meta WHERE key = ?", (key,))

    def meta(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self._exec("SELECT key, value FROM meta")}

    def add_key(self, kid: str, jwk_json: str, added: int) -> None:
        """Store a public key; the same (kid, jwk) again is a no-op (another jwk under the
        kid is refused by the table's own guard, which runs before the conflict check)."""
        self._insert("keys", ("kid", "jwk", "added"), [(kid, jwk_json, added)], ignore=True)

    def signing_keys(self) -> list[tuple[str, str]]:
        """(kid, jwk json) of every stored key, by kid."""
        sql = f"SELECT kid, jwk FROM keys ORDER BY kid{self._dialect.collate}"
        return [(str(k), str(j)) for k, j in self._exec(sql)]

    def key_rows(self) -> list[tuple[str, str, int]]:
        """(kid, jwk json, added) of every stored key, by kid (an exact copy, `migrate`)."""
        sql = f"SELECT kid, jwk, added FROM keys ORDER BY kid{self._dialect.collate}"
        return [(str(k), str(j), int(a)) for k, j, a in self._exec(sql)]

    # Rotation records, settings statements and policies are numbered as SQLite's rowid
    # would: no gap for a rolled-back insert (the ids are shown), under the write lock.
    def add_key_record(self, signer: str, kid: str, token: str, added: int) -> None:
        self._exec(
            "INSERT INTO key_records (id, signer, kid, jws, added) "
            "SELECT COALESCE(max(id), 0) + 1, ?, ?, ?, ? FROM key_records",
            (signer, kid, token, added),
        )

    def key_records(self) -> list[tuple[int, str, str, str]]:
        """(id, signer kid, endorsed kid, compact JWS) of every rotation record, in order."""
        return [
            (int(i), str(s), str(k), str(j))
            for i, s, k, j in self._exec("SELECT id, signer, kid, jws FROM key_records ORDER BY id")
        ]

    def add_settings(self, kid: str, token: str, added: int) -> None:
        self._exec(
            "INSERT INTO settings (id, kid, jws, added) "
            "SELECT COALESCE(max(id), 0) + 1, ?, ?, ? FROM settings",
            (kid, token, added),
        )

    def settings_statements(self) -> list[tuple[int, str, str]]:
        """(id, signer kid, compact JWS) of every settings statement, oldest first."""
        return [
            (int(i), str(k), str(j))
            for i, k, j in self._exec("SELECT id, kid, jws FROM settings ORDER BY id")
        ]

    def newest_settings(self) -> tuple[int, str, str] | None:
        """The newest settings statement (id, signer kid, compact JWS): which key signs now."""
        row = self._one("SELECT id, kid, jws FROM settings ORDER BY id DESC LIMIT 1")
        return None if row is None else (int(row[0]), str(row[1]), str(row[2]))

    def added_times(self) -> dict[str, dict[int, int]]:
        """`added` of every settings statement and rotation record, by table and id."""
        return {
            table: {int(i): int(a) for i, a in self._exec(f"SELECT id, added FROM {table}")}
            for table in ("settings", "key_records")
        }

    # --- entries ---------------------------------------------------------------------------

    def insert_entries(
        self, day: str, first_index: int, rows: Sequence[tuple[bytes, bytes]], accepted_at: int
    ) -> None:
        """(leaf_hash, claims) rows at indices first_index, first_index + 1, ..."""
        self._insert(
            "entries",
            ("day", "leaf_index", "leaf_hash", "claims", "accepted_at"),
            ((day, first_index + n, h, claims, accepted_at) for n, (h, claims) in enumerate(rows)),
            types=("text", "int8", "bytea", "bytea", "int8"),
        )

    def entry_days(self) -> list[str]:
        sql = f"{DAYS} SELECT day FROM days WHERE day IS NOT NULL ORDER BY day"
        return [str(d) for (d,) in self._exec(sql)]

    def head_days(self, before: str | None, limit: int) -> list[str]:
        """Up to `limit` days with a published head before `before` (None: any), newest first:
        one index seek each, however many heads a day has (the explorer's page of days)."""
        days: list[str] = []
        while len(days) < limit:
            where, params = ("", ()) if before is None else (" WHERE day < ?", (before,))
            (day,) = self._one(f"SELECT max(day) FROM heads{where}", params)
            if day is None:
                break
            days.append(before := str(day))
        return days

    def day_size(self, day: str) -> int:
        row = self._one("SELECT max(leaf_index) FROM entries WHERE day = ?", (day,))
        return 0 if row[0] is None else int(row[0]) + 1

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
                (day, start, self._limit(limit)),
            )
        ]

    def entry(self, day: str, leaf_index: int) -> EntryRow | None:
        rows = self.entries(day, leaf_index, 1)
        return rows[0] if rows and rows[0].leaf_index == leaf_index else None

    def iter_entries(self, day: str, chunk: int = 10_000) -> Iterator[EntryRow]:
        """Paged by the primary key: each page is a fresh query, so a long audit does not
        hold one read transaction open for minutes."""
        start = 0
        while True:
            rows = self.entries(day, start, chunk)
            yield from rows
            if len(rows) < chunk:
                return
            start = rows[-1].leaf_index + 1

    def accepted_at(self, day: str, leaf_index: int) -> int | None:
        """The second (Unix time) the entry was accepted at, as stored with it."""
        row = self._one(
            "SELECT accepted_at FROM entries WHERE day = ? AND leaf_index = ?", (day, leaf_index)
        )
        return None if row is None else int(row[0])

    def accepted_runs(self, day: str) -> list[tuple[int, int, int]]:
        """(first leaf_index, count, accepted_at) of each run of a day's entries accepted in
        one second, in index order (an exact copy, `migrate`): a run's indices less their
        rank among that second's entries are one number."""
        sql = (
            "SELECT min(leaf_index), count(*), accepted_at FROM (SELECT leaf_index, "
            "accepted_at, leaf_index - row_number() OVER (PARTITION BY accepted_at ORDER BY "
            "leaf_index) AS run FROM entries WHERE day = ?) AS numbered "
            "GROUP BY accepted_at, run ORDER BY 1"
        )
        return [(int(f), int(n), int(a)) for f, n, a in self._exec(sql, (day,))]

    def entries_accepted_off_day(self) -> list[tuple[str, int, int]]:
        """(day, leaf_index, accepted_at) of every entry not accepted on its UTC day."""
        return [
            (str(d), int(i), int(a))
            for d, i, a in self._exec(
                "SELECT day, leaf_index, accepted_at FROM entries "
                f"WHERE {self._dialect.off_day} ORDER BY day, leaf_index"
            )
        ]

    # --- the `/record` index: `server_key_digest` of each key ------------------------------

    def insert_servers(self, day: str, rows: Iterable[tuple[str, int]]) -> None:
        """(key digest, leaf_index) rows of the `/record` index; one already stored is left
        alone. Inserted in the order of the digest: a run shares its b-tree pages."""
        self._insert(
            "servers",
            ("key", "day", "leaf_index"),
            sorted([(digest, day, index) for digest, index in rows]),
            ignore=True,
        )

    def iter_servers(self, day: str) -> Iterator[tuple[int, str]]:
        """(leaf_index, key digest) of a day's `/record` index, in index order."""
        for index, key in self._iter(
            "SELECT leaf_index, key FROM servers WHERE day = ? "
            f"ORDER BY leaf_index, key{self._dialect.collate}",
            (day,),
        ):
            yield int(index), str(key)

    def server_entries(self, key: str, limit: int = 50) -> list[tuple[str, int]]:
        """(day, leaf_index) of the entries indexed under `key`'s digest, newest first: a
        reader compares each entry's own keys (a digest may, rarely, name another's)."""
        return [
            (str(d), int(i))
            for d, i in self._exec(
                "SELECT day, leaf_index FROM servers WHERE key = ? "
                "ORDER BY day DESC, leaf_index DESC LIMIT ?",
                (server_key_digest(key), self._limit(limit)),
            )
        ]
