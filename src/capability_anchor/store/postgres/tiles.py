"""The tile tables of the PostgreSQL store, as SQLite's (`store/sqlite/tiles.py`): one SQL per
operation for the day trees (`tiles`, keyed by day) and the history tree (`history_tiles`),
so both are written, read and rebuilt by the same code; `store.edges.edge_partials` rebuilds
a right edge from them on either engine."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from capability_anchor.store.edges import edge_partials
from capability_anchor.store.rows import TileRow

from .base import PostgresBase

TileValues = tuple[int, int, int, bytes, bytes | None]  # (level, index, width, hashes, root)
_INSERT_CHUNK = 1000  # tiles per INSERT: 7000 parameters at most, of PostgreSQL's 65535


@dataclass(frozen=True, slots=True)
class TileTable:
    """A tile table: its name, and the columns before `level` that name one tree in it."""

    name: str
    key: tuple[str, ...]

    @property
    def where(self) -> str:
        return "".join(f"{k} = %s AND " for k in self.key)

    def insert(self, rows: int) -> str:
        """One INSERT of `rows` tiles."""
        cols = ", ".join((*self.key, "level", "idx", "width", "hashes", "root"))
        marks = ", ".join(["%s"] * (len(self.key) + 5))
        values = ", ".join([f"({marks})"] * rows)
        # An identical tile already stored is left alone (tiles are deterministic from the
        # leaves); a different one is refused by the table's insert rule.
        return f"INSERT INTO {self.name} ({cols}) VALUES {values} ON CONFLICT DO NOTHING"


DAY_TILES = TileTable("tiles", ("day",))
HISTORY_TILES = TileTable("history_tiles", ())


class PostgresTiles(PostgresBase):
    """Tile reads and writes over any `TileTable`; `key` holds the values of its key columns."""

    def _insert_tiles_in(
        self, table: TileTable, key: tuple[str, ...], rows: Iterable[TileValues]
    ) -> None:
        # One statement per chunk, not `executemany`: psycopg pipelines that and ends the
        # pipeline with a Flush after its Sync, which disarms the server's
        # idle_in_transaction_session_timeout until the next statement, so a writer stalled
        # right after it held the write lock for good (decisions/35-joins.md, #35 item 5).
        values = [(*key, *row) for row in rows]
        for at in range(0, len(values), _INSERT_CHUNK):
            chunk = values[at : at + _INSERT_CHUNK]
            self._exec(table.insert(len(chunk)), [v for row in chunk for v in row])

    def _tile_in(
        self, table: TileTable, key: tuple[str, ...], level: int, index: int, min_width: int
    ) -> bytes | None:
        row = self._one(
            f"SELECT hashes FROM {table.name} WHERE {table.where}level = %s AND idx = %s "
            "AND width >= %s ORDER BY width LIMIT 1",
            (*key, level, index, min_width),
        )
        return None if row is None else bytes(row[0])

    def _full_tile_roots_in(
        self, table: TileTable, key: tuple[str, ...], level: int, first: int, count: int
    ) -> list[bytes]:
        return [
            bytes(r)
            for (r,) in self._exec(
                f"SELECT root FROM {table.name} WHERE {table.where}level = %s AND width = 256 "
                "AND idx >= %s AND idx < %s ORDER BY idx",
                (*key, level, first, first + count),
            )
        ]

    def _iter_tiles_in(
        self, table: TileTable, key: tuple[str, ...], label: str
    ) -> Iterator[TileRow]:
        for level, idx, width, hashes, root in self._iter(
            f"SELECT level, idx, width, hashes, root FROM {table.name} WHERE {table.where}TRUE "
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


__all__ = [
    "DAY_TILES",
    "HISTORY_TILES",
    "PostgresTiles",
    "TileTable",
    "TileValues",
    "edge_partials",
]
