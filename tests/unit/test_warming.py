"""The reader's tile warmer (`read/warming.py`): a head's full tiles computed in the background
into the shared cache, the same rows a proof computes, never past the cache's budget."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from capability_anchor import merkle
from capability_anchor.errors import StoreError
from capability_anchor.merkle.tiles import FULL_TILE_BYTES, tile_rows
from capability_anchor.read.warming import TileWarmer

N = 66_000  # > 256 * 256: a full level-1 tile
BIG = merkle.TiledTree(hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range(N))


def warmer(
    cache: merkle.TileCache, reads: list[tuple[int, int]]
) -> tuple[TileWarmer, Callable[[str, int], merkle.TileNodes]]:
    def tiles(day: str, size: int) -> merkle.TileNodes:
        def get(level: int, index: int) -> bytes:
            reads.append((level, index))
            return BIG.tile(level, index, size)

        return merkle.TileNodes(get, cache=cache, namespace=day)

    return TileWarmer(cache, tiles), tiles


def test_warming_computes_each_full_tile_once_as_a_proof_would() -> None:
    cache, reads = merkle.TileCache(), []
    warm, tiles = warmer(cache, reads)
    warm.warm("d", 0, 1000)
    assert reads == [(0, 0), (0, 1), (0, 2)]  # 3/232 is partial at 1,000: not warmed
    assert cache.get(("d", 0, 1)) == tile_rows(BIG.tile(0, 1, 1000))
    warm.warm("d", 1000, N)  # a newer head: only what became full since
    full = N // 256
    assert reads[3:] == [(0, i) for i in range(3, full)] + [(1, 0)]
    assert not cache.holds_full(("d", 0, full)) and len(cache) == full + 1
    del reads[:]
    for index in (5, 300, 65_535, 65_900):
        assert tiles("d", N).inclusion_path(index, N) == BIG.inclusion_proof(index, N)
    assert set(reads) == {(0, full), (1, 1), (2, 0)}  # the partial tiles of the right edge


def test_warming_never_drops_another_tile_for_one() -> None:
    cache, reads = merkle.TileCache(max_bytes=4 * FULL_TILE_BYTES), []
    kept = tile_rows(BIG.tile(0, 9, N))
    cache.put(("other", 0, 9), kept)
    warm, _ = warmer(cache, reads)
    cache.put(("d", 0, 1), tile_rows(BIG.tile(0, 1, 300)))  # cached when it was partial
    warm.warm("d", 0, N)
    assert reads == [(0, 0), (0, 1), (0, 2)]  # the narrow 0/1 is read again, full
    assert cache.holds_full(("d", 0, 1)) and cache.get(("other", 0, 9)) is kept
    assert cache.bytes <= cache.max_bytes


def test_asking_warms_in_a_thread_that_stop_ends() -> None:
    cache, reads = merkle.TileCache(), []
    warm, _ = warmer(cache, reads)
    warm.ask("d", 600)
    warm.ask("d", 520)  # smaller: already asked
    deadline = time.monotonic() + 30
    while not cache.holds_full(("d", 0, 1)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert cache.holds_full(("d", 0, 0)) and cache.holds_full(("d", 0, 1))
    warm.stop()
    warm.ask("d", 2000)  # stopped: nothing more is read
    time.sleep(0.05)
    assert sorted(reads) == [(0, 0), (0, 1)]


def test_a_store_error_ends_one_warming_not_the_thread() -> None:
    cache = merkle.TileCache()
    asked: list[int] = []

    def tiles(day: str, size: int) -> merkle.TileNodes:
        def get(level: int, index: int) -> bytes:
            asked.append(size)
            if size == 300:
                raise StoreError("the log is closed")
            return BIG.tile(level, index, size)

        return merkle.TileNodes(get, cache=cache, namespace=day)

    warm = TileWarmer(cache, tiles)
    warm.ask("a", 300)
    deadline = time.monotonic() + 30
    while not asked and time.monotonic() < deadline:
        time.sleep(0.01)
    warm.ask("b", 300 + 256)
    while not cache.holds_full(("b", 0, 1)) and time.monotonic() < deadline:
        time.sleep(0.01)
    warm.stop()
    assert cache.holds_full(("b", 0, 0)) and not cache.holds_full(("a", 0, 0))
