"""What the *append* stage takes and gives back: prepared records and their results.

Preparing (validation, RFC 8785 leaf bytes, leaf hash, server keys) is pure and needs only
the log's issuer and record rule, so a worker process can run it (`api.appendworker`); storing
the prepared batch is the writer's (`writer.LogWriter.append_prepared`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from hashlib import sha256
from typing import Any

import msgspec

from capability_anchor import leaf
from capability_anchor.errors import InvalidRecord
from capability_anchor.record import rule as observation

from .serverindex import server_keys

# (leaf hash, leaf bytes, /record index keys) of one validated record.
Prepared = tuple[bytes, bytes, tuple[str, ...]]

MAX_BATCH = 1000

# msgspec's sorted encoder writes a plain value (`strictjson.is_plain`) byte for byte as
# RFC 8785 does, ~7x faster than sorted json.dumps; `leaf.plain_leaf_bytes` hands it only
# plain values, and tests/unit/test_prepare_fast.py holds it to rfc8785.
_ENCODE = msgspec.json.Encoder(order="sorted").encode


@dataclass(frozen=True, slots=True)
class AppendResult:
    day: str
    leaf_index: int
    leaf_hash: bytes
    duplicate: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "day": self.day,
            "leaf_index": self.leaf_index,
            "leaf_hash": self.leaf_hash.hex(),
            "duplicate": self.duplicate,
        }


def prepare_records(
    records: Sequence[object],
    iss: str,
    rule: str = observation.OBSERVATION,
    namespace: str | None = None,
    *,
    now: float,
) -> list[Prepared]:
    """`Log.prepare` given only the log's issuer, record rule and pinned id namespace
    (`record.rule`), and the log's clock `now`: pure, so a worker process can run it. SPEC §2
    first, then the issuer, then the record rule. The batch is stored at a reading of the
    clock no earlier than `now`, so a record accepted here meets the rule's time limit then
    too (a time limit only ever moves later)."""
    prepared: list[Prepared] = []
    append = prepared.append
    check = observation.check_record
    for position, record in enumerate(records):
        try:
            data = leaf.plain_leaf_bytes(record, _ENCODE) or leaf.leaf_bytes(record)
            if isinstance(record, dict) and "iss" in record and record["iss"] != iss:
                raise InvalidRecord(f"iss {record['iss']!r} is not this log's issuer {iss!r}")
            check(record, rule, now=now, namespace=namespace)
        except InvalidRecord as exc:
            raise InvalidRecord(str(exc), position=position) from None
        append((sha256(b"\x00" + data).digest(), data, server_keys(record)))
    return prepared
