"""The tlog-tiles resources of the day trees and the history (SPEC §12.4): hash tiles and
entry bundles, read from the stored tiles and rows, never recomputed.

A resource exists only where a published size makes it: a full tile once the newest
published size covers all of it (full tiles are stored as soon as they fill, before any
head covers them, so their presence alone says nothing), a partial tile of width W at level
L only if some published size s has `floor(s / 256**L) = 256·N + W` (C2SP: "partial tiles
corresponding to tree sizes for which a checkpoint was produced"). Every history size is
published (each head makes one), so there any partial tile up to the current size exists;
a day's partial tiles exist at the sizes of its heads.

Entry bundles hold each leaf's bytes prefixed by its length as a big-endian uint16: a day's
leaf bytes are the entries' stored claims (SPEC §2), the history's the heads' JWS payloads
(§12.1).
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import NotFound, StoreError
from .merkle import HASH_SIZE, TILE_HEIGHT, TILE_WIDTH
from .merkle.tilepath import TileRequest, entry_bundle
from .store import Store


def _published(
    request: TileRequest, newest: int, has_size_in: Callable[[int, int], bool], what: str
) -> None:
    """NotFound unless a published size of the tree makes this resource (module docstring)."""
    shift = TILE_HEIGHT * request.hash_level
    end = request.index * TILE_WIDTH + request.width  # hashes of that level it holds
    if newest >> shift < end:
        raise NotFound(f"{what}: {request.path} is past the published size ({newest})")
    if request.partial and not has_size_in(end << shift, (end + 1) << shift):
        raise NotFound(f"{what}: no published size has the partial tile {request.path}")


def _hashes(data: bytes | None, request: TileRequest, what: str) -> bytes:
    """The tile at exactly its width: a wider stored version holds the same hashes first."""
    need = request.width * HASH_SIZE
    if data is None or len(data) < need:
        raise StoreError(f"{what}: the stored tile {request.path} is missing or too short")
    return data[:need]


class PublishedTiles:
    """tlog-tiles resources of one log (`LogReader.tiles`)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def day(self, day: str, request: TileRequest) -> bytes:
        store = self._store
        what = f"day {day}"
        newest = store.newest_head(day)
        if newest is None:
            raise NotFound(f"{what} has no published head")
        _published(
            request,
            newest.tree_size,
            lambda low, high: store.has_head_between(day, low, high),
            what,
        )
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
        if newest == 0:
            raise NotFound("the history is empty: no head is published yet")
        # Every size 1..newest is published: the size check alone decides.
        _published(request, newest, lambda low, high: True, what)
        first = request.index * TILE_WIDTH
        if request.level is None:
            heads = store.history_heads(first, first + request.width)
            if len(heads) != request.width:
                raise StoreError(f"{what}: leaves {first}.. have no stored head")
            return entry_bundle(h.history_leaf() for h in heads)
        data = store.history_tile(request.level, request.index, request.width)
        return _hashes(data, request, what)


__all__ = ["PublishedTiles"]
