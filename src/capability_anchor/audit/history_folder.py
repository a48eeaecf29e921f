"""The history of an exported folder (SPEC §12.6 `--roots DIR`), rebuilt from the folder's own heads
in §12.1 order, against what the folder publishes: every history tile, the checkpoint (signed by a
trusted key, its root the rebuilt one; with a policy, a quorum), and each head's tlog-proof (its
`extra` the head's JWS, its index and path right)."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

from capability_anchor import head as heads
from capability_anchor.encoding import b64url_decode
from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.merkle import (
    TILE_HEIGHT,
    TILE_WIDTH,
    TiledTree,
    hash_leaf,
    verify_inclusion,
)
from capability_anchor.merkle.tilepath import (
    TileRequest,
    entry_bundle,
    parse_tile_path,
    published_resources,
)
from capability_anchor.note import (
    TYPE_ED25519,
    Checkpoint,
    NoteVerifier,
    Policy,
    check_cosignatures,
    open_checkpoint,
    parse_note,
    parse_tlog_proof,
    parse_vkey,
)

from .report import AuditReport, is_day


def folder_heads(folder: Path) -> list[tuple[Path, heads.Head]]:
    """Every head file of the folder that parses, in SPEC §12.1 order."""
    files = [p for p in folder.glob("????-??-??.json") if is_day(p.stem)]
    files += [p for p in folder.glob("????-??-??/*.json") if is_day(p.parent.name)]
    found = []
    for path in files:
        with contextlib.suppress(CapabilityAnchorError):
            found.append((path, heads.parse_document(path.read_bytes())))
    return sorted(found, key=lambda f: (f[1].day, f[1].sealed, f[1].tree_size))


def _proof_path(path: Path, head: heads.Head) -> Path:
    return path.with_name(f"{head.day if head.sealed else head.tree_size}.tlog-proof")


@dataclass
class _History:
    folder: Path
    leaves: list[bytes]
    tree: TiledTree
    verifiers: list[NoteVerifier]
    origin: str


def audit_folder_history(
    report: AuditReport,
    folder: Path,
    keys: list[bytes],
    policy: Policy | None = None,
) -> None:
    """`keys`: the trusted Ed25519 public keys (raw), the folder's `keys.json` or `--keys`."""
    history = folder / "history"
    found = folder_heads(folder)
    if not history.is_dir():
        if found:  # a log with no head yet has no history to export
            report.problems.append(f"{history} is missing (export writes it, SPEC §12.4)")
        return
    leaves = [b64url_decode(h.jws.split(".")[1]) for _, h in found]
    tree = TiledTree(hash_leaf(leaf) for leaf in leaves)
    origin = _origin(report, history, keys, policy)
    if origin is None:
        return
    h = _History(folder, leaves, tree, [NoteVerifier(origin, k) for k in keys], origin)
    report.count("history_leaves", len(leaves))
    _audit_tiles(report, h)
    _audit_served_checkpoint(report, h, policy, int(time.time()))
    for index, (path, head) in enumerate(found):
        _audit_tlog_proof(report, h, path, head, index)
    expected = {_proof_path(*f) for f in found}
    for stray in sorted(folder.rglob("*.tlog-proof")):
        if stray not in expected:
            report.problems.append(f"{stray}: no head of the folder has this tlog-proof")


def _origin(
    report: AuditReport, history: Path, keys: list[bytes], policy: Policy | None
) -> str | None:
    path = history / "vkey"
    try:
        vkey = parse_vkey(path.read_text("utf-8").removesuffix("\n"))
    except (OSError, UnicodeDecodeError, CapabilityAnchorError) as exc:
        report.problems.append(f"{path}: not the log's note key ({exc})")
        return None
    if vkey.key_type != TYPE_ED25519 or vkey.public_key not in keys:
        report.problems.append(f"{path}: its key is not one of the log's trusted keys")
        return None
    logs = policy.logs if policy is not None else ()
    if logs and all(log.verifier.vkey() != vkey.text() for log in logs):
        report.problems.append(f"{path}: is not the policy's log vkey")
    return vkey.name


