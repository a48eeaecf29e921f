"""The SQLite engine as `store.open` reaches it (`sqlite://` and every plain data dir): one
database file in the data dir (`DB_NAME`, with its -wal and -shm while it is open), and
the witness's own database in the witness's data dir (`WITNESS_DB_NAME`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from capability_anchor.errors import UsageError
from capability_anchor.store.engines import Engine, Where
from capability_anchor.store.interface import Scrub, Store
from capability_anchor.store.witness import WitnessStore

from . import SqliteStore
from .base import DB_NAME
from .scrub import Scrubber
from .witness import WITNESS_DB_NAME, SqliteWitnessStore

_SIDE = ("-wal", "-shm")


def _dir(where: Where) -> Path:
    if not isinstance(where, Path):
        raise UsageError(f"the SQLite engine is given a data dir, not {where!r}")
    return where


class SqliteEngine(Engine):
    scheme = "sqlite"

    def location(self, where: Where) -> Where:
        if isinstance(where, Path):
            return where
        parts = urlsplit(where)
        path = unquote(parts.path)
        if parts.scheme.lower() != "sqlite" or parts.netloc or not path.startswith("/"):
            raise UsageError(
                f"{where}: a SQLite store is named sqlite:///ABSOLUTE/DATA/DIR (or by the "
                "data dir's path)"
            )
        if parts.query or parts.fragment:
            raise UsageError(f"{where}: a sqlite:// URL takes no query or fragment")
        return Path(path)

    def exists(self, where: Where) -> bool:
        return (_dir(where) / DB_NAME).exists()

    def create(self, where: Where, fill: Callable[[Store], None]) -> None:
        SqliteStore.create(_dir(where), fill)

    def open(self, where: Where, *, upkeep: bool) -> Store:
        store = SqliteStore.open(_dir(where))
        if upkeep:
            try:
                store._start_checkpointer()
            except BaseException:
                store.close()
                raise
        return store

    def open_readonly(self, where: Where) -> Store:
        return SqliteStore.open_readonly(_dir(where))

    def copy_to(self, where: Where, dest: Path) -> None:
        SqliteStore.copy_to(_dir(where), dest)

    def copy_name(self, where: Where) -> str:
        return DB_NAME

    def own_files(self, where: Where) -> list[str]:
        return [DB_NAME, *(DB_NAME + side for side in _SIDE)]

    def is_runtime(self, name: str) -> bool:
        # -wal, -shm, and a rollback -journal SQLite may leave: none is the database.
        return name.startswith(f"{DB_NAME}-")

    def describe(self, where: Where) -> str:
        return str(_dir(where) / DB_NAME)

    def scrubber(self, where: Where) -> Scrub | None:
        return Scrubber(_dir(where))

    def create_witness(self, where: Where, name: str) -> WitnessStore:
        return SqliteWitnessStore.create(_dir(where), name)

    def open_witness(self, where: Where) -> WitnessStore:
        return SqliteWitnessStore.open(_dir(where))

    def remove_witness(self, where: Where) -> None:
        for suffix in ("", *_SIDE):
            (_dir(where) / (WITNESS_DB_NAME + suffix)).unlink(missing_ok=True)


__all__ = ["SqliteEngine"]
