"""Leaf bytes and record validation (SPEC §2), against RFC 8785's own examples.

The number tests carry their own ECMAScript Number::toString (ECMA-262 §6.1.6.1.20) so the
library's number formatting is checked against the algorithm JCS names, not only against
itself.
"""

from __future__ import annotations

import hashlib
import json
import random
import struct
from decimal import Decimal
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from capability_anchor.errors import InvalidRecord
from capability_anchor.leaf import (
    MAX_DEPTH,
    MAX_LEAF_BYTES,
    MAX_SAFE_INTEGER,
    RESERVED_MEMBERS,
    leaf_bytes,
    leaf_claims,
    leaf_hash,
    parse_json,
    parse_record,
    validate_record,
)
from tests.kit.hypo import examples

MAX = MAX_SAFE_INTEGER
FAST = settings(max_examples=examples(200), deadline=None)


def nested(levels: int, innermost: Any = 0, kinds: str = "a") -> Any:
    """`levels` containers around `innermost`, each an array ("a") or an object ("o") as
    `kinds` says, cycling."""
    value = innermost
    for i in range(levels):
        value = {"k": value} if kinds[i % len(kinds)] == "o" else [value]
    return value


def without_reserved(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in RESERVED_MEMBERS}


def ecma_number(x: float) -> str:
    """ECMA-262 Number::toString for a finite double, as RFC 8785 §3.2.2.3 requires."""
    if x == 0:
        return "0"
    if x < 0:
        return "-" + ecma_number(-x)
    # repr() is the shortest round-tripping digit string, nearest to the value on ties: the
    # same digits ECMA-262 asks for.
    _, digit_tuple, exponent = Decimal(repr(x)).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    k, n = len(digits), exponent + len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return f"{digits[:n]}.{digits[n:]}"
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    e = n - 1
    mantissa = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
    return f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


# --- known answer ----------------------------------------------------------------------------

RECORD = {
    "v": "0.2",
    "iss": "https://resolver.example",
    "sub": "example:abc",
    "url": "https://mail.example.com/mcp",
    "status": "ok",
    "checked_at": "2026-10-28T10:05:00Z",
    "evidence": {"method": "https://resolver.example/method"},
    "iat": 1,
    "exp": 2,
}
RECORD_LEAF = (
    b'{"checked_at":"2026-10-28T10:05:00Z","evidence":{"method":"https://resolver.example/method"},'
    b'"iss":"https://resolver.example","status":"ok","sub":"example:abc",'
    b'"url":"https://mail.example.com/mcp","v":"0.2"}'
)
# printf '\x00%s' "$RECORD_LEAF" | sha256sum
RECORD_LEAF_HASH = "5928d0b9e2c07a19bdcb3c357430444404cc01b592688bd7665d333b078491ab"


def test_known_answer_leaf() -> None:
    assert leaf_bytes(RECORD) == RECORD_LEAF
    assert leaf_hash(RECORD) == hashlib.sha256(b"\x00" + RECORD_LEAF).digest()
    assert leaf_hash(RECORD).hex() == RECORD_LEAF_HASH
    assert leaf_hash(parse_record(json.dumps(RECORD, indent=2))) == leaf_hash(RECORD)


def test_leaf_claims_drops_only_reserved_top_level_members() -> None:
    record = {name: 1 for name in RESERVED_MEMBERS} | {"a": {"iat": 1}, "ia": 2}
    claims = leaf_claims(record)
    assert claims == {"a": {"iat": 1}, "ia": 2}
    assert claims is not record
    assert claims["a"] is record["a"]  # shallow
    assert len(record) == len(RESERVED_MEMBERS) + 2  # not mutated


def test_validate_record_returns_the_record() -> None:
    assert validate_record(RECORD) is RECORD


# --- RFC 8785 examples -----------------------------------------------------------------------

# RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text.
APPENDIX_B = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


def from_bits(hex_bits: str) -> float:
    value: float = struct.unpack(">d", bytes.fromhex(hex_bits))[0]
    return value


