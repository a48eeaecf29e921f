"""The record rule's fast path (`rule.token_problem`): the common observation accepted with the
Struct's own regexes and exact type checks, in a third of msgspec's time. It only accepts: False
means "ask the exact path", which decides and words every refusal (tests/unit/test_record_fast.py
holds the two to the same answers)."""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable
from typing import Final

from .patterns import (
    CHECKED_AT_PATTERN,
    CHECKED_AT_SKEW,
    DAY_PATTERN,
    FORBIDDEN,
    STATUSES,
    URL_PATTERN,
    sub_pattern,
)

_Search = Callable[[str], re.Match[str] | None]
_URL_PATTERN_SEARCH: Final[_Search] = re.compile(URL_PATTERN).search
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
# The common server URL, a strict subset of URL_PATTERN: a lower-case DNS host without a
# leading www., no port, path segments of RFC 3986 unreserved characters. Fewer
# alternatives to try per character than URL_PATTERN, so a match costs about half;
# anything else is matched against URL_PATTERN itself.
COMMON_URL_PATTERN: Final = rf"https://(?!www\.){_LABEL}(?:\.{_LABEL})*(?:/[A-Za-z0-9._~-]+)*"
_COMMON_URL: Final[_Search] = re.compile(COMMON_URL_PATTERN).fullmatch


def url_matches(url: str) -> bool:
    """`re.search(URL_PATTERN, url)` is not None, trying the common URL's pattern first."""
    return _COMMON_URL(url) is not None or _URL_PATTERN_SEARCH(url) is not None


_CHECKED_AT: Final[_Search] = re.compile(CHECKED_AT_PATTERN).search
_DAY: Final[_Search] = re.compile(DAY_PATTERN).search
_STATUSES: Final = frozenset(STATUSES)
_STR: Final = frozenset({str})


@functools.lru_cache(maxsize=16)
def _sub_search(namespace: str | None) -> _Search:
    return re.compile(sub_pattern(namespace)).search


@functools.lru_cache(maxsize=4096)
def whole_second(stamp: str) -> int:
    """Epoch seconds of `YYYY-MM-DDTHH:MM:SS` (UTC): records of one batch mostly share it."""
    return int(dt.datetime.fromisoformat(stamp).replace(tzinfo=dt.UTC).timestamp())


def accepts(
    record: object, accepted_at: int, namespace: str | None = None, *, names_checked: bool = False
) -> bool:
    """True when `record` surely follows the rule at `accepted_at`; False: ask the exact path."""
    if type(record) is not dict or not (names_checked or _STR.issuperset(map(type, record))):
        return False
    for member in FORBIDDEN:
        if member in record:
            return False
    try:
        v, sub, url = record["v"], record["sub"], record["url"]
        status, checked_at, evidence = record["status"], record["checked_at"], record["evidence"]
    except KeyError:
        return False
    if (
        type(v) is not str
        or v != "0.2"
        or type(sub) is not str
        or not _sub_search(namespace)(sub)
        or type(url) is not str
        or not url_matches(url)
        or type(status) is not str
        or status not in _STATUSES
        or type(checked_at) is not str
        or not _CHECKED_AT(checked_at)
        or type(evidence) is not dict
        or not (names_checked or _STR.issuperset(map(type, evidence)))
    ):
        return False
    if "name" in record and type(record["name"]) is not str:
        return False
    latest = accepted_at + CHECKED_AT_SKEW
    whole = whole_second(checked_at[:19])
    if whole > latest or (whole == latest and checked_at[20:-1].strip("0")):
        return False
    if "first_seen" in record:
        first_seen = record["first_seen"]
        if type(first_seen) is not str or not _DAY(first_seen) or first_seen > checked_at[:10]:
            return False
    return True
