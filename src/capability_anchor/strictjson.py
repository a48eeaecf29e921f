"""Strict JSON: one meaning per document read, one spelling per document written; the kernel under
every other module (imports only `errors` and `rfc8785`).

`loads` refuses the same text the same way everywhere (non-UTF-8, a BOM, duplicate names, NaN,
overflow, lone surrogates); `canonical` writes RFC 8785 (JCS) bytes, its fast path held
byte-identical to `rfc8785` by tests/unit/test_jcs.py and test_prepare_fast.py."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any, Final, NoReturn, TypeGuard

import rfc8785

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
            if not _encodes(item):
                raise MalformedJSON("a string contains a lone surrogate")
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


# A number token that may not fit a double has a run of 100 digits or an exponent of 3 or
# more digits: anything else is below 10^100 x 10^99, which a double holds. Found by mapping
# digits to 0, e/E to e and signs to +, then plain substring search (~50x faster than a
# regex). Digits inside strings can only cause a false alarm, which costs time, not meaning.
_NUMBER_SHAPES = bytes.maketrans(b"0123456789eE+-", b"0000000000ee++")
_SUSPECT_SHAPES = (b"0" * 100, b"e000", b"e+000")


def _numbers_need_hooks(text: str) -> bool:
    shapes = text.encode("utf-8", "surrogatepass").translate(_NUMBER_SHAPES)
    return any(shape in shapes for shape in _SUSPECT_SHAPES)


def loads(data: str | bytes | bytearray, *, allow_lone_surrogates: bool = False) -> Any:
    """Parse strict JSON; `MalformedJSON` says what is wrong and where."""
    # Strict UTF-8 text, no byte order mark.
    if isinstance(data, bytes | bytearray):
        if data.startswith(b"\xef\xbb\xbf"):
            raise MalformedJSON("text starts with a UTF-8 byte order mark")
        try:
            text = bytes(data).decode("utf-8", errors="strict")
        except UnicodeDecodeError as exc:
            raise MalformedJSON(
                f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"
            ) from None
    elif isinstance(data, str):
        if data.startswith("\ufeff"):
            raise MalformedJSON("text starts with a byte order mark (U+FEFF)")
        text = data
    else:
        raise MalformedJSON(f"JSON text must be str or bytes, got {type(data).__name__}")
    return _strict_loads(text, allow_lone_surrogates, number_hooks=_numbers_need_hooks(text))


def _strict_loads(text: str, allow_lone_surrogates: bool, *, number_hooks: bool = True) -> Any:
    try:
        value = json.loads(
            text,
            object_pairs_hook=_reject_duplicates,
            parse_constant=_reject_constant,
            parse_float=_parse_float if number_hooks else None,
            parse_int=_parse_int if number_hooks else None,
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


def load_object(
    data: str | bytes | bytearray,
    what: str,
    *,
    error: Callable[[str], Exception] = MalformedJSON,
    invalid: str = "{what} is not valid JSON: {detail}",
    not_object: str = "{what} is not a JSON object",
) -> dict[str, Any]:
    """Parse strict JSON that must be an object; else `error`, worded by the caller's templates."""
    try:
        value = loads(data)
    except MalformedJSON as exc:
        raise error(_fill(invalid, what=what, detail=str(exc))) from None
    if not isinstance(value, dict):
        raise error(_fill(not_object, what=what, type=json_type_name(value)))
    return value


_PLACEHOLDER = re.compile(r"\{(what|detail|type)\}")


def _fill(template: str, **values: str) -> str:
    # Not str.format: a message may hold braces of its own (`{v, iss, records}`).
    return _PLACEHOLDER.sub(lambda m: values[m[1]], template)


def canonical(value: Any, *, plain: bool = False) -> bytes:
    """The RFC 8785 (JCS) bytes of a JSON value. `plain=True` promises `is_plain(value)`: sorted
    `json.dumps` is then the same bytes, ~4x faster. Raises ValueError or TypeError for what JCS
    cannot write."""
    if plain:
        return _dumps_plain(value)
    data: bytes = rfc8785.dumps(value)
    return data


_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # `raw_decode`, unwrapped


def members(data: bytes) -> tuple[dict[str, str], dict[str, Any]]:
    """The top-level members of an RFC 8785 object as written there (name -> `"name":value`),
    for `joined` to splice others into without writing these again, and the object itself
    (read in the same pass); ValueError if not one."""
    text = data.decode("utf-8")
    found: dict[str, str] = {}
    values: dict[str, Any] = {}
    if len(text) < 2 or text[0] != "{" or text[-1] != "}":
        raise ValueError("not a JSON object")
    at, end = 1, len(text) - 1
    while at < end:
        name, colon = json.decoder.scanstring(text, at + 1)  # type: ignore[attr-defined]
        if text[at] != '"' or text[colon] != ":":
            raise ValueError(f"not RFC 8785 at offset {at}")
        try:
            values[name], stop = _SCAN(text, colon + 1)
        except StopIteration:
            raise ValueError(f"not RFC 8785 at offset {colon + 1}") from None
        if stop < end and text[stop] != ",":
            raise ValueError(f"not RFC 8785 at offset {stop}")
        found[name] = text[at:stop]
        at = stop + 1
    return found, values