@pytest.mark.parametrize(("hex_bits", "text"), APPENDIX_B)
def test_appendix_b_number_serialization(hex_bits: str, text: str) -> None:
    value = from_bits(hex_bits)
    assert rfc8785.dumps(value) == text.encode()
    assert ecma_number(value) == text
    if abs(value) <= MAX:
        assert leaf_bytes({"n": value}) == b'{"n":' + text.encode() + b"}"
        # The canonical text parses back to the same double, hence the same leaf.
        assert leaf_bytes(parse_record('{"n":' + text + "}")) == leaf_bytes({"n": value})
    else:
        with pytest.raises(InvalidRecord, match=r"at /n: number .* exceeds 2\^53-1"):
            leaf_bytes({"n": value})
        with pytest.raises(InvalidRecord, match="exceeds 2"):
            parse_record('{"n":' + text + "}")


@pytest.mark.parametrize("hex_bits", ["7fffffffffffffff", "7ff0000000000000", "fff0000000000000"])
def test_appendix_b_nan_and_infinity_are_refused(hex_bits: str) -> None:
    value = from_bits(hex_bits)
    with pytest.raises(rfc8785.FloatDomainError):
        rfc8785.dumps(value)
    with pytest.raises(InvalidRecord, match=r"at /n: number .* is not finite"):
        leaf_bytes({"n": value})


# RFC 8785 §3.2.2 input and §3.2.3 output.
RFC_INPUT = r"""{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"""
RFC_OUTPUT = (
    r"""{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"""
    r""""string":"€$\u000f\nA'B\"\\\\\"/"}"""
).encode()


def test_rfc8785_example_object() -> None:
    assert rfc8785.dumps(json.loads(RFC_INPUT)) == RFC_OUTPUT
    # 1E30 is outside our number range: the record as a whole is refused, naming the member.
    with pytest.raises(InvalidRecord, match=r"at /numbers/1: number 1e\+30 exceeds"):
        parse_record(RFC_INPUT)
    # Without it, our leaf is the RFC's output without it.
    trimmed = RFC_INPUT.replace("1E30, ", "")
    assert leaf_bytes(parse_record(trimmed)) == RFC_OUTPUT.replace(b"1e+30,", b"")


def test_rfc8785_sorting_example() -> None:
    text = r"""{
      "\u20ac": "Euro Sign",
      "\r": "Carriage Return",
      "\ufb33": "Hebrew Letter Dalet With Dagesh",
      "1": "One",
      "\ud83d\ude00": "Emoji: Grinning Face",
      "\u0080": "Control",
      "\u00f6": "Latin Small Letter O With Diaeresis"
    }"""
    leaf = leaf_bytes(parse_record(text))
    expected_order = [
        ("\\r", "Carriage Return"),
        ("1", "One"),
        ("\u0080", "Control"),
        ("\u00f6", "Latin Small Letter O With Diaeresis"),
        ("\u20ac", "Euro Sign"),
        ("\U0001f600", "Emoji: Grinning Face"),  # UTF-16 D83D sorts before FB33
        ("\ufb33", "Hebrew Letter Dalet With Dagesh"),
    ]
    members = ",".join(f'"{key}":"{value}"' for key, value in expected_order)
    assert leaf == ("{" + members + "}").encode("utf-8")


def test_string_escapes_are_the_minimal_jcs_set() -> None:
    record = {"s": '\x00\x08\t\n\x0b\x0c\r\x1f "\\/\x7f\u2028\U0001f600'}
    assert leaf_bytes(record) == (
        '{"s":"\\u0000\\b\\t\\n\\u000b\\f\\r\\u001f \\"\\\\/\x7f\u2028\U0001f600"}'
    ).encode("utf-8")


# --- generated records -----------------------------------------------------------------------

