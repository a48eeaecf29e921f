"""One JCS entry point (`strictjson.canonical`): its fast path is byte-identical to the
`rfc8785` library wherever `is_plain` lets a caller take it, over generated JSON values, and
no other module of the package imports `rfc8785`."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from capability_anchor import leaf, strictjson
from capability_anchor.errors import InvalidRecord
from tests.kit.paths import ROOT

SRC = ROOT / "src" / "capability_anchor"
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


def reference(value: Any) -> bytes | None:
    try:
        return bytes(rfc8785.dumps(value))
    except (ValueError, TypeError):
        return None


@settings(max_examples=600, deadline=None)
@given(ANY_JSON)
def test_the_fast_path_is_rfc8785_wherever_is_plain_allows_it(value: Any) -> None:
    want = reference(value)
    if strictjson.is_plain(value):
        assert want is not None
        assert strictjson.canonical(value, plain=True) == want
    if want is None:
        with pytest.raises((ValueError, TypeError)):
            strictjson.canonical(value)
    else:
        assert strictjson.canonical(value) == want


@settings(max_examples=600, deadline=None)
@given(PLAIN_JSON)
def test_plain_values_take_the_fast_path_with_the_same_bytes(value: Any) -> None:
    assert strictjson.is_plain(value)
    assert strictjson.canonical(value, plain=True) == reference(value)


@pytest.mark.parametrize(
    "value",
    [
        {"a": 1.5},  # a float: ECMAScript formatting
        [1e-7],
        {"é": 1, "z": 2},  # a non-ASCII member name: UTF-16 order
        {"\U0001f600": 1, "\uffff": 2},
        [BOUND + 1],  # outside the I-JSON range
        ["\ud800"],  # a lone surrogate
        (1, 2),  # no JSON value
    ],
)
def test_is_plain_refuses_what_the_fast_path_could_spell_differently(value: Any) -> None:
    assert not strictjson.is_plain(value)


def test_the_refusals_are_not_vacuous_the_fast_path_would_differ() -> None:
    for value in ({"\U0001f600": 1, "\uffff": 2}, [1e-7], [1.0]):
        fast = strictjson.canonical(value, plain=True)
        assert fast != reference(value)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(TEXT, ANY_JSON, max_size=6))
def test_leaf_bytes_are_rfc8785_of_the_leaf_claims(record: dict[str, Any]) -> None:
    """The leaf's walk decides the fast path for itself (`leaf._walk`): whatever it decides,
    a valid record's leaf bytes are the library's."""
    try:
        got = leaf.leaf_bytes(record)
    except InvalidRecord:
        return
    assert got == reference(leaf.leaf_claims(record))


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_module_but_the_entry_point_imports_rfc8785() -> None:
    importers = sorted(
        str(path.relative_to(SRC)) for path in SRC.rglob("*.py") if "rfc8785" in _imports(path)
    )
    assert importers == ["strictjson.py"]
