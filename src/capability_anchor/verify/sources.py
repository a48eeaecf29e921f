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

# Imported inside functions: `note` ~90 ms (python -X importtime after `cli.verify_proof`, min
# of 7 runs, 2026-12-05): only a run that reads a proof loads it.


@dataclass(frozen=True)
class StampSource:
    """One day's stored stamps: a timestamps document (`listing`) or DER replies (`tokens`)."""

    where: str
    listing: bytes | None = None
    tokens: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class ProofSource:
    """The head's tlog-proof as read (`data`, None if none); `where` names the place either way."""

    where: str
    data: bytes | None = None


class Sources(Protocol):
    @property
    def names_head(self) -> bool:
        """True when the head is given outright (`--head`), so no anchor is needed to find it."""
        ...

    def head(self, anchor: Anchor | None) -> tuple[bytes, str]:
        """The head's bytes and where; VerificationError if not found, InputError if unreadable."""
        ...

    def stamps(self, day: str, anchor: Anchor | None) -> StampSource: ...

    def history_proof(self, anchor: Anchor | None, leaf_hash: bytes) -> ProofSource:
        """The tlog-proof of the head of history leaf `leaf_hash`; InputError if unreadable."""
        ...


def no_anchor() -> VerificationError:
    return VerificationError("no valid anchor to locate the head by (give --head)")


@dataclass(frozen=True)
class FolderSources:
    """An exported folder: heads, their stamps and tlog-proofs, at the names export gives them."""

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
        data = read_file(path, limit=proof_limit()) if path.exists() else None
        return ProofSource(str(path), data)


def proof_limit() -> int:
    """The largest tlog-proof `note.proof` parses (imported here, so only when one is read)."""
    from capability_anchor.note.proof import MAX_PROOF_SIZE

    return MAX_PROOF_SIZE
