"""Wall-clock sanity for the running service: a jump of the wall clock never seals a day
that has not ended, and never puts entries on a day that has not begun (the skew, its
episodes and `seal`'s acknowledgement: docs/explanation/procedures.md).
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from capability_anchor.encoding import utc_second
from capability_anchor.errors import ClockDisagrees
from capability_anchor.files import write_secret_file
from capability_anchor.metrics.service import observe

ACK_FILE = "clock-ack"
DISAGREES_FILE = "clock-disagrees"
TOLERANCE_S = 300.0

log = logging.getLogger("capability_anchor.clock")
_ACK_VERSION = 1
T = TypeVar("T")
_MAX_ACK_FILE = 4096


def monotonic() -> float:
    """Seconds on a clock nobody can set, counting suspended time where the OS can."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    if boottime is not None:
        return time.clock_gettime(boottime)
    return time.monotonic()


def boot_id() -> str:
    """This boot's id (Linux), else "": monotonic readings compare only within one boot."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _span(seconds: float) -> str:
    """A signed duration for people: +19d 00:00:02, -7m 30s, +0.4 s."""
    left = abs(seconds)
    sign = "+" if seconds >= 0 or left < 0.05 else "-"
    if left < 60:
        return f"{sign}{left:.1f} s"
    whole = round(left)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{sign}{days}d {hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{sign}{hours}h {minutes:02d}m {secs:02d}s"
    return f"{sign}{minutes}m {secs:02d}s"


def _write(path: Path, text: str) -> None:
    """`text` in `path`, written to a temporary file and renamed: a reader never sees half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    write_secret_file(tmp, text.encode("ascii"))
    os.replace(tmp, path)


def disagreeing(data_dir: Path) -> str | None:
    """How a running service's clocks on `data_dir` disagree (`DISAGREES_FILE`), or None
    when no live process of this boot says so."""
    try:
        with open(Path(data_dir) / DISAGREES_FILE, "rb") as handle:
            episode = json.loads(handle.read(_MAX_ACK_FILE))
        pid, boot = int(episode["pid"]), str(episode["boot_id"])
        since, skew = str(episode["since"]), str(episode["skew"])
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if boot != boot_id():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, another user's
    return f"by {skew} since {since}, process {pid}"


def acknowledge(data_dir: Path, wall: float | None = None, mono: float | None = None) -> Path:
    """Record that the operator takes the wall clock as right (at `wall`, `mono`, default
    now), for a running service to re-baseline on."""
    reading = {
        "v": _ACK_VERSION,
        "wall": time.time() if wall is None else wall,
        "mono": monotonic() if mono is None else mono,
        "boot_id": boot_id(),
    }
    path = Path(data_dir) / ACK_FILE
    _write(path, json.dumps(reading, sort_keys=True) + "\n")
    return path


