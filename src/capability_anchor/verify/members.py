"""A record file's plain members against its signed claims (`record_signature`): a file whose
visible members differ from what its token signs misleads every reader, so it fails. Values compare
as parsed JSON, numbers by value; `expires` must name the second `exp` names. Differences are named
by JSON path."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

from capability_anchor.strictjson import is_int

_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_MAX_NAMED = 20


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b  # exact: Python compares int and float by value without rounding
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _diff(plain: Any, signed: Any, where: str, out: list[str]) -> None:
    if _same(plain, signed):
        return
    if isinstance(plain, dict) and isinstance(signed, dict):
        for name in sorted(set(plain) | set(signed)):
            path = f"{where}.{name}" if where else name
            if name not in signed:
                out.append(f"{path} (not signed)")
            elif name not in plain:
                out.append(f"{path} (signed, missing beside jws)")
            else:
                _diff(plain[name], signed[name], path, out)
    elif isinstance(plain, list) and isinstance(signed, list) and len(plain) == len(signed):
        for i, (p, s) in enumerate(zip(plain, signed, strict=True)):
            _diff(p, s, f"{where}[{i}]", out)
    else:
        out.append(where)


def _expires_problem(value: Any, exp: Any) -> str | None:
    """None when `value` is an RFC 3339 date-time naming the second `exp` names."""
    if not is_int(exp):
        return "expires (no integer exp is signed)"
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        return "expires (not an RFC 3339 date-time with a zone)"
    try:
        when = dt.datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        return "expires (not a real date-time)"
    if when.timestamp() != exp:
        return "expires (not the signed exp)"
    return None


def differences(plain: Mapping[str, Any], signed: Mapping[str, Any]) -> list[str]:
    """The JSON paths where `plain` (its `jws` aside) differs from the `signed` claims."""
    out: list[str] = []
    members = {k: v for k, v in plain.items() if k != "jws"}
    if "expires" in members and "expires" not in signed:
        problem = _expires_problem(members.pop("expires"), signed.get("exp"))
        if problem is not None:
            out.append(problem)
    _diff(members, dict(signed), "", out)
    if len(out) > _MAX_NAMED:
        out[_MAX_NAMED:] = [f"and {len(out) - _MAX_NAMED} more"]
    return out
