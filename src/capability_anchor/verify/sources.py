"""Where the verifier gets what a record does not carry: its head, the head's stamps and its
tlog-proof (SPEC §9, §12.5). `FolderSources` reads an exported folder;
`cli.inputs.CommandLineSources` adds files and URLs; every read is bounded (`bounded.read`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from capability_anchor.bounded.read import read_file
from capability_anchor.errors import VerificationError

from .anchor import Anchor

__all__ = [
    "FolderSources",
    "ProofSource",
    "Sources",
    "StampSource",
    "proof_limit",
    "read_file",
    "read_proof",
]


@dataclass(frozen=True)
class StampSource:
    """The stored stamps of one day, as read: a timestamps document (`listing`, parsed by
    the verifier) or DER replies kept as they are (`tokens`); `where` names the source."""

    where: str
    listing: bytes | None = None
    tokens: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class ProofSource:
    """The head's tlog-proof as read (`data`), or None when there is none where the
    verifier looked; `where` names the place either way."""

    where: str
    data: bytes | None = None


class Sources(Protocol):
    @property
    def names_head(self) -> bool:
        """True when the head is given outright (`--head`), so no anchor is needed to find it."""
        ...

    def head(self, anchor: Anchor | None) -> tuple[bytes, str]:
        """The head's bytes and where they came from. VerificationError when it cannot be
        located; InputError when it cannot be read."""
        ...

    def stamps(self, day: str, anchor: Anchor | None) -> StampSource: ...

    def history_proof(self, anchor: Anchor | None, leaf_hash: bytes) -> ProofSource:
        """The tlog-proof of the head whose history leaf hash is `leaf_hash` (the head the
        anchor names). InputError when it exists but cannot be read."""
        ...


def no_anchor() -> VerificationError:
    return VerificationError("no valid anchor to locate the head by (give --head)")


@dataclass(frozen=True)
class FolderSources:
    """An exported folder: heads at `<day>.json` and `<day>/<size>.json`, stamps in
    `<day>.timestamps.json` (else `<day>.tsr`), tlog-proofs beside the heads."""

    roots: Path
    names_head = False

    def head(self, anchor: Anchor | None) -> tuple[bytes, str]:
        if anchor is None:
            raise no_anchor()
        path = self.roots / f"{anchor.file_stem}.json"
        return read_file(path), str(path)

    def stamps(self, day: str, anchor: Anchor | None) -> StampSource:
        listing = self.roots / f"{day}.timestamps.json"
        if listing.exists():
            return StampSource(str(listing), listing=read_file(listing))
        tsr = self.roots / f"{day}.tsr"
        return StampSource(str(tsr), tokens=(read_file(tsr),) if tsr.exists() else ())

    def history_proof(self, anchor: Anchor | None, leaf_hash: bytes) -> ProofSource:
        del leaf_hash  # the folder names proofs by their head's file, as it names heads
        if anchor is None:
            return ProofSource(f"nowhere in {self.roots} (no anchor to name the head by)")
        path = self.roots / f"{anchor.file_stem}.tlog-proof"
        return ProofSource(str(path), read_proof(path) if path.exists() else None)


def proof_limit() -> int:
    """A tlog-proof is read to at most the largest `note.proof` parses: a larger one could
    never parse. Imported here, so a run that reads no proof never loads `note`."""
    from capability_anchor.note.proof import MAX_PROOF_SIZE

    return MAX_PROOF_SIZE


def read_proof(path: str | Path) -> bytes:
    return read_file(path, limit=proof_limit())
