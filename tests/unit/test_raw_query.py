"""`guards.raw_query` (how `GET /proof` reads its query) against what it replaces: Litestar's
own query parsing for a handler's parameters, `check_integers`' one spelling, and the bounds
Litestar's signature model put on `count(0)` integers (the same notes)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from litestar._kwargs.extractors import create_query_default_dict
from litestar._parsers import parse_query_string

from capability_anchor.api.guards import raw_query
from capability_anchor.errors import UsageError
from capability_anchor.read.reader import MAX_INT
from tests.kit.hypo import examples

_PIECES = ["day", "index", "tree_size", "leaf_hash", "=", "&", "%", "%2", "%41", "%e2%82%ac"]
_PIECES += ["%zz", "+", "5", "0", "00", "-1", "9223372036854775808", "\xff", "a", ";", " "]
QUERIES = st.lists(st.sampled_from(_PIECES), max_size=12).map("".join)


def _litestar(query: bytes) -> dict[str, Any]:
    """The values Litestar handed a handler whose parameters are not sequences."""
    return dict(create_query_default_dict(parse_query_string(query), ()))


@settings(max_examples=examples(2000))
@given(QUERIES)
def test_names_and_values_are_litestars(query: str) -> None:
    raw = query.encode("latin-1")
    assert raw_query({"query_string": raw}, ()) == _litestar(raw)


def _old(query: bytes, ints: tuple[str, ...]) -> dict[str, Any]:
    """What the handler got before: `check_integers`, then Litestar's parse and bounds."""
    parsed = parse_query_string(query)
    for name in ints:
        values = [v for k, v in parsed if k == name]
        if len(values) > 1:
            raise UsageError(f"{name} is given more than once")
        if values and not (values[0].isascii() and values[0].isdigit()):
            raise UsageError(f"{name} must be a non-negative integer written in digits")
        if values and (values[0] != str(int(values[0])) or len(values[0]) > 19):
            raise UsageError(f"{name} must be a non-negative integer written in digits")
    got = _litestar(query)
    for name in ints:
        if name in got:
            got[name] = int(got[name])
            if got[name] > MAX_INT:
                raise UsageError(f"{name}: Expected `int` <= {MAX_INT}")
    return got


@settings(max_examples=examples(2000))
@given(QUERIES)
def test_integers_are_checked_as_before(query: str) -> None:
    raw, ints = query.encode("latin-1"), ("index", "tree_size")
    try:
        expected: Any = _old(raw, ints)
    except UsageError as exc:
        expected = str(exc)
    try:
        got: Any = raw_query({"query_string": raw}, ints)
    except UsageError as exc:
        got = str(exc)
    assert got == expected


@pytest.mark.parametrize(
    ("query", "note"),
    [
        (b"index=1&index=1", "index is given more than once"),
        (b"index=01", "index must be a non-negative integer written in digits"),
        (b"tree_size=%2B1", "tree_size must be a non-negative integer written in digits"),
        (b"tree_size=9223372036854775808", "tree_size: Expected `int` <= 9223372036854775807"),
    ],
)
def test_the_notes(query: bytes, note: str) -> None:
    with pytest.raises(UsageError, match=f"^{note}$"):
        raw_query({"query_string": query}, ("index", "tree_size"))
    assert raw_query({"query_string": b"index=9223372036854775807&day=a&day=b"}, ("index",)) == {
        "index": MAX_INT,
        "day": "b",
    }
