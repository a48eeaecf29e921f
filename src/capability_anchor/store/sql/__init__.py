"""The SQL both engines run, written once (docs/explanation/store.md): `rows` (meta, key
trust, entries, the `/record` index), `trees` (tiles, the history tree) and `heads` (heads,
stamps, checkpoints, cosignatures, policies, witness state), with `?` placeholders, on an
engine's three statement primitives (`SqlBase`) and its `Dialect` for the few real
differences. It imports no driver: only the kernel and `rows`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from capability_anchor.errors import CapabilityAnchorError, Conflict, StoreError

# (codes an engine's error starts with, the project's error, what it is for an operator)
Kinds = tuple[tuple[tuple[str, ...], type[StoreError], str], ...]
Rows = Iterable[Sequence[object]]
Names = Sequence[str]


@dataclass(frozen=True)
class Dialect:
    """What differs in the SQL text between engines."""

    collate: str  # after a text column in ORDER BY: order by its bytes
    unlimited: int | None  # the LIMIT that is none
    stamp_order: str  # the column that orders stamps as they were stored
    off_day: str  # a condition: the entry's accepted_at is not a time of its UTC day


class SqlBase(ABC):
    """The statement primitives an engine implements, and the helpers over them."""

    _dialect: Dialect

    @abstractmethod
    def _exec(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        """Run one statement (in the thread's transaction, if any); its rows."""

    @abstractmethod
    def _iter(self, sql: str, params: Sequence[object] = ()) -> Iterator[Any]:
        """Rows one at a time, for results too large to fetch at once."""

    @abstractmethod
    def _insert(
        self, table: str, cols: Names, rows: Rows, *, ignore: bool = False, types: Names = ()
    ) -> None:
        """Insert many rows; `ignore`: one already stored under the key is left alone
        (`ON CONFLICT DO NOTHING`); `types`: the columns' (PostgreSQL's names)."""

    def _one(self, sql: str, params: Sequence[object] = ()) -> Any:
        rows = self._exec(sql, params)
        return rows[0] if rows else None

    def _limit(self, limit: int | None) -> int | None:
        """`limit` as a LIMIT value: None or a negative one is none."""
        return self._dialect.unlimited if limit is None or limit < 0 else limit


def classified(code: str, kinds: Kinds, context: str, detail: str) -> StoreError | None:
    """The project's error for an engine's error `code`, by the first of `kinds` it starts
    with; None for none of them. The store raises; whoever handles the error counts it."""
    for prefixes, cls, what in kinds:
        if code.startswith(prefixes):
            return cls(f"{context}: {what}: {detail}")
    return None


def refused(message: str) -> CapabilityAnchorError:
    """A write the schema refused: an append-only rule's own words, else the message."""
    if "append-only" in message:
        return Conflict(message)
    return StoreError(f"the store refused a write: {message}")


__all__ = ["Dialect", "Kinds", "Names", "Rows", "SqlBase", "classified", "refused"]
