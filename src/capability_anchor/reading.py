"""The read side of a log: what has been published, as `api/`, `export` and `audit` see it.

Readers never write and never see an uncommitted row (each thread reads through its own
`query_only` connection of the store). They go through this object rather than the store
so that the storage package stays the only owner of how rows are kept.
"""

from __future__ import annotations

from collections.abc import Iterator

from .store import EntryRow, HeadRow, StampRow, Store, TileRow


class LogReader:
    """Published heads, entries, tiles, stamps and key records of one log."""

    def __init__(self, store: Store) -> None:
        self._store = store

    # --- heads -------------------------------------------------------------------------------

    def all_heads(self) -> list[HeadRow]:
        return self._store.all_heads()

    def head(self, day: str, tree_size: int, sealed: bool) -> HeadRow | None:
        return self._store.head(day, tree_size, sealed)

    def newest_head(self, day: str) -> HeadRow | None:
        return self._store.newest_head(day)

    def newest_unsealed(self, day: str) -> HeadRow | None:
        return self._store.newest_unsealed(day)

    def newest_published(self) -> HeadRow | None:
        return self._store.newest_published()

    def sealed_head(self, day: str) -> HeadRow | None:
        return self._store.sealed_head(day)

    def sealed_heads(self, before: str | None = None, limit: int | None = None) -> list[HeadRow]:
        """Sealed heads, newest first."""
        return self._store.sealed_heads(before, limit)

    def last_sealed_day(self) -> str | None:
        return self._store.last_sealed_day()

    # --- entries, tiles, the server index ------------------------------------------------------

    def entry_days(self) -> list[str]:
        return self._store.entry_days()

    def day_size(self, day: str) -> int:
        return self._store.day_size(day)

    def iter_entries(self, day: str) -> Iterator[EntryRow]:
        return self._store.iter_entries(day)

    def iter_tiles(self, day: str) -> Iterator[TileRow]:
        return self._store.iter_tiles(day)

    def iter_servers(self, day: str) -> Iterator[tuple[int, str]]:
        return self._store.iter_servers(day)

    # --- stamps and trust ----------------------------------------------------------------------

    def stamps(self, day: str) -> list[StampRow]:
        return self._store.stamps(day)

    def key_records(self) -> list[tuple[int, str, str, str]]:
        return self._store.key_records()
