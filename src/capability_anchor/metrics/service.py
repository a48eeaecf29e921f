"""The service's Prometheus registry (`/metrics`): the multiprocess folder every process of a
service counts in (`prepare`), the metrics made on first use (`observe`; prometheus-client picks
in-memory or folder values when a metric is made), the state gauges other parts feed, and the
exposition. Folder lifecycle and states: docs/explanation/architecture.md, "Metrics"."""

from __future__ import annotations

import contextlib
import fcntl
import multiprocessing
import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from capability_anchor.envvars import PROMETHEUS_MULTIPROC_DIR
from capability_anchor.errors import UsageError

from .defs import PREFIX, Metrics, make

if TYPE_CHECKING:
    from prometheus_client import Gauge
    from prometheus_client.registry import Collector


_BASE_PREFIX = "capability-anchor-metrics-"
_OWNED = re.compile(r"(\d+)-(\d+)")
_FILE_PID = re.compile(r"_(\d+)\.db$")

_made: Metrics | None = None
_made_lock = threading.Lock()
_enabled = False


class _Uncounted:
    """What `observe` gives a process nothing scrapes (a CLI command): every count is
    dropped, and prometheus-client (~0.1 s to import) is never loaded."""

    def labels(self, *values: str) -> _Uncounted:
        return self

    def inc(self, amount: float = 1) -> None:
        pass

    def observe(self, amount: float) -> None:
        pass

    def set(self, value: float) -> None:
        pass


_UNCOUNTED = Metrics(*([cast(Any, _Uncounted())] * len(fields(Metrics))))


def enable() -> None:
    """Count in this process: it serves `/metrics` (`create_app`, the witness's app), or
    started with the service's folder set (a body worker, a uvicorn worker)."""
    global _enabled
    _enabled = True


def observe() -> Metrics:
    """The metrics of this process, made on first use (see the module docstring); in a
    process that is not part of a service, metrics that count nothing."""
    global _made
    if not _enabled and folder() is None:
        return _UNCOUNTED
    if _made is None:
        with _made_lock:
            if _made is None:
                _made = make()
    return _made


def count_requests(tally: dict[tuple[str, str, int], list[float]]) -> None:
    """Add HTTP requests tallied by (route, method, status) to `requests` and
    `request_seconds`: [count, seconds, then the count per bucket of LATENCY_BUCKETS and
    +Inf], what `inc` and `observe` per request would have added, one write per value (each
    is a locked write to the process's file)."""
    metrics = observe()
    if metrics is _UNCOUNTED:
        return
    for (route, method, status), (n, seconds, *buckets) in tally.items():
        metrics.requests.labels(route, method, str(status)).inc(n)
        latency: Any = metrics.request_seconds.labels(route, method)
        latency._sum.inc(seconds)  # Histogram's own values: it has no bulk observe
        for value, k in zip(latency._buckets, buckets, strict=True):
            if k:
                value.inc(k)


# --- the states other parts of the service own ------------------------------------------------

StateSource = Callable[[Any], float | bool | None]
"""Called with the scraping process's reader `Log` (typed Any: metrics sit below the log)."""
STATES: dict[str, str] = {
    "behind_published": "1 while the log is behind what it already published (it signs "
    "nothing and refuses appends until `recover`), else 0",
    "witnessing_problem": "1 while a witnessing problem episode is open (logged once per "
    "episode), else 0",
}
_sources: dict[str, StateSource] = {}
_set: dict[str, Gauge] = {}


def _state_name(name: str) -> str:
    if name not in STATES:
        raise ValueError(f"no state gauge named {name!r} (one of {', '.join(STATES)})")
    return name


def register_state(name: str, source: StateSource, *, default: bool = False) -> None:
    """Feed the gauge `capability_anchor_<name>` (a name of STATES) from `source(log)`, called
    at every scrape in the scraping process with its reader Log; None: no sample. For a
    state every process can read (the store, a file). With DEFAULT, only when nothing feeds
    it yet (the app's own sources, which a host or a test may have replaced)."""
    if default and (name in _sources or name in _set):
        return
    if _state_name(name) in _set:
        raise ValueError(f"{name} is already set by set_state in this process")
    _sources[name] = source


def state_of(name: str, log: Any) -> float | bool | None:
    """The value `register_state`'s source for NAME gives now (None: none, or no sample)."""
    source = _sources.get(name)
    return source(log) if source is not None else None


def set_state(name: str, value: float) -> None:
    """Set the gauge `capability_anchor_<name>` from the process that holds the state in
    memory (the background work's): every scrape, in any worker, sees the highest value
    of the processes alive. One state is fed either this way or by `register_state`."""
    if _state_name(name) in _sources:
        raise ValueError(f"{name} is already fed by register_state in this process")
    if not _enabled and folder() is None:
        return  # a process nothing scrapes (a test's or a CLI's background work)
    gauge = _set.get(name)
    if gauge is None:
        from prometheus_client import Gauge

        with _made_lock:
            gauge = _set.get(name)
            if gauge is None:
                gauge = Gauge(f"{PREFIX}_{name}", STATES[name], multiprocess_mode="livemax")
                _set[name] = gauge
    gauge.set(value)


