"""The store as a contract: what the log, the read side, the audit and export may ask of it,
and the few primitives an engine implements for it (docs/explanation/store.md says what
each promises: durability, append-only, snapshots, the project's errors). Every read and
write of rows is shared code over those primitives (`store/sql/`); nothing here names an
engine, a file, a row id or an engine's own mechanics."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

from capability_anchor.errors import StoreError

from .rows import EntryRow
from .sql.heads import SqlHeads
from .sql.trees import SqlTrees


@dataclass(frozen=True)
class EngineFindings:
    """What `Store.engine_findings` found: each problem one line, in the order found;
    `checked` the counts of what was checked, by name; `version` the schema version the
    store records (0: not a capability-anchor log; -1 when not read); `stopped` the error
    that kept the engine from finishing (the audit adds `problems`, then raises it)."""

    problems: list[str]
    checked: dict[str, int] = field(default_factory=dict)
    version: int = -1
    stopped: StoreError | None = None


class Scrub(Protocol):
    """An engine's background check for damage no read meets (`open.scrubber`): the service
    runs `run_once` in a thread whenever `due`, and `interrupt`s it at shutdown."""

    def due(self) -> bool: ...

    def run_once(self) -> str | None:
        """The finding if the store is damaged (then marked, `damage.py`), else None."""
        ...

    def interrupt(self) -> None: ...


class Store(SqlTrees, SqlHeads):
    """A log's storage. An engine implements the abstract methods: the statement primitives
    of `sql.SqlBase`, its transactions, its audit, and the reads its SQL must spell its own
    way; a store with a sequencer lease across replicas also overrides the lease's four."""

    # --- transactions and lifecycle ------------------------------------------------------

    @abstractmethod
    def write(self) -> AbstractContextManager[None]:
        """One durable, atomic write transaction under the store's write lock: when it
        returns, everything written in it is durable; if it raises, none of it happened."""

    @abstractmethod
    def read(self) -> AbstractContextManager[None]:
        """One consistent snapshot for several reads on this thread."""

    def wait_for_writers(self) -> None:
        """Return once no other writer holds the write lock (at once by default: one writer
        per process): a writer reads ahead after it, so that a batch committed meanwhile is
        read before its own lock, not under it."""
        return None

    @abstractmethod
    def describe(self) -> str:
        """Where the store is, for messages (never parsed: not an address to open)."""

    @abstractmethod
    def close(self) -> None: ...

    # --- the reads each engine spells its own way (its indexes differ) ---------------------

    @abstractmethod
    def existing(self, day: str, leaf_hashes: Sequence[bytes]) -> dict[bytes, int]:
        """Leaf indices of those hashes already stored in `day` (dedupe)."""

    @abstractmethod
    def find_leaf(self, leaf_hash: bytes) -> list[tuple[str, int]]:
        """Every (day, leaf_index) holding this leaf hash, newest day first."""

    @abstractmethod
    def entries_containing(self, day: str, start: int, needle: str, limit: int) -> list[EntryRow]:
        """Up to `limit` entries of `day` from `start` on, newest first, whose claims contain
        `needle` once ASCII letters are lower-cased (a cheap filter, never a match)."""

    # --- the audit (`audit/datadir`), on a read-only opening ------------------------------

    @abstractmethod
    def snapshot(self) -> AbstractContextManager[None]:
        """One read snapshot around everything inside; engine errors raised inside become
        `StoreError` (`StoreCorrupt` when the engine says the data is damaged)."""

    @abstractmethod
    def changed_under_read(self) -> bool:
        """Whether the stored data changed under the audit's reads (then nothing read is
        one moment of the log)."""

    @abstractmethod
    def engine_findings(self, after_reads: bool = False) -> EngineFindings:
        """The engine's own diagnostics, in its terms: before the audit's reads its
        consistency check, the schema version it records and every schema object that is
        not as that version defines it; after them, what the reads met that the engine
        could not store correctly (text that is not UTF-8)."""

    @abstractmethod
    def index_mismatches(self) -> list[str]:
        """Every index re-derived from its table: what does not match."""

    def check_unchanged(self) -> None:
        """Raise `StoreError` if the stored data changed under the audit's reads."""
        if self.changed_under_read():
            raise StoreError(
                f"{self.describe()} changed while it was read as a file nothing had open (a "
                "process opened the log during the audit): run the audit again"
            )

    # --- the sequencer lease across replicas: none by default (one writer) -----------------

    @property
    def head_reuse_s(self) -> float:
        """How long a reader may answer `GET /proof` from the newest head of a day it read
        before (`read.reader`): 0 for an engine in the process; a fraction of a second for
        one across the network (a proof against a head that old is still a true proof)."""
        return 0.0

    def change_mark(self) -> object | None:
        """A mark of the store as this thread reads it: two marks are equal only if nothing
        was committed between the two calls, by any process (this one's writes included), so
        rows a reader kept with a mark may be served while its mark holds (`read.reader`).
        None: the engine has no cheap one, and the reader checks the rows themselves."""
        return None

    def wake_signer(self) -> None:
        """Ask the lease holder to sign soon (a standby's proved batch waits for it)."""
        return None

    def signature_wanted(self) -> bool:
        """Whether another replica asked this lease holder to sign since the last call."""
        return False

    def lease_holder(self) -> str | None:
        """Who holds the sequencer lease, for `/metrics` ("" while nobody does); None for an
        engine with no such lease, or when it cannot be read now."""
        return None
