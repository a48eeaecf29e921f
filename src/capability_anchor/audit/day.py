"""The data-dir audit of one day: its entries, tiles, `/record` index and heads, re-derived
from the stored leaf bytes."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from capability_anchor import head as heads
from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.keys import KeySet
from capability_anchor.log import index_watermark, server_keys
from capability_anchor.merkle import TILE_WIDTH, TreeEdge, hash_leaf
from capability_anchor.progress import Progress
from capability_anchor.store import EntryRow, HeadRow, TileRow, server_key_digest

from .report import AuditReport

if TYPE_CHECKING:
    from capability_anchor.log import Log

_TileKey = tuple[int, int, int]


def check_head(
    report: AuditReport, row: HeadRow, keys: KeySet, iss: str, root: bytes | None
) -> heads.Head | None:
    where = f"head {row.day} size {row.tree_size} {'sealed' if row.sealed else 'unsealed'}"
    try:
        checked = heads.verify_document(row.doc, keys)
    except CapabilityAnchorError as exc:
        report.problems.append(f"{where}: {exc}")
        return None
    verified = checked.head
    c = verified.claims
    if not checked.claims_match:
        report.problems.append(f"{where}: document claims differ from its signed claims")
    if (c["day"], c["tree_size"], c["sealed"], c["root"], c["iat"]) != (
        row.day,
        row.tree_size,
        row.sealed,
        row.root.hex(),
        row.iat,
    ):
        report.problems.append(f"{where}: signed claims differ from the stored head row")
    if c["iss"] != iss:
        report.problems.append(f"{where}: iss {c['iss']!r} is not the log's {iss!r}")
    if root is not None and root.hex() != c["root"]:
        report.problems.append(
            f"{where}: root recomputed from the entries is {root.hex()}, the head says {c['root']}"
        )
    report.count("heads")
    return verified


def _keys_of(claims: bytes) -> tuple[str, ...]:
    try:
        return server_keys(json.loads(claims))
    except ValueError:
        return ()  # unreadable claims are reported by the leaf hash check


class TreeCheck:
    """The day's tree rebuilt from its leaf hashes: full tiles, each head's root and partials."""

    def __init__(
        self,
        report: AuditReport,
        day: str,
        tiles: Iterator[TileRow],
        head_sizes: Iterable[int],
        *,
        where: str | None = None,
        counter: str = "tiles",
    ) -> None:
        self.report = report
        self.day = day
        self.where = f"day {day}" if where is None else where  # what each problem names
        self.counter = counter
        self.stored = {(t.level, t.index, t.width): t for t in tiles}
        self.matched: set[_TileKey] = set()
        self.edge = TreeEdge()
        self.roots: dict[int, bytes] = {}
        self.pending = b""
        self.sizes = iter(head_sizes)
        self.next_size = next(self.sizes, None)
        while self.next_size == 0:
            self.roots[0] = self.edge.root()
            self.next_size = next(self.sizes, None)

    def add(self, leaf_hash: bytes, size: int) -> None:
        """`leaf_hash` is the leaf that makes the tree `size` entries large."""
        self.pending += leaf_hash
        if self.next_size is not None and size == self.next_size:
            self.flush()
            self.roots[self.next_size] = self.edge.root()
            self._check_partials()
            self.next_size = next(self.sizes, None)
        elif len(self.pending) >= 32 * 4096:
            self.flush()

    def flush(self) -> None:
        for full in self.edge.extend(self.pending):
            key = (full.tile.level, full.tile.index, TILE_WIDTH)
            got = self.stored.get(key)
            if got is None:
                self.report.problems.append(f"{self.where}: full tile {full.tile.path} is missing")
            elif got.hashes != full.hashes or got.root != full.root:
                self.report.problems.append(f"{self.where}: full tile {full.tile.path} differs")
            self.matched.add(key)
            self.report.count(self.counter)
        self.pending = b""

    def _check_partials(self) -> None:
        for tile, data in self.edge.partial_tiles():
            key = (tile.level, tile.index, tile.width)
            got = self.stored.get(key)
            if got is None or got.hashes != data:
                self.report.problems.append(
                    f"{self.where}: tile {tile.path} at size {self.edge.size} "
                    f"{'is missing' if got is None else 'differs'}"
                )
            self.matched.add(key)

    def check_sizes(self, entries: int) -> None:
        """Every head size the entries did not reach."""
        for size in [self.next_size, *self.sizes]:
            if size is not None and size not in self.roots:
                self.report.problems.append(
                    f"{self.where}: a head claims size {size}, the day has {entries}"
                )

    def check_unmatched(self) -> None:
        for key in sorted(set(self.stored) - self.matched):
            level, index, width = key
            self.report.problems.append(
                f"{self.where}: stored tile {level}/{index} width {width} belongs to no "
                "published tree"
            )


class _ServerIndexCheck:
    """The /record index holds exactly the keys each stored record implies, below the watermark
    (log.index_watermark); above it, nothing or exactly those. Read in entry order."""

    def __init__(
        self, report: AuditReport, day: str, indexed: Iterator[tuple[int, str]], watermark: int
    ) -> None:
        self.report = report
        self.day = day
        self.indexed = indexed
        self.watermark = watermark
        self.pending = next(indexed, None)

    def check(self, entry: EntryRow) -> None:
        want = sorted(server_key_digest(k) for k in _keys_of(entry.claims))
        got: list[str] = []
        while self.pending is not None and self.pending[0] <= entry.leaf_index:
            if self.pending[0] < entry.leaf_index:
                self._not_stored(self.pending[0])
            else:
                got.append(self.pending[1])
            self.pending = next(self.indexed, None)
        if got != want and (entry.leaf_index < self.watermark or got):
            self.report.problems.append(
                f"day {self.day}: entry {entry.leaf_index}: server index has {got}, expected {want}"
            )

    def finish(self) -> None:
        while self.pending is not None:
            self._not_stored(self.pending[0])
            self.pending = next(self.indexed, None)

    def _not_stored(self, index: int) -> None:
        self.report.problems.append(
            f"day {self.day}: server index names entry {index}, which is not stored"
        )


def _check_entry(report: AuditReport, day: str, entry: EntryRow, expected: int) -> int:
    """Index and leaf hash of one entry; returns the index the next one should have."""
    if entry.leaf_index != expected:
        report.problems.append(
            f"day {day}: entry index {entry.leaf_index} found where {expected} was expected"
        )
        expected = entry.leaf_index
    if hash_leaf(entry.claims) != entry.leaf_hash:
        report.problems.append(
            f"day {day}: entry {entry.leaf_index}: leaf hash does not match its stored bytes"
        )
    return expected + 1


def audit_day(
    report: AuditReport,
    log: Log,
    day: str,
    day_heads: list[HeadRow],
    keys: KeySet,
    progress: Progress,
) -> int:
    """Entries, tiles and heads of one day; returns the number of entries."""
    store = log.store
    head_sizes = sorted({h.tree_size for h in day_heads})
    tree = TreeCheck(report, day, store.iter_tiles(day), head_sizes)
    watermark = index_watermark(max(head_sizes, default=0), store.day_size(day), log.index_chunk)
    servers = _ServerIndexCheck(report, day, store.iter_servers(day), watermark)
    expected = 0
    for entry in store.iter_entries(day):
        servers.check(entry)
        expected = _check_entry(report, day, entry, expected)
        report.count("entries")
        tree.add(entry.leaf_hash, expected)
        if expected % 100_000 == 0:
            progress(expected, None, f"audit {day}")
    tree.flush()
    servers.finish()
    tree.check_sizes(expected)
    for row in day_heads:
        check_head(report, row, keys, log.iss, tree.roots.get(row.tree_size))
    tree.check_unmatched()
    return expected
