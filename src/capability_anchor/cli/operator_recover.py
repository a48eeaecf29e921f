"""`capability-anchor recover --from URL|DIR` (SPEC §13.3): bring a data dir restored from an
older backup back to what the log published (`log.recovery`), then resume signing."""

from __future__ import annotations

import argparse
import sys

from .common import EXIT_OK, emit
from .operator_base import PROG, open_log


def cmd_recover(args: argparse.Namespace) -> int:
    from capability_anchor.log.recovery import recover

    with open_log(args) as log:
        done = recover(log, args.source)
    emit(done.to_json())
    if done.heads == 0:
        print(
            f"{PROG}: nothing to recover: {args.source} holds no more than this data dir "
            f"(history size {done.size}, root {done.root.hex()}); signing resumes",
            file=sys.stderr,
        )
    else:
        days = ", ".join(done.days)
        print(
            f"{PROG}: recovered {done.entries} entries and {done.heads} heads of {days} from "
            f"{args.source}: history size {done.before_size} -> {done.size}, root "
            f"{done.root.hex()}; signing resumes",
            file=sys.stderr,
        )
    return EXIT_OK
