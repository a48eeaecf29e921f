"""A log written by hand into an export-shaped folder, as someone holding the log's key
could publish it: every head, history leaf, tile and checkpoint is made with library calls
(`head.sign`, `note.sign_checkpoint`, `merkle.TiledTree`), so a test can publish exactly the
bad history it wants the monitor to catch. What it writes is what the monitor reads of an
export (heads, keys.json, history and day tiles, the checkpoint); no tlog-proofs."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rfc8785

from capability_anchor import head as heads
from capability_anchor.keys import SigningKey
from capability_anchor.merkle import TiledTree
from capability_anchor.merkle.tilepath import entries_path, entry_bundle
from capability_anchor.note import Checkpoint, NoteSigner, sign_checkpoint

ORIGIN = "resolver.example/history"
ISS = "https://resolver.example"
DAY1, DAY2, DAY3 = "2026-03-01", "2026-03-02", "2026-03-03"


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


@dataclass
class HandLog:
    folder: Path
    key: SigningKey
    days: dict[str, list[bytes]] = field(default_factory=dict)  # day -> entry leaf bytes
    leaves: list[bytes] = field(default_factory=list)  # history leaves
    sealed_digest: str | None = None

    def entries(self, day: str, count: int) -> None:
        got = self.days.setdefault(day, [])
        got += [rfc8785.dumps({"day": day, "n": len(got) + i}) for i in range(count)]

    def day_root(self, day: str, size: int) -> bytes:
        return TiledTree(leaf_hash(e) for e in self.days.get(day, [])[:size]).root()

    def head(
        self,
        day: str,
        size: int,
        *,
        sealed: bool = False,
        root: bytes | None = None,
        prev: Any = "auto",
        key: SigningKey | None = None,
    ) -> dict[str, Any]:
        """Sign and publish a head (file and history leaf); defaults make it a good one."""
        claims = heads.make_claims(
            iss=ISS,
            day=day,
            tree_size=size,
            root=self.day_root(day, size) if root is None else root,
            sealed=sealed,
            prev=self.sealed_digest if prev == "auto" else prev,
            iat=heads.sealed_iat(day) - 3600,
        )
        signed = heads.sign(claims, key or self.key)
        path = self.folder / (f"{day}.json" if sealed else f"{day}/{size}.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(heads.document(claims, signed.jws))
        leaf = rfc8785.dumps(claims)
        self.leaves.append(leaf)
        if sealed:
            self.sealed_digest = hashlib.sha256(leaf).hexdigest()
        self._day_tiles(day, size)
        return claims

    def _day_tiles(self, day: str, size: int) -> None:
        if size == 0:
            return
        tree = TiledTree(leaf_hash(e) for e in self.days[day][:size])
        _write_tiles(self.folder / day, tree, self.days[day][:size])

    def publish(self) -> bytes:
        """Write the history tiles, entry bundles, keys.json and the signed checkpoint."""
        tree = TiledTree(leaf_hash(leaf) for leaf in self.leaves)
        _write_tiles(self.folder / "history", tree, self.leaves)
        note = sign_checkpoint(
            Checkpoint(ORIGIN, tree.size, tree.root()), NoteSigner(ORIGIN, self.key)
        )
        (self.folder / "history" / "checkpoint").write_bytes(note)
        jwks = {"keys": [self.key.public.jwk()]}
        (self.folder / "keys.json").write_text(json.dumps(jwks))
        return note

    def forged_checkpoint(self, size: int) -> bytes:
        """A checkpoint of `size` signed with the log's key whose root is not its tree's:
        a rolled-back fork, as a log that rewrote its history would show."""
        root = hashlib.sha256(b"another history").digest()
        return sign_checkpoint(Checkpoint(ORIGIN, size, root), NoteSigner(ORIGIN, self.key))


def _write_tiles(base: Path, tree: TiledTree, leaves: list[bytes]) -> None:
    for tid, data in tree.tiles():
        path = base / tid.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if tid.level == 0:
            start = tid.index * 256
            bundle = base / entries_path(tid.index, tid.width)
            bundle.parent.mkdir(parents=True, exist_ok=True)
            bundle.write_bytes(entry_bundle(leaves[start : start + tid.width]))


def good_log(folder: Path, key: SigningKey) -> HandLog:
    """Two days: day 1 heads at 3 and 5 then sealed at 5; day 2 a head at 2; published."""
    log = HandLog(folder, key)
    log.entries(DAY1, 5)
    log.head(DAY1, 3)
    log.head(DAY1, 5)
    log.head(DAY1, 5, sealed=True)
    log.entries(DAY2, 300)
    log.head(DAY2, 2)
    log.publish()
    return log
