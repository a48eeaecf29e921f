"""The history tree's write side (SPEC §12.1): every published head is a leaf, appended in
the head's own write transaction in publication order `(day, unsealed before sealed,
tree_size)`; the size and root are computed from this transaction's stored rows.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from capability_anchor.errors import Conflict
from capability_anchor.merkle import TreeEdge, hash_leaf
from capability_anchor.note import Checkpoint, NoteSigner, origin_from_url, sign_checkpoint
from capability_anchor.store import HISTORY_ORIGIN, HeadRow, HistoryLeaf, Store

if TYPE_CHECKING:
    from capability_anchor.keys import SigningKey

_events = logging.getLogger("capability_anchor.heads")


@dataclass(frozen=True, slots=True)
class HistoryHead:
    """The history at the size a head just made it: what its checkpoint (§12.2) signs."""

    size: int
    root: bytes


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


def append_head(store: Store, row: HeadRow) -> HistoryHead:
    """Store `row`'s history leaf and the tiles it completes (partial ones too), after `row`."""
    size = store.history_size()
    edge = TreeEdge(size, store.history_edge_partials(size))
    leaf_hash = hash_leaf(row.history_leaf())
    store.insert_history_leaf(HistoryLeaf(size, leaf_hash, row.day, row.sealed, row.tree_size))
    store.insert_history_tiles(edge.extend_published(leaf_hash))
    return HistoryHead(edge.size, edge.root())


def history_origin(store: Store, public_url: str) -> str:
    """The stored origin; an older history gets (and keeps) the one of `public_url` now."""
    origin = store.meta().get(HISTORY_ORIGIN)
    if origin is None:
        origin = origin_from_url(public_url)
        store.set_meta(HISTORY_ORIGIN, origin)
    return origin


def sign_history_checkpoint(
    store: Store, key: SigningKey, public_url: str, history: HistoryHead
) -> None:
    """Sign and store the checkpoint of `history.size` (SPEC §12.2) in the head's write
    transaction, after any earlier size a migrated log lacks (`catch_up`)."""
    catch_up(store, key, public_url, below=history.size)
    signer = NoteSigner(history_origin(store, public_url), key)
    store.insert_checkpoint(
        history.size, sign_checkpoint(Checkpoint(signer.name, history.size, history.root), signer)
    )


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
    signer = NoteSigner(history_origin(store, public_url), key)
    edge = TreeEdge()
    for start in range(0, end, 10_000):
        hashes = store.history_leaf_hashes(start, min(start + 10_000, end))
        for leaf_hash in hashes:
            edge.extend(leaf_hash)
            if edge.size > done:
                checkpoint = Checkpoint(signer.name, edge.size, edge.root())
                store.insert_checkpoint(edge.size, sign_checkpoint(checkpoint, signer))
    return end - done
