"""Records, leaf claims and leaf bytes (SPEC §2), pure: no I/O, no clock.

The whole record is held to I-JSON (RFC 7493) and the leaf is the RFC 8785 (JCS) form of its claims,
so anyone in any language recomputes a leaf hash from the record alone. `parse_json` /
`parse_record` take JSON text; `validate_record` / `leaf_bytes` / `leaf_hash` a decoded value."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any, NoReturn

from capability_anchor import strictjson

from .errors import InvalidRecord, MalformedJSON
from .merkle import hash_leaf
from .strictjson import MAX_SAFE_INTEGER, Encoder, json_type_name

RESERVED_MEMBERS = frozenset({"iat", "exp", "anchor", "proof", "jws", "expires"})
"""Top-level members a resolver adds when it issues a record; they never reach the leaf."""

MAX_LEAF_BYTES = 16384
MAX_DEPTH = 32
"""The top-level object is depth 1; each object or array value inside adds 1."""

# The walk compares exact types, not isinstance: str, dict, list and the keys of
# _SCALAR_BYTES are the only types json.loads produces, and a subclass (an OrderedDict, a
# str Enum, a list with its own __iter__) could serialise differently from what was validated.

# Characters that would make an error message unprintable or misleading.
_UNSAFE_IN_MESSAGE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_MAX_SEGMENT_CHARS = 40


# --- error locations -------------------------------------------------------------------------


def _segment(name: str) -> str:
    """One JSON Pointer (RFC 6901) member segment, shortened and made safe to print."""
    text = name if len(name) <= _MAX_SEGMENT_CHARS else name[:_MAX_SEGMENT_CHARS] + "..."
    text = text.replace("~", "~0").replace("/", "~1")
    return _UNSAFE_IN_MESSAGE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def _fail(path: str, problem: str) -> NoReturn:
    where = f"at {path}" if path else "at the top level"
    raise InvalidRecord(f"invalid record {where}: {problem}")


def _describe_int(value: int) -> str:
    # str() of an int over 4300 digits raises ValueError in Python >= 3.11; describe it instead.
    if value.bit_length() > 200:
        return f"integer of about {int(value.bit_length() * math.log10(2))} digits"
    return f"number {value}"


def _check_text(text: str, where: Any, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code_point = ord(text[exc.start])
        _fail(
            _pointer(where),
            f"{what} contains a lone surrogate U+{code_point:04X} at character {exc.start}",
        )


def _check_number(value: int | float, where: Any) -> None:
    if isinstance(value, float):
        if not math.isfinite(value):
            _fail(_pointer(where), f"number {value!r} is not finite")
        if abs(value) > MAX_SAFE_INTEGER:
            _fail(_pointer(where), f"number {value!r} exceeds 2^53-1 in magnitude")
    # Rounding to the nearest double is monotone and 2^53 is a double, so an int's double
    # exceeds 2^53-1 exactly when the int does; comparing ints avoids float(), which raises
    # OverflowError past 1.8e308.
    elif abs(value) > MAX_SAFE_INTEGER:
        _fail(_pointer(where), f"{_describe_int(value)} exceeds 2^53-1 in magnitude")


# --- validation ------------------------------------------------------------------------------


def validate_record(record: object) -> dict[str, Any]:
    """Check the record against SPEC §2; `InvalidRecord` names the first problem and where."""
    _walk(record)
    return record  # type: ignore[return-value]  # _walk proved it is a dict


# A location is built only when something fails: a chain of (parent, segment) pairs.
# Array positions stay ints until a pointer is built.
_Where = tuple[Any, str | int] | None


def _pointer(where: _Where) -> str:
    parts: list[str] = []
    while where is not None:
        where, segment = where
        parts.append(str(segment))
    return "".join(f"/{_segment(p)}" for p in reversed(parts))


# `leaf_bytes` stops walking once a lower bound on the leaf's size passes this: twice the
# limit, so a leaf just over it still gets its exact size in the message, while a hostile
# record (a 4 MiB array of zeros) is refused after a bounded amount of work.
_EARLY_STOP_BYTES = 2 * MAX_LEAF_BYTES
# Lower bounds on the JCS bytes of scalars: `1` for any number, `true`, `false`, `null`.
_SCALAR_BYTES: dict[type, int] = {int: 1, float: 1, bool: 4, type(None): 4}
_NUMBERS = frozenset({int, float})


def _too_large() -> NoReturn:
    raise InvalidRecord(
        f"leaf bytes are more than {_EARLY_STOP_BYTES} bytes long, "
        f"over the limit of {MAX_LEAF_BYTES}"
    )


_MORE = object()  # marks an iterator entry of the walk's stack
_EAGER = 64  # containers with more children than this are walked through an iterator


# Generators made by functions, so each binds its own container's location (a generator
# expression in the loop would read the loop's variable when it runs).
def _member_steps(members: dict[str, Any], where: _Where) -> Iterator[tuple[object, _Where]]:
    return ((item, (where, key)) for key, item in members.items())


def _item_steps(items: list[Any], where: _Where) -> Iterator[tuple[object, _Where]]:
    return ((item, (where, i)) for i, item in enumerate(items))


def _scalar_run_size(items: list[Any]) -> int | None:
    """For an array of only integers, or only strings, that are all valid: a lower bound of
    its JCS size less the brackets, found at C speed (an array of zeros is the cheapest
    hostile input there is). None for any other array, or any doubt: the item-by-item walk
    then decides, and names the first bad item."""
    if len(items) < 16:
        return None
    kinds = set(map(type, items))
    if kinds == {int}:
        if max(items) > MAX_SAFE_INTEGER or min(items) < -MAX_SAFE_INTEGER:
            return None
        return 2 * len(items) - 1  # a digit each, and the commas
    if kinds == {str}:
        try:
            # Python strings never pair surrogates across a join: each lone one still fails.
            "".join(items).encode("utf-8")
        except UnicodeEncodeError:
            return None
        return sum(map(len, items)) + 3 * len(items) - 1  # quotes, commas
    return None


def _not_an_object(record: object) -> NoReturn:
    raise InvalidRecord(f"a record must be a JSON object, got {json_type_name(record)}")


def _walk(record: object, size_limit: int | None = None) -> bool:
    """Validate; True when the record is `strictjson.is_plain` (its leaf bytes may take the JCS fast
    path). With `size_limit`, stop once a lower bound of the leaf claims' JCS size exceeds it."""
    plain = True
    size = 2
    limit = size_limit if size_limit is not None else -1
    # Iterative walk: hostile input (or a list that contains itself) must not reach Python's
    # recursion limit, and the depth cap stops a cycle before memory grows. An entry is a
    # value to check: (value, where, depth, counts toward the size). A large container's
    # children are not copied onto the stack but left in an iterator entry, (_MORE,
    # iterator of (value, where), depth, counted; None: each counts unless reserved).
    # This loop is on the append path: strings and scalars, most of a record, are checked
    # inline; a container costs one call (`_object`, `_array`) that stacks its children.
    if type(record) is not dict:
        _not_an_object(record)
    stack: list[tuple[Any, Any, int, bool | None]] = [(record, None, 1, False)]
    while stack:
        value, where, depth, counted = stack.pop()
        if value is _MORE:
            _resume(stack, where, depth, counted)
            continue
        kind = type(value)
        # Exact types, so the branches cannot meet a subclass; anything else is no JSON value.
        if kind is str:
            _check_text(value, where, "string")
            if counted:
                size += len(value) + 2
        elif kind is dict:
            size, names_plain = _object(value, where, depth, counted, stack, size, limit)
            plain &= names_plain
        elif kind is list:
            size = _array(value, where, depth, counted, stack, size, limit)
        elif kind in _SCALAR_BYTES:
            if counted:
                size += _SCALAR_BYTES[kind]
            if kind in _NUMBERS:
                plain &= kind is int
                _check_number(value, where)
        else:
            _fail(_pointer(where), f"{kind.__name__} is not a JSON value")
        if size > limit >= 0:
            _too_large()
    return plain