def member(name: str, value: Any) -> str:
    """One member `"name":value` as RFC 8785 writes it; `name` one that JSON writes as itself
    (ASCII, no quote, backslash or control character)."""
    written = _as_is(value)
    if written is None:
        written = canonical(value, plain=is_plain(value)).decode("utf-8")
    return f'"{name}":{written}'


_ESCAPED = re.compile(r'[\x00-\x1f"\\\x7f]')  # what JSON escapes, and DEL (left to `canonical`)


def _bare(text: str) -> bool:
    """Whether JSON writes `text` between quotes as it is (printable ASCII, no `"` or `\\`)."""
    # (bytes.isalnum first: a hash's hex passes it in ~1 ns a byte, 6x faster than the regex)
    return text.isascii() and (text.encode().isalnum() or _ESCAPED.search(text) is None)


def _as_is(value: Any) -> str | None:
    """RFC 8785 of a safe integer, a string or list of strings JSON writes as they are, or an
    object of those under such names (a record's `anchor` and `proof`), written directly
    (`json`'s string escaping costs ~0.4 µs a hex hash here); None for any other value."""
    kind = type(value)
    if kind is int:
        return str(value) if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else None
    if kind is str:
        return f'"{value}"' if _bare(value) else None
    if kind is list:
        if not value:
            return "[]"
        if not _STR.issuperset(map(type, value)) or not _bare("".join(value)):
            return None
        return '["' + '","'.join(value) + '"]'
    if kind is not dict or not _STR.issuperset(map(type, value)):
        return None
    parts = []
    for name in sorted(value):  # ASCII names: code point order is UTF-16 order
        item = value[name]
        written = None if type(item) is dict or not _bare(name) else _as_is(item)
        if written is None:
            return None
        parts.append(f'"{name}":{written}')
    return "{" + ",".join(parts) + "}"


def joined(written: dict[str, str]) -> bytes:
    """The RFC 8785 object of members as `members`/`member` write them (names in UTF-16 order)."""
    names = sorted(written)  # code point order is UTF-16 order for these names:
    if not "".join(names).isascii():  # else sort by UTF-16 code units
        names.sort(key=lambda name: name.encode("utf-16-be"))
    return ("{" + ",".join([written[name] for name in names]) + "}").encode("utf-8")


# JCS writes integers only within the I-JSON range (RFC 7493 §2.2).
MAX_SAFE_INTEGER = 2**53 - 1


def is_plain(value: Any) -> bool:
    """True when sorted `json.dumps` spells `value` as RFC 8785 does (no float, ASCII names)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            if not _STR.issuperset(map(type, item)) or not "".join(item).isascii():
                return False
            stack.extend(item.values())
        elif kind is list:
            if not _STR.issuperset(map(type, item)):
                stack.extend(item)
                continue
            text = "".join(item)  # a list of strings (a proof's path) at once
            if not text.isascii() and not _encodes(text):
                return False
        elif kind is str:
            if not item.isascii() and not _encodes(item):  # ASCII holds no lone surrogate
                return False
        elif kind is int:
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                return False
        elif item is not None and kind is not bool:
            return False
    return True


Encoder = Callable[[Any], bytes]


def plain_canonical(
    value: object,
    *,
    omit: frozenset[str],
    max_depth: int,
    max_bytes: int,
    encode: Encoder | None = None,
) -> bytes | None:
    """The JCS bytes of `value` less its top-level members `omit`, when it is plain, at most
    `max_depth` deep and `max_bytes` long; None otherwise or in doubt (the caller's exact walk then
    decides). `encode` writes plain values as RFC 8785 does."""
    if type(value) is not dict or _plain_shape(value, 1, max_depth, 2 * max_bytes) < 0:
        return None
    write = _dumps_plain if encode is None else encode
    try:
        if omit.isdisjoint(value):
            data = write(value)
        else:
            write([value[k] for k in omit if k in value])  # refuses a lone surrogate there
            data = write({k: v for k, v in value.items() if k not in omit})
    except UnicodeEncodeError:
        return None
    return data if len(data) <= max_bytes else None


# One encoder for every call: `json.dumps` with these options builds a new one each time.
_PLAIN_ENCODER: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _dumps_plain(value: Any) -> bytes:
    return _PLAIN_ENCODER.encode(value).encode("utf-8")


_STR: Final = frozenset({str})


def _plain_shape(value: Any, depth: int, max_depth: int, budget: int) -> int:
    """`budget` less the values in `value` and below, when all plain and not too deep; else -1."""
    if depth > max_depth:
        return -1
    if type(value) is dict:
        if not _STR.issuperset(map(type, value)) or not "".join(value).isascii():
            return -1
        items = value.values()
    else:
        items = value
    budget -= len(value)
    if budget < 0:
        return -1
    for item in items:
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                continue
            return -1
        if kind is dict or kind is list:
            budget = _plain_shape(item, depth + 1, max_depth, budget)
            if budget >= 0:
                continue
        return -1
    return budget


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def json_type_name(value: object) -> str:
    """The JSON name of a value's type, for messages ("array", not "list")."""
    names: dict[type, str] = {
        dict: "object",
        list: "array",
        str: "string",
        int: "number",
        float: "number",
        bool: "boolean",
        type(None): "null",
    }
    return names.get(type(value), type(value).__name__)


def is_int(value: object) -> TypeGuard[int]:
    """An integer and not a bool: JSON's `true` is not the number 1."""
    return isinstance(value, int) and not isinstance(value, bool)
