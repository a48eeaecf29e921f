"""The record rule: what a log accepts beyond SPEC §2, by its config's `records`: `observation` (a
Capability Resolution 0.2 observation, SPEC §13.1; the rule: docs/reference/formats.md) or `any`
(any object SPEC §2 allows; also logs made before the rule). The shape is a msgspec Struct whose
patterns are the OpenAPI schema's too; the forbidden members and the two time rules are checked
beside it; every error names the member and its rule."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

import msgspec

from capability_anchor.encoding import utc_second
from capability_anchor.errors import InvalidRecord, UsageError

from .fast import accepts, whole_second
from .patterns import (
    CHECKED_AT_PATTERN,
    CHECKED_AT_SKEW,
    DAY_PATTERN,
    FORBIDDEN,
    LOCAL_MAX,
    NAMESPACE_PATTERN,
    STATUSES,
    URL_PATTERN,
    sub_pattern,
)
from .urls import canonical_url

OBSERVATION: Final = "observation"
ANY: Final = "any"
RULES: Final = (OBSERVATION, ANY)
CONFIG_KEY: Final = "records"
NAMESPACE_KEY: Final = "id_namespace"
# The rule of a log whose config has no `records` member: one created before the rule existed,
# whose writers must not start being refused by an upgrade.
LEGACY_RULE: Final = ANY

CHECKED_AT_FORMAT: Final = "cr-checked-at"
FIRST_SEEN_FORMAT: Final = "cr-first-seen"

_URL_RE = re.compile(URL_PATTERN)

_SUB_RULE = (
    "a namespace of 1 to 32 of a-z, 0-9 and -, then a local part of 1 to "
    f"{LOCAL_MAX} characters, none of them whitespace or a control character"
)
# Each member's rule, as the error states it.
MEMBER_RULES: Final[Mapping[str, str]] = {
    "v": 'must be "0.2"',
    "sub": f"must be <namespace>:<local> (Capability Resolution §4): {_SUB_RULE}",
    "url": "must be a canonical https server URL (Capability Resolution §4)",
    "status": "must be one of " + ", ".join(STATUSES),
    "checked_at": "must be RFC 3339 UTC, YYYY-MM-DDTHH:MM:SS[.fraction]Z",
    "evidence": "must be an object",
    "name": "must be a string when present",
    "first_seen": "must be a date YYYY-MM-DD when present",
}
_CHECKED_AT_DOC = (
    "RFC 3339 UTC, YYYY-MM-DDTHH:MM:SS[.fraction]Z, a real instant. Format cr-checked-at: no "
    f"later than the log's clock when it accepts the record + {CHECKED_AT_SKEW} s "
    "(Capability Resolution §9.6)."
)
_FIRST_SEEN_DOC = (
    "A real date YYYY-MM-DD. Format cr-first-seen: no later than the day of checked_at."
)
_RECORD_DOC = (
    "A Capability Resolution 0.2 observation (SPEC §13.1): its record token is a CR 0.2 "
    "token. Other members are kept, except need and constraints (CR §8); reserved members "
    "(iat, exp, anchor, proof, jws, expires) are not part of the leaf (SPEC §2)."
)


def _sub_doc(namespace: str | None) -> str:
    where = f"{namespace}, this log's id namespace" if namespace else "a namespace"
    return (
        f"the server ID, <namespace>:<local>: {where}, then a local part of 1 to {LOCAL_MAX} "
        "characters without whitespace or control characters"
    )


Sub = Annotated[str, msgspec.Meta(pattern=sub_pattern(), description=_sub_doc(None))]


class Observation(msgspec.Struct, frozen=True):
    """A CR 0.2 observation's members; others are allowed and kept (the leaf is the record sent)."""

    v: Literal["0.2"]
    sub: Sub
    url: Annotated[
        str,
        msgspec.Meta(
            pattern=URL_PATTERN,
            description="the server's canonical URL (Capability Resolution §4): https, no "
            "credentials, a lower-case host without a leading www., no :443, no query, "
            "fragment or trailing slash",
        ),
    ]
    status: Literal["ok", "sign_in", "down", "unknown"]
    checked_at: Annotated[
        str,
        msgspec.Meta(
            pattern=CHECKED_AT_PATTERN,
            description=_CHECKED_AT_DOC,
            extra_json_schema={"format": CHECKED_AT_FORMAT},
        ),
    ]
    evidence: dict[str, Any]
    name: str | msgspec.UnsetType = msgspec.UNSET
    first_seen: (
        Annotated[
            str,
            msgspec.Meta(
                pattern=DAY_PATTERN,
                description=_FIRST_SEEN_DOC,
                extra_json_schema={"format": FIRST_SEEN_FORMAT},
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET


REQUIRED: Final = tuple(f.name for f in msgspec.structs.fields(Observation) if f.required)


@functools.lru_cache(maxsize=16)
def observation_type(namespace: str | None = None) -> type[Observation]:
    """The rule's Struct: `Observation`, or with `sub` held to a pinned namespace."""
    if namespace is None:
        return Observation
    pinned = Annotated[
        str, msgspec.Meta(pattern=sub_pattern(namespace), description=_sub_doc(namespace))
    ]
    made = msgspec.defstruct("Observation", [("sub", pinned)], bases=(Observation,), frozen=True)
    assert issubclass(made, Observation)
    return made


def check_namespace(namespace: str) -> str:
    if not isinstance(namespace, str) or not re.fullmatch(NAMESPACE_PATTERN, namespace):
        raise UsageError(
            "an id namespace must be 1 to 32 of a-z, 0-9 and - (Capability Resolution §4), "
            f"got {namespace!r}"
        )
    return namespace


def rules_of(config: Mapping[str, Any]) -> tuple[str, str | None]:
    """The record rule a log's stored config names (LEGACY_RULE when it names none) and the id
    namespace it pins (`init --id-namespace`), if any."""
    rule = config.get(CONFIG_KEY, LEGACY_RULE)
    if rule not in RULES:
        raise UsageError(
            f"the log's config names records {rule!r}; expected one of {', '.join(RULES)}"
        )
    namespace = config.get(NAMESPACE_KEY)
    return str(rule), None if namespace is None else check_namespace(namespace)


def config_of(records: str, id_namespace: str | None) -> dict[str, str]:
    """The config members `init` stores for a rule and an optional pinned namespace."""
    config = {CONFIG_KEY: check_rule(records)}
    if id_namespace is not None:
        config[NAMESPACE_KEY] = check_namespace(id_namespace)
    return config


def check_rule(rule: str) -> str:
    if rule not in RULES:
        raise UsageError(f"records must be one of {', '.join(RULES)}, got {rule!r}")
    return rule


def check_record(record: object, rule: str, *, now: float, namespace: str | None = None) -> None:
    """InvalidRecord unless `record` follows `rule` when accepted at `now`."""
    if rule == ANY:
        return
    if rule != OBSERVATION:
        check_rule(rule)
    problem = token_problem(record, accepted_at=now, namespace=namespace)
    if problem is not None:
        raise InvalidRecord(problem)


def token_problem(
    record: object, *, accepted_at: float, namespace: str | None = None
) -> str | None:
    """Why a token signing `record` would not be a CR 0.2 token, or None (`fast`, then exact)."""
    if accepts(record, int(accepted_at), namespace):
        return None
    return exact_problem(record, accepted_at=accepted_at, namespace=namespace)


def exact_problem(
    record: object, *, accepted_at: float, namespace: str | None = None
) -> str | None:
    """`token_problem` without the fast path: msgspec's Struct, then the time rules."""
    if isinstance(record, dict):
        present = [m for m in FORBIDDEN if m in record]
        if present:
            return (
                f"{' and '.join(present)}: a record must not carry need or constraints "
                "(Capability Resolution §8: a token says nothing about what was asked)"
            )
    try:
        checked = msgspec.convert(record, type=observation_type(namespace), strict=True)
    except msgspec.ValidationError as exc:
        return _explain(record, str(exc), namespace)
    return _time_problem(checked, int(accepted_at))


MAX_SAFE = 2**53 - 1
JSON_VALUE: Final = "JsonValue"


def json_value_schema(ref: str = "#/$defs/") -> dict[str, Any]:
    """Any JSON value SPEC §2 allows, as JSON Schema can say it (numbers within ±(2^53 - 1))."""
    value = {"$ref": ref + JSON_VALUE}
    return {
        "anyOf": [
            {"type": ["string", "boolean", "null"]},
            {"type": "number", "minimum": -MAX_SAFE, "maximum": MAX_SAFE},
            {"type": "array", "items": value},
            {"type": "object", "additionalProperties": value},
        ]
    }


def record_schema(rule: str, namespace: str | None = None, ref: str = "#/$defs/") -> dict[str, Any]:
    """The JSON Schema (2020-12) of a record this rule and namespace accept: the door's Struct
    inlined, plus what msgspec cannot say (no `need` or `constraints`, SPEC §2's number range at
    `ref` + "JsonValue"). `any`: an object."""
    value = {"$ref": ref + JSON_VALUE}
    defs = {"$defs": {JSON_VALUE: json_value_schema(ref)}} if ref == "#/$defs/" else {}
    if check_rule(rule) == ANY:
        return {
            "type": "object",
            "additionalProperties": value,
            "description": "any JSON object SPEC §2 allows",
            **defs,
        }
    generated = msgspec.json.schema(observation_type(namespace))
    (schema,) = generated["$defs"].values()
    properties = dict(schema["properties"])
    properties["evidence"] = {**properties["evidence"], "additionalProperties": value}
    return {
        **schema,
        "properties": properties,
        "additionalProperties": value,
        "description": _RECORD_DOC,
        "not": {"anyOf": [{"required": [m]} for m in FORBIDDEN]},
        **defs,
    }


_AT = re.compile(r" - at `\$\.([A-Za-z_]+)`$")
_MISSING = re.compile(r"^Object missing required field `([A-Za-z_]+)`")


def _explain(record: object, message: str, namespace: str | None) -> str:
    if not isinstance(record, dict):
        return "a record must be a JSON object"
    if _MISSING.match(message):
        missing = [m for m in REQUIRED if m not in record]
        return (
            f"missing member{'s' if len(missing) > 1 else ''} {', '.join(missing)}: a Capability "
            f"Resolution observation needs {', '.join(REQUIRED)}"
        )
    at = _AT.search(message)
    member = at.group(1) if at else None
    if member == "url" and isinstance(record["url"], str):
        return _url_note(record["url"])
    if member == "sub" and namespace is not None and isinstance(record["sub"], str):
        return (
            f"sub: must be {namespace}:<local>, in this log's id namespace {namespace} "
            f"(init --id-namespace), with a local part of 1 to {LOCAL_MAX} characters, none "
            f"of them whitespace or a control character; got {_describe(record['sub'])}"
        )
    if member is not None and member in MEMBER_RULES:
        return f"{member}: {MEMBER_RULES[member]}, got {_describe(record[member])}"
    return message  # not reached for the Struct above; kept honest rather than guessed


def _url_note(url: str) -> str:
    """Why `url` is not canonical, naming its canonical form (the door never rewrites it)."""
    rule = MEMBER_RULES["url"]
    try:
        canonical = canonical_url(url)
    except UsageError as exc:
        return f"url: {rule}, got {_describe(url)} ({exc})"
    if _URL_RE.search(canonical):
        return f"url: {rule}, got {_describe(url)}; its canonical form is {canonical}"
    return (
        f"url: {rule}, got {_describe(url)}; its §4 form {_describe(canonical)} is not one "
        "either (a host of ASCII letters, digits, hyphens and dots, or an IPv6 literal; no "
        "leading www.; RFC 3986 path characters)"
    )


def _describe(value: object, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _time_problem(checked: Observation, accepted_at: int) -> str | None:
    """The two time rules; `accepted_at` is the whole second the log stores (`accepted_at`)."""
    whole = whole_second(checked.checked_at[:19])
    fraction = checked.checked_at[20:-1].strip("0")
    latest = accepted_at + CHECKED_AT_SKEW
    if whole > latest or (whole == latest and fraction):
        return (
            f"checked_at: must be no later than the log's time of acceptance + "
            f"{CHECKED_AT_SKEW} s, {utc_second(latest)} (Capability Resolution §9.6), got "
            f"{_describe(checked.checked_at)}"
        )
    if isinstance(checked.first_seen, str) and checked.first_seen > checked.checked_at[:10]:
        return (
            "first_seen: must be no later than the day of checked_at, "
            f"{checked.checked_at[:10]}, got {_describe(checked.first_seen)}"
        )
    return None
