"""The history tree's rows in PostgreSQL (SPEC §12.1), as SQLite's (`store/sqlite/history.py`):
its leaves (`history`, one per published head, by index) and its tiles (`history_tiles`,
through the same code as the day trees' tiles, `tiles.py`). Migration 1's insert rules keep
the leaves contiguous, in publication order, and each one a stored head."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from capability_anchor.store.rows import HeadRow, HistoryLeaf, TileRow

from .rows import HEAD_COLUMNS, head_row
from .tiles import HISTORY_TILES, PostgresTiles, TileValues, edge_partials

HISTORY_LABEL = "history"  # the `day` of the history's TileRows: it is no day's tree
_LEAF_COLUMNS = "idx, leaf_hash, day, sealed, tree_size"


def _leaf(row: Sequence[object]) -> HistoryLeaf:
    index, leaf_hash, day, sealed, tree_size = row
    return HistoryLeaf(int(index), bytes(leaf_hash), str(day), bool(sealed), int(tree_size))  # type: ignore[call-overload]


class PostgresHistory(PostgresTiles):
    """The history leaves and tiles."""

    def insert_history_leaf(self, leaf: HistoryLeaf) -> None:
        self._exec(
            f"INSERT INTO history ({_LEAF_COLUMNS}) VALUES (%s, %s, %s, %s, %s)",
            (leaf.index, leaf.leaf_hash, leaf.day, int(leaf.sealed), leaf.tree_size),
        )

    def insert_history_tiles(self, rows: Iterable[TileValues]) -> None:
        self._insert_tiles_in(HISTORY_TILES, (), rows)

    def history_size(self) -> int:
        row = self._one("SELECT max(idx) FROM history")
        return 0 if row[0] is None else int(row[0]) + 1

    def history_leaf_hashes(self, start: int, end: int) -> list[bytes]:
        return [
            bytes(h)
            for (h,) in self._exec(
                "SELECT leaf_hash FROM history WHERE idx >= %s AND idx < %s ORDER BY idx",
                (start, end),
            )
        ]

    def history_leaf(self, leaf_hash: bytes) -> HistoryLeaf | None:
        row = self._one(f"SELECT {_LEAF_COLUMNS} FROM history WHERE leaf_hash = %s", (leaf_hash,))
        return None if row is None else _leaf(row)

    def history_leaf_of(self, day: str, sealed: bool, tree_size: int) -> HistoryLeaf | None:
        row = self._one(
            f"SELECT {_LEAF_COLUMNS} FROM history "
            "WHERE day = %s AND sealed = %s AND tree_size = %s",
            (day, int(sealed), tree_size),
        )
        return None if row is None else _leaf(row)

    def history_heads(self, start: int, end: int) -> list[HeadRow]:
        columns = ", ".join(f"h.{c.strip()}" for c in HEAD_COLUMNS.split(","))
        return [
            head_row(r)
            for r in self._exec(
                f"SELECT {columns} FROM history x JOIN heads h ON h.day = x.day "
                "AND h.sealed = x.sealed AND h.tree_size = x.tree_size "
                "WHERE x.idx >= %s AND x.idx < %s ORDER BY x.idx",
                (start, end),
            )
        ]

    def iter_history(self, chunk: int = 10_000) -> Iterator[HistoryLeaf]:
        start = 0
        while True:
            rows = self._exec(
                f"SELECT {_LEAF_COLUMNS} FROM history WHERE idx >= %s ORDER BY idx LIMIT %s",
                (start, chunk),
            )
            yield from (_leaf(r) for r in rows)
            if len(rows) < chunk:
                return
            start = int(rows[-1][0]) + 1

    def history_tile(self, level: int, index: int, min_width: int) -> bytes | None:
        return self._tile_in(HISTORY_TILES, (), level, index, min_width)

    def history_edge_partials(self, size: int) -> list[bytes]:
        return edge_partials(
            size,
            self.history_leaf_hashes,
            lambda level, first, count: self._full_tile_roots_in(
                HISTORY_TILES, (), level, first, count
            ),
            "the history",
        )

    def iter_history_tiles(self) -> Iterator[TileRow]:
        return self._iter_tiles_in(HISTORY_TILES, (), HISTORY_LABEL)


__all__ = ["HISTORY_LABEL", "PostgresHistory"]
