"""What the store holds, as plain values: the row types every caller reads, and the names
and numbers that are part of the log's format (not of any one storage engine)."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass

from capability_anchor.encoding import EncodingError, b64url_decode
from capability_anchor.errors import StoreError

SCHEMA_VERSION = 5
# The history's origin (SPEC §12.2), set once when the history is created, never changed.
HISTORY_ORIGIN = "history_origin"
# Set by migration 2 in a log upgraded from schema 1 (a new log's meta is still empty when
# its migrations run), in the migration's own transaction: its settings are not signed yet,
# and the next open by the key-file holder signs them (`log.trust.check_settings`).
SETTINGS_UNSIGNED = "settings_unsigned"
SERVER_KEY_DIGEST_BYTES = 9  # 72 bits: 12 characters of base64url


def server_key_digest(key: str) -> str:
    """How the `/record` index stores a key (`sub:<id>`, `url:<canonical url>`): 12
    characters of base64url over the first 72 bits of its SHA-256, whatever the key's length
    (schema 5). Whoever reads a hit compares the entry's own keys: a digest names candidates,
    never a record by itself."""
    digest = hashlib.sha256(key.encode()).digest()[:SERVER_KEY_DIGEST_BYTES]
    return base64.urlsafe_b64encode(digest).decode("ascii")


# What a damaged head document can raise on the way to its payload.
_UNREADABLE = (ValueError, KeyError, TypeError, IndexError, AttributeError, EncodingError)


@dataclass(frozen=True, slots=True)
class HeadRow:
    day: str
    tree_size: int
    sealed: bool
    root: bytes
    iat: int
    kid: str
    doc: bytes

    def history_leaf(self) -> bytes:
        """The head's leaf bytes in the history tree (SPEC §12.1): its JWS payload, the JCS
        bytes of its claims, exactly as signed (read from the JWS, never re-serialised)."""
        try:
            token = json.loads(self.doc)["jws"]
            payload = b64url_decode(token.split(".")[1])
        except _UNREADABLE as exc:
            raise StoreError(
                f"head {self.day} size {self.tree_size}: its stored document has no readable "
                f"JWS payload ({exc})"
            ) from None
        return payload


@dataclass(frozen=True, slots=True)
class HistoryLeaf:
    """One leaf of the history tree: its index, its leaf hash, and the head it is."""

    index: int
    leaf_hash: bytes
    day: str
    sealed: bool
    tree_size: int


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


@dataclass(frozen=True, slots=True)
class CosignatureRow:
    """A witness's cosignature of the checkpoint of `size` (SPEC §12.3), as stored: the
    witness's policy name, the key ID of the line, the cosignature/v1 timestamp and the
    signature line exactly as received (without its newline)."""

    witness: str
    key_id: bytes
    size: int
    timestamp: int
    line: str


@dataclass(frozen=True, slots=True)
class WitnessState:
    """What the log knows of one witness (SPEC §12.3): the size it last cosigned (0 before
    the first), `status` "ok", "retry" (no submission before `retry_at`) or "stopped" (an
    operator must act), the failures in a row and the last answer, when it was `updated`.
    The one mutable row type: it is the submitter's bookkeeping, not a statement."""

    witness: str
    size: int
    status: str
    retry_at: int
    failures: int
    detail: str
    updated: int
