"""`strictjson.load_object`, the one parse of a JSON object every reader uses: each caller's
error class and words, braces in those words kept as written."""

from __future__ import annotations

import pytest

from capability_anchor import strictjson
from capability_anchor.errors import ClaimsError, MalformedJSON


def test_an_object_comes_back_as_parsed() -> None:
    assert strictjson.load_object(b'{"a": [1, "x"]}', "doc") == {"a": [1, "x"]}


def test_invalid_json_is_the_callers_error_with_the_parsers_detail() -> None:
    with pytest.raises(ClaimsError, match=r"^doc is not valid JSON: duplicate member name 'a'$"):
        strictjson.load_object(b'{"a": 1, "a": 2}', "doc", error=ClaimsError)


@pytest.mark.parametrize(("text", "kind"), [(b"[]", "array"), (b'"x"', "string"), (b"1", "number")])
def test_a_value_that_is_no_object_is_refused_naming_its_type(text: bytes, kind: str) -> None:
    with pytest.raises(MalformedJSON, match=r"^doc is not a JSON object$"):
        strictjson.load_object(text, "doc")
    with pytest.raises(ClaimsError, match=rf"^the payload is a JSON {kind}, not an object$"):
        strictjson.load_object(
            text,
            "the payload",
            error=ClaimsError,
            not_object="{what} is a JSON {type}, not an object",
        )


def test_braces_in_the_words_and_the_name_are_kept_as_written() -> None:
    shape = "file {x}.json is not {v: '0.2', iss, records: [JWS]}"
    with pytest.raises(ClaimsError) as caught:
        strictjson.load_object(b"[]", "file {x}.json", error=ClaimsError, not_object=shape)
    assert str(caught.value) == shape
    with pytest.raises(ClaimsError) as caught:
        strictjson.load_object(b"{", "{detail}", error=ClaimsError)
    assert str(caught.value).startswith("{detail} is not valid JSON: Expecting property name")
