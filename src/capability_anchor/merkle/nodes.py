"""Which tree nodes a proof needs (RFC 9162 §2.1.3.1, §2.1.4.1), as node IDs, never hashes: a
`NodeSource` supplies them, as in the Go reference. `(height, index)` is the perfect subtree over
leaves `[index << height, (index + 1) << height)`; a proof element is a tuple of IDs whose
right-to-left fold is MTH(D[a:b]) (several for an ephemeral subtree on the right border)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from capability_anchor.errors import UsageError

from .hashing import EMPTY_ROOT, hash_children

NodeID = tuple[int, int]
ProofNode = tuple[NodeID, ...]


class NodeSource(Protocol):
    """Anything that can hand out the hash of a complete perfect subtree."""

    def node(self, height: int, index: int) -> bytes: ...


def range_nodes(begin: int, end: int) -> list[NodeID]:
    """The perfect subtrees of MTH(D[begin:end]), largest first; `begin` must be aligned."""
    ids: list[NodeID] = []
    size = end - begin
    offset = begin
    for height in range(size.bit_length() - 1, -1, -1):
        if size >> height & 1:
            ids.append((height, offset >> height))
            offset += 1 << height
    return ids


def inclusion_nodes(index: int, size: int) -> list[ProofNode]:
    """RFC 9162 PATH(index, D[size]) as node IDs, leaf-most first."""
    check_index(index, size)
    return path_nodes(index, 0, size)


def check_index(index: int, size: int) -> None:
    if not 0 <= index < size:
        raise UsageError(f"leaf index {index} is outside a tree of size {size}")


def path_nodes(index: int, height: int, size: int) -> list[ProofNode]:
    """The audit path of node (height, index) in a tree of `size` leaves, as node IDs."""
    path: list[ProofNode] = []
    last = (size - 1) >> height
    node = index
    while last > 0:
        sibling = node ^ 1
        if sibling < last:
            path.append(((height, sibling),))
        elif sibling == last:
            path.append(tuple(range_nodes(sibling << height, size)))
        # else: the node is the last one at this height and has no sibling.
        node >>= 1
        last >>= 1
        height += 1
    return path


def consistency_nodes(first: int, second: int) -> list[ProofNode]:
    """RFC 9162 PROOF(first, D[second]) as node IDs."""
    if not 0 < first <= second:
        raise UsageError(f"consistency needs 0 < first <= second, got {first} and {second}")
    if first == second:
        return []
    height = (first & -first).bit_length() - 1
    index = (first - 1) >> height
    path = path_nodes(index, height, second)
    if index == 0:
        return path
    return [((height, index),), *path]


def inclusion_path_length(index: int, size: int) -> int:
    """Exact number of hashes in a valid inclusion proof for (index, size)."""
    inner = (index ^ (size - 1)).bit_length()
    border = (index >> inner).bit_count()
    return inner + border


def consistency_path_length(first: int, second: int) -> int:
    """Exact number of hashes in a valid consistency proof for 0 < first < second."""
    height = (first & -first).bit_length() - 1
    index = (first - 1) >> height
    length = inclusion_path_length(index, ((second - 1) >> height) + 1)
    return length if index == 0 else length + 1


def fold(hashes: Sequence[bytes]) -> bytes:
    """Right-to-left fold of a right-border decomposition into one subtree hash."""
    acc = hashes[-1]
    for left in reversed(hashes[:-1]):
        acc = hash_children(left, acc)
    return acc


def resolve(nodes: Sequence[ProofNode], get: Callable[[int, int], bytes]) -> list[bytes]:
    """Turn proof node IDs into hashes, using `get(height, index)` for perfect subtrees."""
    return [fold([get(h, i) for h, i in parts]) for parts in nodes]


def root_from(source: NodeSource, size: int) -> bytes:
    """The root hash of the first `size` leaves of a tree, in O(log size) node reads."""
    if size == 0:
        return EMPTY_ROOT
    return fold([source.node(h, i) for h, i in range_nodes(0, size)])
