"""What an engine provides beside `interface.Store` (`Engine`), and how a store is named
(`Where`). Engines subclass it; `store.open` registers them and opens every store through
them, so an engine imports this contract and never the registry."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from capability_anchor.errors import UsageError

if TYPE_CHECKING:
    from .interface import Scrub, Store

Where = Path | str
"""A data dir, or a URL naming a store (the module docstring)."""


class Engine(ABC):
    """What an engine provides beside `interface.Store` itself: opening, creating and
    copying its stores, the witness's store, and what it keeps in a data dir."""

    scheme: str

    @abstractmethod
    def location(self, where: Where) -> Where:
        """`where` as this engine addresses it (SQLite: the data dir's `Path`); refuses
        (UsageError) a URL it cannot use."""

    @abstractmethod
    def exists(self, where: Where) -> bool: ...

    @abstractmethod
    def create(self, where: Where, fill: Callable[[Store], None]) -> None:
        """Create the store atomically, `fill` running inside its first write transaction:
        a crash leaves either no log or a complete one. `Conflict` if one exists."""

    @abstractmethod
    def open(self, where: Where, *, upkeep: bool) -> Store:
        """Open (and migrate) an existing store for reading and writing; `upkeep`: this
        process serves the log for long, so the engine runs its own background upkeep
        (durability unchanged), stopped by `close`."""

    @abstractmethod
    def open_readonly(self, where: Where) -> Store:
        """Open for reading only, never creating or changing anything of the store (the
        audit, a backup's summary); any private copy it needs is the engine's, removed at
        `close`."""

    @abstractmethod
    def describe(self, where: Where) -> str:
        """Where the store is, for messages ("no log at ...")."""

    # What an engine that keeps nothing in a data dir (a database server's) needs not write.

    def copy_to(self, where: Where, dest: Path) -> None:
        """Copy the live store to the new file `dest` (mode 0600, fsynced) as of one commit,
        while writers in other processes go on; nothing of the store is changed."""
        raise UsageError(f"a {self.scheme} store keeps no file to copy in a data dir")

    def copy_name(self, where: Where) -> str:
        """The file name a copy (`copy_to`) has in a data dir: a backup folder names it so,
        and a data dir holding it is a log's."""
        raise UsageError(f"a {self.scheme} store keeps no file to copy in a data dir")

    def own_files(self, where: Where) -> list[str]:
        """Every file name the store may keep in the data dir (present or not)."""
        return []

    def is_runtime(self, name: str) -> bool:
        """Whether a data dir's file `name` belongs to the store's running processes (never
        copied: a copy is whole without it)."""
        return False

    def scrubber(self, where: Where) -> Scrub | None:
        """The background check for damage no read meets (None: the engine needs none)."""
        return None

    def grant_service(self, where: Where, role: str, *, check_only: bool = False) -> str:
        """See `grant_service`; an engine without database roles refuses."""
        raise UsageError(f"a {self.scheme} store has no database roles (--service-role)")
