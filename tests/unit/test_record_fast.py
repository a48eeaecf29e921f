"""The record rule's fast path (`record.fast`) and the canonical URL's (`record.urls`) against
the exact code behind them: over generated records and URLs, the same accept or reject, the
same message and the same canonical form. The fast path may only ever accept what the exact
path accepts; everything else it hands on."""

from __future__ import annotations

import enum
import string
from collections import OrderedDict
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capability_anchor.errors import UsageError
from capability_anchor.record import fast, rule
from capability_anchor.record.patterns import URL_PATTERN
from capability_anchor.record.urls import canonical_url, urllib_canonical_url

NOW = 1_796_043_600  # 2026-11-30T13:00:00Z
NAMESPACES = st.sampled_from([None, "example", "urn"])


class Text(str):
    pass


class Status(enum.StrEnum):
    OK = "ok"


# --- URLs ---

_label = st.from_regex(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,6}[a-zA-Z0-9])?", fullmatch=True)
_odd_labels = st.sampled_from(
    [
        "www",
        "WWW",
        "xn--bcher-kva",
        "bücher",
        "ß",
        "-a",
        "a-",
        "",
        "a_b",
        "1",
        "%41",
        "\uff41",
    ]  # the last: a full-width a
)
_host = st.lists(st.one_of(_label, _odd_labels), min_size=1, max_size=4).map(".".join)
_segment = st.text(string.ascii_letters + string.digits + "-._~!$&'()*+,;=:@%/ é?#[]", max_size=6)
_port = st.one_of(
    st.none(),
    st.sampled_from(["443", "0443", "0", "80", "65535", "65536", "", "+1", "99999", "1_0"]),
    st.integers(1, 65535).map(str),
)


@st.composite
def odd_urls(draw: st.DrawFn) -> str:
    """URLs in every spelling §4 canonicalises and some it refuses: case, www., trailing
    dots, IDNA and non-ASCII hosts, IPv4 and IPv6 literals (with zones), odd ports,
    credentials, percent-escapes, queries, fragments, slashes and whitespace."""
    host = draw(
        st.one_of(
            _host,
            _host.map(lambda h: h + "."),
            st.ip_addresses(v=4).map(str),
            st.ip_addresses(v=6).map(lambda a: f"[{a}]"),
            st.ip_addresses(v=6).map(lambda a: f"[{str(a).upper()}%25eth0]"),
            st.sampled_from(["[::1", "::1", "[v1.x]", "[::FFFF:1.2.3.4]"]),
        )
    )
    port = draw(_port)
    url = draw(st.sampled_from(["https://", "HTTPS://", "http://", "https:/", "ftp://", ""]))
    url += draw(st.sampled_from(["", "", "", "user@", "user:pw@", ":@", "@"]))
    url += host + ("" if port is None else f":{port}")
    url += "".join("/" + s for s in draw(st.lists(_segment, max_size=3)))
    url += draw(st.sampled_from(["", "", "/", "//", "?q=1", "#f", "?", " ", "\n", "\t/x"]))
    return draw(st.sampled_from(["", " ", "\t"])) + url


def url_outcome(fn: Any, url: object) -> tuple[str, str]:
    try:
        return ("ok", fn(url))
    except UsageError as exc:
        return ("error", str(exc))


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(odd_urls())
def test_the_fast_canonical_url_is_urllibs_for_every_url(url: str) -> None:
    assert url_outcome(canonical_url, url) == url_outcome(urllib_canonical_url, url)
    # The fast check is the §4 pattern itself, nothing looser.
    assert fast.url_matches(url) == bool(rule._URL_RE.search(url))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.from_regex(fast.COMMON_URL_PATTERN, fullmatch=True))
def test_every_common_url_is_one_the_pattern_accepts(url: str) -> None:
    import re

    assert re.search(URL_PATTERN, url), url
    assert canonical_url(url) == urllib_canonical_url(url) == url


def test_non_strings_and_subclasses_take_the_exact_path() -> None:
    for url in (None, 42, b"https://a.example", Text("https://a.example"), ["https://a"]):
        assert url_outcome(canonical_url, url) == url_outcome(urllib_canonical_url, url)


# --- records ---

GOOD: dict[str, Any] = {
    "v": "0.2",
    "iss": "https://resolver.example",
    "sub": "example:server-1",
    "url": "https://api.example/mcp",
    "status": "ok",
    "checked_at": "2026-11-30T12:34:56Z",
    "evidence": {"method": "https-get"},
}
_anything = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.just(Text("ok")),
    st.just(Status.OK),
    st.just(OrderedDict(a=1)),
    st.just(["x"]),
    st.just({1: "x"}),
    st.just({}),
)
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "v": st.sampled_from(["0.2", "0.1", "0.2 ", Text("0.2")]),
    "sub": st.sampled_from(
        [
            "example:s",
            "urn:x",
            "Example:s",
            "example:",
            "example:a b",
            "ex:\x7f",
            ":s",
            "a" * 33 + ":s",
            "example:" + "x" * 128,
            "example:" + "x" * 129,
            "example:s\n",
            Text("example:s"),
            "urn:é",
        ]
    ),
    "url": st.one_of(odd_urls(), st.sampled_from(["https://api.example/mcp", Text("https://a.b")])),
    "status": st.sampled_from(["ok", "sign_in", "down", "unknown", "OK", "maybe", Status.OK]),
    "checked_at": st.sampled_from(
        [
            "2026-11-30T12:34:56Z",
            "2026-11-30T13:05:00Z",
            "2026-11-30T13:05:00.0Z",
            "2026-11-30T13:05:00.000000001Z",
            "2026-11-30T13:05:01Z",
            "2026-11-30T12:34:56.5Z",
            "2026-02-29T00:00:00Z",
            "2024-02-29T00:00:00Z",
            "2026-11-30 12:34:56Z",
            "2026-11-30T12:34:56+00:00",
            "2026-11-30T24:00:00Z",
            "2026-11-30T12:34:56Z\n",
            "0000-01-01T00:00:00Z",
            "0001-01-01T00:00:00Z",
            Text("2026-11-30T12:34:56Z"),
        ]
    ),
    "evidence": st.sampled_from([{}, {"a": 1}, {1: 2}, OrderedDict(a=1), [], "x"]),
    "name": st.sampled_from(["n", "", None, 1, Text("n")]),
    "first_seen": st.sampled_from(
        ["2026-11-30", "2026-12-01", "2026-11-29", "2026-02-30", "2026-11-30\n", 20261130]
    ),
}


@st.composite
def records(draw: st.DrawFn) -> object:
    """A well-formed observation with some members dropped, replaced, added or forbidden."""
    record: dict[Any, Any] = dict(GOOD)
    for member, values in VALUES.items():
        choice = draw(st.integers(0, 5))
        if choice == 0:
            record.pop(member, None)
        elif choice == 1:
            record[member] = draw(st.one_of(values, _anything))
    for extra in draw(st.lists(st.sampled_from(["need", "constraints", "n", 7, Text("x")]))):
        record[extra] = draw(_anything)
    if draw(st.integers(0, 20)) == 0:
        return draw(st.sampled_from([OrderedDict(record), list(record), "x", None]))
    return record


@settings(max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
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
