"""What the benchmarks share (`bench_log`, `bench_api`, `bench_verify`): the records they
append, printing, quantiles, the load average, memory figures, a disk-backed temp dir and
the injected clock. Goals and phases stay in each benchmark."""

from __future__ import annotations

import os
import resource
import tempfile
from collections.abc import Iterator, Sequence
from hashlib import sha256
from pathlib import Path
from typing import Any, NamedTuple

ISS = "https://resolver.example"
CHECKED_AT = "2026-11-30T12:34:56Z"


def record(n: int, tag: str = "") -> dict[str, Any]:
    """A Capability Resolution-like record, unique by (`tag`, `n`) (~300 bytes of leaf)."""
    digest = sha256(f"{tag}{n}".encode()).hexdigest()
    return {
        "v": "0.2",
        "iss": ISS,
        "sub": f"urn:agent:{tag}{n:09d}",
        "url": f"https://api{n % 997}.example/cap/{tag}{n}",
        "name": "inventory.lookup",
        "status": "ok",
        "checked_at": CHECKED_AT,
        "evidence": {"record": f"sha256:{digest}", "method": "https-get"},
        "n": n,
    }


def say(text: str = "") -> None:
    print(text, flush=True)


def print_table(head: Sequence[str], lines: Sequence[Sequence[str]]) -> None:
    """Columns as wide as their widest cell, two spaces apart, a rule under the head."""
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(head)]
    say("")
    say("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
    say("  ".join("-" * w for w in widths))
    for line in lines:
        say("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def quantile(sorted_samples: Sequence[float], q: float) -> float:
    """Nearest-rank quantile of already sorted samples."""
    if not sorted_samples:
        return float("nan")
    rank = max(0, min(len(sorted_samples) - 1, int(q * len(sorted_samples) + 0.5) - 1))
    return sorted_samples[rank]


def loadavg(digits: int = 2, sep: str = " ") -> str:
    """The 1, 5 and 15 minute load averages (other work on this machine skews every figure)."""
    return sep.join(f"{x:.{digits}f}" for x in os.getloadavg())


# --- memory -------------------------------------------------------------------------------------


def peak_rss_mb() -> float:
    """Peak resident set of this process so far (Linux: ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def hwm_rss_mb() -> float:
    """Peak resident set of this process image (VmHWM). Unlike ru_maxrss, which a child
    started by fork + exec inherits from its parent, this starts afresh at exec."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return float("nan")


def current_rss_mb() -> float:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return float("nan")
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


# --- disk and clock -----------------------------------------------------------------------------


def fs_type(path: Path) -> str:
    """The file system type of the mount holding `path` (Linux /proc/mounts), or ''."""
    best, kind = "", ""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return ""
    resolved = str(path.resolve())
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        inside = resolved == point or resolved.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best):
            best, kind = point, parts[2]
    return kind


def default_base() -> Path:
    """A disk-backed temp dir (the log's fsyncs mean nothing on tmpfs)."""
    base = Path(tempfile.gettempdir())
    if fs_type(base) in ("tmpfs", "ramfs"):
        base = Path("/var/tmp")
    return base


class FixedClock:
    """The injected clock: stands still until moved."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class Proc(NamedTuple):
    name: str
    pid: int
    ppid: int
    group: int
    cpu: float
    """User + system CPU seconds so far."""


def processes() -> Iterator[Proc]:
    """Every live process, from /proc/PID/stat (fields after the name: state, ppid, pgrp,
    ..., utime 14, stime 15)."""
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # it ended meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        cpu = (int(fields[11]) + int(fields[12])) / tick
        yield Proc(name, int(entry.name), int(fields[1]), int(fields[2]), cpu)
