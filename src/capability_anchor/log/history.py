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

from ..errors import Conflict
from ..merkle import TreeEdge, hash_leaf
from ..store import HeadRow, HistoryLeaf, Store


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
