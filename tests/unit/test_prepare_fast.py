"""Preparing a batch (`log.batch.prepare_records`) takes fast paths: the plain-record check
(`strictjson.plain_canonical`) with msgspec's sorted encoder for the leaf bytes, the record
rule's `fast.accepts`, and server keys without urllib. Each must give what the exact code
gives: RFC 8785 bytes (rfc8785 itself), the same leaf or the same refusal with the same message
at the same position, and the same server keys."""

from __future__ import annotations

import contextlib
import enum
import hashlib
from collections import OrderedDict
from typing import Any

import msgspec
import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capability_anchor import leaf, strictjson
from capability_anchor.errors import InvalidRecord, UsageError
from capability_anchor.log.batch import PLAIN_JCS, prepare_records
from capability_anchor.log.serverindex import server_keys
from capability_anchor.record import rule
from capability_anchor.record.urls import urllib_canonical_url
from tests.kit.hypo import examples
from tests.kit.recordgen import ANY_JSON, ASCII_TEXT, NOW, PLAIN_JSON, TEXT, records

ISS = "https://resolver.example"
RESERVED = st.sampled_from(sorted(leaf.RESERVED_MEMBERS))


class Number(enum.IntEnum):
    ONE = 1


class Name(str):
    pass


def walked(record: object) -> tuple[str, Any]:
    try:
        return ("ok", leaf.walked_leaf_bytes(record))
    except InvalidRecord as exc:
        return ("error", str(exc))


@settings(max_examples=examples(600), deadline=None)
@given(PLAIN_JSON)
def test_msgspecs_sorted_encoder_writes_plain_values_as_rfc8785(value: Any) -> None:
    expected = rfc8785.dumps(value)
    assert PLAIN_JCS.encode(value) == expected == strictjson.canonical(value, plain=True)


RECORDS = st.dictionaries(st.one_of(ASCII_TEXT, TEXT, RESERVED), ANY_JSON, max_size=8)
PLAIN_RECORDS = st.dictionaries(st.one_of(ASCII_TEXT, RESERVED), PLAIN_JSON, max_size=8)


@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(RECORDS, PLAIN_RECORDS, ANY_JSON))
def test_the_plain_leaf_is_the_walked_leaf_or_none(record: Any) -> None:
    check_plain_leaf(record)


def check_plain_leaf(record: Any) -> None:
    """Both fast encodings give the walked leaf or decline, and the dispatcher agrees."""
    want = walked(record)
    for encode in (None, PLAIN_JCS.encode):
        fast = leaf.plain_leaf_bytes(record, encode)
        if fast is not None:
            assert want == ("ok", fast)
    assert walked_or_fast(record) == want


def walked_or_fast(record: object) -> tuple[str, Any]:
    try:
        return ("ok", leaf.leaf_bytes(record))
    except InvalidRecord as exc:
        return ("error", str(exc))


DEEP: Any = {"a": 1}
for _ in range(31):
    DEEP = {"a": DEEP}
LOOP: list[Any] = []
LOOP.append(LOOP)
EDGES: list[Any] = [
    {"a": OrderedDict(b=1)},
    OrderedDict(a=1),
    {"a": Number.ONE},
    {"a": True, "b": None, "c": [False]},
    {Name("a"): 1},
    {1: 1},
    {"a": (1, 2)},
    {"a": 2**53 - 1, "b": -(2**53) + 1},
    {"a": 2**53},
    {"a": 1.0},
    {"a": "\ud800"},
    {"\ud800": 1},
    {"é": 1},
    {"iat": "\ud800", "a": 1},
    {"iat": 1.5, "a": 1},
    {"exp": [0] * 40_000, "a": 1},
    {"a": [0] * 40_000},
    {"a": "x" * (leaf.MAX_LEAF_BYTES - 8)},  # exactly the limit: {"a":"..."} is 16384 bytes
    {"a": "x" * (leaf.MAX_LEAF_BYTES - 7)},
    {"a": "x" * 40_000},
    DEEP,
    {"a": DEEP},
    {"a": LOOP},
    {"a": [[[]]] * 3},
    {},
]


@pytest.mark.parametrize("record", EDGES, ids=range(len(EDGES)))
def test_the_plain_leaf_at_the_edges(record: Any) -> None:
    check_plain_leaf(record)
    assert len(leaf.plain_leaf_bytes({"a": "x" * (leaf.MAX_LEAF_BYTES - 8)}) or b"") == 16384


def reference_prepare(batch: list[Any], rule_name: str, namespace: str | None) -> Any:
    """prepare_records as it was before the fast paths: the walk, the exact rule, urllib."""
    out = []
    for position, record in enumerate(batch):
        try:
            data = leaf.walked_leaf_bytes(record)
            if isinstance(record, dict) and "iss" in record and record["iss"] != ISS:
                raise InvalidRecord(f"iss {record['iss']!r} is not this log's issuer {ISS!r}")
            if rule_name == rule.OBSERVATION:
                problem = rule.exact_problem(record, accepted_at=NOW, namespace=namespace)
                if problem is not None:
                    raise InvalidRecord(problem)
        except InvalidRecord as exc:
            return ("error", str(exc), position)
        digest = hashlib.sha256(b"\x00" + data).digest()
        out.append((digest, data, reference_keys(record)))
    return ("ok", out)


def reference_keys(record: Any) -> tuple[str, ...]:
    if not isinstance(record, dict) or any(
        m not in record for m in ("v", "iss", "sub", "url", "status", "checked_at", "evidence")
    ):
        return ()
    keys = []
    if isinstance(record["sub"], str):
        keys.append(f"sub:{record['sub']}")
    with contextlib.suppress(UsageError):
        keys.append(f"url:{urllib_canonical_url(record['url'])}")
    return tuple(keys)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(records(), min_size=1, max_size=3),
    st.sampled_from([rule.OBSERVATION, rule.ANY]),
    st.sampled_from([None, "example"]),
)
def test_prepare_gives_what_the_exact_code_gives(
    batch: list[Any], rule_name: str, namespace: str | None
) -> None:
    want = reference_prepare(batch, rule_name, namespace)
    try:
        got: Any = ("ok", prepare_records(batch, ISS, rule_name, namespace, now=NOW))
    except InvalidRecord as exc:
        got = ("error", str(exc), exc.position)
    assert got == want
    for record in batch:
        assert server_keys(record) == reference_keys(record)


def test_msgspec_refuses_a_lone_surrogate() -> None:
    with pytest.raises(UnicodeEncodeError):
        msgspec.json.Encoder(order="sorted").encode({"a": "\udc00"})
