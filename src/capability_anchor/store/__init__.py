"""The log's storage, as a seam: the contract (`interface.Store`, `witness.WitnessStore`, the
row types of `rows`), the SQL both engines run (`sql/`), the one way to open a store
(`open`), the damage mark (`damage`) and the engines (`sqlite/`, `postgres/`). Callers
outside `store/` import the contract and `open`, never an engine (test_layering.py); the
contract imports only the kernel. See docs/explanation/store.md."""

from __future__ import annotations

from .interface import EngineFindings, Scrub, Store
from .rows import (
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
    server_key_digest,
)

__all__ = [
    "HISTORY_ORIGIN",
    "SCHEMA_VERSION",
    "SETTINGS_UNSIGNED",
    "CosignatureRow",
    "EngineFindings",
    "EntryRow",
    "HeadRow",
    "HistoryLeaf",
    "Scrub",
    "StampRow",
    "Store",
    "TileRow",
    "WitnessState",
    "server_key_digest",
]
