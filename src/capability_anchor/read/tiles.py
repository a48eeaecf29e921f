"""The tlog-tiles resources of the day trees and the history (SPEC §12.4): hash tiles and
entry bundles, read from the stored tiles and rows, never recomputed, and only where a
published size makes them (docs/explanation/procedures.md).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from capability_anchor.errors import NotFound, StoreError
from capability_anchor.merkle import HASH_SIZE, TILE_HEIGHT, TILE_WIDTH
from capability_anchor.merkle.tilepath import TileRequest, entry_bundle
from capability_anchor.store import Store

HISTORY = "history"  # the history's key in the cache: no day is spelled so
MAX_SIZE = 2**63 - 1  # SQLite's largest integer: above every stored tree size


def _published(request: TileRequest, has_size_in: Callable[[int, int], bool], what: str) -> None:
    """NotFound unless a published size of the tree makes this resource: `has_size_in(low, high)`
    says whether a published size s has low <= s < high."""
    shift = TILE_HEIGHT * request.hash_level
    end = request.index * TILE_WIDTH + request.width  # hashes of that level it holds
    if not has_size_in(end << shift, MAX_SIZE):
        raise NotFound(f"{what}: {request.path} is past the published size")
    if request.partial and not has_size_in(end << shift, (end + 1) << shift):
        raise NotFound(f"{what}: no published size has the partial tile {request.path}")


def _hashes(data: bytes | None, request: TileRequest, what: str) -> bytes:
    """The tile at exactly its width: a wider stored version holds the same hashes first."""
    need = request.width * HASH_SIZE
    if data is None or len(data) < need:
        raise StoreError(f"{what}: the stored tile {request.path} is missing or too short")
    return data[:need]


class _Resources:
    """A bounded LRU of served resources by (tree, request): once a published size makes a
    tile or bundle it never changes, and an entry bundle costs a read and a decode of each of
    its 256 leaves. Bounded by bytes, since a day's bundle can be 256 leaves of 16 KiB."""

    def __init__(self, max_bytes: int = 32 << 20) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, TileRequest], bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # the event loop and worker threads read at once

    def get(self, key: tuple[str, TileRequest], make: Callable[[], bytes]) -> bytes:
        """The resource kept under `key`, else `make()`'s (kept when small enough)."""
        with self._lock:
            data = self._items.get(key)
            if data is not None:
                self._items.move_to_end(key)
                return data
        data = make()
        self._put(key, data)
        return data

    def _put(self, key: tuple[str, TileRequest], data: bytes) -> None:
        if len(data) > self.max_bytes // 4:
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = data
            self._bytes += len(data)
            while self._bytes > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= len(dropped)


class PublishedTiles:
    """tlog-tiles resources of one log (`LogReader.tiles`)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._cache = _Resources()

    def day(self, day: str, request: TileRequest) -> bytes:
        store = self._store
        what = f"day {day}"

        # Checked on every request, cached or not: the published size only says what exists.
        def has_size_in(low: int, high: int) -> bool:
            # No stored size is past SQLite's integers (and a query with one would fail).
            return low < MAX_SIZE and store.has_head_between(day, low, min(high, MAX_SIZE))

        _published(request, has_size_in, what)
        return self._cache.get((day, request), lambda: self._day(day, request, what))

    def _day(self, day: str, request: TileRequest, what: str) -> bytes:
        store = self._store
        first = request.index * TILE_WIDTH
        if request.level is None:
            rows = store.entries(day, first, request.width)
            if len(rows) != request.width:
                raise StoreError(f"{what}: entries {first}.. are missing")
            return entry_bundle(r.claims for r in rows)
        return _hashes(store.tile(day, request.level, request.index, request.width), request, what)

    def history(self, request: TileRequest) -> bytes:
        store = self._store
        what = "the history"
        newest = store.history_size()
        # Every size 1..newest is published.
        _published(request, lambda low, high: low <= newest, what)
        return self._cache.get((HISTORY, request), lambda: self._history(request, what))

    def _history(self, request: TileRequest, what: str) -> bytes:
        store = self._store
        first = request.index * TILE_WIDTH
        if request.level is None:
            heads = store.history_heads(first, first + request.width)
            if len(heads) != request.width:
                raise StoreError(f"{what}: leaves {first}.. have no stored head")
            return entry_bundle(h.history_leaf() for h in heads)
        data = store.history_tile(request.level, request.index, request.width)
        return _hashes(data, request, what)


__all__ = ["PublishedTiles", "stored_tiles"]


def stored_tiles(
    fetch: Callable[[int, int, int], bytes | None], size: int, what: str
) -> Callable[[int, int], bytes]:
    """`get(level, index)` for a tree of `size`: each tile at least as wide as that size
    makes it (a wider one holds the same hashes first); a missing tile is an inconsistency."""

    def get(level: int, index: int) -> bytes:
        at_level = size >> (TILE_HEIGHT * level)
        width = min(TILE_WIDTH, at_level - index * TILE_WIDTH)
        data = fetch(level, index, width)
        if data is None:
            raise StoreError(f"{what}: tile {level}/{index} (width {width}) is missing")
        return data

    return get
