"""`capability-anchor recover --from URL|DIR` (SPEC §13.3): bring a data dir restored from an
older backup back to what the log published (`log.recovery`), then resume signing; and
`reindex`, the repair of what is derived from entries (SPEC §14.1)."""

from __future__ import annotations

import argparse
import sys

from .common import EXIT_OK, emit
from .operator_base import PROG, open_log

# Imported inside functions: the log's recovery ~120 ms or more (python -X importtime after
# `cli.operator`, min of 7 runs, 2026-12-05): only `recover` pays it.


def add_recover_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="URL|DIR",
        help="the log's public mirror (a serving log or a static export over HTTP) or an "
        "export folder (`export --tiles`) (required)",
    )


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


def cmd_reindex(args: argparse.Namespace) -> int:
    with open_log(args) as log:
        days = log.writer.reindex()
    added = sum(d["added"] for d in days)
    emit({"added": added, "days": days})
    print(
        f"{PROG}: reindex: {added} /record index rows added over {len(days)} days; the index "
        "holds every row the stored entries imply",
        file=sys.stderr,
    )
    return EXIT_OK
