"""The public rate limit (SPEC §10)."""

from __future__ import annotations

import time


class RateLimiter:
    """A token bucket per client address: `rate` requests per second, bursts up to `rate`."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._buckets: dict[str, tuple[float, float]] = {}

    def check(self, client: str) -> float:
        """0 if allowed now, else the seconds to wait."""
        now = time.monotonic()
        tokens, last = self._buckets.get(client, (float(self.rate), now))
        tokens = min(float(self.rate), tokens + (now - last) * self.rate)
        if tokens < 1:
            self._buckets[client] = (tokens, now)
            return (1 - tokens) / self.rate
        self._buckets[client] = (tokens - 1, now)
        if len(self._buckets) > 100_000:
            # Forget full buckets: they are identical to a new client's.
            full = [c for c, (t, _) in self._buckets.items() if t >= self.rate - 1]
            for c in full:
                del self._buckets[c]
        return 0.0
