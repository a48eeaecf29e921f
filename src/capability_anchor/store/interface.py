"""The store as a contract: what the log, the read side, the audit and export may ask of it.

Nothing here names a storage engine, a file, a row id or an engine's own mechanics. Stores
are opened by `store.open` (by data dir or URL, through the engine registry); the one
engine so far is SQLite (`store/sqlite/`). A second engine implements every abstract
method with the same promises, and `tests/store_contract/` holds it to them.

Durability (what holds when a call returns):
- Writes happen only inside `write()`, one atomic transaction under the store's write lock;
  the next leaf index is read under that lock. When `write()` returns, everything written in
  it is durable (it survives power loss); if it raises, none of it happened.
- Append-only is the store's own duty, not its callers': an update or delete of entries,
  heads, tiles, stamps, keys, servers, rotation records, settings statements, history
  leaves or history tiles is refused (`Conflict`), as is an entry or head for a sealed day,
  an entry whose index is not the next of its day, a head whose root differs from another
  head of that day and size, and any insert that would replace a stored row with other content.
- Reads outside `write()` never see a write transaction's uncommitted rows; `read()` makes
  several reads one snapshot.
- Errors are the project's (`errors.StoreError` and its subclasses, `Conflict`), never the
  engine's own exceptions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

from capability_anchor.errors import StoreError

from .checkpoints import StoreWitnessed
from .rows import EntryRow, HeadRow, HistoryLeaf, StampRow, TileRow


class StoreLifecycle(ABC):
    """Transactions, closing, and where the store is. Opening is `store.open`'s: an engine's
    stores are made by its `engines.Engine`, never by a factory of this type."""

    @abstractmethod
    def write(self) -> AbstractContextManager[None]:
        """One durable, atomic write transaction (see the module docstring)."""

    @abstractmethod
    def read(self) -> AbstractContextManager[None]:
        """One consistent snapshot for several reads on this thread."""

    @abstractmethod
    def describe(self) -> str:
        """Where the store is, for messages (never parsed: not an address to open)."""

    @abstractmethod
    def close(self) -> None: ...

    @property
    @abstractmethod
    def head_reuse_s(self) -> float:
        """How long a reader may answer `GET /proof` from the newest head of a day it read
        before (`read.reader`). 0: read it every time, as an engine in the process does in
        microseconds. An engine across the network gives a fraction of a second: a proof
        against a head that old is still a true proof, with its own anchor."""

    @abstractmethod
    def wake_signer(self) -> None:
        """Ask whichever process signs this log's heads (the lease holder) to sign soon: a
        standby replica's proved batch waits for it (`log.standby`). An engine with one
        writer has no other signer: nothing to do."""

    @abstractmethod
    def signature_wanted(self) -> bool:
        """Whether another replica asked this lease holder to sign (`wake_signer`) since the
        last call; the sequencer then signs a checkpoint at once."""

    @abstractmethod
    def lease_holder(self) -> str | None:
        """Who holds the sequencer lease across replicas, for `/metrics` ("" while nobody
        does); None for an engine with no such lease, or when it cannot be read now."""


class StoreWrites(ABC):
    """Inserts: each only inside `write()`."""

    @abstractmethod
    def set_meta(self, key: str, value: str) -> None: ...

    @abstractmethod
    def clear_meta(self, key: str) -> None: ...

    @abstractmethod
    def add_key(self, kid: str, jwk_json: str, added: int) -> None:
        """Store a public key; the same (kid, jwk) again is a no-op."""

    @abstractmethod
    def insert_entries(
        self, day: str, first_index: int, rows: Sequence[tuple[bytes, bytes]], accepted_at: int
    ) -> None:
        """(leaf_hash, claims) rows at indices first_index, first_index + 1, ..."""

    @abstractmethod
    def insert_servers(self, day: str, rows: Iterable[tuple[str, int]]) -> None:
        """(key, leaf_index) rows of the `/record` index; one already stored is left alone."""

    @abstractmethod
    def insert_tiles(
        self, day: str, rows: Iterable[tuple[int, int, int, bytes, bytes | None]]
    ) -> None:
        """(level, index, width, hashes, root) tiles; an identical stored one is left alone."""

    @abstractmethod
    def insert_head(self, head: HeadRow) -> None: ...

    @abstractmethod
    def insert_stamp(self, stamp: StampRow, added: int) -> None: ...

    @abstractmethod
    def add_key_record(self, signer: str, kid: str, token: str, added: int) -> None: ...

    @abstractmethod
    def add_settings(self, kid: str, token: str, added: int) -> None: ...


class StoreReads(ABC):
    """Reads: meta, keys, entries, the `/record` index, tiles, heads, stamps, key trust."""

    @abstractmethod
    def meta(self) -> dict[str, str]: ...

    @abstractmethod
    def signing_keys(self) -> list[tuple[str, str]]:
        """(kid, jwk json) of every stored key, by kid."""

    @abstractmethod
    def day_size(self, day: str) -> int: ...

    @abstractmethod
    def existing(self, day: str, leaf_hashes: Sequence[bytes]) -> dict[bytes, int]:
        """Leaf indices of those hashes already stored in `day` (dedupe)."""

    @abstractmethod
    def iter_servers(self, day: str) -> Iterator[tuple[int, str]]:
        """(leaf_index, `rows.server_key_digest` of the key) of a day's `/record` index, in
        index order."""

    @abstractmethod
    def server_entries(self, key: str, limit: int = 50) -> list[tuple[str, int]]:
        """(day, leaf_index) of the entries indexed under `key`'s digest, newest first: a
        reader compares each entry's own keys (a digest may, rarely, name another's)."""

    @abstractmethod
    def leaf_hashes(self, day: str, start: int, end: int) -> list[bytes]: ...

    @abstractmethod
    def entries(self, day: str, start: int, limit: int) -> list[EntryRow]: ...

    @abstractmethod
    def entry(self, day: str, leaf_index: int) -> EntryRow | None: ...

    @abstractmethod
    def entries_containing(self, day: str, start: int, needle: str, limit: int) -> list[EntryRow]:
        """Up to `limit` entries of `day` from `start` on, newest first, whose claims contain
        `needle` once ASCII letters are lower-cased (a cheap filter, never a match)."""

    @abstractmethod
    def accepted_at(self, day: str, leaf_index: int) -> int | None:
        """The second (Unix time) the entry was accepted at, as stored with it."""

    @abstractmethod
    def find_leaf(self, leaf_hash: bytes) -> list[tuple[str, int]]:
        """Every (day, leaf_index) holding this leaf hash, newest day first."""

    @abstractmethod
    def entry_days(self) -> list[str]: ...

    @abstractmethod
    def iter_entries(self, day: str, chunk: int = 10_000) -> Iterator[EntryRow]: ...

    @abstractmethod
    def tile(self, day: str, level: int, index: int, min_width: int) -> bytes | None:
        """The narrowest stored version of a tile that holds at least `min_width` hashes."""

    @abstractmethod
    def full_tile_roots(self, day: str, level: int, first: int, count: int) -> list[bytes]: ...

    @abstractmethod
    def edge_partials(self, day: str, size: int) -> list[bytes]:
        """The partial tile of each level at tree `size`, rebuilt from stored data."""

    @abstractmethod
    def iter_tiles(self, day: str) -> Iterator[TileRow]: ...

    @abstractmethod
    def heads(self, day: str) -> list[HeadRow]: ...

    @abstractmethod
    def all_heads(self) -> list[HeadRow]: ...

    @abstractmethod
    def head(self, day: str, tree_size: int, sealed: bool) -> HeadRow | None: ...

    @abstractmethod
    def sealed_head(self, day: str) -> HeadRow | None: ...

    @abstractmethod
    def newest_head(self, day: str) -> HeadRow | None:
        """The sealed head of the day, else its largest unsealed head."""

    @abstractmethod
    def newest_unsealed(self, day: str) -> HeadRow | None: ...

    @abstractmethod
    def has_head_between(self, day: str, low: int, high: int) -> bool:
        """Whether a head of `day` has a size in `low <= size < high` (its partial tiles)."""

    @abstractmethod
    def sealed_heads(self, before: str | None = None, limit: int | None = None) -> list[HeadRow]:
        """Sealed heads, newest day first, optionally only days before `before`."""

    @abstractmethod
    def last_sealed_day(self) -> str | None: ...

    @abstractmethod
    def newest_published(self) -> HeadRow | None: ...

    @abstractmethod
    def newest_covering(self, day: str, leaf_index: int) -> HeadRow | None:
        """The newest head of `day` that covers `leaf_index`, if any."""

    @abstractmethod
    def stamps(self, day: str) -> list[StampRow]:
        """Stamps of a day in the order they were stored (SPEC §6 "the earliest stored")."""

    @abstractmethod
    def key_records(self) -> list[tuple[int, str, str, str]]:
        """(id, signer kid, endorsed kid, compact JWS) of every rotation record, in order."""

    @abstractmethod
    def settings_statements(self) -> list[tuple[int, str, str]]:
        """(id, signer kid, compact JWS) of every settings statement, oldest first."""

    @abstractmethod
    def added_times(self) -> dict[str, dict[int, int]]:
        """`added` of every settings statement and rotation record, by table and id."""


class StoreHistory(ABC):
    """The history tree (SPEC §12.1): one leaf per published head, in publication order, and
    its tiles, kept as the day trees' are. Leaves are inserted only inside `write()`, after
    the head they are (in the same transaction); the store refuses a leaf whose index is not
    the next, that is not a stored head, or that does not sort after the last leaf by
    `(day, sealed, tree_size)`."""

    @abstractmethod
    def insert_history_leaf(self, leaf: HistoryLeaf) -> None: ...

    @abstractmethod
    def insert_history_tiles(
        self, rows: Iterable[tuple[int, int, int, bytes, bytes | None]]
    ) -> None:
        """(level, index, width, hashes, root) tiles; an identical stored one is left alone."""

    @abstractmethod
    def history_size(self) -> int: ...

    @abstractmethod
    def history_leaf_hashes(self, start: int, end: int) -> list[bytes]: ...

    @abstractmethod
    def history_leaf(self, leaf_hash: bytes) -> HistoryLeaf | None:
        """The leaf with this leaf hash, if any."""

    @abstractmethod
    def history_leaf_of(self, day: str, sealed: bool, tree_size: int) -> HistoryLeaf | None:
        """The leaf of that head, if any."""

    @abstractmethod
    def history_heads(self, start: int, end: int) -> list[HeadRow]: ...  # leaves start..end-1

    @abstractmethod
    def iter_history(self, chunk: int = 10_000) -> Iterator[HistoryLeaf]:
        """Every leaf, by index."""

    @abstractmethod
    def history_tile(self, level: int, index: int, min_width: int) -> bytes | None:
        """The narrowest stored version of a tile that holds at least `min_width` hashes."""

    @abstractmethod
    def history_edge_partials(self, size: int) -> list[bytes]:
        """The partial tile of each level at history `size`, rebuilt from stored data."""

    @abstractmethod
    def iter_history_tiles(self) -> Iterator[TileRow]: ...


@dataclass(frozen=True)
class EngineFindings:
    """What `StoreAudit.engine_findings` found: each problem one line, in the order found;
    `checked` the audit's counts of what was checked, by name; `version` the schema version
    the store records (0: not a capability-anchor log; -1 when not read); `stopped` the
    error that kept the engine from finishing, once `problems` were found (the audit adds
    them, then raises it)."""

    problems: list[str]
    checked: dict[str, int] = field(default_factory=dict)
    version: int = -1
    stopped: StoreError | None = None


class StoreAudit(ABC):
    """What the data-dir audit (`audit/datadir`) asks of a read-only opening: the engine's
    own diagnostics in one call, and engine-neutral reads of plain data."""

    @abstractmethod
    def snapshot(self) -> AbstractContextManager[None]:
        """One read snapshot around everything inside; engine errors raised inside become
        `StoreError` (`StoreCorrupt` when the engine says the data is damaged)."""

    @abstractmethod
    def changed_under_read(self) -> bool:
        """Whether the stored data changed under the audit's reads (then nothing read is
        one moment of the log)."""

    @abstractmethod
    def check_unchanged(self) -> None:
        """Raise `StoreError` if the stored data changed under the audit's reads."""

    @abstractmethod
    def engine_findings(self, after_reads: bool = False) -> EngineFindings:
        """The engine's own diagnostics, worded in its terms: before the audit's reads
        (`after_reads` False) its consistency check, the schema version it records and
        every schema object that is not as that version defines it; after them, what the
        reads met that the engine could not store correctly (text that is not UTF-8)."""

    @abstractmethod
    def index_mismatches(self) -> list[str]:
        """Every index re-derived from its table: what does not match."""

    @abstractmethod
    def entries_accepted_off_day(self) -> list[tuple[str, int, int]]:
        """(day, leaf_index, accepted_at) of every entry not accepted on its UTC day."""

    @abstractmethod
    def stamp_rows(self) -> list[tuple[str, str, bytes, int]]:
        """(day, tsa, token, added) of every stamp, in the order they were stored."""

    @abstractmethod
    def key_rows(self) -> list[tuple[str, str, int]]:
        """(kid, jwk json, added) of every stored key, by kid (an exact copy, `migrate`)."""

    @abstractmethod
    def accepted_runs(self, day: str) -> list[tuple[int, int, int]]:
        """(first leaf_index, count, accepted_at) of each run of a day's entries accepted in
        one second, in index order (an exact copy, `migrate`)."""


class Scrub(Protocol):
    """An engine's background check for damage no read meets (`open.scrubber`): the service
    runs `run_once` in a thread whenever `due`, and `interrupt`s it at shutdown."""

    def due(self) -> bool: ...

    def run_once(self) -> str | None:
        """The finding if the store is damaged (then marked, `damage.py`), else None."""
        ...

    def interrupt(self) -> None: ...


class Store(StoreLifecycle, StoreWrites, StoreReads, StoreHistory, StoreWitnessed, StoreAudit):
    """A log's storage: the lifecycle, writes, reads, history and audit parts above, in one
    type."""


__all__ = [
    "EngineFindings",
    "Scrub",
    "Store",
    "StoreAudit",
    "StoreHistory",
    "StoreLifecycle",
    "StoreReads",
    "StoreWrites",
]
