"""`capability-anchor monitor URL|DIR`, `monitor --acknowledge ID` and `monitor compare` (the run's
steps: `monitor/follow.py`): one JSON line per finding, a summary line per run; exit 0 consistent, 1
an alarm (or a warning with `--strict`), 2 I/O or usage."""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

from capability_anchor.bounded.read import DEFAULT_DEADLINE_S, check_deadline
from capability_anchor.errors import InputError, UsageError

from .common import EXIT_FAILED, EXIT_OK, emit
from .inputs import load_keys, load_policy, read_source

if TYPE_CHECKING:
    from capability_anchor.monitor import Monitor

# Imported inside functions: the monitor ~100 ms (python -X importtime after `cli.operator`, min
# of 7 runs, 2026-12-05): only `monitor` pays it.

MAX_BACKOFF_S = 300.0
DEFAULT_MAX_LAG = 3600.0


def add_monitor_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "target",
        nargs="*",
        metavar="URL|DIR",
        help="the log's base URL or export folder; or `compare STATE1 STATE2`",
    )
    p.add_argument("--keys", metavar="FILE", help="the log's trusted JWKS (required to follow)")
    p.add_argument("--policy", metavar="FILE", help="a tlog-policy: require its quorum")
    p.add_argument("--state", metavar="DIR", help="the monitor's state folder (required)")
    p.add_argument(
        "--origin",
        metavar="O",
        help="the checkpoint origin (default: the state's, else the policy's log line, else "
        "<host>/history of the URL)",
    )
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
    p.add_argument(
        "--max-lag",
        type=float,
        default=DEFAULT_MAX_LAG,
        metavar="S",
        help="warn checkpoint_stale when the heads are past the checkpoint for longer, and "
        "alarm checkpoint_missing when the checkpoint is not found for longer (default: 3600)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="a warning (checkpoint_stale, checkpoint_older) exits 1",
    )
    p.add_argument(
        "--acknowledge",
        metavar="ID",
        help="record that the operator cleared alarm ID (with --state); later runs go on "
        "from the last good state (with URL|DIR, this one)",
    )


def cmd_monitor(args: argparse.Namespace) -> int:
    from capability_anchor.monitor import (
        Monitor,
        MonitorOptions,
        acknowledge,
        compare_states,
        open_source,
    )

    if args.acknowledge is not None:
        usable = args.state is not None and (
            not args.target
            or (len(args.target) == 1 and args.target[0] != "compare" and args.keys is not None)
        )
        if not usable:
            raise UsageError("usage: monitor --acknowledge ID --state DIR [URL|DIR --keys FILE]")
        emit(acknowledge(Path(args.state), args.acknowledge))
        if not args.target:
            return EXIT_OK
        sys.stdout.flush()  # with a log named too, the run follows, from the last good state
    if args.target and args.target[0] == "compare":
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
        max_lag=args.max_lag,
    )
    if args.max_lag < 0:
        raise UsageError("--max-lag is a number of seconds, at least 0")
    with closing(open_source(args.target[0], deadline=deadline)) as source:
        monitor = Monitor(source, options)
        if args.watch is None:
            return _once(monitor, args.strict)
        return _watch(monitor, max(args.watch, 0.01), args.strict)


def _once(monitor: Monitor, strict: bool) -> int:
    result = monitor.run_once()
    for finding in result.findings:
        emit(finding)
    emit({**result.summary, "result": "alarm" if result.alarmed else "consistent"})
    sys.stdout.flush()
    state = monitor.options.state_dir
    for ident in result.pending:
        print(
            f"capability-anchor monitor: alarm {ident} is not acknowledged, so the log was not "
            f"read (its evidence: {state}/evidence/{ident}/); once it is resolved: "
            f"capability-anchor monitor --acknowledge {ident} --state {state}",
            file=sys.stderr,
            flush=True,
        )
    warned = strict and any("warning" in f for f in result.findings)
    return EXIT_FAILED if result.alarmed or warned else EXIT_OK


def _watch(monitor: Monitor, every: float, strict: bool) -> int:
    """A run every `every` seconds; after I/O errors the pause doubles, up to max(every, 300 s)."""
    errors = 0
    while True:
        try:
            _once(monitor, strict)
            errors = 0
        except InputError as exc:
            errors += 1
            print(f"capability-anchor monitor: {exc}", file=sys.stderr, flush=True)
        time.sleep(min(every * 2**errors, max(every, MAX_BACKOFF_S)))
