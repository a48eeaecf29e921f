"""The right edge of a tiled tree at any size, rebuilt from what every engine stores: the
last leaf hashes and the roots of the last full tiles below each level (the engines' tile
tables keep full tiles and, at published sizes, partial ones)."""

from __future__ import annotations

from collections.abc import Callable

from capability_anchor.errors import StoreError
from capability_anchor.merkle import TILE_HEIGHT, partial_counts


def edge_partials(
    size: int,
    leaf_hashes: Callable[[int, int], list[bytes]],
    full_tile_roots: Callable[[int, int, int], list[bytes]],
    what: str,
) -> list[bytes]:
    """The partial tile of each level at tree `size`, from the stored leaf hashes
    (`leaf_hashes(start, end)`) and full tile roots (`full_tile_roots(level, first, count)`)."""
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


__all__ = ["edge_partials"]
