"""Each answer's Struct (`api/models.py`) is its one definition: every real answer decodes
strictly into it (closed Structs forbid unknown fields, every field is required), and the
documents that must be RFC 8785 still are. The JCS fast path `caching.answer` uses
(`strictjson.canonical(plain=True)`) is RFC 8785's for the values those answers hold: every
code point, and generated answers of that form."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient

from capability_anchor.api import models as m
from capability_anchor.api.app import create_app
from capability_anchor.api.caching import answer, ordered_answer, shaped
from capability_anchor.api.settings import Settings
from capability_anchor.web.errors import ErrorBody
from tests.kit.apikit import build_history, insert_stamp, rec
from tests.kit.hypo import examples

CANONICAL = True
"""The answer is an RFC 8785 document (signed, or ETagged, or both)."""


def _calls(h: Any) -> list[tuple[str, str, dict[str, Any], Any, bool]]:
    x_hash = h.leaf_hashes(h.d2)[5].hex()
    return [
        ("GET", "/healthz", {}, m.Health, False),
        ("GET", "/roots", {}, m.RootsListing, CANONICAL),
        ("GET", "/roots/latest", {}, m.HeadDocument, CANONICAL),
        ("GET", f"/roots/{h.d2}", {}, m.HeadDocument, CANONICAL),
        ("GET", f"/roots/{h.today}/4", {}, m.HeadDocument, CANONICAL),
        ("GET", f"/roots/{h.d2}/timestamps", {}, m.TimestampsDocument, CANONICAL),
        ("GET", f"/proof?day={h.d2}&index=1", {}, m.ProofAnswer, CANONICAL),
        ("GET", f"/proof?leaf_hash={x_hash}", {}, m.ProofAnswer, CANONICAL),
        ("GET", f"/consistency?day={h.d2}&first=3&second=6", {}, m.ConsistencyAnswer, CANONICAL),
        ("GET", f"/entries/{h.today}", {}, m.EntriesListing, CANONICAL),
        ("GET", "/keys", {}, m.Jwks, CANONICAL),
        ("GET", "/keys/records", {}, m.KeyRecords, CANONICAL),
        ("GET", "/record?id=example:a-0", {}, m.ServerRecord, CANONICAL),
        ("GET", "/roots/1999-01-01", {}, ErrorBody, False),
        ("POST", "/prove", {"json": {"record": h.x}}, m.ProofAnswer, CANONICAL),
        ("POST", "/records", {"json": {"records": [rec("doc", 0)]}}, m.RecordsAnswer, False),
        (
            "POST",
            "/records?prove=1",
            {"json": {"records": [rec("doc", 1)]}},
            m.ProvedRecordsAnswer,
            False,
        ),
        ("POST", "/checkpoint", {}, m.HeadDocument, CANONICAL),
    ]


@pytest.mark.parametrize("body_workers", [0, 1], ids=["in-process", "worker-process"])
def test_every_answer_decodes_strictly_into_its_struct(tmp_path: Path, body_workers: int) -> None:
    h = build_history(tmp_path / "data")
    insert_stamp(h.data, h.d2, "https://tsa.example", b"0\x00", "2026-01-01T00:00:00Z")
    settings_ = Settings(
        data_dir=h.data,
        background=False,
        rate_limit=0,
        clock=h.clock,
        body_workers=body_workers,
    )
    auth = {"Authorization": f"Bearer {h.token}"}
    with TestClient(create_app(settings_)) as client:
        for method, url, extra, model, canonical in _calls(h):
            r = client.request(method, url, headers=auth, **extra)
            assert r.status_code == (404 if model is ErrorBody else 200), (url, r.text)
            decoded = msgspec.json.decode(r.content, type=model, strict=True)
            # Nothing the Struct does not name (closed Structs refuse it above), nothing
            # it names missing, and the members as the Struct orders them where no
            # canonical form orders them.
            plain = json.loads(r.content)
            if model is m.ServerRecord:  # open: what the writer gave besides them
                assert set(msgspec.structs.asdict(decoded)) <= set(plain), url
            else:
                assert msgspec.to_builtins(decoded) == plain, url
            if canonical:
                assert rfc8785.dumps(plain) == r.content, url
            elif model is not m.Health:
                assert msgspec.json.encode(decoded) == r.content, url


def test_a_reader_answer_that_grew_a_member_is_refused_not_trimmed() -> None:
    """A member the Struct does not name is a bug to find (a 500 in the tests), never a
    member silently dropped from a signed or ETagged document."""
    proof = {"type": "rfc9162-sha256", "leaf_index": 0, "tree_size": 1, "path": []}
    good = {"v": "0.2", "anchor": {"day": "2026-01-01", "root": "00", "url": "u"}}
    assert shaped(m.ProofAnswer, {**good, "proof": proof}).proof.tree_size == 1
    with pytest.raises(msgspec.ValidationError, match="unknown field `extra`"):
        answer(m.ProofAnswer, {**good, "proof": {**proof, "extra": 1}})
    with pytest.raises(msgspec.ValidationError, match="missing required field `proof`"):
        answer(m.ProofAnswer, good)
    entry = {"day": "2026-01-01", "leaf_index": 0, "leaf_hash": "00", "duplicate": False}
    assert (
        ordered_answer(list[m.AppendedEntry], [entry])
        == json.dumps([entry], separators=(",", ":")).encode()
    )


def test_the_answers_fast_path_writes_every_code_point_as_rfc8785() -> None:
    scalars = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for start in range(0, len(scalars), 0x10000):
        text = "".join(map(chr, scalars[start : start + 0x10000]))
        assert answer(str, text) == rfc8785.dumps(text), hex(scalars[start])


_NAMES = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=8)
_SCALARS = (
    st.text() | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1) | st.booleans() | st.none()
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_NAMES, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=examples(300), deadline=None, database=None)
@given(value=_VALUES)
def test_the_answers_fast_path_is_rfc8785_for_ascii_names_strings_and_integers(value: Any) -> None:
    """The answers `caching.answer` encodes hold ASCII member names and strings, integers,
    booleans and lists (a proof's path, a listing's days): RFC 8785 writes them so too."""
    assert answer(Any, value) == rfc8785.dumps(value)
