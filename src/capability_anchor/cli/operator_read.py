"""The operator commands that only read the log: proof, consistency, export, audit."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from capability_anchor.encoding import hash_from_hex
from capability_anchor.errors import UsageError
from capability_anchor.keys import KeySet
from capability_anchor.progress import StderrProgress

from .common import EXIT_FAILED, EXIT_OK, emit
from .operator_base import PROG, data_dir, open_log

# Imported inside functions: the audit ~230 ms, export ~130 ms, the store's registry ~40 ms
# (python -X importtime after `cli.operator`, min of 7 runs, 2026-12-05): each only in its
# command.


def cmd_proof(args: argparse.Namespace) -> int:
    by_index = args.index is not None
    if by_index == (args.leaf_hash is not None) or (by_index and args.day is None):
        raise UsageError("give either --day D --index I, or --leaf-hash H [--day D]")
    with open_log(args) as log:
        if by_index:
            emit(log.proof(args.day, args.index, args.tree_size))
        else:
            h = hash_from_hex(args.leaf_hash, "--leaf-hash")
            emit(log.proof_by_leaf_hash(h, args.day, args.tree_size))
    return EXIT_OK


def cmd_consistency(args: argparse.Namespace) -> int:
    with open_log(args) as log:
        emit(log.consistency(args.day, args.first, args.second))
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from capability_anchor.export.days import export

    progress = StderrProgress()
    with open_log(args) as log:
        report = export(log, Path(args.outdir), progress, tiles=args.tiles)
    progress.close()
    emit(report.to_json())
    return EXIT_OK


def cmd_audit(args: argparse.Namespace) -> int:
    from capability_anchor.audit import AuditReport, audit_folder
    from capability_anchor.audit.datadir import audit_data_dir
    from capability_anchor.store import damage
    from capability_anchor.store import open as stores

    progress = StderrProgress()
    data = data_dir(args.data)
    report = AuditReport()
    # For the data dir --keys adds trust (heads signed by earlier keys; the store's own keys
    # table never does); for a folder it replaces the folder's keys.json.
    keys = KeySet.from_json(Path(args.keys).read_bytes()) if args.keys else None
    tsa_ca = None
    if args.tsa_ca:
        from capability_anchor.timestamp import trusted_cas

        tsa_ca = trusted_cas(args.tsa_ca)
    policy = None
    if args.policy:
        from capability_anchor.note import parse_policy

        policy = parse_policy(Path(args.policy).read_bytes())
    roots = None if args.roots is None else Path(args.roots)
    if roots is not None and not roots.is_dir():
        raise OSError(f"--roots {args.roots} is not a folder")
    # `--roots DIR` alone audits that folder only: a ./data (or $CAPABILITY_ANCHOR_DATA) that
    # happens to be there is another log, whose problems are not the folder's.
    with_log = roots is None or args.data is not None
    if with_log and stores.exists(data):
        # The data dir is only read (a copy the read-only opening needs is the store's own).
        report = audit_data_dir(
            data, keys=keys, tsa_ca=tsa_ca, roots=roots, progress=progress, policy=policy
        )
        # A failed audit stops every writer (the damage mark); a passing one frees them.
        if report.damage is not None:
            damage.mark(data, f"`capability-anchor audit` found: {report.damage}")
        elif report.ok and damage.clear(data):
            print(
                f"{PROG}: audit: passed: removed the damage mark {data / damage.MARK_FILE}; "
                "the service can start again",
                file=sys.stderr,
            )
    elif roots is None:
        raise OSError(f"no log at {data} and no --roots folder to audit")

    else:
        report.add(audit_folder(roots, keys, None, progress, tsa_ca or (), policy), "roots_")
    progress.close()
    for problem in report.problems:
        print(f"{PROG}: audit: {problem}", file=sys.stderr)
    emit(report.to_json())
    return EXIT_OK if report.ok else EXIT_FAILED
