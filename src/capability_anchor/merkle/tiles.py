"""C2SP tlog-tiles layout: a tile at level L, index N holds the W (<= 256) hashes at height 8L from
index 256N; other nodes are recomputed from the tile below. Tiles only grow, so a wider tile may
serve a smaller size and a proof reads at most two tiles per level."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from hashlib import sha256

from capability_anchor.errors import MalformedProof, UsageError

from .hashing import HASH_SIZE
from .nodes import check_index, path_nodes, resolve

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
    """The tlog-tiles path of a hash tile, `tile/<L>/<N>[.p/<W>]`."""
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
    """Tiles that differ between trees of `old_size` and `new_size` leaves (what to persist)."""
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


def tile_rows(hashes: bytes) -> list[bytes]:
    """A tile's hashes and every complete row above them (rows[k]: the nodes of sub-height k)."""
    rows = [bytes(hashes)]
    while len(rows[-1]) >= 2 * HASH_SIZE:
        below = rows[-1]
        pairs = len(below) // (2 * HASH_SIZE)
        rows.append(
            b"".join(
                [sha256(b"\x01" + below[i : i + 64]).digest() for i in range(0, pairs * 64, 64)]
            )
        )
    return rows


def subtree_hash(hashes: bytes | bytearray | memoryview) -> bytes:
    """Root of a perfect subtree whose bottom-level hashes are concatenated in `hashes`."""
    return tile_rows(bytes(hashes))[-1]


FULL_TILE_BYTES = (2 * TILE_WIDTH - 1) * HASH_SIZE  # a full tile's rows: 16,352 bytes
TILE_CACHE_BYTES = 128 << 20  # every tile of a 2,000,000-leaf day (decisions/37-record.md)


class TileCache:
    """A bounded LRU of tiles' rows shared by proofs (a cached tile can only be narrower, not
    other), and of the ends of paths (`TileNodes.inclusion_path`), by the bytes of hashes
    held: at most `max_bytes`."""

    def __init__(self, max_bytes: int = TILE_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._rows: OrderedDict[Hashable, list[bytes]] = OrderedDict()
        # Proofs run on the event loop and on worker threads at once: a move_to_end racing an
        # eviction would raise KeyError.
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> list[bytes] | None:
        with self._lock:
            rows = self._rows.get(key)
            if rows is not None:
                self._rows.move_to_end(key)
            return rows

    def put(self, key: Hashable, rows: list[bytes]) -> None:
        with self._lock:
            old = self._rows.get(key)
            if old is not None:
                self.bytes -= sum(map(len, old))
            self._rows[key] = rows
            self.bytes += sum(map(len, rows))
            self._rows.move_to_end(key)
            while self.bytes > self.max_bytes and self._rows:
                _, gone = self._rows.popitem(last=False)
                self.bytes -= sum(map(len, gone))

    def holds_full(self, key: Hashable) -> bool:
        """Whether the rows of a full tile are kept under `key` (the LRU order is not touched)."""
        with self._lock:
            rows = self._rows.get(key)
            return rows is not None and len(rows[0]) == TILE_WIDTH * HASH_SIZE

    def __len__(self) -> int:
        return len(self._rows)


class TileNodes:
    """A `NodeSource` over tiles from `get_tile(level, index)`, which may be wider than needed but
    never shorter (a store inconsistency). Each tile's interior rows are computed once; a shared
    `cache` (keys prefixed by `namespace`) holds them across proofs, and a cached tile too narrow is
    fetched again."""

    def __init__(
        self,
        get_tile: Callable[[int, int], bytes],
        *,
        cache: TileCache | None = None,
        namespace: Hashable = None,
    ) -> None:
        self._get_tile = get_tile
        self._cache = cache
        self._namespace = namespace
        self._local: dict[tuple[int, int], list[bytes]] = {}
        self.tiles_read = 0

    def _fetch(self, level: int, index: int) -> list[bytes]:
        data = self._get_tile(level, index)
        if len(data) % HASH_SIZE or not 0 < len(data) <= TILE_WIDTH * HASH_SIZE:
            raise MalformedProof(f"tile {level}/{index} has {len(data)} bytes")
        self.tiles_read += 1
        rows = tile_rows(data)
        self._local[(level, index)] = rows
        if self._cache is not None:
            self._cache.put((self._namespace, level, index), rows)
        return rows

    def _rows(self, level: int, index: int) -> list[bytes]:
        rows = self._local.get((level, index))
        if rows is None and self._cache is not None:
            rows = self._cache.get((self._namespace, level, index))
            if rows is not None:
                self._local[(level, index)] = rows
        return rows if rows is not None else self._fetch(level, index)

    def tile(self, level: int, index: int) -> bytes:
        return self._rows(level, index)[0]

    def inclusion_path(self, index: int, size: int) -> list[bytes]:
        """RFC 9162 PATH(index, D[size]), as `resolve(inclusion_nodes(...))` gives it: while the
        path's tile is full and not the last of its level, its 8 siblings are read from the
        tile's rows at once; the rest, the same for every index under that node, is resolved
        node by node once and kept in the shared cache (it holds the right border's folds)."""
        check_index(index, size)
        path: list[bytes] = []
        level, node, last = 0, index, size - 1  # node and last at height 8·level
        while node | (TILE_WIDTH - 1) < last:
            rows = self._rows(level, node >> TILE_HEIGHT)
            if len(rows[0]) < TILE_WIDTH * HASH_SIZE:
                rows = self.full(level, node >> TILE_HEIGHT)
            offset = node & (TILE_WIDTH - 1)
            for k in range(TILE_HEIGHT):
                start = ((offset >> k) ^ 1) * HASH_SIZE
                path.append(rows[k][start : start + HASH_SIZE])
            level, node, last = level + 1, node >> TILE_HEIGHT, last >> TILE_HEIGHT
        key = (self._namespace, "path", level, node, size)
        rest = self._cache.get(key) if self._cache is not None else None
        if rest is None:
            rest = resolve(path_nodes(node, level * TILE_HEIGHT, size), self.node)
            if self._cache is not None:
                self._cache.put(key, rest)
        return path + rest

    def full(self, level: int, index: int) -> list[bytes]:
        """The rows of a tile that must be full, fetched (a cached narrower one is replaced)."""
        rows = self._fetch(level, index)
        if len(rows[0]) < TILE_WIDTH * HASH_SIZE:
            raise MalformedProof(
                f"tile {level}/{index} has {len(rows[0]) // HASH_SIZE} hashes, a proof needs "
                f"{TILE_WIDTH}"
            )
        return rows

    def node(self, height: int, index: int) -> bytes:
        level, k = divmod(height, TILE_HEIGHT)
        tile_index, offset = divmod(index << k, TILE_WIDTH)
        start = (offset >> k) * HASH_SIZE
        rows = self._rows(level, tile_index)
        if len(rows) <= k or len(rows[k]) < start + HASH_SIZE:
            rows = self._fetch(level, tile_index)
        if len(rows) <= k or len(rows[k]) < start + HASH_SIZE:
            raise MalformedProof(
                f"tile {level}/{tile_index} has {len(rows[0]) // HASH_SIZE} hashes, "
                f"node ({height}, {index}) needs {(offset + (1 << k))}"
            )
        return rows[k][start : start + HASH_SIZE]
