"""The part of the store's interface (`interface.Store`) that keeps the history's signed
checkpoints, the witnesses' cosignatures, the policies and the per-witness state."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator

from .rows import CosignatureRow, WitnessState


class StoreWitnessed(ABC):
    """The history's signed checkpoints (SPEC §12.2), the witnesses' cosignatures and the
    witness policies (§12.3), all append-only, and the submitter's per-witness state (the
    one mutable table). Writes only inside `write()`. The store refuses a checkpoint that is
    not of the next size or not of a size the history has, and a cosignature of a size with
    no stored checkpoint."""

    @abstractmethod
    def insert_checkpoint(self, size: int, note: bytes) -> None: ...

    @abstractmethod
    def checkpoint_note(self, size: int) -> bytes | None:
        """The log-signed checkpoint note of `size`, if stored."""

    @abstractmethod
    def checkpoint_size(self) -> int:
        """The newest stored checkpoint's size (0 when none)."""

    @abstractmethod
    def iter_checkpoints(self, chunk: int = 10_000) -> Iterator[tuple[int, bytes]]:
        """(size, note) of every stored checkpoint, by size."""

    @abstractmethod
    def insert_cosignature(self, row: CosignatureRow, added: int) -> bool:
        """Store `row` unless that line is already stored for its size (then False)."""

    @abstractmethod
    def cosignatures(self, size: int) -> list[CosignatureRow]:
        """The stored cosignatures of the checkpoint of `size`, in the order stored."""

    @abstractmethod
    def cosigned_sizes(self, limit: int | None = None) -> list[int]:
        """Every size with a stored cosignature, newest first (the `limit` newest)."""

    @abstractmethod
    def witnessed_marker(self) -> tuple[int, int, int]:
        """(newest checkpoint size, newest cosignature's id, newest policy's id), each 0 when
        none: it changes whenever what `/history/checkpoint` serves may have changed (the
        three tables only grow)."""

    @abstractmethod
    def iter_cosignatures(self) -> Iterator[CosignatureRow]: ...

    @abstractmethod
    def iter_cosignature_rows(self) -> Iterator[tuple[int, int, CosignatureRow]]:
        """(id, added, row) of every stored cosignature, by id (the audit)."""

    @abstractmethod
    def policy_rows(self) -> list[tuple[int, int, bytes]]:
        """(id, added, text) of every stored policy, oldest first."""

    @abstractmethod
    def set_policy(self, text: bytes, added: int) -> None:
        """Store a new witness policy (the old ones are kept; the newest is the policy)."""

    @abstractmethod
    def policy(self) -> bytes | None: ...

    @abstractmethod
    def witness_state(self, name: str) -> WitnessState | None: ...

    @abstractmethod
    def set_witness_state(self, state: WitnessState) -> None: ...

    @abstractmethod
    def witness_states(self) -> list[WitnessState]: ...
