"""The record rule's fast path (`record.fast`) and the canonical URL's (`record.urls`) against
the exact code behind them: over generated records and URLs, the same accept or reject, the
same message and the same canonical form. The fast path may only ever accept what the exact
path accepts; everything else it hands on."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capability_anchor.errors import UsageError
from capability_anchor.record import fast, rule
from capability_anchor.record.patterns import URL_PATTERN
from capability_anchor.record.urls import canonical_url, urllib_canonical_url
from tests.kit.hypo import examples
from tests.kit.recordgen import GOOD, NOW, Text, odd_urls, records

NAMESPACES = st.sampled_from([None, "example", "urn"])


def url_outcome(fn: Any, url: object) -> tuple[str, str]:
    try:
        return ("ok", fn(url))
    except UsageError as exc:
        return ("error", str(exc))


@settings(max_examples=examples(800), suppress_health_check=[HealthCheck.too_slow])
@given(odd_urls())
def test_the_fast_canonical_url_is_urllibs_for_every_url(url: str) -> None:
    assert url_outcome(canonical_url, url) == url_outcome(urllib_canonical_url, url)
    # The fast check is the §4 pattern itself, nothing looser.
    assert fast.url_matches(url) == bool(rule._URL_RE.search(url))


@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])
@given(st.from_regex(fast.COMMON_URL_PATTERN, fullmatch=True))
def test_every_common_url_is_one_the_pattern_accepts(url: str) -> None:
    import re

    assert re.search(URL_PATTERN, url), url
    assert canonical_url(url) == urllib_canonical_url(url) == url


def test_non_strings_and_subclasses_take_the_exact_path() -> None:
    for url in (None, 42, b"https://a.example", Text("https://a.example"), ["https://a"]):
        assert url_outcome(canonical_url, url) == url_outcome(urllib_canonical_url, url)


@settings(max_examples=examples(1000), suppress_health_check=[HealthCheck.too_slow])
@given(records(), NAMESPACES, st.sampled_from([NOW, NOW + 0.9, NOW - 86400 * 365]))
def test_the_fast_path_and_the_exact_path_give_the_same_answer(
    record: object, namespace: str | None, now: float
) -> None:
    exact = rule.exact_problem(record, accepted_at=now, namespace=namespace)
    if fast.accepts(record, int(now), namespace):
        assert exact is None
    assert rule.token_problem(record, accepted_at=now, namespace=namespace) == exact


def test_the_fast_path_takes_the_common_record() -> None:
    assert fast.accepts(GOOD, NOW)
    assert fast.accepts(
        {**GOOD, "sub": "example:s", "name": "n", "first_seen": "2026-11-30"}, NOW, "example"
    )
    assert not fast.accepts({**GOOD, "sub": "urn:s"}, NOW, "example")
    assert not fast.accepts({**GOOD, "url": "https://API.example/mcp"}, NOW)
