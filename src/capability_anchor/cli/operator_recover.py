"""The data dir's copies and repairs: `backup DEST` (a copy `serve --data DEST` runs from),
`migrate` (SQLite into PostgreSQL), `recover --from URL|DIR` (SPEC §13.3: back to what the log
published, then signing resumes) and `reindex` (what is derived from entries, SPEC §14.1)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from capability_anchor.progress import StderrProgress

from .common import EXIT_OK, emit
from .operator_base import PROG, data_dir, open_log

# Imported inside functions: the log ~200-430 ms, its recovery ~120 ms or more, the audit's copy
# proof ~800 ms (python -X importtime after `cli.operator`, min of 7 runs, 2026-12-05): each only
# in its command.


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


def cmd_backup(args: argparse.Namespace) -> int:
    from capability_anchor.log.backup import backup

    result = backup(data_dir(args.data), Path(args.dest))
    if args.json:
        emit(result.to_json())
    else:
        print(result.text())
    for name in result.not_copied:
        print(
            f"{PROG}: backup: {name} in the data dir is not a log file; not copied", file=sys.stderr
        )
    return EXIT_OK


def cmd_migrate(args: argparse.Namespace) -> int:
    from capability_anchor.audit.copies import prove_copy
    from capability_anchor.log.migrate import migrate

    progress = StderrProgress()
    report = migrate(Path(args.source), args.target, prove_copy, progress)
    progress.close()
    emit(report)
    print(
        f"{PROG}: moved the log in {args.source} to {report['to']}; {args.source} opens it now",
        file=sys.stderr,
    )
    return EXIT_OK
