"""The data-dir audit of the history (SPEC §12.6): rebuilt from the stored heads in §12.1 order, it
must equal the stored leaves one for one and the stored tiles, and each stored checkpoint (1..n)
must be byte for byte its §12.2 note, signed once under its origin by a trusted key."""

from __future__ import annotations

from collections.abc import Sequence

from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.keys import KeySet
from capability_anchor.log import Log
from capability_anchor.merkle import TreeEdge, hash_leaf
from capability_anchor.note import Checkpoint, NoteVerifier, open_checkpoint, parse_note
from capability_anchor.read.history_proofs import HistoryReader
from capability_anchor.store import HeadRow, HistoryLeaf

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
    """Rebuild the history from `all_heads`; compare it and its checkpoints with the stored ones."""
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
    for size, note in history.iter_checkpoints():
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
