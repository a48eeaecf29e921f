"""Hypothesis strategies for the record schema's own formats (`observation.record_schema`):
what a schema-driven client or schemathesis registers for `cr-checked-at` and
`cr-first-seen`, the two rules no regex can say.

`checked_at` values lie in the year 2000 up to the time the strategy is built (so at or
before any later acceptance, whatever the server's clock reads by then), and `first_seen`
dates before 2000, so that any pair of them meets "first_seen ≤ the day of checked_at"
although a format sees one member only.
"""

from __future__ import annotations

import datetime as dt
import time

from hypothesis import strategies as st

from capability_anchor.record.rule import CHECKED_AT_FORMAT, FIRST_SEEN_FORMAT

EARLIEST = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


def checked_at_values(now: float | None = None) -> st.SearchStrategy[str]:
    """RFC 3339 UTC instants between 2000 and `now` (the strategy's build time by default),
    with 0 to 9 fractional digits."""
    latest = dt.datetime.fromtimestamp(int(time.time() if now is None else now), dt.UTC)
    instants = st.datetimes(
        min_value=EARLIEST.replace(tzinfo=None), max_value=latest.replace(tzinfo=None)
    )
    fractions = st.one_of(st.just(""), st.from_regex(r"\.[0-9]{1,9}", fullmatch=True))
    return st.builds(lambda t, f: t.strftime("%Y-%m-%dT%H:%M:%S") + f + "Z", instants, fractions)


def first_seen_values() -> st.SearchStrategy[str]:
    """Dates before 2000: never after the day of a `checked_at_values` instant."""
    return st.dates(min_value=dt.date(1, 1, 1), max_value=dt.date(1999, 12, 31)).map(
        dt.date.isoformat
    )


def formats(now: float | None = None) -> dict[str, st.SearchStrategy[str]]:
    """{format name: strategy}, e.g. for `schemathesis.openapi.format(name, strategy)`."""
    return {CHECKED_AT_FORMAT: checked_at_values(now), FIRST_SEEN_FORMAT: first_seen_values()}
