"""The right edge of a tiled tree: one partial tile per level (at most 255 hashes), all that
appending and the root need, so a store appends in O(1) memory. `TreeEdge.extend` returns the tiles
that became full, with their roots, for the store to persist; an edge is rebuilt from the last
partial hashes and the full tiles' roots."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from capability_anchor.errors import UsageError

from .hashing import EMPTY_ROOT, HASH_SIZE
from .nodes import fold, range_nodes
from .tiles import TILE_HEIGHT, TILE_WIDTH, TileID, subtree_hash

_TILE_BYTES = TILE_WIDTH * HASH_SIZE
StoredTile = tuple[int, int, int, bytes, bytes | None]  # (level, index, width, hashes, root)


@dataclass(frozen=True, slots=True)
class FullTile:
    """A tile that just became full: its ID, its 256 hashes, and its root (height 8L+8)."""

    tile: TileID
    hashes: bytes
    root: bytes


class TreeEdge:
    """The partial tile of every level of a tree of `size` leaves."""

    def __init__(self, size: int = 0, partials: Sequence[bytes] = ()) -> None:
        if size < 0:
            raise UsageError(f"tree size must be >= 0, got {size}")
        self._size = size
        self._partials = [bytearray(p) for p in partials]
        want = partial_counts(size)
        while len(self._partials) < len(want):
            self._partials.append(bytearray())
        got = [len(p) // HASH_SIZE for p in self._partials]
        if (
            any(len(p) % HASH_SIZE for p in self._partials)
            or got[: len(want)] != want
            or any(got[len(want) :])
        ):
            raise UsageError(f"partial tiles {got} do not fit a tree of size {size} ({want})")
        del self._partials[len(want) :]

    @property
    def size(self) -> int:
        return self._size

    def copy(self) -> TreeEdge:
        return TreeEdge(self._size, [bytes(p) for p in self._partials])

    def extend(self, leaf_hashes: bytes) -> list[FullTile]:
        """Append concatenated leaf hashes; return the tiles that became full, in order."""
        if len(leaf_hashes) % HASH_SIZE:
            raise UsageError(f"concatenated hashes must be a multiple of {HASH_SIZE} bytes")
        full: list[FullTile] = []
        incoming = bytes(leaf_hashes)
        level = 0
        first_index = self._size // TILE_WIDTH  # index of level 0's partial tile
        while incoming:
            if level == len(self._partials):
                self._partials.append(bytearray())
            row = self._partials[level]
            row += incoming
            roots = bytearray()
            done = len(row) // _TILE_BYTES
            for n in range(done):
                hashes = bytes(row[n * _TILE_BYTES : (n + 1) * _TILE_BYTES])
                root = subtree_hash(hashes)
                full.append(FullTile(TileID(level, first_index + n, TILE_WIDTH), hashes, root))
                roots += root
            del row[: done * _TILE_BYTES]
            incoming = bytes(roots)
            # The next level's partial tile index, before its new hashes arrive.
            first_index = (self._size >> (TILE_HEIGHT * (level + 1))) // TILE_WIDTH
            level += 1
        self._size += len(leaf_hashes) // HASH_SIZE
        return full

    def extend_published(self, leaf_hashes: bytes) -> list[StoredTile]:
        """Append; the tiles that became full (with roots), then the new size's partial tiles."""
        rows: list[StoredTile] = [
            (t.tile.level, t.tile.index, TILE_WIDTH, t.hashes, t.root)
            for t in self.extend(leaf_hashes)
        ]
        rows += [(t.level, t.index, t.width, data, None) for t, data in self.partial_tiles()]
        return rows

    def partial_tiles(self) -> list[tuple[TileID, bytes]]:
        """The non-empty partial tile of each level, as it is at the current size."""
        out = []
        for level, row in enumerate(self._partials):
            if row:
                count = self._size >> (TILE_HEIGHT * level)
                tile = TileID(level, count // TILE_WIDTH, len(row) // HASH_SIZE)
                out.append((tile, bytes(row)))
        return out

    def root(self) -> bytes:
        """The tree's root: fold of the decomposition nodes, largest (top level) first."""
        if self._size == 0:
            return EMPTY_ROOT
        nodes: list[bytes] = []
        for row in reversed(self._partials):
            count = len(row) // HASH_SIZE
            for k, i in range_nodes(0, count):
                nodes.append(subtree_hash(row[(i << k) * HASH_SIZE : ((i + 1) << k) * HASH_SIZE]))
        return fold(nodes)


def partial_counts(size: int) -> list[int]:
    """How many hashes each level's partial tile holds at tree `size` (top levels may be 0)."""
    counts = []
    level = 0
    while size >> (TILE_HEIGHT * level):
        counts.append((size >> (TILE_HEIGHT * level)) % TILE_WIDTH)
        level += 1
    return counts