def _resume(
    stack: list[tuple[Any, Any, int, bool | None]],
    steps: Iterator[tuple[object, Any]],
    depth: int,
    counted: bool | None,
) -> None:
    """An iterator entry: its next child goes on the stack above it; a spent one is dropped."""
    step = next(steps, None)
    if step is None:
        return
    stack.append((_MORE, steps, depth, counted))
    value, where = step
    if counted is None:
        counted = where[1] not in RESERVED_MEMBERS
    stack.append((value, where, depth, counted))


def _object(
    value: dict[Any, Any],
    where: _Where,
    depth: int,
    counted: bool | None,
    stack: list[tuple[Any, Any, int, bool | None]],
    size: int,
    limit: int,
) -> tuple[int, bool]:
    """Check an object's names and stack its values; the size so far, and whether all are ASCII."""
    if depth > MAX_DEPTH:
        _fail(_pointer(where), f"nesting depth {depth} exceeds the limit of {MAX_DEPTH}")
    top = where is None
    if counted:
        size += 2
    # Every name first, then the values, as before: the problem reported first does not
    # depend on the size limit for records within it.
    for key in value:
        if type(key) is not str:
            _fail(_pointer(where), f"member name {key!r} is {type(key).__name__}, not a string")
        _check_text(key, (where, key), "member name")
        if counted or (top and key not in RESERVED_MEMBERS):
            size += len(key) + 3
            if size > limit >= 0:
                _too_large()
    plain = "".join(value).isascii()  # every name is a str by now
    if len(value) > _EAGER:
        stack.append((_MORE, _member_steps(value, where), depth + 1, None if top else counted))
    elif top:
        # Only the top-level object's reserved members stay out of the leaf.
        stack.extend(
            (item, (where, key), 2, key not in RESERVED_MEMBERS)
            for key, item in reversed(value.items())
        )
    else:
        stack.extend(
            (item, (where, key), depth + 1, counted) for key, item in reversed(value.items())
        )
    return size, plain


