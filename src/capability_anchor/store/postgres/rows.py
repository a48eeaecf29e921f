"""The PostgreSQL implementation's reads and writes of the log's rows: SQLite's
(`store/sqlite/rows.py`) method for method, with the same results in the same order.

Where PostgreSQL needs other SQL for SQLite's answer:
- Text order: SQLite compares TEXT as bytes, PostgreSQL in the database's collation. Free
  text (kids, the `/record` index's base64url digests) is ordered `COLLATE "C"` (UTF-8 byte
  order). Days are not: a day is `YYYY-MM-DD`, which every collation orders as its bytes,
  and their orders and `max()` stay on the indexes, which are in the database's collation.
- The days of `entries`: with no skip scan in PostgreSQL 15, `DISTINCT day` or a probe by
  leaf hash alone reads the whole table; they step day to day on the primary key (`_DAYS`).
- A negative LIMIT: none to SQLite, an error to PostgreSQL (`_no_limit`).
- Rotation records and settings statements take SQLite's rowid, the largest id + 1: an
  identity column's sequence would leave a gap for every rolled-back insert, and the ids
  are shown (`settings #3`). Inserts run under the write lock, so two never take one id.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from capability_anchor.store.rows import EntryRow, HeadRow, StampRow, TileRow, server_key_digest

from .leader import PostgresLeader
from .tiles import DAY_TILES, PostgresTiles, edge_partials

HEAD_COLUMNS = "day, tree_size, sealed, root, iat, kid, doc"

# Every day that has entries, ascending, one primary-key probe per day.
_DAYS = """WITH RECURSIVE days (day) AS (
    SELECT min(day) FROM entries
    UNION ALL
    SELECT (SELECT min(e.day) FROM entries e WHERE e.day > days.day) FROM days
    WHERE days.day IS NOT NULL
)"""

# ASCII-only lower-casing of claims, as SQLite's lower() (and bytes.lower) does: read as
# LATIN1 every byte is one character, so any bytes convert (valid UTF-8 or not) and a
# substring of characters is a substring of bytes; lower() under "C" folds A-Z only. LATIN1
# text cannot hold a NUL byte, so claims with one are left to Python (entries_containing).
_HAS_NUL = "position('\\x00'::bytea IN claims) > 0"
_CONTAINS = (
    f"CASE WHEN {_HAS_NUL} THEN TRUE "
    "ELSE position(%s IN lower(convert_from(claims, 'LATIN1') COLLATE \"C\")) > 0 END"
)


def _no_limit(limit: int | None) -> int | None:
    """`limit` as SQLite reads it: a negative one is none (`LIMIT NULL` to PostgreSQL)."""
    return None if limit is None or limit < 0 else limit


# The dedupe probe of a batch: one index probe per hash, whatever the planner's statistics
# say. As `WHERE day = %s AND leaf_hash = ANY(%s)` the planner (its estimate of the day's
# rows taken while the day was small) read the whole day through a bitmap scan and tested
# each row against the array: 40 ms a batch at 100,000 entries, growing with the day. The
# LIMIT keeps the lateral subquery from being pulled up into a hash join over the day.
EXISTING = (
    "SELECT e.leaf_hash, e.leaf_index FROM unnest(%s::bytea[]) AS h (x) "
    "CROSS JOIN LATERAL (SELECT leaf_hash, leaf_index FROM entries "
    "WHERE day = %s AND leaf_hash = h.x LIMIT 1) AS e"
)


def head_row(row: Sequence[object]) -> HeadRow:
    day, size, sealed, root, iat, kid, doc = row
    return HeadRow(str(day), int(size), bool(sealed), bytes(root), int(iat), str(kid), bytes(doc))  # type: ignore[call-overload]


class PostgresEntries(PostgresTiles):
    """Meta, keys, entries, the `/record` index, tiles."""

    # --- meta and keys ---------------------------------------------------------------------

    def set_meta(self, key: str, value: str) -> None:
        self._exec(
            "INSERT INTO meta (key, value) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            (key, value),
        )

    def meta(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self._exec("SELECT key, value FROM meta")}

    def add_key(self, kid: str, jwk_json: str, added: int) -> None:
        """Store a public key; the same (kid, jwk) again is a no-op (another jwk under the
        kid is refused by the table's insert rule, which runs before the conflict check)."""
        self._exec(
            "INSERT INTO keys (kid, jwk, added) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
            (kid, jwk_json, added),
        )

    def signing_keys(self) -> list[tuple[str, str]]:
        return [
            (str(k), str(j))
            for k, j in self._exec('SELECT kid, jwk FROM keys ORDER BY kid COLLATE "C"')
        ]

    # --- entries ---------------------------------------------------------------------------

    def day_size(self, day: str) -> int:
        row = self._one("SELECT max(leaf_index) FROM entries WHERE day = %s", (day,))
        return 0 if row[0] is None else int(row[0]) + 1

    def existing(self, day: str, leaf_hashes: Sequence[bytes]) -> dict[bytes, int]:
        """Leaf indices of those hashes already stored in `day` (dedupe): one probe of
        `entries_by_hash` per hash (`EXISTING`)."""
        return {bytes(h): int(i) for h, i in self._exec(EXISTING, (list(leaf_hashes), day))}

    def insert_entries(
        self, day: str, first_index: int, rows: Sequence[tuple[bytes, bytes]], accepted_at: int
    ) -> None:
        # One statement for the batch: the entries' insert rule runs once per statement.
        self._copy(
            "entries (day, leaf_index, leaf_hash, claims, accepted_at)",
            ("text", "int8", "bytea", "bytea", "int8"),
            ((day, first_index + i, h, c, accepted_at) for i, (h, c) in enumerate(rows)),
        )

    def insert_servers(self, day: str, rows: Iterable[tuple[str, int]]) -> None:
        """Index server records by `sub:<id>` and `url:<canonical url>` for `/record`."""
        keys, indexes = [], []
        for key, index in rows:
            keys.append(server_key_digest(key))
            indexes.append(index)
        self._exec(
            "INSERT INTO servers (key, day, leaf_index) SELECT k, %s, i "
            "FROM unnest(%s::text[], %s::bigint[]) AS t (k, i) ON CONFLICT DO NOTHING",
            (day, keys, indexes),
        )

    def iter_servers(self, day: str) -> Iterator[tuple[int, str]]:
        """(leaf_index, key digest) of a day's server index, in index order (for the audit;
        the table holds `server_key_digest` of each key)."""
        for index, key in self._iter(
            "SELECT leaf_index, key FROM servers WHERE day = %s "
            'ORDER BY leaf_index, key COLLATE "C"',
            (day,),
        ):
            yield int(index), str(key)

    def server_entries(self, key: str, limit: int = 50) -> list[tuple[str, int]]:
        """(day, leaf_index) of a server's entries, newest first."""
        return [
            (str(d), int(i))
            for d, i in self._exec(
                "SELECT day, leaf_index FROM servers WHERE key = %s "
                "ORDER BY day DESC, leaf_index DESC LIMIT %s",
                (server_key_digest(key), _no_limit(limit)),
            )
        ]

    def leaf_hashes(self, day: str, start: int, end: int) -> list[bytes]:
        return [
            bytes(h)
            for (h,) in self._exec(
                "SELECT leaf_hash FROM entries WHERE day = %s AND leaf_index >= %s "
                "AND leaf_index < %s ORDER BY leaf_index",
                (day, start, end),
            )
        ]

    def entries(self, day: str, start: int, limit: int) -> list[EntryRow]:
        return [
            EntryRow(day, int(i), bytes(h), bytes(c))
            for i, h, c in self._exec(
                "SELECT leaf_index, leaf_hash, claims FROM entries WHERE day = %s "
                "AND leaf_index >= %s ORDER BY leaf_index LIMIT %s",
                (day, start, _no_limit(limit)),
            )
        ]

    def entry(self, day: str, leaf_index: int) -> EntryRow | None:
        rows = self.entries(day, leaf_index, 1)
        return rows[0] if rows and rows[0].leaf_index == leaf_index else None

    def entries_containing(self, day: str, start: int, needle: str, limit: int) -> list[EntryRow]:
        """Up to `limit` entries of `day` from `start` on, newest first, whose claims contain
        `needle` once ASCII letters are lower-cased. The SQL (`_CONTAINS`) selects them, and
        every claims with a NUL byte besides; Python's test, the same one, drops the rest,
        and pages on until `limit` are found or the day is read."""
        want = needle.encode()
        # A needle with a NUL is only ever in claims with one; PostgreSQL text holds none.
        test, args = (_HAS_NUL, ()) if b"\x00" in want else (_CONTAINS, (want.decode("latin-1"),))
        wanted = _no_limit(limit)
        found: list[EntryRow] = []
        below: int | None = None
        while wanted is None or len(found) < wanted:
            page = None if wanted is None else wanted - len(found)
            upto, bound = ("", ()) if below is None else ("AND leaf_index < %s ", (below,))
            rows = self._exec(
                "SELECT day, leaf_index, leaf_hash, claims FROM entries WHERE day = %s AND "
                f"leaf_index >= %s {upto}AND {test} ORDER BY leaf_index DESC LIMIT %s",
                (day, start, *bound, *args, page),
            )
            found += [
                EntryRow(str(d), int(i), bytes(h), bytes(c))
                for d, i, h, c in rows
                if want in bytes(c).lower()
            ]
            if page is None or len(rows) < page:
                break
            below = int(rows[-1][1])
        return found

    def accepted_at(self, day: str, leaf_index: int) -> int | None:
        rows = self._exec(
            "SELECT accepted_at FROM entries WHERE day = %s AND leaf_index = %s",
            (day, leaf_index),
        )
        return int(rows[0][0]) if rows else None

    def find_leaf(self, leaf_hash: bytes) -> list[tuple[str, int]]:
        """Every (day, leaf_index) holding this leaf hash, newest day first."""
        return [
            (str(d), int(i))
            for d, i in self._exec(
                f"{_DAYS} SELECT e.day, e.leaf_index FROM days "
                "JOIN entries e ON e.day = days.day AND e.leaf_hash = %s ORDER BY e.day DESC",
                (leaf_hash,),
            )
        ]

    def entry_days(self) -> list[str]:
        return [
            str(d)
            for (d,) in self._exec(
                f"{_DAYS} SELECT day FROM days WHERE day IS NOT NULL ORDER BY day"
            )
        ]

    def iter_entries(self, day: str, chunk: int = 10_000) -> Iterator[EntryRow]:
        start = 0
        while True:
            # Paged by the primary key: each page is a fresh query, so a long audit does not
            # hold one transaction (and the rows it pins) open for minutes.
            rows = self._exec(
                "SELECT leaf_index, leaf_hash, claims FROM entries WHERE day = %s "
                "AND leaf_index >= %s ORDER BY leaf_index LIMIT %s",
                (day, start, _no_limit(chunk)),
            )
            for i, h, c in rows:
                yield EntryRow(day, int(i), bytes(h), bytes(c))
            if len(rows) < chunk:
                return
            start = int(rows[-1][0]) + 1

    # --- tiles (PostgresTiles: the same code as the history's) ------------------------------

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


class PostgresHeads(PostgresLeader):
    """Heads, stamps and key trust."""

    # --- heads -----------------------------------------------------------------------------

    def insert_head(self, head: HeadRow) -> None:
        """Insert a head under this store's fencing term (`LeaseLost` if another replica
        holds the sequencer lease, or took it since)."""
        h, term = head, self._signing_term()
        self._exec(
            f"INSERT INTO heads ({HEAD_COLUMNS}, term) VALUES ({', '.join(['%s'] * 8)})",
            (h.day, h.tree_size, int(h.sealed), h.root, h.iat, h.kid, h.doc, term),
        )

    def _heads(
        self, where: str, params: Sequence[object], order: str, limit: int | None = None
    ) -> list[HeadRow]:
        sql = f"SELECT {HEAD_COLUMNS} FROM heads WHERE {where} ORDER BY {order} LIMIT %s"
        return [head_row(r) for r in self._exec(sql, (*params, _no_limit(limit)))]

    def heads(self, day: str) -> list[HeadRow]:
        return self._heads("day = %s", (day,), "tree_size, sealed")

    def all_heads(self) -> list[HeadRow]:
        return self._heads("TRUE", (), "day, tree_size, sealed")

    def head(self, day: str, tree_size: int, sealed: bool) -> HeadRow | None:
        rows = self._heads(
            "day = %s AND tree_size = %s AND sealed = %s", (day, tree_size, int(sealed)), "day"
        )
        return rows[0] if rows else None

    def sealed_head(self, day: str) -> HeadRow | None:
        rows = self._heads("day = %s AND sealed = 1", (day,), "day")
        return rows[0] if rows else None

    def newest_head(self, day: str) -> HeadRow | None:
        """The sealed head of the day, else its largest unsealed head: one round trip of two
        index lookups (every `GET /proof` asks), where one `ORDER BY sealed DESC, tree_size
        DESC` would sort every head of the day."""
        sql = (
            f"(SELECT {HEAD_COLUMNS} FROM heads WHERE day = %s AND sealed = 1 LIMIT 1) UNION ALL "
            f"(SELECT {HEAD_COLUMNS} FROM heads WHERE day = %s AND sealed = 0 "
            "ORDER BY tree_size DESC LIMIT 1)"
        )
        found = [head_row(r) for r in self._exec(sql, (day, day))]
        return max(found, key=lambda row: row.sealed, default=None)

    def newest_unsealed(self, day: str) -> HeadRow | None:
        rows = self._heads("day = %s AND sealed = 0", (day,), "tree_size DESC", 1)
        return rows[0] if rows else None

    def has_head_between(self, day: str, low: int, high: int) -> bool:
        """Whether a head of `day` has a size in `low <= size < high` (its partial tiles)."""
        row = self._one(
            "SELECT 1 FROM heads WHERE day = %s AND tree_size >= %s AND tree_size < %s LIMIT 1",
            (day, low, high),
        )
        return row is not None

    def sealed_heads(self, before: str | None = None, limit: int | None = None) -> list[HeadRow]:
        """Sealed heads, newest day first, optionally only days before `before`."""
        if before is None:
            return self._heads("sealed = 1", (), "day DESC", limit)
        return self._heads("sealed = 1 AND day < %s", (before,), "day DESC", limit)

    def last_sealed_day(self) -> str | None:
        row = self._one("SELECT max(day) FROM heads WHERE sealed = 1")
        return None if row[0] is None else str(row[0])

    def newest_published(self) -> HeadRow | None:
        rows = self._heads("TRUE", (), "day DESC, sealed DESC, tree_size DESC", 1)
        return rows[0] if rows else None

    def newest_covering(self, day: str, leaf_index: int) -> HeadRow | None:
        """The newest head of `day` that covers `leaf_index`, if any."""
        rows = self._heads(
            "day = %s AND tree_size > %s", (day, leaf_index), "sealed DESC, tree_size DESC", 1
        )
        return rows[0] if rows else None

    # --- stamps ----------------------------------------------------------------------------

    def insert_stamp(self, stamp: StampRow, added: int) -> None:
        self._exec(
            "INSERT INTO stamps (day, tsa, token, gen_time, added) VALUES (%s, %s, %s, %s, %s)",
            (stamp.day, stamp.tsa, stamp.token, stamp.gen_time, added),
        )

    def stamps(self, day: str) -> list[StampRow]:
        """Stamps of a day in the order they were stored: the first is "the earliest stored"
        (SPEC §6), which no later stamp can displace, whatever its genTime."""
        return [
            StampRow(str(d), str(t), bytes(tok), str(g))
            for d, t, tok, g in self._exec(
                "SELECT day, tsa, token, gen_time FROM stamps WHERE day = %s ORDER BY id",
                (day,),
            )
        ]


__all__ = ["HEAD_COLUMNS", "PostgresEntries", "PostgresHeads", "head_row"]
