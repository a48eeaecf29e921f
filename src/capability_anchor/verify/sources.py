"""Where the verifier gets what a record does not carry: the head it is anchored to, the
RFC 3161 stamps of that head (SPEC §9 steps 5a and 7a), and the head's C2SP tlog-proof in
the history (SPEC §12.5, check 8).

`verify.verify` asks a `Sources` for them and never opens a file or a URL itself.
`FolderSources` reads an exported folder (the audit's `--roots`, and `verify-proof --roots`);
`cli.inputs.CommandLineSources` adds `--head`, `--history-proof` and the anchor's URL.
Every file is read through `bounded.read` (at most its limit, as it is read), which
imports nothing beyond the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from capability_anchor.bounded.read import read_file
from capability_anchor.errors import VerificationError

from .anchor import Anchor

# Imported inside functions: `note` ~90 ms (python -X importtime after `cli.verify_proof`, min
# of 7 runs, 2026-12-05): only a run that reads a proof loads it.

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
    """An exported folder: heads at `<day>.json` (sealed) and `<day>/<tree_size>.json`,
    stamps in `<day>.timestamps.json`, else `<day>.tsr`, tlog-proofs at `<day>.tlog-proof`
    and `<day>/<tree_size>.tlog-proof`."""

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
