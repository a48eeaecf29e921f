"""The signing half of the log's writer (`LogWriter` inherits it): a head over the stored
entries, with its history leaf and checkpoint in the same transaction, and a published head
stored back as published (`recover`). Every method runs inside the caller's write
transaction, under the writer's lock."""

from __future__ import annotations

from typing import TYPE_CHECKING

from capability_anchor import head as heads
from capability_anchor.errors import StoreError, VerificationError
from capability_anchor.merkle import TreeEdge
from capability_anchor.store import HeadRow, Store

from .days import prev_day
from .history_leaves import append_head, check_order, sign_history_checkpoint
from .marks import check_compared, check_not_behind
from .serverindex import Pending, ServerIndex

if TYPE_CHECKING:
    from .lifecycle import Log


class HeadSigner:
    """What signs and stores heads; the writer's state it works on is `LogWriter`'s."""

    _log: Log
    _store: Store
    _index: ServerIndex
    edge: TreeEdge | None
    edge_day: str | None

    def _prev(self, day: str) -> str | None:
        if day == self._log.first_day:
            return None
        before = self._store.sealed_head(prev_day(day))
        if before is None:
            raise StoreError(f"day {prev_day(day)} is not sealed; cannot chain {day}")
        return heads.claims_digest(heads.parse_document(before.doc).claims)

    def sign_head(
        self, day: str, size: int, sealed: bool, iat: int, pending: Pending | None = None
    ) -> HeadRow:
        """Sign and store a head of `day` at `size` with its history leaf and checkpoint, in
        the caller's write transaction. The root is computed from the stored rows, never a
        cache (a cached edge must agree); nothing is signed out of order (`Conflict`), while
        behind (`BehindPublished`, §13.3) or by an uncompared restored copy (§14.2)."""
        check_not_behind(self._log.data_dir)
        check_compared(self._log.data_dir)
        check_order(self._store, day, size, sealed)
        edge, root = self._stored_edge(day, size)
        log = self._log
        claims = heads.make_claims(
            iss=log.iss,
            day=day,
            tree_size=size,
            root=root,
            sealed=sealed,
            prev=self._prev(day),
            iat=iat,
        )
        signed = heads.sign(claims, key := log.signing_key())  # the checkpoint's key too
        row = HeadRow(day, size, sealed, root, iat, key.kid, signed.document())
        self._store_head(row, edge, pending)
        return row

    def store_published_head(self, row: HeadRow) -> None:
        """Store a published head (`recover`) that chains onto the stored entries and heads;
        only its checkpoint is signed (to the published bytes: Ed25519 is deterministic)."""
        check_order(self._store, row.day, row.tree_size, row.sealed)
        edge, root = self._stored_edge(row.day, row.tree_size)
        claims = heads.parse_document(row.doc).claims
        if root != row.root or claims.get("prev") != self._prev(row.day):
            raise VerificationError(
                f"the published head of {row.day} at size {row.tree_size} does not chain onto "
                f"the stored entries and heads (root {root.hex()}); nothing stored"
            )
        self._store_head(row, edge, None)

    def _stored_edge(self, day: str, size: int) -> tuple[TreeEdge, bytes]:
        edge = TreeEdge(size, self._store.edge_partials(day, size))
        root = edge.root()
        cached = self.edge
        if (
            cached is not None
            and self.edge_day == day
            and cached.size == size
            and cached.root() != root
        ):
            raise StoreError(
                f"day {day} at size {size}: the stored entries give root {root.hex()}, "
                f"this process computed {cached.root().hex()}; refusing to sign"
            )
        return edge, root

    def _store_head(self, row: HeadRow, edge: TreeEdge, pending: Pending | None) -> None:
        """Store `row` with what serving it needs, its history leaf and its checkpoint."""
        day, size = row.day, row.tree_size
        # Everything this head covers is findable through /record once it is served.
        if pending is None:
            pending = self._index.take(day, size)
        self._index.index(pending, size)
        # The partial tiles at this size make every proof up to it servable from tiles.
        self._store.insert_tiles(
            day, ((t.level, t.index, t.width, data, None) for t, data in edge.partial_tiles())
        )
        self._store.insert_head(row)
        history = append_head(self._store, row)
        sign_history_checkpoint(self._store, self._log.key, self._log.public_url, history)
