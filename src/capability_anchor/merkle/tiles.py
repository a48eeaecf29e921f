"""C2SP tlog-tiles layout: hash tiles 256 wide, 8 tree levels tall.

A tile at level L and index N holds the hashes of the tree nodes at height 8·L with indices
N·256 … N·256+W-1, concatenated (W ≤ 256; W < 256 only at the right edge, a "partial" tile).
Level 0 tiles are the leaf hashes. Every other node is recomputed from the tile below it:
a node at height 8·L + k covers 2^k consecutive hashes of one level-L tile.

Tiles only grow: a partial tile is a prefix of the same tile at any larger tree size, so a
reader may hand out a wider version of a tile than the size being proven needs. A proof at
size n therefore reads at most two tiles per level (the path's tile and the right border's),
i.e. a handful of tiles even at 10,000,000 leaves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from hashlib import sha256

from ..errors import MalformedProof, UsageError
from .hashing import HASH_SIZE

TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT


@dataclass(frozen=True, slots=True)
class TileID:
    level: int
    index: int
    width: int

    @property
    def path(self) -> str:
        return tile_path(self.level, self.index, self.width)


def tile_path(level: int, index: int, width: int = TILE_WIDTH) -> str:
    """The tlog-tiles URL path of a hash tile: `tile/<L>/<N>[.p/<W>]`.

    N is written in groups of three digits, every group but the last prefixed with `x`
    (1234067 -> `x001/x234/067`), so no directory holds more than 1000 entries.
    """
    if not 0 < width <= TILE_WIDTH:
        raise UsageError(f"tile width must be 1..{TILE_WIDTH}, got {width}")
    digits = f"{index:03d}"
    digits = "0" * (-len(digits) % 3) + digits
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    encoded = "/".join([*("x" + g for g in groups[:-1]), groups[-1]])
    suffix = "" if width == TILE_WIDTH else f".p/{width}"
    return f"tile/{level}/{encoded}{suffix}"


def tiles_for_size(size: int) -> Iterator[TileID]:
    """Every tile of a tree of `size` leaves, at the width it has at that size."""
    level = 0
    count = size  # hashes stored at height 8·level
    while count > 0:
        full, rest = divmod(count, TILE_WIDTH)
        for n in range(full):
            yield TileID(level, n, TILE_WIDTH)
        if rest:
            yield TileID(level, full, rest)
        level += 1
        count >>= TILE_HEIGHT


def tiles_changed(old_size: int, new_size: int) -> Iterator[TileID]:
    """Tiles that differ between the trees of `old_size` and `new_size` leaves (new widths).

    This is what a store must persist after growing a tree from old_size to new_size.
    """
    if not 0 <= old_size <= new_size:
        raise UsageError(f"tiles_changed needs 0 <= old <= new, got {old_size}, {new_size}")
    level = 0
    old, new = old_size, new_size
    while new > 0:
        first = old // TILE_WIDTH
        last = (new - 1) // TILE_WIDTH
        for n in range(first, last + 1):
            width = min(TILE_WIDTH, new - n * TILE_WIDTH)
            old_width = max(0, min(TILE_WIDTH, old - n * TILE_WIDTH))
            if width != old_width:
                yield TileID(level, n, width)
        level += 1
        old >>= TILE_HEIGHT
        new >>= TILE_HEIGHT


def subtree_hash(hashes: bytes | bytearray | memoryview) -> bytes:
    """Root of a perfect subtree whose bottom-level hashes are concatenated in `hashes`."""
    level = bytes(hashes)
    while len(level) > HASH_SIZE:
        level = b"".join(
            [sha256(b"\x01" + level[i : i + 64]).digest() for i in range(0, len(level), 64)]
        )
    return level


class TileNodes:
    """A `NodeSource` over tiles fetched by `get_tile(level, index)`.

    The fetched tile may be wider than needed (tiles only grow) but must contain every hash
    asked for; a shorter one is a store inconsistency and raises. Tiles are cached for the
    life of this object, which is meant to serve one proof or one batch of proofs.
    """

    def __init__(self, get_tile: Callable[[int, int], bytes]) -> None:
        self._get_tile = get_tile
        self._cache: dict[tuple[int, int], bytes] = {}

    def tile(self, level: int, index: int) -> bytes:
        key = (level, index)
        data = self._cache.get(key)
        if data is None:
            data = self._get_tile(level, index)
            if len(data) % HASH_SIZE or not 0 < len(data) <= TILE_WIDTH * HASH_SIZE:
                raise MalformedProof(f"tile {level}/{index} has {len(data)} bytes")
            self._cache[key] = data
        return data

    @property
    def tiles_read(self) -> int:
        return len(self._cache)

    def node(self, height: int, index: int) -> bytes:
        level, k = divmod(height, TILE_HEIGHT)
        first = index << k  # first hash at height 8·level under this node
        tile_index, offset = divmod(first, TILE_WIDTH)
        data = self.tile(level, tile_index)
        start, end = offset * HASH_SIZE, (offset + (1 << k)) * HASH_SIZE
        if end > len(data):
            raise MalformedProof(
                f"tile {level}/{tile_index} has {len(data) // HASH_SIZE} hashes, "
                f"node ({height}, {index}) needs {end // HASH_SIZE}"
            )
        return subtree_hash(memoryview(data)[start:end])
