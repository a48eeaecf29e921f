"""The store is an interface with one implementation: `Store` (the contract callers type
against) and `SqliteStore` (SQLite). The factories on `Store` open the SQLite store, and the
implementation leaves nothing of the contract abstract."""

from __future__ import annotations

import inspect
from pathlib import Path

from capability_anchor.log import Log
from capability_anchor.store import Store
from capability_anchor.store.interface import StoreAudit, StoreLifecycle, StoreReads, StoreWrites
from capability_anchor.store.sqlite import SqliteStore
from tests.kit.logkit import DAY1, ISS, Clock, at, record

# What the SQLite store offers beyond the contract: raw SQL for the tests that play the
# attacker, and sqlite_master as it is and as the migrations write it (the audit's tests).
SQLITE_ONLY = {"execute_raw", "schema", "expected_schema"}


def _public(cls: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls) if not name.startswith("_")}


def test_the_sqlite_store_implements_the_whole_interface() -> None:
    assert SqliteStore.__abstractmethods__ == frozenset()
    assert issubclass(SqliteStore, Store)
    for part in (StoreLifecycle, StoreWrites, StoreReads, StoreAudit):
        assert issubclass(Store, part)
        assert part.__abstractmethods__  # each part declares what an engine must do


def test_the_interface_declares_everything_callers_may_use() -> None:
    """Every public method of the implementation is part of the contract, except the
    SQLite-only ones nothing in src/ calls (so a second engine need not have them)."""
    extra = _public(SqliteStore) - _public(Store)
    assert extra == SQLITE_ONLY
    abstract = set(Store.__abstractmethods__)
    factories = {"copy_to", "create", "exists", "open", "open_readonly"}
    assert _public(Store) - {"path"} == abstract | factories


def test_the_factories_open_the_sqlite_store(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert not Store.exists(data)
    clock = Clock(at(DAY1, 60))
    with Log.init(data, iss=ISS, clock=clock) as log:
        log.append([record(DAY1, 0)])
        assert isinstance(log.store, SqliteStore)
    assert Store.exists(data)
    store = Store.open(data)
    try:
        assert isinstance(store, Store) and isinstance(store, SqliteStore)
        assert store.day_size(DAY1) == 1
    finally:
        store.close()
    readonly = Store.open_readonly(data, tmp_path)
    try:
        assert isinstance(readonly, SqliteStore)
        with readonly.snapshot():
            assert readonly.day_size(DAY1) == 1
            assert readonly.integrity_problems() == []
    finally:
        readonly.close()
