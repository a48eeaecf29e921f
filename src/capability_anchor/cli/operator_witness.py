"""The operator commands of the witness client (SPEC §12.3): `policy FILE` sets or replaces
the stored witness policy, `cosign` runs one round of submissions now."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from capability_anchor.errors import UsageError

from .common import EXIT_FAILED, EXIT_OK, emit
from .operator_base import PROG, open_log, refuse_if_behind

# Imported inside functions: the witness client ~330 ms, the log's policies ~190 ms (python -X
# importtime after `cli.operator`, min of 7 runs, 2026-12-05): only `policy` and `cosign` pay
# them.

MAX_DEADLINE_S = 600.0


def _deadline(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= MAX_DEADLINE_S:
        raise argparse.ArgumentTypeError("must be more than 0 and at most 600 seconds")
    return value


def add_witness_deadline(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--witness-deadline",
        type=_deadline,
        default=10.0,
        metavar="S",
        help="total time allowed for one witness exchange",
    )


def read_policy(name: str) -> bytes:
    try:
        return Path(name).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read the policy file {name}: {exc.strerror}") from None


def cmd_policy(args: argparse.Namespace) -> int:
    from capability_anchor.log.policies import check_policy

    text = read_policy(args.file)
    with open_log(args) as log:
        policy = check_policy(text, log.read.history.vkeys())
        log.set_policy(text)
    emit(
        {
            "witnesses": [w.name for w in policy.witnesses],
            "submitted_to": [w.name for w in policy.witnesses if w.url is not None],
            "quorum": policy.quorum,
        }
    )
    print(f"{PROG}: stored the witness policy from {args.file}", file=sys.stderr)
    return EXIT_OK


def cmd_cosign(args: argparse.Namespace) -> int:
    from capability_anchor.log.policies import check_policy
    from capability_anchor.witness.client import run_round

    with open_log(args) as log:
        # A witness asked for a checkpoint the world has seen superseded would answer 409 and
        # be stopped: behind what was published, nothing is submitted.
        refuse_if_behind(log, args)
        policy = None
        if args.policy is not None:
            policy = check_policy(read_policy(args.policy), log.read.history.vkeys())
        outcomes = run_round(log, policy, deadline=args.witness_deadline, resume=args.resume)
    if not outcomes:
        print(f"{PROG}: no witness with a URL in the policy: nothing to do", file=sys.stderr)
    for outcome in outcomes:
        emit(outcome.to_json())
        if not outcome.ok:
            print(f"{PROG}: witness {outcome.witness}: {outcome.detail}", file=sys.stderr)
    return EXIT_OK if all(o.ok for o in outcomes) else EXIT_FAILED
