"""The record rule: what a log accepts as a record beyond SPEC §2.

A log's config member `records` says which rule its appends follow:

- `"observation"` (what `init` stores unless told otherwise): each record is a Capability
  Resolution 0.2 observation, the members of a §6.3 record that the resolver writes (§8 names
  them; `iss` stays optional here and, when present, must be the log's, SPEC §2):
  `v` "0.2", `sub` a non-empty string, `url` an https URL whose §4 canonical form exists
  (stored as given), `status` one of ok, sign_in, down, unknown, `checked_at` RFC 3339 UTC
  (`YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z`, a real instant), `evidence` an object; optional `name` (a
  string) and `first_seen` (`YYYY-MM-DD`, a real date); any other member is allowed.
- `"any"`: any JSON object SPEC §2 allows, for logs that anchor other documents. Logs created
  before the rule existed have no `records` member and keep accepting what they always did.

The shape is a msgspec Struct, checked with `msgspec.convert(..., strict=True)`; the rules a
type cannot say (non-empty, URL, dates) are its `__post_init__`. msgspec's own messages name
JSON paths; the errors raised here name the member and its rule instead, in one form for every
failure (`status: must be one of ok, sign_in, down, unknown, got "maybe"`).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

import msgspec

from .canonical import canonical_url
from .errors import InvalidRecord, UsageError

OBSERVATION: Final = "observation"
ANY: Final = "any"
RULES: Final = (OBSERVATION, ANY)
CONFIG_KEY: Final = "records"
# The rule of a log whose config has no `records` member: one created before the rule existed,
# whose writers must not start being refused by an upgrade.
LEGACY_RULE: Final = ANY

STATUSES: Final = ("ok", "sign_in", "down", "unknown")

# ASCII digits only (`\d` would take any Unicode digit); `\Z`, not `$`, which allows a "\n".
_CHECKED_AT = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?Z\Z"
)
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
# RFC 3986 has no unencoded whitespace or control characters anywhere in a URL.
_URL_JUNK = re.compile(r"[\x00-\x20\x7f]")

# Each member's rule, as the error states it.
MEMBER_RULES: Final[Mapping[str, str]] = {
    "v": 'must be "0.2"',
    "sub": "must be a non-empty string (the server ID)",
    "url": "must be an https server URL (Capability Resolution §4)",
    "status": "must be one of " + ", ".join(STATUSES),
    "checked_at": "must be RFC 3339 UTC, YYYY-MM-DDTHH:MM:SS[.fraction]Z",
    "evidence": "must be an object",
    "name": "must be a string when present",
    "first_seen": "must be a date YYYY-MM-DD when present",
}


class _MemberError(ValueError):
    """A rule a type cannot express, raised from `__post_init__` (msgspec turns ValueError
    there into a ValidationError carrying this message)."""


class Observation(msgspec.Struct, frozen=True):
    """The members of a Capability Resolution 0.2 observation; others are allowed (no
    `forbid_unknown_fields`) and kept: the leaf is the record as sent, not this Struct."""

    v: Literal["0.2"]
    sub: Annotated[str, msgspec.Meta(min_length=1)]
    url: str
    status: Literal["ok", "sign_in", "down", "unknown"]
    checked_at: str
    evidence: dict[str, Any]
    name: str | msgspec.UnsetType = msgspec.UNSET
    first_seen: str | msgspec.UnsetType = msgspec.UNSET

    def __post_init__(self) -> None:
        _check_url(self.url)
        _check_checked_at(self.checked_at)
        if isinstance(self.first_seen, str):
            _check_first_seen(self.first_seen)


REQUIRED: Final = tuple(f.name for f in msgspec.structs.fields(Observation) if f.required)


def rule_of(config: Mapping[str, Any]) -> str:
    """The record rule a log's stored config names (LEGACY_RULE when it names none)."""
    rule = config.get(CONFIG_KEY, LEGACY_RULE)
    if rule not in RULES:
        raise UsageError(
            f"the log's config names records {rule!r}; expected one of {', '.join(RULES)}"
        )
    return str(rule)


def check_rule(rule: str) -> str:
    if rule not in RULES:
        raise UsageError(f"records must be one of {', '.join(RULES)}, got {rule!r}")
    return rule


def check_record(record: object, rule: str) -> None:
    """Raise InvalidRecord (naming the member and its rule) unless `record` follows `rule`.
    `record` has passed SPEC §2 already (`leaf.leaf_bytes`)."""
    if rule == ANY:
        return
    if rule != OBSERVATION:
        check_rule(rule)
    try:
        msgspec.convert(record, type=Observation, strict=True)
    except msgspec.ValidationError as exc:
        raise InvalidRecord(_explain(record, str(exc))) from None


_AT = re.compile(r" - at `\$\.([A-Za-z_]+)`$")
_MISSING = re.compile(r"^Object missing required field `([A-Za-z_]+)`")


def _explain(record: object, message: str) -> str:
    if not isinstance(record, dict):
        return "a record must be a JSON object"
    if _MISSING.match(message):
        missing = [m for m in REQUIRED if m not in record]
        return (
            f"missing member{'s' if len(missing) > 1 else ''} {', '.join(missing)}: a Capability "
            f"Resolution observation needs {', '.join(REQUIRED)}"
        )
    if message.startswith(tuple(f"{m}: " for m in MEMBER_RULES)):
        return message  # already ours, from __post_init__
    at = _AT.search(message)
    member = at.group(1) if at else None
    if member is not None and member in MEMBER_RULES:
        return f"{member}: {MEMBER_RULES[member]}, got {_describe(record[member])}"
    return message  # not reached for the Struct above; kept honest rather than guessed


def _describe(value: object, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _check_url(url: str) -> None:
    if _URL_JUNK.search(url):
        raise _MemberError(
            f"url: {MEMBER_RULES['url']}, got {_describe(url)} (whitespace or a control character)"
        )
    try:
        canonical_url(url)
    except UsageError as exc:
        raise _MemberError(f"url: {MEMBER_RULES['url']}, got {_describe(url)} ({exc})") from None


def _check_checked_at(value: str) -> None:
    match = _CHECKED_AT.match(value)
    ok = False
    if match:
        day, hh, mm, ss, _ = match.groups()
        try:
            dt.date.fromisoformat(day)
            ok = int(hh) < 24 and int(mm) < 60 and int(ss) < 60
        except ValueError:
            ok = False
    if not ok:
        raise _MemberError(f"checked_at: {MEMBER_RULES['checked_at']}, got {_describe(value)}")


def _check_first_seen(value: str) -> None:
    try:
        real = _DAY.match(value) is not None and dt.date.fromisoformat(value) is not None
    except ValueError:
        real = False
    if not real:
        raise _MemberError(f"first_seen: {MEMBER_RULES['first_seen']}, got {_describe(value)}")


__all__ = ["ANY", "OBSERVATION", "RULES", "Observation", "check_record", "rule_of"]
