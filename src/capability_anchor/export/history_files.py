"""The history's part of the static publication (SPEC §12.4), as the same bytes the API
serves: checkpoint, vkey, policy and tlog-proofs rewritten; tiles create-or-identical (which
tiles: docs/explanation/decisions/19-verification.md).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from capability_anchor import head as heads
from capability_anchor.log import Log
from capability_anchor.merkle.tilepath import published_resources
from capability_anchor.note.proof import format_tlog_proof
from capability_anchor.store import HistoryLeaf

Made = Callable[[], bytes]


def tile_files(log: Log, outdir: Path, day_tiles: bool) -> list[tuple[Path, Made]]:
    """(path, maker of its bytes) of every tile to write, all create-or-identical: made on
    demand, since a day's entry bundles hold the whole day again."""
    read = log.read
    files: list[tuple[Path, Made]] = []
    size = read.history.size()
    for request in published_resources(range(1, size + 1), size):
        files.append((outdir / "history" / request.path, partial(read.tiles.history, request)))
    if day_tiles:
        by_day: dict[str, list[int]] = {}
        for row in read.all_heads():
            by_day.setdefault(row.day, []).append(row.tree_size)
        for day, sizes in sorted(by_day.items()):
            for request in published_resources(sizes, max(sizes)):
                files.append((outdir / day / request.path, partial(read.tiles.day, day, request)))
    return files


def _size_of(note: bytes) -> int:
    return int(note.split(b"\n", 2)[1])


def history_files(log: Log, outdir: Path) -> list[tuple[Path, Made]]:
    """(path, maker of its bytes) of the rewritten history files (see the module
    docstring); none before the first head."""
    history = log.read.history
    if history.size() == 0:
        return []
    served = history.served_checkpoint()
    files: list[tuple[Path, Made]] = [
        (outdir / "history" / "checkpoint", lambda: served),
        (outdir / "history" / "vkey", lambda: history.vkey().encode("utf-8") + b"\n"),
    ]
    policy = history.policy()
    if policy is not None:
        files.append((outdir / "history" / "policy", lambda: policy))
    newest = history.served_checkpoint(history.checkpoint_size())
    docs = {(r.day, r.sealed, r.tree_size): r.doc for r in log.read.all_heads()}

    def proof(leaf: HistoryLeaf) -> bytes:
        note = served if leaf.index < _size_of(served) else newest
        path = history.inclusion(leaf.leaf_hash, _size_of(note)).path
        token = heads.parse_document(docs[(leaf.day, leaf.sealed, leaf.tree_size)]).jws
        return format_tlog_proof(leaf.index, path, note, token.encode("ascii"))

    for leaf in history.iter_leaves():
        name = (
            f"{leaf.day}.tlog-proof" if leaf.sealed else f"{leaf.day}/{leaf.tree_size}.tlog-proof"
        )
        files.append((outdir / name, partial(proof, leaf)))
    return files


__all__ = ["Made", "history_files", "tile_files"]
