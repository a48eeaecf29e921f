"""The log's storage: an interface (`interface.Store`, the contract in prose and types) and
its one implementation, SQLite (`sqlite.SqliteStore`, the only code in the project that
touches SQLite or sqlite-utils). `Store.open(data_dir)` and the other factories open the
SQLite store; callers type against `Store`, so another engine can follow without touching
the log, the API, the audit or export."""

from __future__ import annotations

from .interface import Store
from .rows import (
    DB_NAME,
    HISTORY_ORIGIN,
    SCHEMA_VERSION,
    SETTINGS_UNSIGNED,
    CosignatureRow,
    EntryRow,
    HeadRow,
    HistoryLeaf,
    StampRow,
    TileRow,
    WitnessState,
)

__all__ = [
    "DB_NAME",
    "HISTORY_ORIGIN",
    "SCHEMA_VERSION",
    "SETTINGS_UNSIGNED",
    "CosignatureRow",
    "EntryRow",
    "HeadRow",
    "HistoryLeaf",
    "StampRow",
    "Store",
    "TileRow",
    "WitnessState",
]
