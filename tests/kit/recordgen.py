"""Generated inputs for the fast paths of preparation (`record.fast`, `record.urls`,
`strictjson.plain_canonical`): URLs in every spelling §4 canonicalises or refuses, observation
records with members dropped, replaced or forbidden, and JSON values (as tests/unit/test_jcs.py
makes them) for the leaf."""

from __future__ import annotations

import enum
import string
from collections import OrderedDict
from typing import Any

from hypothesis import strategies as st

from capability_anchor import strictjson

BOUND = strictjson.MAX_SAFE_INTEGER

# Characters where JCS and Python's json could part ways: controls (short and \u00xx escapes),
# quote and backslash, DEL and C1 controls (not escaped by JCS), the JavaScript line
# separators, astral characters (UTF-16 order), lone surrogates (refused).
TRICKY = [chr(c) for c in range(0x20)] + ['"', "\\", "/", "\x7f", "\x85", "\u2028", "\u2029"]
TRICKY += ["\ufeff", "\uffff", "\U0001f600", "\U0010ffff", "\ud800", "\udfff", "é", "ÿ"]
CHARS = st.one_of(st.sampled_from(TRICKY), st.characters(), st.integers(0xD800, 0xDFFF).map(chr))
TEXT = st.text(CHARS, max_size=12)
ASCII_TEXT = st.text(st.characters(max_codepoint=0x7F), max_size=12)
SAFE_TEXT = st.text(
    st.one_of(st.sampled_from(TRICKY[:-4]), st.characters(codec="utf-8")), max_size=12
)
INTS = st.one_of(
    st.integers(-BOUND, BOUND),
    st.sampled_from([BOUND, -BOUND, BOUND + 1, -BOUND - 1, 2**63, 0]),
    st.integers(),
)
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
SCALARS = st.one_of(st.none(), st.booleans(), INTS, FLOATS, TEXT)
ANY_JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(TEXT, inner, max_size=5)),
    max_leaves=30,
)
# Values the fast path must take: ASCII member names, strings without lone surrogates,
# integers within the I-JSON range, no floats.
PLAIN_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-BOUND, BOUND), SAFE_TEXT),
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(ASCII_TEXT, inner, max_size=5)
    ),
    max_leaves=30,
)


NOW = 1_796_043_600  # 2026-11-30T13:00:00Z


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
    lead: str = draw(st.sampled_from(["", " ", "\t"]))
    return f"{lead}{url}"


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
