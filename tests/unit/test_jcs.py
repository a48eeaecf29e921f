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
from capability_anchor.head import proof_json, proof_member
from tests.kit.hypo import examples
from tests.kit.paths import ROOT
from tests.kit.recordgen import ANY_JSON, ASCII_TEXT, BOUND, INTS, PLAIN_JSON, TEXT

SRC = ROOT / "src" / "capability_anchor"


def reference(value: Any) -> bytes | None:
    try:
        return bytes(rfc8785.dumps(value))
    except (ValueError, TypeError):
        return None


@settings(max_examples=examples(600), deadline=None)
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


@settings(max_examples=examples(600), deadline=None)
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


@settings(max_examples=examples(400), deadline=None)
@given(st.dictionaries(TEXT, ANY_JSON, max_size=6))
def test_leaf_bytes_are_rfc8785_of_the_leaf_claims(record: dict[str, Any]) -> None:
    """The leaf's walk decides the fast path for itself (`leaf._walk`): whatever it decides,
    a valid record's leaf bytes are the library's."""
    try:
        got = leaf.leaf_bytes(record)
    except InvalidRecord:
        return
    assert got == reference(leaf.leaf_claims(record))


RECORD_MEMBERS = st.sampled_from(["iat", "exp", "anchor", "proof", "expires", "jws", "a", "~"])


@settings(max_examples=examples(400), deadline=None)
@given(st.dictionaries(TEXT, ANY_JSON, max_size=6), st.dictionaries(RECORD_MEMBERS, ANY_JSON))
def test_members_spliced_into_rfc8785_bytes_are_rfc8785(
    stored: dict[str, Any], added: dict[str, Any]
) -> None:
    """`/record`'s answer: members set into the RFC 8785 bytes of stored claims, never
    written again (`jws.record_answer`), are the bytes of the merged object."""
    data, want = reference(stored), reference({**stored, **added})
    if data is None or want is None:
        return
    members, values = strictjson.members(data)
    assert strictjson.joined(members) == data and values == stored
    extra = {name: strictjson.member(name, value) for name, value in added.items()}
    assert strictjson.joined(members | extra) == want


HEX = st.binary(min_size=32, max_size=32).map(bytes.hex)
STRINGS = st.one_of(HEX, ASCII_TEXT, TEXT)
FLAT = st.one_of(INTS, STRINGS, st.lists(STRINGS, max_size=4))


@settings(max_examples=examples(600), deadline=None)
@given(st.one_of(FLAT, st.dictionaries(st.one_of(ASCII_TEXT, TEXT), FLAT, max_size=5)))
def test_a_member_written_as_is_is_rfc8785(value: Any) -> None:
    """`member` writes a record's `anchor` and `proof` (names and strings JSON writes as they
    are, integers, lists of such strings) directly: the same bytes as the library's."""
    want = reference(value)
    if want is None:
        with pytest.raises((ValueError, TypeError)):
            strictjson.member("proof", value)
    else:
        assert strictjson.member("proof", value) == '"proof":' + want.decode("utf-8")


@settings(max_examples=examples(300), deadline=None)
@given(
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**63 - 1),
    st.lists(st.binary(min_size=32, max_size=32), max_size=64),
)
def test_a_proof_member_written_directly_is_the_member(
    leaf_index: int, tree_size: int, path: list[bytes]
) -> None:
    """`/record`'s `proof` member (`head.proof_member`): `member` of `proof_json`, also past
    the safe integers (where both refuse)."""
    try:
        want = strictjson.member("proof", proof_json(leaf_index, tree_size, path))
    except ValueError:
        with pytest.raises(ValueError):
            proof_member(leaf_index, tree_size, path)
        return
    assert proof_member(leaf_index, tree_size, path) == want


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
