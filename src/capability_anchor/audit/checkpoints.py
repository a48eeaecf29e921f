"""The data-dir audit of the history's checkpoints (SPEC §12.6): 1..n for n leaves, each byte for
byte the §12.2 note of the rebuilt history at its size, with one signature under its origin that a
trusted key verifies (the audit cannot sign again; Ed25519 is deterministic anyway)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.keys import KeySet
from capability_anchor.merkle import TreeEdge
from capability_anchor.note import Checkpoint, NoteVerifier, open_checkpoint, parse_note
from capability_anchor.read.history_proofs import HistoryReader

from .report import AuditReport


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
        _extend_to(edge, leaf_hashes, size)
        if size != expected_size + 1:
            report.problems.append(f"history: checkpoints {expected_size + 1}..{size - 1} missing")
        expected_size = size
        _check_one(report, size, note, Checkpoint(origin, size, edge.root()), verifiers)
        report.count("history_checkpoints")
    if expected_size < len(leaf_hashes):
        report.problems.append(
            f"history: checkpoints {expected_size + 1}..{len(leaf_hashes)} are missing"
        )


def _extend_to(edge: TreeEdge, leaf_hashes: Sequence[bytes], size: int) -> None:
    hashes: Iterable[bytes] = leaf_hashes[edge.size : size]
    for leaf_hash in hashes:
        edge.extend(leaf_hash)
