"""Warming a day's tiles in the background (issue #37): a full tile no proof has touched costs
the request that first needs it a store read and 255 SHA-256 (about 200 µs). Once a proof is
asked of a day's head, one thread of the reader computes that head's full tiles into the shared
`TileCache`, never past its budget (docs/explanation/decisions/37-record4.md).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.merkle import TILE_HEIGHT, TILE_WIDTH, TileCache, TileNodes
from capability_anchor.merkle.tiles import FULL_TILE_BYTES

MAX_DAYS = 64  # days asked about are few; this only bounds what is remembered
STOP_WAIT_S = 10.0  # at most one store read to wait for: a stalled one fails once the store closes


class TileWarmer:
    """Computes the full tiles of the heads `ask` names, oldest first, in one daemon thread
    started by the first `ask`; `stop` ends it (before the store closes)."""

    def __init__(self, cache: TileCache, tiles: Callable[[str, int], TileNodes]) -> None:
        self._cache = cache
        self._tiles = tiles  # the cached tiles of (day, size)
        self._asked: dict[str, int] = {}  # day -> the largest size asked
        self._pending: dict[str, tuple[int, int]] = {}  # day -> (size warmed, size to warm)
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def ask(self, day: str, size: int) -> None:
        """Warm `day`'s tiles that are full at `size` (a head's) and not yet asked for."""
        if self._asked.get(day, 0) >= size:
            return  # the usual case: no lock
        with self._wake:
            old = self._asked.get(day, 0)
            if old >= size or self._stopped:
                return
            if len(self._asked) >= MAX_DAYS:
                self._asked.clear()
            self._asked[day] = size
            self._pending[day] = (self._pending.get(day, (old, 0))[0], size)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tile-warmer", daemon=True)
                self._thread.start()
            self._wake.notify()

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            thread, self._thread = self._thread, None
            self._wake.notify()
        if thread is not None:
            thread.join(STOP_WAIT_S)

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._pending and not self._stopped:
                    self._wake.wait()
                if self._stopped:
                    return
                day = next(iter(self._pending))
                old, new = self._pending.pop(day)
            # Best effort: the proof that needs a tile reads it again, and says why it cannot.
            with contextlib.suppress(CapabilityAnchorError):
                self.warm(day, old, new)

    def warm(self, day: str, old: int, new: int) -> None:
        """Compute the tiles of `day` full at size `new` but not at `old` that the cache does
        not hold, while it has room for them without dropping any other."""
        cache, source = self._cache, self._tiles(day, new)
        level = 0
        while (new >> (TILE_HEIGHT * level)) >= TILE_WIDTH:
            first = (old >> (TILE_HEIGHT * level)) // TILE_WIDTH
            for index in range(first, (new >> (TILE_HEIGHT * level)) // TILE_WIDTH):
                if self._stopped or cache.bytes + FULL_TILE_BYTES > cache.max_bytes:
                    return
                if not cache.holds_full((day, level, index)):
                    source.full(level, index)
                    time.sleep(0)  # let request threads have the GIL between tiles
            level += 1
