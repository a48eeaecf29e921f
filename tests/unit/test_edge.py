"""TreeEdge (the store's in-memory right edge) against the full in-memory tree."""

from __future__ import annotations

import hashlib
import random

import pytest

from capability_anchor import merkle
from capability_anchor.errors import UsageError

N = 70_000
HASHES = [hashlib.sha256(b"e" + i.to_bytes(4, "big")).digest() for i in range(N)]
TREE = merkle.TiledTree(HASHES)


def test_edge_matches_tree_for_random_batches() -> None:
    rng = random.Random(3)
    edge = merkle.TreeEdge()
    stored: dict[merkle.TileID, bytes] = {}
    pos = 0
    while pos < N:
        step = rng.choice([1, 1, 2, 7, 255, 256, 257, 1000, 5000])
        step = min(step, N - pos)
        for full in edge.extend(b"".join(HASHES[pos : pos + step])):
            assert full.tile not in stored
            stored[full.tile] = full.hashes
            assert full.hashes == TREE.tile(full.tile.level, full.tile.index)
            # The root of a full tile is the hash one tile level up.
            assert full.root == TREE.node(8 * (full.tile.level + 1), full.tile.index)
        pos += step
        assert edge.size == pos
        assert edge.root() == TREE.root(pos), pos
        for tile, data in edge.partial_tiles():
            assert tile.width < 256
            assert data == TREE.tile(tile.level, tile.index, pos)
    # Every full tile of the final tree was emitted exactly once.
    want = {t for t, _ in TREE.tiles() if t.width == 256}
    assert set(stored) == want


@pytest.mark.parametrize("size", [0, 1, 255, 256, 257, 65535, 65536, 65537, N])
def test_edge_rebuilds_from_partials(size: int) -> None:
    grown = merkle.TreeEdge()
    grown.extend(b"".join(HASHES[:size]))
    partials = [b"" for _ in merkle.partial_counts(size)]
    for tile, data in grown.partial_tiles():
        partials[tile.level] = data
    rebuilt = merkle.TreeEdge(size, partials)
    assert rebuilt.root() == TREE.root(size)
    if size < N:
        # A rebuilt edge keeps growing exactly like the original.
        rebuilt.extend(HASHES[size])
        assert rebuilt.root() == TREE.root(size + 1)


def test_edge_rejects_partials_that_do_not_fit() -> None:
    with pytest.raises(UsageError):
        merkle.TreeEdge(3, [b"\x00" * 64])
    with pytest.raises(UsageError):
        merkle.TreeEdge(-1)
    with pytest.raises(UsageError):
        merkle.TreeEdge().extend(b"\x00" * 31)