def _array(
    value: list[Any],
    where: _Where,
    depth: int,
    counted: bool | None,
    stack: list[tuple[Any, Any, int, bool | None]],
    size: int,
    limit: int,
) -> int:
    """Check an array's depth and stack its items (or size a run of scalars); the size so far."""
    if depth > MAX_DEPTH:
        _fail(_pointer(where), f"nesting depth {depth} exceeds the limit of {MAX_DEPTH}")
    if counted:
        size += 2
    # Past the limit, only the items before it matter (the walk would stop there): at least
    # one byte and a comma each, so this prefix is surely past it.
    room = limit - size if counted and limit >= 0 else len(value) * 2
    head = value if len(value) <= room // 2 + 2 else value[: room // 2 + 2]
    bulk = _scalar_run_size(head)
    if bulk is not None:
        if counted:
            size += bulk
    elif len(value) > _EAGER:
        stack.append((_MORE, _item_steps(value, where), depth + 1, counted))
    else:
        stack.extend(
            (value[i], (where, i), depth + 1, counted) for i in range(len(value) - 1, -1, -1)
        )
    return size


# --- leaves ----------------------------------------------------------------------------------


def leaf_claims(record: object) -> dict[str, Any]:
    """The record minus the reserved top-level members (a shallow copy; not validated)."""
    if type(record) is not dict:
        _not_an_object(record)
    return {key: value for key, value in record.items() if key not in RESERVED_MEMBERS}


def leaf_bytes(record: object) -> bytes:
    """RFC 8785 canonical UTF-8 of the record's leaf claims (SPEC §2)."""
    fast = plain_leaf_bytes(record)
    return fast if fast is not None else walked_leaf_bytes(record)


def walked_leaf_bytes(record: object) -> bytes:
    """`leaf_bytes` through the exact walk: every record, and every refusal's message."""
    plain = _walk(record, _EARLY_STOP_BYTES)
    claims = leaf_claims(record)
    try:
        # The walk has just validated the record, so it knows whether the fast path holds.
        data = strictjson.canonical(claims, plain=plain)
    except (ValueError, TypeError, RecursionError) as exc:
        # validate_record already excludes what rfc8785 refuses; this keeps the promise that
        # only InvalidRecord leaves this module should the two ever disagree.
        raise InvalidRecord(f"record cannot be canonicalised: {exc}") from None
    if len(data) > MAX_LEAF_BYTES:
        raise InvalidRecord(
            f"leaf bytes are {len(data)} bytes long, over the limit of {MAX_LEAF_BYTES}"
        )
    return data


def plain_leaf_bytes(record: object, encode: Encoder | None = None) -> bytes | None:
    """`leaf_bytes` of a plain record at C speed (`strictjson.plain_canonical`), else None."""
    return strictjson.plain_canonical(
        record, omit=RESERVED_MEMBERS, encode=encode, max_depth=MAX_DEPTH, max_bytes=MAX_LEAF_BYTES
    )


def leaf_hash(record: object) -> bytes:
    """SHA-256(0x00 || leaf bytes)."""
    return hash_leaf(leaf_bytes(record))


# --- JSON text -------------------------------------------------------------------------------


def parse_json(data: str | bytes) -> Any:
    """Parse strict JSON text (`strictjson`); `InvalidRecord` with line and column. Surrogates,
    number range and depth are record rules, checked by `validate_record`: use `parse_record` for
    records."""
    try:
        return strictjson.loads(data, allow_lone_surrogates=True)
    except MalformedJSON as exc:
        detail = str(exc)
        if detail.startswith("nested too deeply"):
            detail += f" (the limit for records is {MAX_DEPTH})"
        raise InvalidRecord(f"invalid JSON: {detail}") from None


def parse_record(data: str | bytes) -> dict[str, Any]:
    """Parse JSON text strictly and validate it as a record (SPEC §2)."""
    return validate_record(parse_json(data))
