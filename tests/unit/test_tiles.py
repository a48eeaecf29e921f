"""tlog-tiles layout: paths, which tiles change, and proofs served from tiles alone at sizes
where the upper tile levels exist (more than 65,536 leaves)."""

from __future__ import annotations

import hashlib
import random

import pytest

from capability_anchor import merkle
from capability_anchor.errors import MalformedProof, UsageError
from capability_anchor.merkle.tiles import FULL_TILE_BYTES, tile_rows, tiles_for_size

N = 70_000  # > 256 * 256, so level-2 tiles exist
BIG = merkle.TiledTree(hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range(N))


@pytest.mark.parametrize(
    ("level", "index", "width", "path"),
    [
        (0, 0, 256, "tile/0/000"),
        (0, 5, 256, "tile/0/005"),
        (1, 1234067, 256, "tile/1/x001/x234/067"),
        (2, 1000, 256, "tile/2/x001/000"),
        (0, 1234067, 17, "tile/0/x001/x234/067.p/17"),
        (3, 0, 1, "tile/3/000.p/1"),
    ],
)
def test_tile_paths_follow_tlog_tiles(level: int, index: int, width: int, path: str) -> None:
    assert merkle.tile_path(level, index, width) == path


def test_tile_widths_are_checked() -> None:
    for bad in (0, 257):
        with pytest.raises(UsageError):
            merkle.tile_path(0, 0, bad)


def test_tiles_changed_is_the_difference_of_tile_sets() -> None:
    rng = random.Random(7)
    sizes = [0, 1, 255, 256, 257, 511, 512, 65535, 65536, 65537, 69999, 70000]
    sizes += [rng.randrange(N) for _ in range(20)]
    for old in sizes:
        for new in sizes:
            if old > new:
                continue
            before = set(tiles_for_size(old))
            after = set(tiles_for_size(new))
            assert set(merkle.tiles_changed(old, new)) == after - before, (old, new)


def test_tiles_of_big_tree_are_rows_of_the_right_heights() -> None:
    tiles = dict(BIG.tiles())
    assert merkle.TileID(2, 0, 1) in tiles  # one hash at height 16: the first 65,536 leaves
    assert tiles[merkle.TileID(2, 0, 1)] == BIG.root(65536)
    assert tiles[merkle.TileID(1, 0, 256)][:32] == BIG.root(256)
    total = sum(len(v) for v in tiles.values()) // 32
    assert total == N + N // 256 + N // 65536


def test_tiles_since_lists_what_a_store_must_persist() -> None:
    tree = merkle.TiledTree(BIG.node(0, i) for i in range(300))
    changed = {t: b for t, b in tree.tiles_since(250)}
    assert set(changed) == {
        merkle.TileID(0, 0, 256),
        merkle.TileID(0, 1, 44),
        merkle.TileID(1, 0, 1),
    }


def test_proofs_from_tiles_alone_match_the_tree_and_read_few_tiles() -> None:
    rng = random.Random(1)
    sizes = [1, 2, 255, 256, 257, 65535, 65536, 65537, N - 1, N]
    sizes += [rng.randrange(1, N + 1) for _ in range(25)]
    for size in sizes:
        # The source hands out tiles as wide as they are now: wider than at `size`.
        source = merkle.TileNodes(BIG.tile)
        assert merkle.root_from(source, size) == BIG.root(size)
        for index in {0, size - 1, rng.randrange(size)}:
            source = merkle.TileNodes(BIG.tile)
            got = merkle.nodes.resolve(merkle.inclusion_nodes(index, size), source.node)
            assert got == BIG.inclusion_proof(index, size)
            merkle.verify_inclusion(BIG.node(0, index), index, size, got, BIG.root(size))
            # At most two tiles per level: the path's own and the right border's.
            assert source.tiles_read <= 2 * 3, (index, size, source.tiles_read)
        first = rng.randrange(1, size + 1)
        source = merkle.TileNodes(BIG.tile)
        got = merkle.nodes.resolve(merkle.consistency_nodes(first, size), source.node)
        assert got == BIG.consistency_proof(first, size)
        merkle.verify_consistency(first, size, BIG.root(first), BIG.root(size), got)