special_strings = st.sampled_from(
    [
        "",
        '"',
        "\\",
        "/",
        "\b\f\n\r\t",
        "\x00\x1f\x7f\x80\x9f",
        "\u2028\u2029",
        "\ufeff",
        "\U0001f600",
        "\U0010ffff",
        "\ufb33\u20ac",
        "iat",
        "\\u0000",
    ]
)
strings = st.text(max_size=12) | special_strings  # every code point but surrogates
keys = strings | st.sampled_from(sorted(RESERVED_MEMBERS))
boundary_ints = st.sampled_from([0, 1, -1, MAX, -MAX, MAX - 1, -MAX + 1, 2**31, -(2**32)])
ints = st.integers(-MAX, MAX) | boundary_ints
special_floats = st.sampled_from(
    [
        0.0,
        -0.0,
        5e-324,
        -5e-324,
        2.2250738585072014e-308,
        2.225073858507201e-308,
        1e-7,
        1e-6,
        9.999999999999997e-7,
        0.1,
        0.5,
        1.0,
        1e15,
        4e15,
        1e20 / 1e5,
        float(MAX),
        -float(MAX),
        4503599627370496.5,
        1424953923781206.2,
    ]
)
floats = st.floats(-MAX, MAX, allow_nan=False, allow_infinity=False) | special_floats
scalars = st.none() | st.booleans() | ints | floats | strings
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
deep_values = st.builds(
    nested, st.integers(0, MAX_DEPTH - 1), scalars, st.text(alphabet="ao", min_size=1)
)
records = st.dictionaries(keys, values | deep_values, max_size=6)
reserved_members = st.dictionaries(st.sampled_from(sorted(RESERVED_MEMBERS)), values)


