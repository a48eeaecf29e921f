"""The witness's own storage (c2sp.org/tlog-witness), in its own data dir, never the log's:
the logs it witnesses and every checkpoint it cosigned, append-only; a row never goes
back in size or changes the root of a size (docs/explanation/store.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

WITNESS_SCHEMA_VERSION = 3


@dataclass(frozen=True)
class WitnessedLog:
    """A log the witness cosigns for: its origin and the vkeys trusted for it."""

    origin: str
    vkeys: tuple[str, ...]
    added: int


@dataclass(frozen=True)
class Cosigned:
    """One checkpoint the witness cosigned: the log's signed note as received, and the one
    cosignature/v1 line the witness answered with."""

    origin: str
    size: int
    root: bytes
    checkpoint: bytes
    cosignature: str
    time: int

    def monitoring_note(self) -> bytes:
        """The checkpoint with the witness's cosignature appended (the monitoring view)."""
        return self.checkpoint + self.cosignature.encode("utf-8")


Step = Callable[[Cosigned | None], Cosigned]
"""Given the latest cosigned row (None: never), the row to add, or an exception."""


class WitnessStore(Protocol):
    """What the witness needs from storage. `advance` is the one write of the protocol."""

    def name(self) -> str:
        """The witness's key name, fixed at creation."""
        ...

    def log(self, origin: str) -> WitnessedLog | None: ...

    def log_by_hash(self, hex_origin: str) -> WitnessedLog | None:
        """The log whose origin's hex SHA-256 is `hex_origin` (the monitoring endpoint's
        name for it), by a keyed lookup: a request costs the same however many logs."""
        ...

    def add_log(self, origin: str, vkeys: tuple[str, ...], added: int) -> None:
        """Configure a log; the same origin again with the same keys is a no-op, with other
        keys a Conflict naming `update_log` (a log's keys are not replaced by accident)."""
        ...

    def update_log(self, origin: str, vkeys: tuple[str, ...], when: int) -> tuple[str, ...]:
        """Replace a configured log's key set (a rotation: during its overlap the set holds
        the old and the new key); the key set it had. An empty set, or an origin that is not
        configured, is a UsageError. The same set again changes nothing."""
        ...

    def latest(self, origin: str) -> Cosigned | None: ...

    def advance(self, origin: str, step: Step) -> Cosigned:
        """Read the latest row of `origin`, call `step` with it and add what it returns, all in
        one write transaction: two calls for one log never both pass from the same row."""
        ...

    def close(self) -> None: ...
