"""Hypothesis profiles: `ci` (thorough and derandomized: the same commit always gets the same
verdict) and `dev` (quick, random, remembering failures in .hypothesis/). `examples(n)` is a
test's own thorough count, cut to a tenth under `dev`. No deadline in either: a loaded machine
with several pytest-xdist workers makes any time limit a coin toss."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
QUICK = 10  # the share of a test's count that `dev` runs

settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev", max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def examples(n: int) -> int:
    """A test's max_examples: N in `ci`, a tenth of it (at least 10) in `dev`."""
    return n if PROFILE == "ci" else max(10, n // QUICK)
