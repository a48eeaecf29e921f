"""Strict JSON parsing: one meaning per document, for every JSON the project reads.

Records, JWS headers and claims, key files and JWK sets all go through `loads`, so the same
text is refused the same way everywhere: bytes must be UTF-8 (json.loads on bytes would
sniff UTF-16/32), no byte order mark, no duplicate member names (two parsers could pick
different values), no NaN/Infinity, no number that overflows a double, and no lone surrogate
unless the caller validates strings itself with a better location (records do).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NoReturn

from .errors import MalformedJSON

_MAX_QUOTE = 40


def _short(text: str) -> str:
    return text if len(text) <= _MAX_QUOTE else f"{text[:_MAX_QUOTE]}..."


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise MalformedJSON(f"duplicate member name {_short(key)!r}")
        result[key] = value
    return result


def _reject_constant(name: str) -> NoReturn:
    raise MalformedJSON(f"{name} is not a JSON number")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise MalformedJSON(f"number {_short(text)} overflows a double")
    return value


def _parse_int(text: str) -> int:
    # float() first: it is linear in the length, whereas int() of thousands of digits is
    # quadratic (and refused past 4300 digits); anything that overflows a double is refused
    # before int() ever sees it.
    if not math.isfinite(float(text)):
        raise MalformedJSON(f"number {_short(text)} overflows a double")
    return int(text)


def _check_strings(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise MalformedJSON("a string contains a lone surrogate") from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def decode_text(data: str | bytes | bytearray) -> str:
    """The text of a JSON document: strict UTF-8, no byte order mark."""
    if isinstance(data, bytes | bytearray):
        if data.startswith(b"\xef\xbb\xbf"):
            raise MalformedJSON("text starts with a UTF-8 byte order mark")
        try:
            return bytes(data).decode("utf-8", errors="strict")
        except UnicodeDecodeError as exc:
            raise MalformedJSON(
                f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"
            ) from None
    if isinstance(data, str):
        if data.startswith("\ufeff"):
            raise MalformedJSON("text starts with a byte order mark (U+FEFF)")
        return data
    raise MalformedJSON(f"JSON text must be str or bytes, got {type(data).__name__}")


# A JSON string token, for counting what lies outside strings (unrolled loop: linear time).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
# Outside strings, a re-encoded value shows a number that may not be finite as NaN or
# Infinity, and one that may overflow a double as a run of as many digits as 1e308 has
# (found as a substring once every digit is mapped to 0: a regex is ~20x slower).
_ZEROS = bytes.maketrans(b"0123456789", b"0" * 10)
_LONG_DIGITS = b"0" * 309


def loads(data: str | bytes | bytearray, *, allow_lone_surrogates: bool = False) -> Any:
    """Parse strict JSON; raise `MalformedJSON` saying what is wrong and where."""
    text = decode_text(data)
    value = _fast_loads(text, allow_lone_surrogates)
    if value is not _SLOW:
        return value
    return _strict_loads(text, allow_lone_surrogates)


_SLOW: Any = object()


def _fast_loads(text: str, allow_lone_surrogates: bool) -> Any:
    """The C parser without hooks, then whole-document checks at C speed; `_SLOW` unless
    the document is certainly valid. Per-token Python hooks cost ~7 s for a 4 MiB array of
    zeros, this ~50 ms. Any doubt falls back to `_strict_loads`, which decides and words
    the error, so both accept exactly the same documents and give the same values.

    Duplicates: outside strings a `:` separates exactly one member, so the source has
    duplicate names exactly when it has more such colons than the parsed objects have
    members, counted in the C encoder's output of the value."""
    try:
        value = json.loads(text)
        encoded = json.dumps(value)  # ensure_ascii: lone surrogates are escaped, not raised
    except (ValueError, RecursionError):  # JSONDecodeError, or an int past 4300 digits
        return _SLOW
    outside = _STRING.sub("", encoded)
    if "NaN" in outside or "Infinity" in outside:
        return _SLOW
    if _LONG_DIGITS in outside.encode("ascii").translate(_ZEROS):
        return _SLOW
    if _STRING.sub("", text).count(":") != outside.count(":"):
        return _SLOW
    if not allow_lone_surrogates:
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return _SLOW
    return value


def _strict_loads(text: str, allow_lone_surrogates: bool) -> Any:
    """Hooks on every token: slow, but says exactly what is wrong and where."""
    try:
        value = json.loads(
            text,
            object_pairs_hook=_reject_duplicates,
            parse_constant=_reject_constant,
            parse_float=_parse_float,
            parse_int=_parse_int,
        )
    except json.JSONDecodeError as exc:
        raise MalformedJSON(
            f"{exc.msg} at line {exc.lineno} column {exc.colno} (char {exc.pos})"
        ) from None
    except RecursionError:
        raise MalformedJSON("nested too deeply to parse") from None
    if not allow_lone_surrogates:
        _check_strings(value)
    return value
