"""Strict encodings shared by every layer: unpadded canonical base64url, lowercase 64-hex hashes,
real `YYYY-MM-DD` days, RFC 3339 UTC seconds. One accepted spelling per value, so two strings
never mean the same bytes.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import re
import time

from .errors import UsageError

_B64URL_RE = re.compile(r"[A-Za-z0-9_-]*")
_HEX32_RE = re.compile(r"[0-9a-f]{64}")
_DAY_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


class EncodingError(UsageError):
    """A value is not in the one canonical spelling this project accepts."""


def utc_second(t: float) -> str:
    """Unix time `t` as RFC 3339 UTC to the second (`2026-12-05T21:30:00Z`)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def b64url_encode(data: bytes) -> str:
    """Unpadded base64url (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Decode unpadded, canonical base64url; raise `EncodingError` on anything else."""
    if not isinstance(text, str) or _B64URL_RE.fullmatch(text) is None:
        raise EncodingError("not unpadded base64url (only A-Z a-z 0-9 - _ are allowed)")
    if len(text) % 4 == 1:
        raise EncodingError("base64url length is impossible (length mod 4 == 1)")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:  # pragma: no cover - the regex guards this
        raise EncodingError(f"not base64url: {exc}") from None
    # Unused trailing bits may be set in a non-canonical spelling; a second spelling of the
    # same bytes would let a token be altered without changing what it says.
    if b64url_encode(data) != text:
        raise EncodingError("non-canonical base64url (unused trailing bits are set)")
    return data


def hash_from_hex(text: object, what: str = "hash") -> bytes:
    """Parse a SHA-256 hash written as 64 lowercase hex characters."""
    if not isinstance(text, str) or _HEX32_RE.fullmatch(text) is None:
        raise EncodingError(f"{what} must be 64 lowercase hex characters")
    return bytes.fromhex(text)


def parse_day(text: object) -> _dt.date:
    """Parse a UTC day `YYYY-MM-DD` that is a real calendar date."""
    if not isinstance(text, str) or _DAY_RE.fullmatch(text) is None:
        raise EncodingError(f"day must be YYYY-MM-DD, got {text!r}")
    try:
        return _dt.date.fromisoformat(text)
    except ValueError:
        raise EncodingError(f"{text!r} is not a real date") from None


def format_day(day: _dt.date) -> str:
    return day.isoformat()
