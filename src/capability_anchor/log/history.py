"""The history tree's write side (SPEC §12.1): every published head is a leaf of one tree
per log, appended in the head's own write transaction.

Publication order is `(day, sealed false before true, tree_size)`: a head of day D at size n
only while D is not sealed and no published head of D is larger. `check_order` refuses any
other head before it is signed; the store's triggers refuse a leaf out of that order too.
`append_head` stores the leaf and the history tiles it completes, and returns the new
history size and root, both computed from the stored rows of this transaction (the right
edge is rebuilt from the stored leaf hashes and tile roots, never taken from a cache).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import Conflict
from ..merkle import TreeEdge, hash_leaf
from ..store import HeadRow, HistoryLeaf, Store

if TYPE_CHECKING:
    from ..keys import SigningKey


@dataclass(frozen=True, slots=True)
class HistoryHead:
    """The history at the size a head just made it: what its checkpoint (§12.2) signs."""

    size: int
    root: bytes


def check_order(store: Store, day: str, size: int, sealed: bool) -> None:
    """Raise `Conflict` unless a head of `day` at `size` (`sealed` or not) may be published
    now; run inside the write transaction that would store it, so no writer in any process
    can publish a head in between."""
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
    """Store `row`'s history leaf and the tiles it completes (the partial tiles of the new
    size among them: every history size is a published one), inside the caller's write
    transaction, after `row` itself was stored."""
    size = store.history_size()
    edge = TreeEdge(size, store.history_edge_partials(size))
    leaf_hash = hash_leaf(row.history_leaf())
    store.insert_history_leaf(HistoryLeaf(size, leaf_hash, row.day, row.sealed, row.tree_size))
    store.insert_history_tiles(edge.extend_published(leaf_hash))
    return HistoryHead(edge.size, edge.root())


def sign_history_checkpoint(store: Store, key: SigningKey, history: HistoryHead) -> None:
    """The hook for SPEC §12.2, called by `LogWriter.sign_head` inside the head's write
    transaction right after `append_head`: sign the checkpoint of `history.size` (root
    `history.root`, both from this transaction's stored rows) with the log's signing `key`
    and store it through `store`, so that a head, its history leaf and the checkpoint of
    the new size commit together or not at all. Not wired yet: the C2SP note formats come
    with the checkpoint slice of issue 13; until then no checkpoint is stored."""
    del store, key, history  # nothing to sign until the note formats land
