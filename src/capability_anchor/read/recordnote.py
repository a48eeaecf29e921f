"""Why `/record` found nothing: the note of its 404, found with bounded work whatever the
log's size (docs/explanation/procedures.md).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from capability_anchor.errors import UsageError
from capability_anchor.record.urls import canonical_url

if TYPE_CHECKING:
    from .reader import LogReader

RECENT = 256
# Candidates the tail filter hands back at most: the newest of them speak.
TAIL_CANDIDATES = 64


def not_found_note(
    read: LogReader,
    key: str,
    *,
    indexed: bool,
    days: Sequence[str],
    needs: Sequence[str],
    tails: Sequence[tuple[str, int]] = (),
) -> str:
    """The note for a `/record` lookup by `key` (`sub:<id>` or `url:<canonical url>`) that
    found no covered entry; `indexed` says whether the index named any entry of it, `tails`
    (day, first unindexed index) where the index does not look yet."""
    what = "id" if key.startswith("sub:") else "url"
    uncovered = (
        f"entries with that {what} exist, but no published head covers them yet "
        "(the next checkpoint will: the service publishes one every checkpoint interval, "
        "a writer at once with POST /checkpoint)"
    )
    if indexed:
        return uncovered
    lacking: list[str] | None = None
    needle = _needle(key)
    for claims in [*_unindexed(read, tails, needle), *_recent(read, days, needle)]:
        if not _matches(claims, key):
            continue
        missing = [m for m in needs if m not in claims]
        if not missing:
            return uncovered
        if lacking is None:  # the newest such entry speaks
            lacking = missing
    if lacking is not None:
        return (
            f"the newest entry with that {what} lacks {', '.join(lacking)}; /record serves only "
            f"entries with all of {', '.join(needs)}"
        )
    return (
        f"no entry with that {what} (an entry is served only when it has all of {', '.join(needs)})"
    )


def _unindexed(
    read: LogReader, tails: Sequence[tuple[str, int]], needle: bytes
) -> list[dict[str, Any]]:
    """Claims of the entries of each (day, start) of `tails` from `start` on (the ones the
    server index does not hold yet, so no head covers them) whose leaf bytes contain
    `needle`."""
    out: list[dict[str, Any]] = []
    for day, start in tails:
        rows = read.store.entries_containing(day, start, needle.decode("utf-8"), TAIL_CANDIDATES)
        for row in rows:
            claims = json.loads(row.claims)
            if isinstance(claims, dict):
                out.append(claims)
    return out


def _recent(read: LogReader, days: Sequence[str], needle: bytes) -> list[dict[str, Any]]:
    """Claims of those of the RECENT newest entries of `days` whose lower-cased leaf bytes
    contain `needle` (newest first). The byte test is a cheap filter, never the match: a 404
    must stay cheap on the event loop, and parsing 256 leaves is ~2 ms."""
    out: list[dict[str, Any]] = []
    seen = 0
    for day in days:
        want = RECENT - seen
        if want <= 0:
            break
        size = read.store.day_size(day)
        rows = read.store.entries(day, max(0, size - want), want)
        seen += len(rows)
        for row in reversed(rows):
            if needle not in row.claims.lower():
                continue
            claims = json.loads(row.claims)
            if isinstance(claims, dict):
                out.append(claims)
    return out


def _needle(key: str) -> bytes:
    """Bytes that every leaf matching `key` contains once lower-cased: the id as JSON
    (leaf bytes are RFC 8785, whose string escapes are `json.dumps`'s), or the canonical
    URL's host (a stored url keeps its case and form). Both sides are lower-cased by
    `bytes.lower`, which keeps containment. Empty (no filter) for a host whose text and bytes
    lower-case differently (non-ASCII) or that is an IPv6 literal."""
    kind, _, value = key.partition(":")
    if kind == "sub":
        return json.dumps(value, ensure_ascii=False).encode("utf-8").lower()
    host = value.removeprefix("https://").split("/")[0].rsplit(":", 1)[0]
    if host.startswith("[") or not host.isascii():
        return b""
    return host.encode("ascii")


def _matches(claims: dict[str, Any], key: str) -> bool:
    kind, _, value = key.partition(":")
    if kind == "sub":
        return claims.get("sub") == value
    with contextlib.suppress(UsageError):
        return canonical_url(claims.get("url")) == value
    return False
