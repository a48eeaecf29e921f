"""The read side of a log (SPEC §6 head selection, proofs from stored tiles, listings).
Readers never write and never see an uncommitted row; inside the writer's transaction
(`append_and_prove`) they read the writer's own rows.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from capability_anchor import head as heads
from capability_anchor import strictjson
from capability_anchor.encoding import parse_day
from capability_anchor.errors import NotFound, UsageError
from capability_anchor.head import proof_json
from capability_anchor.merkle import TileCache, TileNodes, consistency_nodes
from capability_anchor.merkle.nodes import resolve
from capability_anchor.store import HeadRow, Store
from capability_anchor.strictjson import is_int

from .history_proofs import HistoryReader, NoteKeyHolder
from .tiles import PublishedTiles, stored_tiles
from .warming import TileWarmer

MAX_INT = 2**63 - 1  # SQLite's integers


class Origin(NoteKeyHolder, Protocol):
    """Whose log this is: read at each use, since an embedding program may set `public_url`
    after opening (the service does, from its settings)."""

    iss: str
    public_url: str


def bounded(value: int, what: str) -> int:
    """Indices and sizes as SQLite can hold them: beyond that it is a bad request."""
    if not is_int(value) or not 0 <= value <= MAX_INT:
        raise UsageError(f"{what} must be an integer 0..{MAX_INT}, got {value!r}")
    return value


class LogReader:
    """Head selection, proofs and listings of one log; its plain rows are read from `store`."""

    def __init__(self, store: Store, origin: Origin) -> None:
        self.store = store
        self._origin = origin
        # Stored tiles never change, so their rows are shared by every proof (bounded LRU).
        self._tile_cache = TileCache()
        # day -> (its newest head, when last checked to be the newest, the store's change mark
        # read before that check).
        self._newest: dict[str, tuple[HeadRow, float, object | None]] = {}
        self.history = HistoryReader(store, self._tile_cache, signer=origin)
        self.tiles = PublishedTiles(store)
        self._warmer = TileWarmer(self._tile_cache, self._tiles)
        self._anchor_member: tuple[str, int, bool, bytes, str, str] | None = None

    def close(self) -> None:
        """Stop warming tiles: before the store closes."""
        self._warmer.stop()

    # --- heads -------------------------------------------------------------------------------

    def head_for(
        self, day: str, tree_size: int | None = None, *, covering: int | None = None
    ) -> HeadRow:
        """SPEC §6 head selection: without a size the newest head of the day (the sealed one
        once sealed; `covering`: see `_newest_head`); with a size the unsealed head of that
        size, else the sealed one."""
        parse_day(day)
        if tree_size is None:
            found = self._newest_head(day, covering)
        else:
            bounded(tree_size, "tree size")
            found = self.store.head(day, tree_size, False) or self.store.head(day, tree_size, True)
        if found is None:
            what = f"day {day}" if tree_size is None else f"day {day} at size {tree_size}"
            raise NotFound(f"no published head for {what}")
        return found

    def anchor(self, row: HeadRow) -> dict[str, Any]:
        return {
            "day": row.day,
            "root": row.root.hex(),
            "url": heads.anchor_url(self._origin.public_url, row.day, row.tree_size, row.sealed),
        }

    # --- proofs --------------------------------------------------------------------------------

    def tile_getter(self, day: str, size: int) -> Callable[[int, int], bytes]:
        """The stored tiles of `day`'s tree at `size`, uncached: inside a write transaction
        rows it read must not outlive a rollback in a shared cache."""

        def fetch(level: int, index: int, min_width: int) -> bytes | None:
            return self.store.tile(day, level, index, min_width)

        return stored_tiles(fetch, size, f"day {day}")

    def _tiles(self, day: str, size: int) -> TileNodes:
        return TileNodes(self.tile_getter(day, size), cache=self._tile_cache, namespace=day)

    def proof(self, day: str, leaf_index: int, tree_size: int | None = None) -> dict[str, Any]:
        """`{v, anchor, proof}` for entry `leaf_index` of `day` in the selected head."""
        bounded(leaf_index, "leaf index")
        row = self.head_for(day, tree_size, covering=leaf_index)
        if leaf_index >= row.tree_size:
            raise NotFound(
                f"entry {leaf_index} of {day} is not covered by the head of size {row.tree_size}"
            )
        return self.proof_in(row, leaf_index)

    def _path(self, row: HeadRow, leaf_index: int) -> list[bytes]:
        """The inclusion path of entry `leaf_index` (< its size) in the head `row`; the head's
        other full tiles are then warmed in the background (`warming.py`)."""
        self._warmer.ask(row.day, row.tree_size)
        return self._tiles(row.day, row.tree_size).inclusion_path(leaf_index, row.tree_size)

    def proof_in(self, row: HeadRow, leaf_index: int) -> dict[str, Any]:
        """`{v, anchor, proof}` for entry `leaf_index` (< its size) in the head `row`."""
        return {
            "v": heads.VERSION,
            "anchor": self.anchor(row),
            "proof": proof_json(leaf_index, row.tree_size, self._path(row, leaf_index)),
        }

    def record_members(self, row: HeadRow, leaf_index: int) -> tuple[str, str]:
        """`proof_in`'s `anchor` and `proof` as RFC 8785 members (`strictjson.member`) for a
        record's splice; the anchor's is written once per head and base URL."""
        url = self._origin.public_url
        kept = self._anchor_member
        if kept is None or kept[:5] != (row.day, row.tree_size, row.sealed, row.root, url):
            member = strictjson.member("anchor", self.anchor(row))
            kept = self._anchor_member = (row.day, row.tree_size, row.sealed, row.root, url, member)
        path = self._path(row, leaf_index)
        return kept[5], heads.proof_member(leaf_index, row.tree_size, path)

    def _newest_head(self, day: str, covering: int | None) -> HeadRow | None:
        """The day's newest head as kept: a sealed one for good, as it stays the newest; an
        unsealed one while the store's change mark holds (nothing committed since), else while
        its newest (size, sealed) is the same (one index seek). For a proof of entry
        `covering`, an engine with `head_reuse_s` answers from a kept head that covers it,
        checked at most that long ago, without asking."""
        kept = self._newest.get(day)
        now = time.monotonic()
        if kept is not None:
            row, checked, seen = kept
            if row.sealed:
                return row
            reuse = self.store.head_reuse_s
            if covering is not None and covering < row.tree_size and now - checked < reuse:
                return row
        # Read before the rows: a commit in between makes the mark stale, never the row.
        mark = self.store.change_mark()
        if kept is not None:
            if mark is not None and mark == seen:
                return row
            if self.store.newest_head_state(day) == (row.tree_size, row.sealed):
                self._newest[day] = (row, now, mark)
                return row
        found = self.store.newest_head(day)
        if found is not None:
            if len(self._newest) >= 64:
                self._newest.clear()  # days asked for are few; this only bounds them
            self._newest[day] = (found, now, mark)
        return found

    def uncached_proofs(self, row: HeadRow, leaf_indices: Sequence[int]) -> list[dict[str, Any]]:
        """The inclusion proofs of entries in `row`, read without the shared tile cache: the
        writer's `append_and_prove` reads them inside its uncommitted transaction, and rows
        read there must not outlive a rollback."""
        source = TileNodes(self.tile_getter(row.day, row.tree_size))
        return [
            proof_json(i, row.tree_size, source.inclusion_path(i, row.tree_size))
            for i in leaf_indices
        ]

    def proof_by_leaf_hash(
        self, leaf_hash: bytes, day: str | None = None, tree_size: int | None = None
    ) -> dict[str, Any]:
        """Proof for a leaf hash: in `day`, else the newest day in which a published head
        covers it."""
        for found_day, index in self.store.find_leaf(leaf_hash):
            if day is not None and found_day != day:
                continue
            covering = self.store.newest_covering(found_day, index)
            if covering is not None:
                return self.proof(found_day, index, tree_size)
        raise NotFound(f"no published head covers leaf {leaf_hash.hex()}")

    def consistency(self, day: str, first: int, second: int) -> dict[str, Any]:
        bounded(first, "first")
        bounded(second, "second")
        if first < 1:
            raise UsageError(f"consistency needs first >= 1, got {first}")
        newest = self.head_for(day)
        if not first <= second <= newest.tree_size:
            # Each size is well formed; the pair names no proof the log has (yet): 404.
            raise NotFound(
                f"no consistency proof from {first} to {second} in {day}: it needs first <= "
                f"second <= {newest.tree_size} (the size of its newest head)"
            )
        source = self._tiles(day, newest.tree_size)
        path = resolve(consistency_nodes(first, second), source.node)
        return {
            "v": heads.VERSION,
            "day": day,
            "first": first,
            "second": second,
            "path": [p.hex() for p in path],
        }

    # --- listings ------------------------------------------------------------------------------

    def entries(self, day: str, start: int = 0, limit: int = 100) -> list[dict[str, Any]]:
        parse_day(day)
        bounded(start, "start")
        bounded(limit, "limit")
        return [
            {
                "leaf_index": e.leaf_index,
                "leaf_hash": e.leaf_hash.hex(),
                "claims": json.loads(e.claims),
            }
            for e in self.store.entries(day, start, limit)
        ]

    def roots(self, before: str | None = None, limit: int = 100) -> dict[str, Any]:
        if before is not None:
            parse_day(before)
        rows = self.store.sealed_heads(before, limit)
        return {
            "v": heads.VERSION,
            "iss": self._origin.iss,
            "days": [
                {
                    "day": r.day,
                    "tree_size": r.tree_size,
                    "root": r.root.hex(),
                    "url": heads.anchor_url(self._origin.public_url, r.day, r.tree_size, True),
                }
                for r in rows
            ],
        }
