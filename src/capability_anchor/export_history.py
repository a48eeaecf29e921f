"""The history's part of the static publication (SPEC §12.4), as the same bytes the API
serves: `history/checkpoint` (as `/history/checkpoint` serves it), `history/vkey`,
`history/policy` and a tlog-proof beside every head (`<day>.tlog-proof`,
`<day>/<tree_size>.tlog-proof`), all rewritten (the checkpoint moves on, the proofs follow
it, a policy can be replaced and a key rotated); `history/tile/...` and, with
`export --tiles`, each day's tiles under `<day>/tile/...`, create-or-identical.

Each tlog-proof is against the exported checkpoint; a head that checkpoint does not cover
yet (its quorum lags behind the newest heads) is proven against the newest checkpoint, as
`/history/proof` does.

Which tiles: every full tile at the tree's current size, and every partial tile of a
published size whose full tile does not exist yet. C2SP tlog-tiles lets a log drop a partial
tile once its full tile is there, and a folder that kept one per history size would grow by
a file per head forever; partial tiles already in a folder are never removed (every tile is
create-or-identical). Entry bundles follow the level-0 tiles.
"""

from __future__ import annotations

from pathlib import Path

from . import head as heads
from .log import Log
from .merkle.tilepath import published_resources
from .note import TlogProof


def tile_files(log: Log, outdir: Path, day_tiles: bool) -> list[tuple[Path, bytes]]:
    """(path, bytes) of every tile to write, all create-or-identical."""
    read = log.read
    files: list[tuple[Path, bytes]] = []
    size = read.history.size()
    for request in published_resources(range(1, size + 1), size):
        files.append((outdir / "history" / request.path, read.tiles.history(request)))
    if day_tiles:
        by_day: dict[str, list[int]] = {}
        for row in read.all_heads():
            by_day.setdefault(row.day, []).append(row.tree_size)
        for day, sizes in sorted(by_day.items()):
            for request in published_resources(sizes, max(sizes)):
                files.append((outdir / day / request.path, read.tiles.day(day, request)))
    return files


def _size_of(note: bytes) -> int:
    return int(note.split(b"\n", 2)[1])


def history_files(log: Log, outdir: Path) -> list[tuple[Path, bytes]]:
    """(path, bytes) of the rewritten history files (see the module docstring); none
    before the first head."""
    history = log.read.history
    if history.size() == 0:
        return []
    served = history.served_checkpoint()
    files = [
        (outdir / "history" / "checkpoint", served),
        (outdir / "history" / "vkey", history.vkey().encode("utf-8") + b"\n"),
    ]
    policy = history.policy()
    if policy is not None:
        files.append((outdir / "history" / "policy", policy))
    newest: bytes | None = None
    docs = {(r.day, r.sealed, r.tree_size): r.doc for r in log.read.all_heads()}
    for leaf in history.iter_leaves():
        note = served
        if _size_of(note) <= leaf.index:
            newest = newest or history.served_checkpoint(history.checkpoint_size())
            note = newest
        path = history.inclusion(leaf.leaf_hash, _size_of(note)).path
        token = heads.parse_document(docs[(leaf.day, leaf.sealed, leaf.tree_size)]).jws
        proof = TlogProof(leaf.index, tuple(path), note, token.encode("ascii")).to_bytes()
        name = (
            f"{leaf.day}.tlog-proof" if leaf.sealed else f"{leaf.day}/{leaf.tree_size}.tlog-proof"
        )
        files.append((outdir / name, proof))
    return files


__all__ = ["history_files", "tile_files"]
