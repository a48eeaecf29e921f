"""The read side of the history tree (SPEC §12.1): its size, its root at any size, and
inclusion and consistency proofs, all from the stored history tiles, through the same
machinery as the day trees' proofs (`merkle.TileNodes` over `reading.stored_tiles`).

Every history size from 1 to the current one is a published size (each head makes one), so
its partial tiles are stored and any size up to the current one can be proven.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .errors import NotFound, UsageError
from .merkle import TileCache, TileNodes, consistency_nodes, inclusion_nodes, root_from
from .merkle.nodes import resolve
from .reading_tiles import stored_tiles
from .store import HistoryLeaf, Store, TileRow

# The history's key in the shared tile cache: no day (`YYYY-MM-DD`) can be spelled so.
_NAMESPACE = "history"


@dataclass(frozen=True, slots=True)
class HistoryInclusion:
    """A head's history leaf and its RFC 9162 inclusion path in the history of `size`."""

    leaf: HistoryLeaf
    size: int
    path: list[bytes]


class HistoryReader:
    """The history tree of one log, read from the store (`LogReader.history`)."""

    def __init__(self, store: Store, cache: TileCache | None = None) -> None:
        self._store = store
        self._cache = cache

    def size(self) -> int:
        return self._store.history_size()

    def iter_leaves(self) -> Iterator[HistoryLeaf]:
        """Every stored leaf, by index (the audit)."""
        return self._store.iter_history()

    def iter_tiles(self) -> Iterator[TileRow]:
        """Every stored history tile (the audit)."""
        return self._store.iter_history_tiles()

    def _nodes(self, size: int, cached: bool = True) -> TileNodes:
        get = stored_tiles(self._store.history_tile, size, "the history")
        if not cached:
            return TileNodes(get)
        return TileNodes(get, cache=self._cache, namespace=_NAMESPACE)

    def _size(self, size: int | None, at_least: int = 0) -> int:
        """`size`, else the current size; refused unless at_least <= size <= current."""
        current = self._store.history_size()
        if size is None:
            size = current
        if not at_least <= size <= current:
            raise UsageError(
                f"history size must be {at_least}..{current} (the history's size), got {size}"
            )
        return size

    def root(self, size: int | None = None, *, cached: bool = True) -> bytes:
        """The history's root at `size` (default: now). `cached=False` inside a write
        transaction: rows read there must not outlive a rollback in the shared cache."""
        size = self._size(size)
        return root_from(self._nodes(size, cached), size)

    def leaf(self, leaf_hash: bytes) -> HistoryLeaf:
        found = self._store.history_leaf(leaf_hash)
        if found is None:
            raise NotFound(f"no published head has history leaf hash {leaf_hash.hex()}")
        return found

    def inclusion(self, leaf_hash: bytes, size: int | None = None) -> HistoryInclusion:
        """The inclusion proof of the head whose history leaf hash is `leaf_hash`, in the
        history of `size` (default: now), which must already hold that head."""
        leaf = self.leaf(leaf_hash)
        size = self._size(size, at_least=leaf.index + 1)
        path = resolve(inclusion_nodes(leaf.index, size), self._nodes(size).node)
        return HistoryInclusion(leaf, size, path)

    def consistency(self, first: int, second: int | None = None) -> list[bytes]:
        """The RFC 9162 consistency proof from history size `first` to `second` (default:
        now); 0 < first <= second, as SPEC §3 reads the RFC."""
        second = self._size(second, at_least=1)
        if not 0 < first <= second:
            raise UsageError(f"consistency needs 0 < first <= second, got {first} and {second}")
        return resolve(consistency_nodes(first, second), self._nodes(second).node)
