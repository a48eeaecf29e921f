"""The log's storage, as a seam: the contract (`interface.Store`, `witness.WitnessStore`,
the row types of `rows`, the engine's own `engines.Engine`), the one way to open a store
(`open`: by data dir or URL, through the engine registry), the damage mark (`damage`), and
the engines, one package each (`sqlite/`, the only code in the project that imports SQLite
or sqlite-utils; `postgres/`, being built for issue #24, so far its schema).

Callers outside `store/` type against the contract and open through `open` (`from
capability_anchor.store import open as stores`); none imports an engine package
(tests/integration/test_layering.py). The contract modules import only the project's kernel
(`errors`, `encoding`, `merkle`) and `files`; an engine may import anything of `store/`
and its own driver. See docs/explanation/store.md.
"""

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
