"""An incremental in-memory RFC 9162 tree that hands out tlog-tiles and proofs. Each height is one
bytearray of its complete nodes, so tiles are slices and every node a lookup (twice the leaf hashes
in memory, proofs in microseconds); appends hash level by level in batches."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from hashlib import sha256

from capability_anchor.errors import UsageError

from .hashing import HASH_SIZE
from .nodes import consistency_nodes, inclusion_nodes, resolve, root_from
from .tiles import TILE_HEIGHT, TILE_WIDTH, TileID, tiles_changed, tiles_for_size


class TiledTree:
    """A growing Merkle tree of leaf hashes (append-only)."""

    def __init__(self, leaf_hashes: Iterable[bytes] = ()) -> None:
        self._rows: list[bytearray] = [bytearray()]
        self.extend(leaf_hashes)

    @property
    def size(self) -> int:
        return len(self._rows[0]) // HASH_SIZE

    def __len__(self) -> int:
        return self.size

    def append(self, leaf_hash: bytes) -> int:
        """Append one leaf hash; returns its index."""
        index = self.size
        self.extend_concatenated(_checked_hash(leaf_hash))
        return index

    def extend(self, leaf_hashes: Iterable[bytes]) -> None:
        """Append leaf hashes in order."""
        if isinstance(leaf_hashes, bytes | bytearray):
            raise UsageError("extend takes an iterable of 32-byte hashes; use extend_concatenated")
        self.extend_concatenated(b"".join(_checked_hash(h) for h in leaf_hashes))

    def extend_concatenated(self, hashes: bytes) -> None:
        """Append leaf hashes given as one concatenated byte string."""
        if len(hashes) % HASH_SIZE:
            raise UsageError(f"concatenated hashes must be a multiple of {HASH_SIZE} bytes")
        rows = self._rows
        rows[0] += hashes
        height = 0
        while True:
            row = rows[height]
            complete_pairs = len(row) // (2 * HASH_SIZE)
            if height + 1 == len(rows):
                if complete_pairs == 0:
                    return
                rows.append(bytearray())
            parent = rows[height + 1]
            have = len(parent) // HASH_SIZE
            if have == complete_pairs:
                # Nothing new completed here, so nothing above can have changed either.
                return
            view = memoryview(row)
            parent += b"".join(
                [
                    sha256(b"\x01" + view[i : i + 64]).digest()
                    for i in range(have * 64, complete_pairs * 64, 64)
                ]
            )
            height += 1

    def node(self, height: int, index: int) -> bytes:
        """Hash of the complete perfect subtree (height, index)."""
        if height >= len(self._rows):
            raise UsageError(f"no complete node at height {height} in a tree of {self.size}")
        row = self._rows[height]
        start = index * HASH_SIZE
        if not 0 <= start < len(row):
            raise UsageError(f"no complete node ({height}, {index}) in a tree of {self.size}")
        return bytes(row[start : start + HASH_SIZE])

    def _check_size(self, size: int | None) -> int:
        if size is None:
            return self.size
        if not 0 <= size <= self.size:
            raise UsageError(f"tree size {size} is outside 0..{self.size}")
        return size

    def root(self, size: int | None = None) -> bytes:
        """Root at `size` (default: now), for any earlier size in O(log n)."""
        return root_from(self, self._check_size(size))

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        size = self._check_size(size)
        return resolve(inclusion_nodes(index, size), self.node)

    def consistency_proof(self, first: int, second: int | None = None) -> list[bytes]:
        second = self._check_size(second)
        return resolve(consistency_nodes(first, second), self.node)

    def tile(self, level: int, index: int, size: int | None = None) -> bytes:
        """The tlog-tile (level, index) as it is at tree `size` (default: now)."""
        size = self._check_size(size)
        count = size >> (TILE_HEIGHT * level)
        start = index * TILE_WIDTH
        if not 0 <= start < count:
            raise UsageError(f"tile {level}/{index} does not exist at tree size {size}")
        row = self._rows[TILE_HEIGHT * level]
        end = min(count, start + TILE_WIDTH)
        return bytes(row[start * HASH_SIZE : end * HASH_SIZE])

    def tiles(self, size: int | None = None) -> Iterator[tuple[TileID, bytes]]:
        """Every tile at tree `size` with its bytes."""
        size = self._check_size(size)
        for tid in tiles_for_size(size):
            yield tid, self.tile(tid.level, tid.index, size)

    def tiles_since(self, old_size: int) -> Iterator[tuple[TileID, bytes]]:
        """Tiles that changed since the tree had `old_size` leaves (what a store persists)."""
        for tid in tiles_changed(self._check_size(old_size), self.size):
            yield tid, self.tile(tid.level, tid.index)


def _checked_hash(value: bytes) -> bytes:
    if not isinstance(value, bytes | bytearray) or len(value) != HASH_SIZE:
        raise UsageError(f"a leaf hash must be {HASH_SIZE} bytes")
    return bytes(value)


# --- the list-based API of SPEC §11 ------------------------------------------------------------


def _tree_of(leaf_hashes: Iterable[bytes], size: int | None = None) -> TiledTree:
    hashes = list(leaf_hashes)
    if size is not None and not 0 <= size <= len(hashes):
        raise UsageError(f"tree size {size} is outside 0..{len(hashes)}")
    return TiledTree(hashes if size is None else hashes[:size])


def root_hash(leaf_hashes: Iterable[bytes]) -> bytes:
    """MTH of the given leaf hashes (SHA-256("") for none)."""
    return _tree_of(leaf_hashes).root()


def inclusion_path(leaf_hashes: Iterable[bytes], leaf_index: int, tree_size: int) -> list[bytes]:
    """RFC 9162 §2.1.3.1 PATH(leaf_index, D[tree_size]) over the first tree_size leaves."""
    return _tree_of(leaf_hashes, tree_size).inclusion_proof(leaf_index)


def consistency_path(leaf_hashes: Iterable[bytes], first: int, second: int) -> list[bytes]:
    """RFC 9162 §2.1.4.1 PROOF(first, D[second]); requires 0 < first <= second."""
    return _tree_of(leaf_hashes, second).consistency_proof(first)
