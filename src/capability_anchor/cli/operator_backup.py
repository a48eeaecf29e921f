"""`backup DEST`: a consistent copy of the data dir that `serve --data DEST` runs from; `migrate`,
which moves a SQLite log into PostgreSQL."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from capability_anchor.progress import StderrProgress

from .common import EXIT_OK, emit
from .operator_base import PROG, data_dir

# Imported inside functions: the log ~200-430 ms, the audit's copy proof ~800 ms (python -X
# importtime after `cli.operator`, min of 7 runs, 2026-12-05): only `backup` and `migrate` pay
# them.


def add_backup_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dest", metavar="DEST", help="a new or empty folder (created mode 0700)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")


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
