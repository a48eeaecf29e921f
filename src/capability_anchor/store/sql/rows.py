"""Meta, keys, key trust, entries, the `/record` index, and both trees' tiles (the day trees'
in `tiles`, keyed by day; the history's in `history_tiles`, with its leaves in `history`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from capability_anchor.errors import StoreError
from capability_anchor.merkle import TILE_HEIGHT, partial_counts
from capability_anchor.store.rows import EntryRow, HeadRow, HistoryLeaf, TileRow, server_key_digest

from . import SqlBase

TileValues = tuple[int, int, int, bytes, bytes | None]  # (level, index, width, hashes, root)
TILE_COLUMNS = ("level", "idx", "width", "hashes", "root")
HEAD_COLUMNS = "day, tree_size, sealed, root, iat, kid, doc"
LEAF_COLUMNS = "idx, leaf_hash, day, sealed, tree_size"
HISTORY_LABEL = "history"  # the `day` of the history's TileRows: it is no day's tree
# A tree's tiles: (table, the condition naming the tree with `?` for its key, the key).
Tree = tuple[str, str, tuple[str, ...]]
HISTORY: Tree = ("history_tiles", "TRUE", ())


def day_tree(day: str) -> Tree:
    return ("tiles", "day = ?", (day,))


def head_row(row: Sequence[object]) -> HeadRow:
    day, size, sealed, root, iat, kid, doc = row
    return HeadRow(str(day), int(size), bool(sealed), bytes(root), int(iat), str(kid), bytes(doc))  # type: ignore[call-overload]


def _leaf(row: Sequence[object]) -> HistoryLeaf:
    index, leaf_hash, day, sealed, tree_size = row
    return HistoryLeaf(int(index), bytes(leaf_hash), str(day), bool(sealed), int(tree_size))  # type: ignore[call-overload]


def edge_partials(
    size: int,
    leaf_hashes: Callable[[int, int], list[bytes]],
    full_tile_roots: Callable[[int, int, int], list[bytes]],
    what: str,
) -> list[bytes]:
    """The partial tile of each level at tree `size`, from the stored leaf hashes and the
    roots of the last full tiles below each level."""
    partials: list[bytes] = []
    for level, count in enumerate(partial_counts(size)):
        if count == 0:
            partials.append(b"")
            continue
        at_level = size >> (TILE_HEIGHT * level)
        first = at_level - count  # index of the first hash of the partial tile
        if level == 0:
            hashes = leaf_hashes(first, at_level)
        else:
            hashes = full_tile_roots(level - 1, first, count)
        if len(hashes) != count:
            raise StoreError(
                f"{what}: level {level} of the tree at size {size} needs {count} "
                f"hashes, the store has {len(hashes)} (missing leaves or tiles)"
            )
        partials.append(b"".join(hashes))
    return partials


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
        """(key, leaf_index) rows of the `/record` index; one already stored is left alone."""
        self._insert(
            "servers",
            ("key", "day", "leaf_index"),
            ((server_key_digest(key), day, index) for key, index in rows),
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

    # --- tiles: full ones (width 256, with their root) and the partial ones of published
    # sizes; an identical stored tile is left alone, another refused by the table ------------

    def _insert_tiles(self, tree: Tree, rows: Iterable[TileValues]) -> None:
        table, _, key = tree
        cols = ("day", *TILE_COLUMNS) if key else TILE_COLUMNS
        self._insert(table, cols, ((*key, *row) for row in rows), ignore=True)

    def _tile(self, tree: Tree, level: int, index: int, min_width: int) -> bytes | None:
        table, where, key = tree
        row = self._one(
            f"SELECT hashes FROM {table} WHERE {where} AND level = ? AND idx = ? "
            "AND width >= ? ORDER BY width LIMIT 1",
            (*key, level, index, min_width),
        )
        return None if row is None else bytes(row[0])

    def _full_tile_roots(self, tree: Tree, level: int, first: int, count: int) -> list[bytes]:
        table, where, key = tree
        return [
            bytes(r)
            for (r,) in self._exec(
                f"SELECT root FROM {table} WHERE {where} AND level = ? AND width = 256 "
                "AND idx >= ? AND idx < ? ORDER BY idx",
                (*key, level, first, first + count),
            )
        ]

    def _iter_tiles(self, tree: Tree, label: str) -> Iterator[TileRow]:
        table, where, key = tree
        for level, idx, width, hashes, root in self._iter(
            f"SELECT level, idx, width, hashes, root FROM {table} WHERE {where} "
            "ORDER BY level, idx, width",
            key,
        ):
            yield TileRow(
                label,
                int(level),
                int(idx),
                int(width),
                bytes(hashes),
                None if root is None else bytes(root),
            )

    def insert_tiles(self, day: str, rows: Iterable[TileValues]) -> None:
        """(level, index, width, hashes, root) tiles of a day's tree."""
        self._insert_tiles(day_tree(day), rows)

    def tile(self, day: str, level: int, index: int, min_width: int) -> bytes | None:
        """The narrowest stored version of a tile that holds at least `min_width` hashes."""
        return self._tile(day_tree(day), level, index, min_width)

    def full_tile_roots(self, day: str, level: int, first: int, count: int) -> list[bytes]:
        return self._full_tile_roots(day_tree(day), level, first, count)

    def edge_partials(self, day: str, size: int) -> list[bytes]:
        """The partial tile of each level at tree `size`, rebuilt from stored data."""
        return edge_partials(
            size,
            lambda start, end: self.leaf_hashes(day, start, end),
            lambda level, first, count: self.full_tile_roots(day, level, first, count),
            f"day {day}",
        )

    def iter_tiles(self, day: str) -> Iterator[TileRow]:
        return self._iter_tiles(day_tree(day), day)

    # --- the history tree (SPEC §12.1): one leaf per published head, after it --------------

    def insert_history_leaf(self, leaf: HistoryLeaf) -> None:
        self._exec(
            f"INSERT INTO history ({LEAF_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
            (leaf.index, leaf.leaf_hash, leaf.day, int(leaf.sealed), leaf.tree_size),
        )

    def insert_history_tiles(self, rows: Iterable[TileValues]) -> None:
        self._insert_tiles(HISTORY, rows)

    def history_size(self) -> int:
        row = self._one("SELECT max(idx) FROM history")
        return 0 if row[0] is None else int(row[0]) + 1

    def history_leaf_hashes(self, start: int, end: int) -> list[bytes]:
        return [
            bytes(h)
            for (h,) in self._exec(
                "SELECT leaf_hash FROM history WHERE idx >= ? AND idx < ? ORDER BY idx",
                (start, end),
            )
        ]

    def history_leaf(self, leaf_hash: bytes) -> HistoryLeaf | None:
        """The leaf with this leaf hash, if any."""
        row = self._one(f"SELECT {LEAF_COLUMNS} FROM history WHERE leaf_hash = ?", (leaf_hash,))
        return None if row is None else _leaf(row)

    def history_leaf_of(self, day: str, sealed: bool, tree_size: int) -> HistoryLeaf | None:
        """The leaf of that head, if any."""
        row = self._one(
            f"SELECT {LEAF_COLUMNS} FROM history WHERE day = ? AND sealed = ? AND tree_size = ?",
            (day, int(sealed), tree_size),
        )
        return None if row is None else _leaf(row)

    def history_heads(self, start: int, end: int) -> list[HeadRow]:
        """The heads of leaves start..end-1."""
        columns = ", ".join(f"h.{c.strip()}" for c in HEAD_COLUMNS.split(","))
        return [
            head_row(r)
            for r in self._exec(
                f"SELECT {columns} FROM history x JOIN heads h ON h.day = x.day "
                "AND h.sealed = x.sealed AND h.tree_size = x.tree_size "
                "WHERE x.idx >= ? AND x.idx < ? ORDER BY x.idx",
                (start, end),
            )
        ]

    def iter_history(self, chunk: int = 10_000) -> Iterator[HistoryLeaf]:
        """Every leaf, by index."""
        start = 0
        while True:
            rows = self._exec(
                f"SELECT {LEAF_COLUMNS} FROM history WHERE idx >= ? ORDER BY idx LIMIT ?",
                (start, chunk),
            )
            yield from (_leaf(r) for r in rows)
            if len(rows) < chunk:
                return
            start = int(rows[-1][0]) + 1

    def history_tile(self, level: int, index: int, min_width: int) -> bytes | None:
        return self._tile(HISTORY, level, index, min_width)

    def history_edge_partials(self, size: int) -> list[bytes]:
        return edge_partials(
            size,
            self.history_leaf_hashes,
            lambda level, first, count: self._full_tile_roots(HISTORY, level, first, count),
            "the history",
        )

    def iter_history_tiles(self) -> Iterator[TileRow]:
        return self._iter_tiles(HISTORY, HISTORY_LABEL)


__all__ = ["HEAD_COLUMNS", "HISTORY_LABEL", "SqlRows", "TileValues", "head_row"]
