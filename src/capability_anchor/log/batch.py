"""What the *append* stage takes and gives back: prepared records and their results.
Preparing is pure (a worker process runs it: `api.appendworker`); storing is the writer's.
"""

from __future__ import annotations

from collections.abc import Sequence
from hashlib import sha256
from typing import Any, NamedTuple, cast

import msgspec

from capability_anchor import leaf
from capability_anchor.errors import InvalidRecord
from capability_anchor.record import rule as observation
from capability_anchor.record.fast import accepts

from .serverindex import server_keys

# (leaf hash, leaf bytes, /record index keys) of one validated record.
Prepared = tuple[bytes, bytes, tuple[str, ...]]

MAX_BATCH = 1000

PLAIN_JCS = msgspec.json.Encoder(order="sorted")
"""Writes a plain value (`strictjson.is_plain`) byte for byte as RFC 8785 does, ~7x faster than
sorted json.dumps: the leaf bytes `leaf.plain_leaf_bytes` hands it, and the plain answers
(`api.caching.answer`). tests/unit/test_prepare_fast.py holds it to rfc8785. Not in strictjson:
the verifying path imports no msgspec (tests/integration/test_layering.py)."""


class AppendResult(NamedTuple):
    """Where a record of a batch is stored. A tuple: a frozen dataclass took ~8x as long to
    make, once per record on the writer's serial path."""

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
    """`Log.prepare`, pure: SPEC §2, then the issuer, then the record rule at `now` (the
    batch is stored no earlier, and a time limit only ever moves later)."""
    prepared: list[Prepared] = []
    append = prepared.append
    observed = rule == observation.OBSERVATION
    second = int(now)
    for position, record in enumerate(records):
        keys: tuple[str, ...]
        try:
            data = leaf.plain_leaf_bytes(record, PLAIN_JCS.encode)
            plain = data is not None
            if data is None:
                data = leaf.walked_leaf_bytes(record)
            if isinstance(record, dict) and "iss" in record and record["iss"] != iss:
                raise InvalidRecord(f"iss {record['iss']!r} is not this log's issuer {iss!r}")
            if observed and accepts(record, second, namespace, names_checked=plain):
                # The fast rule held `url` to the §4 pattern (its own canonical form): these
                # are `server_keys(record)`; without `iss` /record needs none.
                held = cast(dict[str, str], record)
                keys = ("sub:" + held["sub"], "url:" + held["url"]) if "iss" in held else ()
            else:
                observation.check_record(record, rule, now=now, namespace=namespace)
                keys = server_keys(record)
        except InvalidRecord as exc:
            raise InvalidRecord(str(exc), position=position) from None
        append((sha256(b"\x00" + data).digest(), data, keys))
    return prepared