class ClockGuard:
    """The service's clock (`now`, given to its `Log`s as their clock) and its sanity check.
    Thread-safe: the writer's worker threads and the event loop read it at once."""

    def __init__(
        self,
        data_dir: Path,
        *,
        wall: Callable[[], float] = time.time,
        mono: Callable[[], float] = monotonic,
        tolerance: float = TOLERANCE_S,
    ) -> None:
        self._wall = wall
        self._mono = mono
        self.tolerance = tolerance
        self.ack_path = Path(data_dir) / ACK_FILE
        self.episode_path = Path(data_dir) / DISAGREES_FILE
        self._boot = boot_id()
        self._lock = threading.Lock()
        self._base = (wall(), mono())
        self._since: float | None = None  # monotonic time the current episode began
        # An acknowledgement already there at start is the past (the baseline is newer).
        self._ack_seen: tuple[int, int, int] | None = self._ack_signature()
        self.episodes = 0
        self._pins = threading.local()
        observe().clock_disagrees.set(0)

    def _ack_signature(self) -> tuple[int, int, int] | None:
        try:
            info = os.stat(self.ack_path)
        except OSError:
            return None
        return (info.st_ino, info.st_mtime_ns, info.st_size)

    # --- reading the time -------------------------------------------------------------------

    def pinned(self, call: Callable[[], T]) -> Callable[[], T]:
        """`call` with one verdict: its first reading of the time decides, later ones go on
        by the monotonic clock (so `POST /records?prove=1` never fails after its append)."""

        def run() -> T:
            self._pins.active, self._pins.reading = True, None
            try:
                return call()
            finally:
                self._pins.active, self._pins.reading = False, None

        return run

    def now(self) -> float:
        """The service's time: the earlier of the wall clock and the expected time, while
        they agree; ClockDisagrees while they do not."""
        if getattr(self._pins, "active", False):
            if self._pins.reading is not None:
                t, at = self._pins.reading
                return float(t + self._mono() - at)
            t = self._now()
            self._pins.reading = (t, self._mono())
            return t
        return self._now()

    def _now(self) -> float:
        wall, mono = self._wall(), self._mono()
        with self._lock:
            expected = self._base[0] + mono - self._base[1]
            if abs(wall - expected) > self.tolerance and self._take_ack(mono):
                expected = self._base[0] + mono - self._base[1]
            skew = wall - expected
            if abs(skew) <= self.tolerance:
                if self._since is not None:
                    observe().clock_disagrees.set(0)
                    log.warning(
                        "the wall clock agrees with the monotonic clock again (skew %s, "
                        "after %s): appends, checkpoints and sealing resume",
                        _span(skew),
                        _span(mono - self._since).lstrip("+"),
                    )
                    self._since = None
                    self._episode(None)
                return min(wall, expected)
            if self._since is None:
                self._since = mono
                self.episodes += 1
                observe().clock_disagrees.set(1)
                log.warning(
                    "the wall clock (%s) disagrees with the monotonic clock by %s, more than "
                    "%d s: appends, checkpoints and sealing are paused until they agree again "
                    "or an operator runs `capability-anchor seal`",
                    utc_second(wall),
                    _span(skew),
                    int(self.tolerance),
                )
                self._episode({"since": utc_second(wall), "skew": _span(skew)})
        raise ClockDisagrees(
            f"the service's wall clock ({utc_second(wall)}) disagrees with its monotonic clock by "
            f"{_span(skew)} (more than {int(self.tolerance)} s): appends and sealing are "
            "paused until the clocks agree again or an operator runs `capability-anchor seal`"
        )

    def agrees(self) -> bool:
        """Whether the clocks agree now (an episode's start and end are logged as by `now`)."""
        try:
            self.now()
        except ClockDisagrees:
            return False
        return True

    def _episode(self, episode: dict[str, str] | None) -> None:
        """Write (or, None, remove) `DISAGREES_FILE`; a failure is only logged."""
        try:
            if episode is None:
                self.episode_path.unlink(missing_ok=True)
            else:
                record = {**episode, "pid": os.getpid(), "boot_id": self._boot}
                _write(self.episode_path, json.dumps(record, sort_keys=True) + "\n")
        except OSError as exc:
            log.warning("cannot record the clock episode in %s: %s", self.episode_path, exc)

    # --- the operator's acknowledgement ---------------------------------------------------------

    def _take_ack(self, mono: float) -> bool:
        """Adopt a new acknowledgement's reading as the baseline (lock held); whether adopted."""
        signature = self._ack_signature()
        if signature is None or signature == self._ack_seen:
            return False
        self._ack_seen = signature
        try:
            with open(self.ack_path, "rb") as handle:
                ack = json.loads(handle.read(_MAX_ACK_FILE))
            wall, ack_mono, boot = float(ack["wall"]), float(ack["mono"]), str(ack["boot_id"])
            if ack["v"] != _ACK_VERSION or not (math.isfinite(wall) and math.isfinite(ack_mono)):
                raise ValueError("unknown version or a reading that is not a number")
        except (OSError, ValueError, TypeError, KeyError) as exc:
            log.warning("ignoring the clock acknowledgement %s: %s", self.ack_path, exc)
            return False
        if boot != self._boot:
            log.warning(
                "ignoring the clock acknowledgement %s: written on another boot or machine "
                "(its monotonic clock is not this one's); restart the service instead",
                self.ack_path,
            )
            return False
        if not self._base[1] < ack_mono <= mono:
            return False  # from before the baseline (already in force), or not yet taken
        self._base = (wall, ack_mono)
        log.warning(
            "the operator acknowledged the wall clock at %s (capability-anchor seal): the "
            "service takes it as its new baseline",
            utc_second(wall),
        )
        return True
