"""Stored tiles as a tree of a given size reads them: the one tile getter of the day trees'
and the history's proofs (`reading`, `reading_history`)."""

from __future__ import annotations

from collections.abc import Callable

from .errors import StoreError
from .merkle import TILE_HEIGHT, TILE_WIDTH


def stored_tiles(
    fetch: Callable[[int, int, int], bytes | None], size: int, what: str
) -> Callable[[int, int], bytes]:
    """`get(level, index)` over `fetch(level, index, min_width)` for a tree of `size`: each
    tile at least as wide as that size makes it (a wider, later version holds the same
    hashes first). A tile the store lacks is a store inconsistency."""

    def get(level: int, index: int) -> bytes:
        at_level = size >> (TILE_HEIGHT * level)
        width = min(TILE_WIDTH, at_level - index * TILE_WIDTH)
        data = fetch(level, index, width)
        if data is None:
            raise StoreError(f"{what}: tile {level}/{index} (width {width}) is missing")
        return data

    return get
