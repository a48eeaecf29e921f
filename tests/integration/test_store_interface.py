"""The store is an interface with implementations reached only through `store.open`: `Store`
(the contract callers type against, its rows read and written by shared SQL) and the
engines. Opening is the registry's; an engine implements only the contract's primitives,
at most 40 methods with the engine and witness store (issue #36), and leaves none abstract."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from capability_anchor.errors import UsageError
from capability_anchor.log import Log
from capability_anchor.store import Scrub, Store
from capability_anchor.store import open as stores
from capability_anchor.store.engines import Engine
from capability_anchor.store.sqlite import SqliteStore
from capability_anchor.store.witness import WitnessStore
from tests.kit.logkit import DAY1, ISS, Clock, at, record

# What the SQLite store offers beyond the contract: raw SQL for the tests that play the
# attacker. The factories (create, open, open_readonly, copy_to) are the engine's.
SQLITE_ONLY = {"execute_raw"}


def _public(cls: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls) if not name.startswith("_")}


# What an engine implements: statements, transactions, its own spelling of a few reads,
# its audit.
PRIMITIVES = {
    "_exec",
    "_iter",
    "_insert",
    "write",
    "read",
    "describe",
    "close",
    "existing",
    "find_leaf",
    "entries_containing",
    "snapshot",
    "changed_under_read",
    "engine_findings",
    "index_mismatches",
}


def test_the_sqlite_store_implements_the_whole_interface() -> None:
    assert SqliteStore.__abstractmethods__ == frozenset()
    assert issubclass(SqliteStore, Store)
    assert Store.__abstractmethods__ == PRIMITIVES


def test_an_engine_implements_at_most_40_methods() -> None:
    """The store's primitives, the engine's own (opening, creating, where it is), and the
    witness store's and the scrubber's protocols."""
    protocols = {m for m in vars(WitnessStore) if not m.startswith("_")}
    protocols |= {m for m in vars(Scrub) if not m.startswith("_")}
    assert len(Store.__abstractmethods__) + len(Engine.__abstractmethods__) + len(protocols) <= 40


def test_the_interface_declares_everything_callers_may_use() -> None:
    """Every public method of the implementation is part of the contract, except the
    SQLite-only ones nothing outside `store/` calls (so a second engine need not have
    them); the contract itself has no factory, path or engine mechanics."""
    extra = _public(SqliteStore) - _public(Store)
    assert extra == SQLITE_ONLY
    for leak in ("path", "start_checkpointer", "user_version", "invalid_text", "open"):
        assert leak not in _public(Store)


def test_the_registry_opens_the_sqlite_store(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert not stores.exists(data)
    clock = Clock(at(DAY1, 60))
    with Log.init(data, iss=ISS, clock=clock) as log:
        log.append([record(DAY1, 0)])
        assert isinstance(log.store, SqliteStore)
    assert stores.exists(data)
    assert stores.exists(f"sqlite://{data.resolve()}")
    store = stores.open(data)
    try:
        assert isinstance(store, Store) and isinstance(store, SqliteStore)
        assert store.day_size(DAY1) == 1
    finally:
        store.close()
    readonly = stores.open_readonly(f"sqlite://{data.resolve()}")
    try:
        assert isinstance(readonly, SqliteStore)
        with readonly.snapshot():
            assert readonly.day_size(DAY1) == 1
            assert readonly.engine_findings().problems == []
    finally:
        readonly.close()


def test_a_store_url_is_spelled_one_way(tmp_path: Path) -> None:
    assert "sqlite" in stores.schemes()
    assert stores.resolve(f"sqlite://{tmp_path}")[1] == tmp_path
    assert stores.resolve(str(tmp_path))[1] == tmp_path
    for bad in ("sqlite://host/abs", "sqlite://relative/dir", f"sqlite://{tmp_path}?mode=ro"):
        with pytest.raises(UsageError, match="sqlite"):
            stores.resolve(bad)
    with pytest.raises(UsageError, match="no storage engine for nosuch://"):
        stores.exists("nosuch://somewhere")
