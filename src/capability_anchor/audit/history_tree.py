"""The data-dir audit of the history tree (SPEC §12.6): rebuilt from the stored heads in §12.1
order, it must equal the stored leaves one for one and the stored tiles. Each finding names the leaf
or head it is about."""

from __future__ import annotations

from collections.abc import Sequence

from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.keys import KeySet
from capability_anchor.log import Log
from capability_anchor.merkle import hash_leaf
from capability_anchor.store import HeadRow, HistoryLeaf

from .checkpoints import audit_checkpoints
from .day import TreeCheck
from .report import AuditReport

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
    """Rebuild the history from `all_heads` and compare it with the stored one, and its
    checkpoints with the ones signed by a key of `keys` (`checkpoints`)."""
    reader = log.read.history
    ordered = sorted(all_heads, key=_key)
    by_key = {_key(h): _leaf_hash(report, h) for h in ordered}
    stored = list(reader.iter_leaves())
    _check_leaves(report, stored, by_key)
    size = len(ordered)
    tree = TreeCheck(
        report,
        "history",
        reader.iter_tiles(),
        range(1, size + 1),  # every history size is a published one
        where="history",
        counter="history_tiles",
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
