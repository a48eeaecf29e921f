"""The strict parser, which skips its number hooks when no number could overflow a double,
against the same parser with a hook on every token: the same documents accepted, with the
same values, and the same error for every refused one. Plus the bounds on hostile input."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from capability_anchor import leaf, strictjson
from capability_anchor.errors import InvalidRecord, MalformedJSON
from capability_anchor.leaf import MAX_LEAF_BYTES, leaf_bytes
from tests.kit.hypo import examples


def outcome(fn: Any, text: str, allow: bool) -> tuple[str, Any]:
    try:
        return ("ok", fn(text, allow))
    except MalformedJSON as exc:
        return ("error", str(exc))


def same_value(a: Any, b: Any) -> bool:
    # repr tells -0.0 from 0.0 and keeps member order; json.dumps would not.
    return repr(a) == repr(b)


def check_agrees(text: str) -> None:
    for allow in (False, True):
        hooked = outcome(strictjson._strict_loads, text, allow)
        public = outcome(lambda t, a: strictjson.loads(t, allow_lone_surrogates=a), text, allow)
        assert public[0] == hooked[0], (text, public, hooked)
        if hooked[0] == "error":
            assert public[1] == hooked[1]
        else:
            assert same_value(public[1], hooked[1])


TRICKY = [
    '{"a":1,"a":2}',
    '{"a":{"b":1,"b":1}}',
    '[{"a":1,"a":1}]',
    '{"\\u0061":1,"a":2}',
    '{"a:b":1,"c":2}',  # colons in names
    '{"a":"x:y:z","a":"q"}',
    '{"a":"\\":","b":1}',  # an escaped quote before a colon inside a string
    '{"a":"\\\\","b":":"}',
    "NaN",
    '{"a":Infinity}',
    '{"a":-Infinity}',
    '{"a":1e400}',
    '{"a":-1e400}',
    '{"a":1e308}',
    '{"a":' + "9" * 308 + "}",
    '{"a":' + "9" * 309 + "}",
    '{"a":' + "1" + "0" * 308 + "}",  # 309 digits and finite
    '{"a":1' + "0" * 250 + "e99}",  # a 2-digit exponent can still overflow
    '{"a":1' + "0" * 98 + "e99}",
    '{"a":1' + "0" * 98 + ".5e-99}",
    '{"a":1e0000000000400}',
    '{"a":1E+308,"b":1e-400,"c":2e308}',
    '{"a":' + "9" * 400 + "}",
    '{"a":' + "9" * 5000 + "}",
    '{"a":"' + "9" * 400 + '"}',
    '{"a":"\\ud800"}',
    '{"\\ud800":1}',
    '{"a":"\\ud83d\\ude00"}',
    '{"a":1,}',
    '{"a":1} {}',
    "",
    "[" * 100_000,
    "[" * 100_000 + "]" * 100_000,
    '{"a":-0.0,"b":-0,"c":4.50,"d":1E-7,"e":5e-324}',
    '{"":1,"":2}',
    '{"a":[],"b":{},"c":[{}],"d":"NaN","e":"Infinity"}',
]


@pytest.mark.parametrize("text", TRICKY)
def test_skipping_number_hooks_agrees_on_tricky_documents(text: str) -> None:
    check_agrees(text)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**320), max_value=10**320)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from(['"', "\\", ":", "a", "\u20ac", "\n", "\x00"])),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(alphabet='ab:"\\', max_size=2), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=examples(300), deadline=None)
@given(json_values, st.integers(min_value=0, max_value=3))
def test_skipping_number_hooks_agrees_on_generated_documents(value: Any, duplicate: int) -> None:
    text = json.dumps(value)
    check_agrees(text)
    # The same document with a member repeated inside the outermost object, if any.
    if text.startswith("{") and len(text) > 2 and duplicate:
        first = text[1 : text.index(",")] if "," in text else text[1:-1]
        check_agrees("{" + first + "," + text[1:])


def zeros_record(n: int) -> bytes:
    return ('{"record":{"a":[' + ",".join(["0"] * n) + "]}}").encode()


def test_hostile_array_of_zeros_parses_and_is_refused_quickly() -> None:
    body = zeros_record(2_000_000)  # ~4 MiB: the hostile /prove body
    started = time.process_time()
    parsed = leaf.parse_json(body)
    parse_s = time.process_time() - started
    started = time.process_time()
    with pytest.raises(InvalidRecord, match=f"over the limit of {MAX_LEAF_BYTES}"):
        leaf.leaf_hash(parsed["record"])
    walk_s = time.process_time() - started
    print(f"4 MiB array of zeros: parse {parse_s * 1000:.0f} ms, refusal {walk_s * 1000:.1f} ms")
    # The slow path took ~7 s on this machine; generous bounds, in CPU time: other processes
    # (pytest-xdist workers, a shared machine) do not count.
    assert parse_s < 2.0
    assert walk_s < 0.2


def test_early_stop_keeps_exact_sizes_near_the_limit_and_ignores_reserved_members() -> None:
    just_over = {"p": "x" * (MAX_LEAF_BYTES - 7)}
    with pytest.raises(InvalidRecord, match=f"leaf bytes are {MAX_LEAF_BYTES + 1} bytes long"):
        leaf_bytes(just_over)
    with pytest.raises(InvalidRecord, match="more than 32768 bytes long, over the limit of 16384"):
        leaf_bytes({"p": list(range(40_000))})
    # Reserved members never reach the leaf, so they never count toward the early stop ...
    ok = {"p": 1, "proof": [0] * 100_000, "jws": "y" * 100_000}
    assert leaf_bytes(ok) == b'{"p":1}'
    # ... but they are still validated, in document order.
    with pytest.raises(InvalidRecord, match="at /proof/99999: number 1e"):
        leaf_bytes({"p": 1, "proof": [0] * 99_999 + [1e300]})


def test_early_stop_reports_problems_before_the_limit_first() -> None:
    with pytest.raises(InvalidRecord, match=r"at /a/3: string contains a lone surrogate"):
        leaf_bytes({"a": [0, 0, 0, "\ud800"] + [0] * 100_000})


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"a": [*range(100), 2**60]}, r"at /a/100: number \d+ exceeds"),
        ({"a": [2**60] + [0] * 100_000}, r"at /a/0: number \d+ exceeds"),
        ({"a": [0] * 100_000 + [2**60]}, "more than 32768 bytes long"),
        ({"a": ["x"] * 50 + ["\ud800"]}, "at /a/50: string contains a lone surrogate"),
        ({"a": ["\udc00"] + ["\ud83d"] * 20}, "at /a/0: string contains a lone surrogate U"),
        ({"a": ["xy"] * 20_000}, "more than 32768 bytes long"),
        ({"proof": [2**60] * 20}, r"at /proof/0: number \d+ exceeds"),
    ],
)
def test_arrays_checked_in_bulk_report_what_the_walk_reports(
    record: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidRecord, match=message):
        leaf_bytes(record)


def test_arrays_checked_in_bulk_give_the_same_leaf() -> None:
    record = {"a": list(range(-50, 50)), "b": ["\u20ac", "x", "\n"] * 10, "proof": [1] * 40}
    claims = {"a": record["a"], "b": record["b"]}
    assert leaf_bytes(record) == rfc8785.dumps(claims)
