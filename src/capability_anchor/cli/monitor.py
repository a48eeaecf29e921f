"""`capability-anchor monitor URL|DIR --keys K [--policy P] --state DIR [--entries]
[--watch S]` and `monitor compare STATE1 STATE2` (issue #14; the steps are in
`monitor/follow.py`). One JSON line per finding, then a summary line per run; exit 0 when
consistent, 1 on any alarm, 2 on I/O or usage."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..boundedread import DEFAULT_DEADLINE_S, check_deadline
from ..errors import InputError, UsageError
from .common import EXIT_FAILED, EXIT_OK, emit
from .inputs import load_keys, load_policy, read_source

if TYPE_CHECKING:
    from ..monitor import Monitor

MAX_BACKOFF_S = 300.0


def add_monitor_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "target",
        nargs="+",
        metavar="URL|DIR",
        help="the log's base URL or export folder; or `compare STATE1 STATE2`",
    )
    p.add_argument("--keys", metavar="FILE", help="the log's trusted JWKS (required to follow)")
    p.add_argument("--policy", metavar="FILE", help="a tlog-policy: require its quorum")
    p.add_argument("--state", metavar="DIR", help="the monitor's state folder (required)")
    p.add_argument("--origin", metavar="O", help="the checkpoint origin (default: see README)")
    p.add_argument(
        "--entries", action="store_true", help="also re-derive every day root from its entries"
    )
    p.add_argument(
        "--watch", type=float, metavar="S", help="poll every S seconds (errors back off)"
    )
    p.add_argument(
        "--deadline",
        type=float,
        metavar="S",
        default=DEFAULT_DEADLINE_S,
        help="how long one read of a URL may take in all "
        f"(default: {DEFAULT_DEADLINE_S:g}; past it: exit 2, or the next round with --watch)",
    )


def cmd_monitor(args: argparse.Namespace) -> int:
    from ..monitor import Monitor, MonitorOptions, compare_states, open_source

    if args.target[0] == "compare":
        if len(args.target) != 3:
            raise UsageError("usage: monitor compare STATE1 STATE2")
        findings = compare_states(Path(args.target[1]), Path(args.target[2]))
        for finding in findings:
            emit(finding)
        return EXIT_FAILED if any("alarm" in f for f in findings) else EXIT_OK
    if len(args.target) != 1 or args.keys is None or args.state is None:
        raise UsageError("usage: monitor URL|DIR --keys FILE --state DIR")
    deadline = check_deadline(args.deadline)
    options = MonitorOptions(
        keys=load_keys(read_source(args.keys, deadline=deadline), args.keys),
        state_dir=Path(args.state),
        policy=load_policy(args.policy, deadline=deadline) if args.policy else None,
        origin=args.origin,
        entries=args.entries,
    )
    source = open_source(args.target[0], deadline=deadline)
    try:
        monitor = Monitor(source, options)
        if args.watch is None:
            return _once(monitor)
        return _watch(monitor, max(args.watch, 0.01))
    finally:
        source.close()


def _once(monitor: Monitor) -> int:
    result = monitor.run_once()
    for finding in result.findings:
        emit(finding)
    emit({**result.summary, "result": "alarm" if result.alarmed else "consistent"})
    sys.stdout.flush()
    return EXIT_FAILED if result.alarmed else EXIT_OK


def _watch(monitor: Monitor, every: float) -> int:
    """Forever: a run every `every` seconds; after I/O errors the pause doubles, up to
    max(every, 300 s), and is back to `every` after the next run that reads the log."""
    errors = 0
    while True:
        try:
            _once(monitor)
            errors = 0
        except InputError as exc:
            errors += 1
            print(f"capability-anchor monitor: {exc}", file=sys.stderr, flush=True)
        time.sleep(min(every * 2**errors, max(every, MAX_BACKOFF_S)))
