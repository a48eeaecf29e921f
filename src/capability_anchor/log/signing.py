"""The signing half of the log's writer (`LogWriter` inherits it): a head over the stored
entries, with its history leaf (SPEC §12.1) and checkpoint (§12.2) in the same transaction,
and a published head stored back as published (`recover`). Every method runs inside the
caller's write transaction, under the writer's lock."""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from capability_anchor import head as heads
from capability_anchor.errors import Conflict, StoreError, VerificationError
from capability_anchor.merkle import TreeEdge, hash_leaf
from capability_anchor.note import Checkpoint, NoteSigner, origin_from_url, sign_checkpoint
from capability_anchor.store import HISTORY_ORIGIN, HeadRow, HistoryLeaf, Store

from .days import prev_day
from .marks import check_compared, check_not_behind
from .serverindex import Pending, ServerIndex

if TYPE_CHECKING:
    from capability_anchor.keys import SigningKey

    from .lifecycle import Log

_events = logging.getLogger("capability_anchor.heads")


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
        store, day, size = self._store, row.day, row.tree_size
        # Everything this head covers is findable through /record once it is served.
        if pending is None:
            pending = self._index.take(day, size)
        self._index.index(pending, size)
        # The partial tiles at this size make every proof up to it servable from tiles.
        store.insert_tiles(
            day, ((t.level, t.index, t.width, data, None) for t, data in edge.partial_tiles())
        )
        store.insert_head(row)
        # Its history leaf, in publication order `(day, unsealed before sealed, tree_size)`,
        # with the tiles it completes (partial ones too), then the checkpoint of the new size
        # (after any earlier one a migrated log lacks).
        at = store.history_size()
        history = TreeEdge(at, store.history_edge_partials(at))
        leaf_hash = hash_leaf(row.history_leaf())
        store.insert_history_leaf(HistoryLeaf(at, leaf_hash, day, row.sealed, size))
        store.insert_history_tiles(history.extend_published(leaf_hash))
        key, url = self._log.key, self._log.public_url
        catch_up(store, key, url, below=history.size)
        signer = NoteSigner(_history_origin(store, url), key)
        checkpoint = Checkpoint(signer.name, history.size, history.root())
        store.insert_checkpoint(history.size, sign_checkpoint(checkpoint, signer))


def check_order(store: Store, day: str, size: int, sealed: bool) -> None:
    """`Conflict` unless a head of `day` at `size` may be published now (run inside the
    write transaction that would store it)."""
    newest = store.newest_head(day)
    if newest is None:
        return
    if newest.sealed:
        raise Conflict(f"day {day} is sealed at size {newest.tree_size}; it takes no more heads")
    if newest.tree_size > size:
        raise Conflict(
            f"day {day} has a published head of size {newest.tree_size}; a head of size "
            f"{size} would be out of the history's order"
        )
    if newest.tree_size == size and not sealed:
        raise Conflict(f"day {day} already has an unsealed head of size {size}")


def _history_origin(store: Store, public_url: str) -> str:
    """The stored origin; an older history gets (and keeps) the one of `public_url` now."""
    origin = store.meta().get(HISTORY_ORIGIN)
    if origin is None:
        origin = origin_from_url(public_url)
        store.set_meta(HISTORY_ORIGIN, origin)
    return origin


def sign_missing(
    store: Store, lock: AbstractContextManager[object], key: SigningKey, public_url: str
) -> int:
    """At open: sign the checkpoints a migrated log lacks (`catch_up`), under `lock`, in one
    write only when some are missing; how many."""
    with store.read():
        if store.checkpoint_size() >= store.history_size():
            return 0
    with lock, store.write():
        signed = catch_up(store, key, public_url)
    if signed:
        _events.info("history: signed the %d checkpoints this log had not signed yet", signed)
    return signed


def catch_up(store: Store, key: SigningKey, public_url: str, below: int | None = None) -> int:
    """Sign the checkpoint of every history size after the newest stored one, below `below`
    (default: through the history's size), from the stored leaf hashes; how many."""
    end = store.history_size() if below is None else below - 1
    done = store.checkpoint_size()
    if done >= end:
        return 0
    signer = NoteSigner(_history_origin(store, public_url), key)
    edge = TreeEdge()
    for start in range(0, end, 10_000):
        hashes = store.history_leaf_hashes(start, min(start + 10_000, end))
        for leaf_hash in hashes:
            edge.extend(leaf_hash)
            if edge.size > done:
                checkpoint = Checkpoint(signer.name, edge.size, edge.root())
                store.insert_checkpoint(edge.size, sign_checkpoint(checkpoint, signer))
    return end - done
