"""The regexes of a CR 0.2 record, the door's and the OpenAPI document's alike: read the same by
ECMA-262 and Python `re` (ASCII classes only, an end that is the end in both), held to
`canonical_url`, `datetime` and an ECMA-262 engine by tests/e2e/test_cr_tokens.py."""

from __future__ import annotations

import re
from typing import Final

LOCAL_MAX: Final = 128
# The rule's other data, here so that `rule` and its fast path (`fast`) read one copy.
STATUSES: Final = ("ok", "sign_in", "down", "unknown")
FORBIDDEN: Final = ("need", "constraints")
# CR 0.2 §9.6 "MUST NOT sign a checked_at later than the observation", with the clock skew
# CR §8 allows a token's iat.
CHECKED_AT_SKEW: Final = 300

# `$` alone would also match before a final "\n" in Python (msgspec calls `re.search`); the
# lookahead after it makes the end the end in both dialects. ASCII classes only, never `\d`
# or `\s`, whose sets differ between the two.
_END = r"$(?![\s\S])"
NAMESPACE_PATTERN: Final = r"[a-z0-9-]{1,32}"
# Whitespace (Unicode White_Space, and U+FEFF) and control characters (Cc): none in a local.
_NOT_IN_LOCAL = r"\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


def sub_pattern(namespace: str | None = None) -> str:
    """`<namespace>:<local>`, with `namespace` fixed when the log pins one."""
    if namespace is not None and not re.fullmatch(NAMESPACE_PATTERN, namespace):
        raise ValueError(f"not an id namespace: {namespace!r}")
    ns = NAMESPACE_PATTERN if namespace is None else namespace
    return rf"^{ns}:[^{_NOT_IN_LOCAL}]{{1,{LOCAL_MAX}}}{_END}"


_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_H16 = r"[0-9a-f]{1,4}"
_LS32 = rf"(?:{_H16}:{_H16}|{_IPV4})"
# RFC 3986 §3.2.2 IPv6address, lower-case (canonical form lower-cases the host).
_IPV6 = (
    "(?:"
    + "|".join(
        (
            rf"(?:{_H16}:){{6}}{_LS32}",
            rf"::(?:{_H16}:){{5}}{_LS32}",
            rf"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
            rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
            rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
            rf"(?:(?:{_H16}:){{0,6}}{_H16})?::",
        )
    )
    + ")"
)
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_DNS = rf"(?!www\.){_LABEL}(?:\.{_LABEL})*"
# 1..65535 without leading zeros, and never 443 (canonical form drops it).
_PORT = (
    r"(?!443(?![0-9]))(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}"
    r"|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
)
# RFC 3986 pchar; segments may be empty inside the path but it never ends with "/".
_PCHAR = r"(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})"
URL_PATTERN: Final = rf"^https://(?:{_DNS}|\[{_IPV6}\])(?::{_PORT})?(?:/+{_PCHAR}+)*{_END}"

# A real date: months of 31, 30 and 28 days, and 29 February of leap years; no year 0000.
_DATE = (
    r"(?!0000)(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
    r"|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)"
)
DAY_PATTERN: Final = rf"^{_DATE}{_END}"
CHECKED_AT_PATTERN: Final = (
    rf"^{_DATE}T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{{1,9}})?Z{_END}"
)