# --- the multiprocess folder ------------------------------------------------------------------


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc), None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22, counted after the command name's closing parenthesis (which may hold spaces).
    return int(text.rsplit(")", 1)[1].split()[19])


def _running(pid: int, started: int | None = None) -> bool:
    """Whether `pid` runs (and, given `started`, is the process that started then, not a
    later one with its pid); without /proc, whether a process has that pid."""
    now = _start_time(pid)
    if now is not None:
        return started is None or started == 0 or now == started
    if Path("/proc/self/stat").exists():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it runs
    return True


def _base_path() -> Path:
    return Path(tempfile.gettempdir()) / f"{_BASE_PREFIX}{os.getuid()}"


def _base() -> Path:
    """Our private folder of metrics folders (0700, ours, no symlink), made if need be."""
    base = _base_path()
    with contextlib.suppress(FileExistsError):
        base.mkdir(mode=0o700)
    info = base.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise UsageError(
            f"{base} is not a private folder of this user (it must be a directory of uid "
            f"{os.getuid()}, mode 0700): remove it, or set {PROMETHEUS_MULTIPROC_DIR.name}"
        )
    return base


@contextlib.contextmanager
def _locked(base: Path) -> Iterator[None]:
    fd = os.open(base / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _owner() -> int:
    """The process whose lifetime the counts share: the uvicorn supervisor for a worker of
    the ASGI form (a multiprocessing child), else this process."""
    parent = multiprocessing.parent_process()
    return parent.pid if parent is not None and parent.pid is not None else os.getpid()


def prepare(*, own: bool = False) -> Path:
    """Turn multiprocess mode on for this process and the ones it starts; the folder used.

    `own` (`serve`): a folder of this process's own, whatever the environment says. Else
    (the ASGI form): PROMETHEUS_MULTIPROC_DIR when the operator set it to a folder of theirs
    (emptying it before a start is then theirs to do, as the client's docs say), else ours
    for the owner (`_owner`). An inherited folder of ours belongs to another service."""
    given = PROMETHEUS_MULTIPROC_DIR.get()
    if given and not own and Path(given).parent != _base_path():
        folder = Path(given)
        if not folder.is_dir():
            raise UsageError(f"{PROMETHEUS_MULTIPROC_DIR.name}={given} is not a directory")
    else:
        base = _base()
        owner = os.getpid() if own else _owner()
        folder = base / f"{owner}-{_start_time(owner) or 0}"
        with _locked(base):
            _sweep(base)
            with contextlib.suppress(FileExistsError):
                folder.mkdir(mode=0o700)
    PROMETHEUS_MULTIPROC_DIR.set(str(folder))
    _use_folder()
    enable()
    return folder


def _sweep(base: Path) -> None:
    """Remove the folders of owners that are gone (under the lock)."""
    for child in base.iterdir():
        found = _OWNED.fullmatch(child.name)
        if found is None or not child.is_dir():
            continue
        if not _running(int(found[1]), int(found[2])):
            shutil.rmtree(child, ignore_errors=True)


def _use_folder() -> None:
    """Metrics made from now on keep their values in the folder (see the module docstring);
    metrics made before (in memory) are dropped, so nothing counts in two places."""
    global _made
    import prometheus_client.values as values

    values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]
    with _made_lock:
        made = [*vars(_made).values()] if _made is not None else []
        _drop(*made, *_set.values())
        _made = None
        _set.clear()


def _drop(*made: Any) -> None:
    """Unregister metrics from the default registry (they count nowhere any more)."""
    from prometheus_client import REGISTRY

    for metric in made:
        with contextlib.suppress(KeyError):
            REGISTRY.unregister(metric)


def folder() -> Path | None:
    """The multiprocess folder of this process, if multiprocess mode is on."""
    given = PROMETHEUS_MULTIPROC_DIR.get()
    return Path(given) if given else None


def _mark_dead(path: Path) -> None:
    """`mark_process_dead` for every process with files in `path` that is no longer alive."""
    from prometheus_client import multiprocess

    pids = set()
    for name in os.listdir(path):
        found = _FILE_PID.search(name)
        if found is not None:
            pids.add(int(found[1]))
    for pid in pids:
        if pid != os.getpid() and not _running(pid):
            multiprocess.mark_process_dead(pid, str(path))  # type: ignore[no-untyped-call]


# --- the exposition -----------------------------------------------------------------------------


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The Prometheus text exposition format, version 0.0.4."""


def exposition(*collectors: Collector) -> bytes:
    """The text exposition of every process's counts (multiprocess mode), else of this process's
    (the default registry, shared with a host process), and of `collectors` (blocking: files and
    the store are read; call it off the event loop)."""
    from prometheus_client import REGISTRY, CollectorRegistry, generate_latest, multiprocess

    observe()  # this process's metrics exist (and so have samples) even before any count
    path = folder()
    reg = CollectorRegistry(auto_describe=False)
    if path is not None:
        _mark_dead(path)
        multiprocess.MultiProcessCollector(reg, str(path))  # type: ignore[no-untyped-call]
    for collector in collectors:
        reg.register(collector)
    own = generate_latest(REGISTRY) if path is None else b""
    return bytes(own + generate_latest(reg))
