"""The data-dir audit of the trees: each day's entries, tiles, `/record` index and heads,
re-derived from the stored leaf bytes; the history (SPEC §12.6), rebuilt from the stored heads in
§12.1 order, against the stored leaves, tiles and checkpoints (each byte for byte its §12.2 note,
signed once under its origin by a trusted key)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from capability_anchor import head as heads
from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.keys import KeySet
from capability_anchor.log import index_watermark, server_keys
from capability_anchor.merkle import TILE_WIDTH, TreeEdge, hash_leaf
from capability_anchor.note import Checkpoint, NoteVerifier, open_checkpoint, parse_note
from capability_anchor.progress import Progress
from capability_anchor.read.history_proofs import HistoryReader
from capability_anchor.store import EntryRow, HeadRow, HistoryLeaf, TileRow, server_key_digest

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
    stored = (row.day, row.tree_size, row.sealed, row.root.hex(), row.iat)
    if (c["day"], c["tree_size"], c["sealed"], c["root"], c["iat"]) != stored:
        report.problems.append(f"{where}: signed claims differ from the stored head row")
    if c["iss"] != iss:
        report.problems.append(f"{where}: iss {c['iss']!r} is not the log's {iss!r}")
    if root is not None and root.hex() != c["root"]:
        report.problems.append(
            f"{where}: root recomputed from the entries is {root.hex()}, the head says {c['root']}"
        )
    report.count("heads")
    return verified


class TreeCheck:
    """The day's tree rebuilt from its leaf hashes: full tiles, each head's root and partials."""

    def __init__(
        self,
        report: AuditReport,
        where: str,  # what each problem names
        tiles: Iterator[TileRow],
        head_sizes: Iterable[int],
        counter: str = "tiles",
    ) -> None:
        self.report = report
        self.where = where
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
        try:
            keys = server_keys(json.loads(entry.claims))
        except ValueError:
            keys = ()  # unreadable claims are reported by the leaf hash check
        want = sorted(server_key_digest(k) for k in keys)
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
    tree = TreeCheck(report, f"day {day}", store.iter_tiles(day), head_sizes)
    watermark = index_watermark(max(head_sizes, default=0), store.day_size(day), log.index_chunk)
    servers = _ServerIndexCheck(report, day, store.iter_servers(day), watermark)
    expected = 0
    for entry in store.iter_entries(day):
        servers.check(entry)
        if entry.leaf_index != expected:
            report.problems.append(
                f"day {day}: entry index {entry.leaf_index} found where {expected} was expected"
            )
            expected = entry.leaf_index
        if hash_leaf(entry.claims) != entry.leaf_hash:
            report.problems.append(
                f"day {day}: entry {entry.leaf_index}: leaf hash does not match its stored bytes"
            )
        expected += 1
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


_Key = tuple[str, bool, int]  # (day, sealed, tree_size): a head's place in the history


def _name(key: _Key) -> str:
    day, sealed, size = key
    return f"head {day} size {size} {'sealed' if sealed else 'unsealed'}"


def _leaf_hash(report: AuditReport, row: HeadRow) -> bytes | None:
    try:
        return hash_leaf(row.history_leaf())
    except CapabilityAnchorError as exc:
        report.problems.append(f"history: {_name(_key(row))} has no readable payload: {exc}")
        return None


def _key(row: HeadRow | HistoryLeaf) -> _Key:
    return (row.day, row.sealed, row.tree_size)


def _check_leaves(
    report: AuditReport, stored: Sequence[HistoryLeaf], by_key: dict[_Key, bytes | None]
) -> None:
    """Index, order, head and hash of every stored leaf; every head has a leaf."""
    previous: _Key | None = None
    for expected, leaf in enumerate(stored):
        key = _key(leaf)
        if leaf.index != expected:
            report.problems.append(
                f"history: leaf index {leaf.index} found where {expected} was expected "
                "(a leaf is missing)"
            )
        if previous is not None and key <= previous:
            report.problems.append(
                f"history: leaf {leaf.index} ({_name(key)}) is out of publication order "
                f"after {_name(previous)}"
            )
        previous = key
        if key not in by_key:
            report.problems.append(f"history: leaf {leaf.index} names {_name(key)}, not stored")
        elif by_key[key] is not None and by_key[key] != leaf.leaf_hash:
            report.problems.append(
                f"history: leaf {leaf.index} ({_name(key)}): its leaf hash is not the hash "
                "of the head's JWS payload"
            )
        report.count("history_leaves")
    have = {_key(leaf) for leaf in stored}
    for key in sorted(set(by_key) - have):
        report.problems.append(f"history: {_name(key)} is missing from the history")


def audit_history(
    report: AuditReport, log: Log, all_heads: Sequence[HeadRow], keys: KeySet
) -> None:
    """Rebuild the history from `all_heads`; compare it and its checkpoints with the stored ones."""
    reader = log.read.history
    ordered = sorted(all_heads, key=_key)
    by_key = {_key(h): _leaf_hash(report, h) for h in ordered}
    stored = list(log.store.iter_history())
    _check_leaves(report, stored, by_key)
    size = len(ordered)
    # Every history size is a published one.
    tree = TreeCheck(
        report, "history", log.store.iter_history_tiles(), range(1, size + 1), "history_tiles"
    )
    hashes: list[bytes] = []
    for n, row in enumerate(ordered, start=1):
        leaf_hash = by_key[_key(row)]
        if leaf_hash is None:
            return  # unreadable head: reported; the rebuilt tree would mean nothing
        tree.add(leaf_hash, n)
        hashes.append(leaf_hash)
    tree.flush()
    tree.check_unmatched()
    audit_checkpoints(report, reader, hashes, keys)


def _check_one(
    report: AuditReport, size: int, note: bytes, expected: Checkpoint, keys: list[NoteVerifier]
) -> None:
    where = f"history: checkpoint {size}"
    try:
        opened = open_checkpoint(note, list(keys), origin=expected.origin)
    except CapabilityAnchorError as exc:
        report.problems.append(f"{where}: {exc}")
        return
    if opened.checkpoint != expected:
        report.problems.append(
            f"{where} is not the checkpoint of the history rebuilt from the stored heads "
            f"(root {opened.checkpoint.root.hex()}, rebuilt {expected.root.hex()})"
        )
    elif len(parse_note(note).signatures) != 1:
        report.problems.append(f"{where} carries more than the log's one signature")


def audit_checkpoints(
    report: AuditReport, history: HistoryReader, leaf_hashes: Sequence[bytes], keys: KeySet
) -> None:
    """Check every stored checkpoint against the history of `leaf_hashes` (the rebuilt one)."""
    if not leaf_hashes:
        return
    try:
        origin = history.origin()
    except CapabilityAnchorError as exc:
        report.problems.append(f"history: {exc}")
        return
    verifiers = [NoteVerifier(origin, key.raw) for key in keys]
    edge = TreeEdge()
    expected_size = 0
    for size, note in history.store.iter_checkpoints():
        if size > len(leaf_hashes):
            report.problems.append(
                f"history: checkpoint {size} is beyond the history's {len(leaf_hashes)} leaves"
            )
            break
        for leaf_hash in leaf_hashes[edge.size : size]:
            edge.extend(leaf_hash)
        if size != expected_size + 1:
            report.problems.append(f"history: checkpoints {expected_size + 1}..{size - 1} missing")
        expected_size = size
        _check_one(report, size, note, Checkpoint(origin, size, edge.root()), verifiers)
        report.count("history_checkpoints")
    if expected_size < len(leaf_hashes):
        report.problems.append(
            f"history: checkpoints {expected_size + 1}..{len(leaf_hashes)} are missing"
        )
