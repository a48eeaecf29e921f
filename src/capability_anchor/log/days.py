"""UTC days of the log: which day a time falls in, and the days either side of one."""

from __future__ import annotations

import datetime as dt
import functools
import math
from collections.abc import Callable

from capability_anchor.encoding import format_day, parse_day

Clock = Callable[[], float]


def utc_day(t: float) -> str:
    # Whole seconds first, as every stored time is: fromtimestamp would round 23:59:59.9999997
    # up into the next day while int(t) keeps it in this one.
    return dt.datetime.fromtimestamp(math.floor(t), dt.UTC).date().isoformat()


def next_day(day: str) -> str:
    return format_day(parse_day(day) + dt.timedelta(days=1))


def prev_day(day: str) -> str:
    return format_day(parse_day(day) - dt.timedelta(days=1))


@functools.lru_cache(maxsize=64)  # every `/record` asks, mostly for today
def day_end(day: str) -> int:
    """The last whole second (Unix time) of a UTC day."""
    start = dt.datetime.combine(parse_day(day), dt.time(), dt.UTC)
    return int(start.timestamp()) + 86400 - 1