def test_inclusion_path_reads_full_tiles_at_once_and_matches_the_tree() -> None:
    """`TileNodes.inclusion_path` (a full tile's 8 siblings at once) gives what the node IDs
    resolved one by one give: at every index of the first and last tiles of a size past a
    level-1 tile, and around the boundaries of others."""
    rng = random.Random(2)
    source = merkle.TileNodes(BIG.tile, cache=merkle.TileCache(), namespace="d")
    sweep = 65_536 + 257
    for index in [*range(1024), *range(65_024, sweep)]:
        assert source.inclusion_path(index, sweep) == BIG.inclusion_proof(index, sweep), index
    for size in [1, 255, 256, 257, 511, 512, 513, 65_535, 65_536, 65_537, N - 1, N]:
        edges = {i for b in (0, 256, 512, 65_280, 65_536) for i in range(b - 2, b + 2)}
        picks = {i for i in edges if 0 <= i < size} | {rng.randrange(size) for _ in range(200)}
        for index in picks:
            want = BIG.inclusion_proof(index, size)
            assert source.inclusion_path(index, size) == want, (index, size)
    with pytest.raises(UsageError):
        source.inclusion_path(N, N)


def test_a_tile_too_short_for_the_node_is_an_error() -> None:
    source = merkle.TileNodes(lambda level, index: BIG.tile(level, index, 100))
    with pytest.raises(MalformedProof, match="has 100 hashes"):
        source.node(7, 0)
    with pytest.raises(MalformedProof, match="has 100 hashes, a proof needs 256"):
        source.inclusion_path(0, 300)
    bad = merkle.TileNodes(lambda level, index: b"\x00" * 33)
    with pytest.raises(MalformedProof, match="33 bytes"):
        bad.node(0, 0)


def test_tree_rejects_bad_input() -> None:
    tree = merkle.TiledTree()
    with pytest.raises(UsageError):
        tree.append(b"short")
    with pytest.raises(UsageError):
        tree.extend(b"\x00" * 32)  # bytes, not an iterable of hashes
    with pytest.raises(UsageError):
        tree.root(1)
    with pytest.raises(UsageError):
        tree.inclusion_proof(0)
    assert tree.root() == merkle.EMPTY_ROOT


def test_a_shared_cache_serves_later_proofs_and_refetches_grown_tiles() -> None:
    cache = merkle.TileCache(max_bytes=8 * FULL_TILE_BYTES)
    reads: list[tuple[int, int, int]] = []

    def at(size: int):  # type: ignore[no-untyped-def]
        def get(level: int, index: int) -> bytes:
            reads.append((level, index, size))
            return BIG.tile(level, index, size)

        return get

    small = merkle.TileNodes(at(300), cache=cache, namespace="d")
    assert merkle.nodes.resolve(
        merkle.inclusion_nodes(260, 300), small.node
    ) == BIG.inclusion_proof(260, 300)
    before = len(reads)
    # The same tiles again: served from the cache, no read.
    again = merkle.TileNodes(at(300), cache=cache, namespace="d")
    assert merkle.nodes.resolve(
        merkle.inclusion_nodes(261, 300), again.node
    ) == BIG.inclusion_proof(261, 300)
    assert len(reads) == before
    # The tree grew: the cached partial tile 0/1 (44 wide) is too narrow and is read again.
    grown = merkle.TileNodes(at(600), cache=cache, namespace="d")
    assert merkle.nodes.resolve(
        merkle.inclusion_nodes(290, 600), grown.node
    ) == BIG.inclusion_proof(290, 600)
    assert (0, 1, 600) in reads[before:]
    # So it is for a path that reads the tile's siblings at once (it is full at 600).
    del reads[:]
    again = merkle.TileNodes(at(300), cache=cache, namespace="d2")
    again.node(0, 256)
    full = merkle.TileNodes(at(600), cache=cache, namespace="d2")
    assert full.inclusion_path(290, 600) == BIG.inclusion_proof(290, 600)
    assert reads[:2] == [(0, 1, 300), (0, 1, 600)]
    # Another namespace (another day) never sees these tiles.
    other = merkle.TileNodes(at(300), cache=cache, namespace="e")
    other.node(0, 0)
    assert other.tiles_read == 1
    assert len(cache) <= 8
    assert cache.bytes <= 8 * FULL_TILE_BYTES


def test_the_tile_cache_is_bounded_by_the_bytes_it_holds() -> None:
    cache = merkle.TileCache(max_bytes=3 * FULL_TILE_BYTES)
    rows = tile_rows(bytes(range(32)) * 256)
    assert sum(map(len, rows)) == FULL_TILE_BYTES
    for n in range(5):
        cache.put(("d", 0, n), rows)
    assert len(cache) == 3 and cache.bytes == 3 * FULL_TILE_BYTES
    assert cache.get(("d", 0, 1)) is None and cache.get(("d", 0, 4)) is rows  # LRU
    cache.put(("d", 0, 4), rows[:1])  # a key stored again counts once
    assert cache.bytes == 2 * FULL_TILE_BYTES + len(rows[0])
