"""Each pattern of the OpenAPI document (`api/openapi.py`) says exactly what the server's
own check accepts: a value the pattern allows is never refused as malformed, and a value
the check refuses never fits the pattern (a day: the pattern with `format: date`).
Exhaustive where the space is small (days), generated from the pattern itself
(deterministically) and at the boundaries elsewhere."""

from __future__ import annotations

import re

import jsonschema_rs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capability_anchor.api.openapi import (
    DAY_PATTERN,
    HASH_PATTERN,
    HTTPS_URL_PATTERN,
    TILE_PATTERN,
)
from capability_anchor.encoding import hash_from_hex, parse_day
from capability_anchor.errors import UsageError
from capability_anchor.merkle.tilepath import MAX_INDEX, entries_path, parse_tile_path
from capability_anchor.merkle.tiles import tile_path
from capability_anchor.record.urls import canonical_url
from tests.kit.hypo import examples

FIXED = settings(
    max_examples=examples(300),
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def _fits(pattern: str, value: str) -> bool:
    # JSON Schema patterns are ECMA-262 searches; ours are anchored ^...$ and otherwise use
    # only syntax Python's `re` reads the same way. ECMA's `$` is the end of the text, where
    # Python's also matches before a final newline: `\Z` is ECMA's.
    assert pattern.startswith("^") and pattern.endswith("$")
    return re.search(pattern[:-1] + r"\Z", value) is not None


def _accepted(check: object, value: str) -> bool:
    try:
        check(value)  # type: ignore[operator]
    except UsageError:
        return False
    return True


YEARS = ["0000", "0001", "0004", "0100", "0400", "1900", "1999", "2000", "2023", "2024"]
YEARS += ["2026", "2100", "2400", "9996", "9999"]


# A day is its shape (the pattern) and `format: date` (RFC 3339 full-date), checked here by
# a JSON Schema validator that knows formats, as schemathesis does.
_DAY_SCHEMA = jsonschema_rs.validator_for(
    {"type": "string", "pattern": DAY_PATTERN, "format": "date"}, validate_formats=True
)


def test_the_day_schema_is_the_day_check_on_every_month_and_day_of_awkward_years() -> None:
    """Leap years by 4, 100 and 400, year 0000, month 00 and 13, day 00, 29-32."""
    wrong = []
    for year in YEARS:
        for month in range(14):
            for day in range(33):
                text = f"{year}-{month:02d}-{day:02d}"
                if _DAY_SCHEMA.is_valid(text) != _accepted(parse_day, text):
                    wrong.append(text)
    assert not wrong, wrong


@pytest.mark.parametrize(
    "text", ["2026-1-01", "2026-01-1", "20260101", " 2026-01-01", "2026-01-01\n", "+2026-01-01"]
)
def test_a_day_in_another_spelling_fits_neither(text: str) -> None:
    assert not _fits(DAY_PATTERN, text)
    assert not _DAY_SCHEMA.is_valid(text)
    assert not _accepted(parse_day, text)


@FIXED
@given(st.from_regex(DAY_PATTERN, fullmatch=True))
def test_every_day_the_schema_allows_is_accepted(text: str) -> None:
    if _DAY_SCHEMA.is_valid(text):
        parse_day(text)
    else:
        assert not _accepted(parse_day, text)


@FIXED
@given(st.from_regex(HASH_PATTERN, fullmatch=True))
def test_every_hash_the_pattern_generates_is_accepted(text: str) -> None:
    hash_from_hex(text)


@pytest.mark.parametrize("text", ["AB" * 32, "ab" * 31, "ab" * 33, "g" * 64, "ab" * 32 + "\n"])
def test_a_hash_in_another_spelling_fits_neither(text: str) -> None:
    assert not _fits(HASH_PATTERN, text)
    assert not _accepted(hash_from_hex, text)


@FIXED
@given(st.from_regex(TILE_PATTERN, fullmatch=True))
def test_every_tile_path_the_pattern_generates_is_accepted(text: str) -> None:
    parse_tile_path(text)


def _tile(level: int | None, index: int, width: int = 256) -> str:
    path = entries_path(index, width) if level is None else tile_path(level, index, width)
    return path.removeprefix("tile/")


@pytest.mark.parametrize(
    "text",
    [
        _tile(0, 0),
        _tile(63, 0),
        _tile(None, 0, 1),
        _tile(1, 0, 255),
        _tile(0, 999),
        _tile(0, 1000),
        _tile(0, 10**18 - 1),
        _tile(0, 10**18),
        _tile(0, 8 * 10**18),
        _tile(0, MAX_INDEX),
        _tile(None, MAX_INDEX, 3),
        _tile(0, MAX_INDEX - 1),
        _tile(0, MAX_INDEX // 10 * 10 - 1),
    ],
)
def test_tile_paths_at_the_bounds_fit_and_are_accepted(text: str) -> None:
    assert _fits(TILE_PATTERN, text)
    parse_tile_path(text)


@pytest.mark.parametrize(
    "text",
    [
        "64/000",  # level over 63
        "01/000",  # a leading zero in the level
        "0/000.p/256",  # a partial tile of full width
        "0/000.p/0",
        "0/000.p/01",
        "0/x000/001",  # a leading group of zeros
        "0/00",  # a group of two digits
        "0/x001",  # no last group
        "0/001/002",  # an upper group without x
        "0/x009/x223/x372/x036/x854/x775/808",  # MAX_INDEX + 1
        "0/x010/x000/x000/x000/x000/x000/000",
        "0/x001/x000/x000/x000/x000/x000/x000/000",  # eight groups
        "entries",
        "tile/0/000",
        "0/000/",  # a trailing slash
    ],
)
def test_a_tile_path_the_server_refuses_does_not_fit(text: str) -> None:
    assert not _accepted(parse_tile_path, text)
    assert not _fits(TILE_PATTERN, text)


@FIXED
@given(st.from_regex(HTTPS_URL_PATTERN, fullmatch=True))
def test_every_url_the_pattern_generates_has_a_canonical_form(text: str) -> None:
    assert canonical_url(text).startswith("https://")


@pytest.mark.parametrize(
    "text",
    [
        "http://s.example/mcp",
        "https://user@s.example/mcp",
        "https://s.example:65536/mcp",
        "https://s.example:x/mcp",
        "https:///mcp",
        "ftp://s.example",
    ],
)
def test_a_url_the_server_refuses_does_not_fit(text: str) -> None:
    assert not _accepted(canonical_url, text)
    assert not _fits(HTTPS_URL_PATTERN, text)