def shuffled(value: Any, rng: random.Random) -> Any:
    """The same JSON value with every object's members in a different order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


@FAST
@given(records)
def test_leaf_is_jcs_of_record_without_reserved_members(record: dict[str, Any]) -> None:
    assert leaf_bytes(record) == rfc8785.dumps(without_reserved(record))
    assert leaf_hash(record) == hashlib.sha256(b"\x00" + leaf_bytes(record)).digest()
    assert validate_record(record) is record


@FAST
@given(records, st.randoms(use_true_random=False))
def test_leaf_is_invariant_under_member_order(record: dict[str, Any], rng: random.Random) -> None:
    assert leaf_bytes(shuffled(record, rng)) == leaf_bytes(record)


@FAST
@given(records, st.booleans())
def test_json_text_round_trips_to_the_same_leaf(record: dict[str, Any], ascii_only: bool) -> None:
    text = json.dumps(record, ensure_ascii=ascii_only)
    assert parse_json(text) == record
    assert leaf_bytes(parse_record(text)) == leaf_bytes(record)
    assert leaf_bytes(parse_record(text.encode("utf-8"))) == leaf_bytes(record)
    # The canonical form is itself JSON text that parses to the same leaf.
    assert leaf_bytes(parse_record(leaf_bytes(record))) == leaf_bytes(record)


@FAST
@given(records, reserved_members)
def test_reserved_members_never_reach_the_leaf(
    record: dict[str, Any], reserved: dict[str, Any]
) -> None:
    assert leaf_bytes(record | reserved) == leaf_bytes(without_reserved(record))


@FAST
@given(records, st.sampled_from(sorted(RESERVED_MEMBERS)), scalars)
def test_nested_reserved_names_do_reach_the_leaf(
    record: dict[str, Any], name: str, value: Any
) -> None:
    with_member = record | {"evidence": {name: value}}
    without_member = record | {"evidence": {}}
    assert leaf_bytes(with_member) != leaf_bytes(without_member)
    assert json.dumps(name).encode() + b":" in leaf_bytes(with_member)


@FAST
@given(floats)
def test_numbers_follow_ecmascript(value: float) -> None:
    assert leaf_bytes({"n": value}) == b'{"n":' + ecma_number(value).encode() + b"}"


@FAST
@given(ints)
def test_integers_are_written_as_integers(value: int) -> None:
    assert leaf_bytes({"n": value}) == b'{"n":' + str(value).encode() + b"}"
    # An integral double says the same as the integer.
    assert leaf_bytes({"n": float(value)}) == leaf_bytes({"n": value})


# --- rejections ------------------------------------------------------------------------------


class Opaque:
    pass


REJECTED_VALUES = [
    pytest.param([], "must be a JSON object, got array", id="top-level-array"),
    pytest.param("x", "must be a JSON object, got string", id="top-level-string"),
    pytest.param(None, "must be a JSON object, got null", id="top-level-null"),
    pytest.param(1, "must be a JSON object, got number", id="top-level-number"),
    pytest.param({1: "x"}, "at the top level: member name 1 is int", id="int-key"),
    pytest.param({"a": {None: 1}}, "at /a: member name None is NoneType", id="none-key"),
    pytest.param({"a": (1, 2)}, "at /a: tuple is not a JSON value", id="tuple"),
    pytest.param({"a": {1, 2}}, "at /a: set is not a JSON value", id="set"),
    pytest.param({"a": b"x"}, "at /a: bytes is not a JSON value", id="bytes"),
    pytest.param({"a": Opaque()}, "at /a: Opaque is not a JSON value", id="object"),
    pytest.param({"a": Decimal(1)}, "at /a: Decimal is not a JSON value", id="decimal"),
    pytest.param({"a": [float("nan")]}, "at /a/0: number nan is not finite", id="nan"),
    pytest.param({"a": float("inf")}, "at /a: number inf is not finite", id="inf"),
    pytest.param({"a": float("-inf")}, "at /a: number -inf is not finite", id="-inf"),
    pytest.param({"a": 1e20}, r"at /a: number 1e\+20 exceeds 2\^53-1", id="float-1e20"),
    pytest.param({"a": 10**20}, "at /a: number 100000000000000000000 exceeds", id="int-1e20"),
    pytest.param({"a": 9007199254740992.0}, "number 9007199254740992.0 exceeds", id="2^53-float"),
    pytest.param({"a": 2**53}, "number 9007199254740992 exceeds", id="2^53-int"),
    pytest.param({"a": 2**53 + 1}, "number 9007199254740993 exceeds", id="2^53+1-int"),
    pytest.param({"a": -(2**53)}, "number -9007199254740992 exceeds", id="-2^53-int"),
    pytest.param({"a": -1.7976931348623157e308}, "exceeds 2", id="-max-double"),
    # float() of this raises OverflowError; it must still be an InvalidRecord.
    pytest.param({"a": 10**400}, "at /a: integer of about 400 digits exceeds", id="int-1e400"),
    # str() of this raises ValueError (4300-digit limit); the message must not try it.
    pytest.param({"a": -(10**5000)}, "integer of about 5000 digits", id="int-1e5000"),
    pytest.param({"a": "ok\ud800"}, r"at /a: string contains a lone surrogate U\+D800", id="hi"),
    pytest.param({"a": ["\udfff"]}, r"at /a/0: string .* U\+DFFF", id="lone-low-surrogate"),
    pytest.param({"\udc00": 1}, r"at /\\udc00: member name .* U\+DC00", id="surrogate-key"),
    pytest.param({"a": {"b\ud83d": 1}}, r"at /a/b\\ud83d: member name", id="nested-key"),
    pytest.param({"a/b~": [0, "\ud800"]}, "at /a~1b~0/1: string", id="pointer-escaping"),
    pytest.param({"a": nested(MAX_DEPTH, kinds="a")}, "nesting depth 33", id="depth-33-arrays"),
    pytest.param({"a": nested(MAX_DEPTH, kinds="o")}, "nesting depth 33", id="depth-33-objects"),
    pytest.param({"a": nested(MAX_DEPTH, {}, "ao")}, "nesting depth 33", id="depth-33-mixed"),
]


@pytest.mark.parametrize(("value", "message"), REJECTED_VALUES)
def test_invalid_records_are_rejected(value: object, message: str) -> None:
    with pytest.raises(InvalidRecord, match=message):
        validate_record(value)
    with pytest.raises(InvalidRecord, match=message):
        leaf_bytes(value)
    with pytest.raises(InvalidRecord):
        leaf_hash(value)


def test_reserved_members_are_validated_too() -> None:
    # They never reach the leaf, but a record is validated whole (SPEC §2).
    with pytest.raises(InvalidRecord, match="at /iat: number 1e"):
        leaf_bytes({"a": 1, "iat": 1e20})
    with pytest.raises(InvalidRecord, match="at /jws: string contains a lone surrogate"):
        leaf_bytes({"a": 1, "jws": "\ud800"})


def test_first_problem_in_document_order_is_reported() -> None:
    with pytest.raises(InvalidRecord, match="at /a/1"):
        validate_record({"a": [0, 1e20, "\ud800"], "b": 1e20})


def test_subclasses_of_json_types_are_rejected() -> None:
    class Text(str):
        pass

    with pytest.raises(InvalidRecord, match="at /a: Text is not a JSON value"):
        leaf_bytes({"a": Text("x")})


def test_a_list_that_contains_itself_is_caught_by_the_depth_limit() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(InvalidRecord, match="nesting depth 33"):
        leaf_bytes({"a": loop})


@pytest.mark.parametrize("kinds", ["a", "o", "ao", "oa"])
def test_depth_32_is_accepted(kinds: str) -> None:
    # The top-level object is depth 1, so 31 containers inside reach exactly 32.
    record = {"a": nested(MAX_DEPTH - 1, kinds=kinds)}
    assert leaf_bytes(record) == rfc8785.dumps(record)


def test_depth_over_text() -> None:
    ok = '{"a":' + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}"
    deep = '{"a":' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}"
    assert leaf_bytes(parse_record(ok)) == ok.encode()
    with pytest.raises(InvalidRecord, match="nesting depth 33 exceeds the limit of 32"):
        parse_record(deep)


@pytest.mark.parametrize("opener", ["[", '{"a":', '{"a":['])
def test_hostile_nesting_does_not_crash(opener: str) -> None:
    with pytest.raises(InvalidRecord, match="nested too deeply"):
        parse_json(opener * 100_000)
    # Balanced, and so otherwise valid, input too.
    closer = {"[": "]", '{"a":': "}", '{"a":[': "]}"}[opener]
    with pytest.raises(InvalidRecord, match="nested too deeply"):
        parse_record(opener * 100_000 + "0" + closer * 100_000)


def test_leaf_size_limit() -> None:
    padding = MAX_LEAF_BYTES - len(b'{"p":""}')
    exact = {"p": "x" * padding}
    assert len(leaf_bytes(exact)) == MAX_LEAF_BYTES
    with pytest.raises(InvalidRecord, match=f"leaf bytes are {MAX_LEAF_BYTES + 1} bytes long"):
        leaf_bytes({"p": "x" * (padding + 1)})
    # The limit is on UTF-8 bytes, not characters: each euro sign is three bytes.
    assert len(leaf_bytes({"p": "\u20ac" * (padding // 3)})) == MAX_LEAF_BYTES - padding % 3
    with pytest.raises(InvalidRecord, match="over the limit of 16384"):
        leaf_bytes({"p": "\u20ac" * (padding // 3 + 1)})
    # Escapes count as written: "\n" is two bytes in the leaf.
    with pytest.raises(InvalidRecord, match="over the limit"):
        leaf_bytes({"p": "\n" * (padding // 2 + 1)})
    # The limit is on the leaf: reserved members may make the record itself larger.
    assert len(leaf_bytes(exact | {"jws": "y" * 50_000})) == MAX_LEAF_BYTES


REJECTED_TEXT = [
    pytest.param('{"a":1,"a":2}', "duplicate member name 'a'", id="duplicate"),
    pytest.param('{"a":{"b":1,"b":1}}', "duplicate member name 'b'", id="nested-duplicate"),
    pytest.param('[{"a":1,"a":1}]', "duplicate member name", id="duplicate-in-array"),
    pytest.param('{"\\u0061":1,"a":2}', "duplicate member name 'a'", id="escaped-duplicate"),
    pytest.param("NaN", "NaN is not a JSON number", id="nan"),
    pytest.param('{"a":Infinity}', "Infinity is not a JSON number", id="infinity"),
    pytest.param('{"a":-Infinity}', "-Infinity is not a JSON number", id="-infinity"),
    pytest.param('{"a":1e400}', "number 1e400 overflows a double", id="1e400"),
    pytest.param('{"a":-1e400}', "number -1e400 overflows a double", id="-1e400"),
    pytest.param('{"a":' + "9" * 400 + "}", "overflows a double", id="400-digit-int"),
    pytest.param('{"a":' + "9" * 5000 + "}", "overflows a double", id="5000-digit-int"),
    pytest.param("{'a':1}", "Expecting property name", id="single-quotes"),
    pytest.param('{"a":1,}', "line 1 column 8", id="trailing-comma"),
    pytest.param('{"a":01}', "Expecting ',' delimiter", id="leading-zero"),
    pytest.param('{"a":"\t"}', "Invalid control character", id="raw-control-char"),
    pytest.param('{"a":1} {}', "Extra data", id="trailing-data"),
    pytest.param("", "Expecting value", id="empty"),
    pytest.param('{"a":1}\n\n  x', "line 3 column 3", id="position"),
]


@pytest.mark.parametrize(("text", "message"), REJECTED_TEXT)
def test_invalid_json_text_is_rejected(text: str, message: str) -> None:
    with pytest.raises(InvalidRecord, match=message):
        parse_json(text)
    with pytest.raises(InvalidRecord, match=message):
        parse_json(text.encode("utf-8"))


REJECTED_RECORD_TEXT = [
    pytest.param('"\\ud800"', "must be a JSON object, got string", id="top-level-string"),
    pytest.param("[1]", "must be a JSON object, got array", id="top-level-array"),
    pytest.param("null", "must be a JSON object, got null", id="top-level-null"),
    pytest.param('{"a":"\\ud800"}', r"at /a: string contains a lone surrogate U\+D800", id="str"),
    pytest.param('{"a":"\\udc00\\ud800"}', r"U\+DC00", id="reversed-pair"),
    pytest.param('{"\\ud800":1}', r"at /\\ud800: member name .* U\+D800", id="key"),
    pytest.param('{"a":9007199254740992.0}', "number 9007199254740992.0 exceeds", id="2^53.0"),
    pytest.param('{"a":9007199254740992}', "number 9007199254740992 exceeds", id="2^53"),
    pytest.param('{"a":9007199254740993}', "exceeds 2", id="2^53+1"),
    pytest.param('{"a":-9007199254740992}', "exceeds 2", id="-2^53"),
    pytest.param('{"a":1e20}', "exceeds 2", id="1e20"),
    pytest.param('{"a":100000000000000000000}', "exceeds 2", id="int-1e20"),
    pytest.param('{"a":[1E308]}', r"at /a/0: number 1e\+308 exceeds", id="1E308"),
    # Rounds to 2^53 as a double, though the decimal is below it.
    pytest.param('{"a":9007199254740991.9}', "exceeds 2", id="rounds-up"),
]


@pytest.mark.parametrize(("text", "message"), REJECTED_RECORD_TEXT)
def test_invalid_record_text_is_rejected(text: str, message: str) -> None:
    with pytest.raises(InvalidRecord, match=message):
        parse_record(text)
    with pytest.raises(InvalidRecord, match=message):
        parse_record(text.encode("utf-8"))


ACCEPTED_NUMBERS = [
    ("0.5", b"0.5"),
    ("5e-324", b"5e-324"),
    ("9007199254740991", b"9007199254740991"),
    ("-9007199254740991", b"-9007199254740991"),
    ("9007199254740991.0", b"9007199254740991"),
    ("9.007199254740991E15", b"9007199254740991"),
    ("-0", b"0"),
    ("-0.0", b"0"),
    ("1e-400", b"0"),  # underflows to zero: the nearest double
    ("0.000001", b"0.000001"),
    ("1E-7", b"1e-7"),
    ("4.50", b"4.5"),
]


@pytest.mark.parametrize(("text", "canonical"), ACCEPTED_NUMBERS)
def test_numbers_in_range_are_accepted(text: str, canonical: bytes) -> None:
    assert leaf_bytes(parse_record('{"n":' + text + "}")) == b'{"n":' + canonical + b"}"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(b'{"a":"\xff"}', "not UTF-8 .byte 0xff at offset 6", id="invalid-byte"),
        pytest.param(b'{"a":"\xc3"}', "not UTF-8", id="truncated-sequence"),
        pytest.param(b'{"a":"\xc0\xaf"}', "not UTF-8", id="overlong"),
        pytest.param(b'{"a":"\xed\xa0\x80"}', "not UTF-8", id="encoded-surrogate"),
        pytest.param(b'\xef\xbb\xbf{"a":1}', "byte order mark", id="utf8-bom"),
        pytest.param('{"a":1}'.encode("utf-16"), "not UTF-8", id="utf16-with-bom"),
        # Valid UTF-8 (NUL is a character), so they fail as JSON, not as encodings.
        pytest.param('{"a":1}'.encode("utf-16-le"), "invalid JSON: Expecting", id="utf16-le"),
        pytest.param('{"a":1}'.encode("utf-32-be"), "invalid JSON: Expecting", id="utf32-be"),
    ],
)
def test_json_bytes_must_be_utf8(data: bytes, message: str) -> None:
    with pytest.raises(InvalidRecord, match=message):
        parse_json(data)


def test_str_with_bom_is_rejected() -> None:
    with pytest.raises(InvalidRecord, match="byte order mark"):
        parse_json('\ufeff{"a":1}')


def test_json_text_of_wrong_type_is_rejected() -> None:
    with pytest.raises(InvalidRecord, match="must be str or bytes"):
        parse_json(123)  # type: ignore[arg-type]


def test_parse_json_accepts_any_json_value() -> None:
    # Record rules belong to parse_record; parse_json is only strict JSON.
    assert parse_json(' [1, 2.5, "x", null, true] ') == [1, 2.5, "x", None, True]
    assert parse_json(b'"\\ud83d\\ude00"') == "\U0001f600"
    assert parse_json('{"a":{"a":1}}') == {"a": {"a": 1}}


# --- the plain-json fast path ----------------------------------------------------------------
# leaf_bytes uses json.dumps instead of rfc8785 when a record has no float and only ASCII
# member names. These properties are the proof that the two are byte-identical there.

_any_text = st.text(
    alphabet=st.characters(exclude_categories=("Cs",)),  # every code point but surrogates
    max_size=30,
)
_plain_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53 - 1), max_value=2**53 - 1),
    _any_text,
    st.sampled_from(["\u2028\u2029", "\x7f\x00\x1f\b\f\n\r\t", '"\\/', "\U0001f600\ufb33\u20ac"]),
)
_ascii_keys = st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=12)
_plain_values = st.recursive(
    _plain_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_ascii_keys, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=examples(600), deadline=None)
@given(st.dictionaries(_ascii_keys, _plain_values, max_size=8))
def test_fast_path_is_byte_identical_to_rfc8785(record: dict[str, Any]) -> None:
    from capability_anchor.leaf import _walk

    assert _walk(record) is True
    assert leaf_bytes(record) == rfc8785.dumps(leaf_claims(record))


@pytest.mark.parametrize(
    "record",
    [{"a": 0.5}, {"a": [1, {"b": 1.0}]}, {"\u00e9": 1}, {"a": {"\U0001f600": 1}}],
    ids=["float", "nested-float", "latin-key", "astral-key"],
)
def test_floats_and_non_ascii_names_take_the_rfc8785_path(record: dict[str, Any]) -> None:
    from capability_anchor.leaf import _walk

    assert _walk(record) is False
    assert leaf_bytes(record) == rfc8785.dumps(record)
