"""Both trees' tiles (the day trees' in `tiles`, keyed by day; the history's in
`history_tiles`) and the history tree's leaves (`history`, SPEC §12.1), written, read and
rebuilt by the same code."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from capability_anchor.errors import StoreError
from capability_anchor.merkle import TILE_HEIGHT, partial_counts
from capability_anchor.store.rows import HeadRow, HistoryLeaf, TileRow

from .rows import HEAD_COLUMNS, SqlRows, head_row

TileValues = tuple[int, int, int, bytes, bytes | None]  # (level, index, width, hashes, root)
TILE_COLUMNS = ("level", "idx", "width", "hashes", "root")
LEAF_COLUMNS = "idx, leaf_hash, day, sealed, tree_size"
HISTORY_LABEL = "history"  # the `day` of the history's TileRows: it is no day's tree
# A tree's tiles: (table, the condition naming the tree with `?` for its key, the key).
Tree = tuple[str, str, tuple[str, ...]]
HISTORY: Tree = ("history_tiles", "TRUE", ())


def day_tree(day: str) -> Tree:
    return ("tiles", "day = ?", (day,))


def _leaf(row: Any) -> HistoryLeaf:
    index, leaf_hash, day, sealed, tree_size = row
    return HistoryLeaf(int(index), bytes(leaf_hash), str(day), bool(sealed), int(tree_size))


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


class SqlTrees(SqlRows):
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
            root = None if root is None else bytes(root)
            yield TileRow(label, int(level), int(idx), int(width), bytes(hashes), root)

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
