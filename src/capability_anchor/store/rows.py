"""What the store holds, as plain values: the row types every caller reads, and the names
and numbers that are part of the data dir's format (not of any one storage engine)."""

from __future__ import annotations

from dataclasses import dataclass

DB_NAME = "log.sqlite3"
SCHEMA_VERSION = 2
# Set by migration 2 in a log upgraded from schema 1 (a new log's meta is still empty when
# its migrations run), in the migration's own transaction: its settings are not signed yet,
# and the next open by the key-file holder signs them (logtrust.check_settings; README).
SETTINGS_UNSIGNED = "settings_unsigned"


@dataclass(frozen=True, slots=True)
class HeadRow:
    day: str
    tree_size: int
    sealed: bool
    root: bytes
    iat: int
    kid: str
    doc: bytes


@dataclass(frozen=True, slots=True)
class EntryRow:
    day: str
    leaf_index: int
    leaf_hash: bytes
    claims: bytes


@dataclass(frozen=True, slots=True)
class TileRow:
    day: str
    level: int
    index: int
    width: int
    hashes: bytes
    root: bytes | None


@dataclass(frozen=True, slots=True)
class StampRow:
    day: str
    tsa: str
    token: bytes
    gen_time: str