def _expected_tile(h: _History, request: TileRequest) -> bytes | None:
    shift = TILE_HEIGHT * request.hash_level
    first = request.index * TILE_WIDTH
    if h.tree.size >> shift < first + request.width:
        return None
    if request.level is None:
        return entry_bundle(h.leaves[first : first + request.width])
    return h.tree.tile(request.level, request.index)[: request.width * 32]


def _audit_tiles(report: AuditReport, h: _History) -> None:
    base = h.folder / "history" / "tile"
    seen = set()
    for path in sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else []:
        name = path.relative_to(base).as_posix()
        try:
            request = parse_tile_path(name)
        except CapabilityAnchorError:
            report.problems.append(f"{path}: not a tlog-tiles name")
            continue
        seen.add(request)
        expected = _expected_tile(h, request)
        if expected is None:
            report.problems.append(
                f"{path}: past the history of the folder's {h.tree.size} heads "
                "(a head is missing from the folder, or the tile is another history's)"
            )
        elif path.read_bytes() != expected:
            report.problems.append(f"{path}: differs from the history the folder's heads make")
        report.count("history_tiles")
    size = h.tree.size
    for request in published_resources(range(1, size + 1), size):
        if request not in seen:
            report.problems.append(f"{base / request.path.removeprefix('tile/')} is missing")


def _opened(report: AuditReport, h: _History, where: Path, data: bytes) -> Checkpoint | None:
    """The checkpoint note in `data` if the log signed it over the folder's tree; else a problem."""
    try:
        opened = open_checkpoint(data, list(h.verifiers), origin=h.origin)
    except CapabilityAnchorError as exc:
        report.problems.append(f"{where}: the checkpoint does not verify: {exc}")
        return None
    if not any(s.name == h.origin for s in opened.opened.verified):
        report.problems.append(f"{where}: the checkpoint has no signature by the log's key")
        return None
    checkpoint = opened.checkpoint
    if checkpoint.size > h.tree.size:
        report.problems.append(
            f"{where}: the checkpoint's size {checkpoint.size} is past the history of the "
            f"folder's {h.tree.size} heads (a head is missing from the folder)"
        )
        return None
    if checkpoint.root != h.tree.root(checkpoint.size):
        report.problems.append(
            f"{where}: the checkpoint's root is not the root of the folder's heads at size "
            f"{checkpoint.size}"
        )
        return None
    return checkpoint


def _audit_served_checkpoint(
    report: AuditReport, h: _History, policy: Policy | None, at: int
) -> None:
    path = h.folder / "history" / "checkpoint"
    if not path.exists():
        report.problems.append(f"{path} is missing")
        return
    data = path.read_bytes()
    if _opened(report, h, path, data) is None:
        return
    report.count("history_checkpoint")
    if policy is not None:
        try:
            check_cosignatures(parse_note(data), policy, at=at).require()
        except CapabilityAnchorError as exc:
            report.problems.append(f"{path}: the policy's witnesses: {exc}")


def _audit_tlog_proof(
    report: AuditReport, h: _History, head_path: Path, head: heads.Head, index: int
) -> None:
    path = _proof_path(head_path, head)
    if not path.exists():
        report.problems.append(f"{path} is missing (every exported head has its tlog-proof)")
        return
    try:
        proof = parse_tlog_proof(path.read_bytes())
    except CapabilityAnchorError as exc:
        report.problems.append(f"{path}: {exc}")
        return
    if proof.extra != head.jws.encode("ascii"):
        report.problems.append(f"{path}: its extra is not the JWS of {head_path.name}")
        return
    if proof.index != index:
        report.problems.append(
            f"{path}: index {proof.index}, but {head_path.name} is history leaf {index}"
        )
        return
    checkpoint = _opened(report, h, path, proof.note)
    if checkpoint is None:
        return
    try:
        verify_inclusion(
            hash_leaf(h.leaves[index]), index, checkpoint.size, list(proof.path), checkpoint.root
        )
    except CapabilityAnchorError as exc:
        report.problems.append(f"{path}: the inclusion path does not verify: {exc}")
        return
    report.count("tlog_proofs")
