"""`capability-anchor`: the operator CLI (SPEC §10).

Machine output is JSON on stdout, messages on stderr; exit 0 success, 1 a failed check or
refused operation, 2 usage or I/O error. Every subcommand takes `--data DIR` (default: env
CAPABILITY_ANCHOR_DATA, else ./data). The log's clock is the system clock: there is no way
to set it from here (tests inject it through the library).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from .. import leaf
from ..errors import CapabilityAnchorError, InvalidRecord
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, emit, fail, quiet_broken_pipe
from .serve import add_serve_arguments, cmd_serve

PROG = "capability-anchor"


def data_dir(value: str | None) -> Path:
    return Path(value or os.environ.get("CAPABILITY_ANCHOR_DATA") or "data")


EXIT_CODES = """exit codes:
  0  done (every check passed)
  1  refused or a failed check (an invalid record, an audit problem, a failed stamp)
  2  usage or I/O error (bad arguments, no log at DIR, unreadable file, taken port, busy)"""


class _Help(argparse.RawDescriptionHelpFormatter):
    """Each option's default appended to its help unless the help already says it (or there
    is none: None, an empty list, an unset flag); the exit-code epilog kept as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if "default" in text or default in (None, False, [], argparse.SUPPRESS):
            return text
        if not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def add_data(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data",
        metavar="DIR",
        default=None,
        help="data dir (default: $CAPABILITY_ANCHOR_DATA, else ./data)",
    )


def add_tsa(p: argparse.ArgumentParser, *, deadline: bool = True) -> None:
    p.add_argument(
        "--tsa",
        metavar="URL",
        action="append",
        default=[],
        help="an RFC 3161 TSA (repeatable; default: the ones stored by init)",
    )
    p.add_argument(
        "--tsa-ca",
        metavar="PEM",
        action="append",
        default=[],
        help="trusted TSA CA certificates (repeatable, a file may hold several; "
        "default: the ones stored by init)",
    )
    if deadline:
        p.add_argument(
            "--tsa-deadline",
            type=float,
            default=None,
            metavar="S",
            help="total time allowed for one TSA exchange (default: 10)",
        )


# The old private names, for code written against them on other branches.
_data_dir, _add_data, _add_tsa = data_dir, add_data, add_tsa


def _version() -> str:
    from .. import __version__

    return f"{PROG} {__version__}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Transparency log and Merkle anchor service for Capability Resolution. "
        "JSON on stdout, messages on stderr.",
        epilog=EXIT_CODES,
        formatter_class=_Help,
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name, help=text, description=text, epilog=EXIT_CODES, formatter_class=_Help
        )

    p = command("init", "create the store, an Ed25519 key and a writer token")
    add_data(p)
    p.add_argument(
        "--iss", required=True, metavar="ORIGIN", help="the resolver origin (required)"
    )
    p.add_argument("--public-url", metavar="URL", help="base of anchor URLs (default: iss)")
    p.add_argument(
        "--records",
        choices=("observation", "any"),
        default="observation",
        help="what append accepts: Capability Resolution 0.2 observations, or any JSON object "
        "SPEC §2 allows (stored in the signed config)",
    )
    add_tsa(p, deadline=False)

    p = command("append", "append JSON Lines records: one object per line")
    add_data(p)
    p.add_argument("file", metavar="FILE|-", help="JSON Lines file, or - for stdin")

    p = command("checkpoint", "publish an unsealed head of today if the tree grew")
    add_data(p)

    p = command("seal", "seal every past day that is not sealed, then stamp it")
    add_data(p)
    add_tsa(p)

    p = command("timestamp", "stamp every sealed head that a TSA has not stamped yet")
    add_data(p)
    add_tsa(p)

    p = command("proof", "inclusion proof of an entry (as GET /proof)")
    add_data(p)
    p.add_argument("--day", metavar="D", help="UTC day YYYY-MM-DD (needed with --index)")
    p.add_argument("--index", type=int, metavar="I", help="leaf index in that day's tree")
    p.add_argument("--leaf-hash", metavar="H", help="the entry's leaf hash, 64 hex digits")
    p.add_argument(
        "--tree-size",
        type=int,
        metavar="N",
        help="prove against this tree size (default: the newest published head)",
    )

    p = command("consistency", "consistency proof (as GET /consistency)")
    add_data(p)
    p.add_argument("--day", required=True, metavar="D", help="UTC day YYYY-MM-DD (required)")
    p.add_argument("--first", required=True, type=int, metavar="M", help="older tree size")
    p.add_argument("--second", required=True, type=int, metavar="N", help="newer tree size")

    p = command(
        "rotate-key", "make a new signing key; the old one endorses it and it endorses the old one"
    )
    add_data(p)

    p = command("export", "write the static publication (SPEC §8) to OUTDIR")
    add_data(p)
    p.add_argument("outdir", metavar="OUTDIR", help="folder to write (created if missing)")

    p = command("audit", "re-derive and check the log and/or an exported folder")
    add_data(p)
    p.add_argument("--roots", metavar="DIR", help="also audit an exported folder")
    p.add_argument(
        "--keys", metavar="FILE", help="trusted JWKS for --roots (default: its keys.json)"
    )
    p.add_argument(
        "--tsa-ca",
        metavar="PEM",
        action="append",
        default=[],
        help="check that every stamp chains to one of these TSA CAs (repeatable)",
    )

    add_serve_arguments(command("serve", "run the HTTP service (SPEC §6) with background work"))

    p = command("demo", "anchor sample (or given) records in memory, sign and verify them")
    add_data(p)
    p.add_argument("--iss", default="https://resolver.example", help="the resolver origin")
    p.add_argument("--records", type=Path, default=None, help="JSON Lines of records")
    return parser


def main(argv: list[str] | None = None) -> int:
    with quiet_broken_pipe():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(COMMANDS[args.command](args))
    except (CapabilityAnchorError, OSError) as exc:  # the edge: a message and an exit code
        return fail(PROG, exc)


# --- commands ---------------------------------------------------------------------------------


def _open(args: argparse.Namespace) -> Any:
    from ..log import Log

    return Log.open(data_dir(args.data))


def cmd_init(args: argparse.Namespace) -> int:
    from ..log import Log
    from ..stamping import TsaConfig

    data = data_dir(args.data)
    tsa = TsaConfig.from_files(args.tsa, args.tsa_ca)
    config = tsa.to_config() if tsa.urls or tsa.ca_pem else None
    with Log.init(
        data, iss=args.iss, public_url=args.public_url, config=config, records=args.records
    ) as log:
        emit(
            {
                "iss": log.iss,
                "first_day": log.first_day,
                "kid": log.key.kid,
                "data": str(data),
                "records": log.records,
            }
        )
        print(
            f"{PROG}: created a log in {data}; writer token in {data / 'writer-token'}",
            file=sys.stderr,
        )
    return EXIT_OK


def _read_lines(name: str) -> list[bytes]:
    if name == "-":
        return sys.stdin.buffer.read().split(b"\n")
    return Path(name).read_bytes().split(b"\n")


def cmd_append(args: argparse.Namespace) -> int:
    from ..log import MAX_BATCH
    from ..progress import StderrProgress

    lines = _read_lines(args.file)
    with _open(args) as log:
        records: list[object] = []
        line_of: list[int] = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue  # blank lines are skipped but counted
            try:
                records.append(leaf.parse_json(line))
            except InvalidRecord as exc:
                # Malformed JSON is exit 2 in every command (README, Decisions).
                hint = _json_lines_hint(lines) if not records else ""
                print(f"{PROG}: line {number}: {exc}{hint}", file=sys.stderr)
                return EXIT_USAGE
            line_of.append(number)
        # Everything is validated before anything is stored: one bad line stores nothing.
        try:
            prepared = log.prepare(records)
        except InvalidRecord as exc:
            number = line_of[exc.position] if exc.position is not None else 0
            print(f"{PROG}: line {number}: {exc}", file=sys.stderr)
            return EXIT_FAILED
        progress = StderrProgress()
        for start in range(0, len(prepared), MAX_BATCH):
            # Each batch is one durable transaction; its lines are printed only after the
            # commit, so every line printed is an acknowledged entry.
            for result in log.append_prepared(prepared[start : start + MAX_BATCH]):
                emit(result.to_json())
            sys.stdout.flush()
            progress(min(start + MAX_BATCH, len(prepared)), len(prepared), "append")
        progress.close()
    return EXIT_OK


def _json_lines_hint(lines: list[bytes]) -> str:
    """A hint when the first record does not parse because the input is one JSON document
    spread over several lines (a pretty-printed object or an array), not JSON Lines."""
    content = [line for line in lines if line.strip()]
    if len(content) < 2:
        return ""
    first = content[0].strip()
    if first not in (b"{", b"["):
        try:
            leaf.parse_json(b"\n".join(lines))
        except InvalidRecord:
            return ""
    return "; input is JSON Lines: one object per line"


def _emit_doc(doc: bytes | None) -> None:
    sys.stdout.write(("null" if doc is None else doc.decode("utf-8")) + "\n")


def cmd_checkpoint(args: argparse.Namespace) -> int:
    with _open(args) as log:
        before = log.read.newest_unsealed(log.today())
        doc = log.checkpoint()
        _emit_doc(doc)
        if doc is None:
            print(f"{PROG}: no head: today (UTC) has no entries yet", file=sys.stderr)
        elif before is not None and doc == before.doc:
            print(
                f"{PROG}: the tree did not grow since its newest head (tree size "
                f"{before.tree_size}): no new head; printed that one",
                file=sys.stderr,
            )
    return EXIT_OK


def _tsa_config(args: argparse.Namespace, log: Any) -> Any:
    from ..stamping import TsaConfig

    return TsaConfig.resolve(log.config, args.tsa, args.tsa_ca, args.tsa_deadline)


def _report_stamp(result: Any) -> None:
    print(f"{PROG}: {result.describe()}", file=sys.stderr)


def cmd_seal(args: argparse.Namespace) -> int:
    import time

    from .. import head as heads
    from ..clockguard import acknowledge, iso, monotonic
    from ..stamping import stamp_missing

    def printed(doc: bytes) -> None:
        # Printed as each day's transaction commits: a printed head is a published head.
        _emit_doc(doc)
        sys.stdout.flush()

    # The clock reading that decides what is sealed is the one the operator acknowledges.
    wall, mono = time.time(), monotonic()
    with _open(args) as log:
        # The TSA configuration is checked before anything is sealed (usage errors first).
        tsa = _tsa_config(args, log)
        sealed = log.seal(printed)
        if not sealed:
            # Still JSON on stdout: an empty list says "nothing sealed" to a script.
            sys.stdout.write("[]\n")
            note = "nothing to seal: every day before today (UTC) is sealed"
            print(f"{PROG}: {note}", file=sys.stderr)
        # A running service whose clocks disagree takes this reading as its new baseline.
        ack = acknowledge(log.data_dir, wall, mono)
        print(
            f"{PROG}: the wall clock ({iso(wall)}) is acknowledged for a running service "
            f"({ack})",
            file=sys.stderr,
        )
        if tsa.urls and sealed:
            days = {heads.parse_document(doc).day for doc in sealed}
            # Fail open: a failed stamp is reported and left for `timestamp` or the service.
            stamp_missing(log, tsa, days=days, on_result=_report_stamp)
    return EXIT_OK


def cmd_timestamp(args: argparse.Namespace) -> int:
    from ..errors import UsageError
    from ..stamping import stamp_missing

    with _open(args) as log:
        tsa = _tsa_config(args, log)
        if not tsa.urls:
            raise UsageError("no TSA: give --tsa URL (or store one with init --tsa)")
        failed = False

        def report(result: Any) -> None:
            nonlocal failed
            if result.ok:
                emit(result.to_json())
                sys.stdout.flush()
            else:
                failed = True
                _report_stamp(result)

        stamp_missing(log, tsa, on_result=report)
    return EXIT_FAILED if failed else EXIT_OK


def cmd_proof(args: argparse.Namespace) -> int:
    from ..encoding import hash_from_hex
    from ..errors import UsageError

    by_index = args.index is not None
    if by_index == (args.leaf_hash is not None) or (by_index and args.day is None):
        raise UsageError("give either --day D --index I, or --leaf-hash H [--day D]")
    with _open(args) as log:
        if by_index:
            emit(log.proof(args.day, args.index, args.tree_size))
        else:
            h = hash_from_hex(args.leaf_hash, "--leaf-hash")
            emit(log.proof_by_leaf_hash(h, args.day, args.tree_size))
    return EXIT_OK


def cmd_consistency(args: argparse.Namespace) -> int:
    with _open(args) as log:
        emit(log.consistency(args.day, args.first, args.second))
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from ..export import export
    from ..progress import StderrProgress

    progress = StderrProgress()
    with _open(args) as log:
        report = export(log, Path(args.outdir), progress)
    progress.close()
    emit(report.to_json())
    return EXIT_OK


def cmd_rotate_key(args: argparse.Namespace) -> int:
    from ..log import Log
    from ..logtrust import rotate_key

    data = data_dir(args.data)
    rotation = rotate_key(data, Log.open)
    emit(rotation.to_json())
    print(
        f"{PROG}: now signing with {rotation.kid}; the old key is kept in {rotation.backup}. "
        "Restart a running `serve` so it signs with the new key, and re-export.",
        file=sys.stderr,
    )
    return EXIT_OK


def cmd_audit(args: argparse.Namespace) -> int:
    import tempfile

    from ..audit import AuditReport, audit_folder
    from ..auditdb import audit_data_dir
    from ..keys import KeySet
    from ..progress import StderrProgress
    from ..store import Store

    progress = StderrProgress()
    data = data_dir(args.data)
    report = AuditReport()
    # For the data dir --keys adds trust (heads signed by earlier keys; the store's own keys
    # table never does); for a folder it replaces the folder's keys.json.
    keys = KeySet.from_json(Path(args.keys).read_bytes()) if args.keys else None
    tsa_ca = None
    if args.tsa_ca:
        from ..timestamp import trusted_cas

        tsa_ca = trusted_cas(args.tsa_ca)
    roots = None if args.roots is None else Path(args.roots)
    if roots is not None and not roots.is_dir():
        raise OSError(f"--roots {args.roots} is not a folder")
    if Store.exists(data):
        # The data dir is only read; a copy the read-only opening may need goes here.
        with tempfile.TemporaryDirectory(prefix="capability-anchor-audit-") as scratch:
            report = audit_data_dir(
                data, Path(scratch), keys=keys, tsa_ca=tsa_ca, roots=roots, progress=progress
            )
    elif roots is None:
        raise OSError(f"no log at {data} and no --roots folder to audit")
    else:
        folder = audit_folder(roots, keys, None, progress, tsa_ca or ())
        report.problems += folder.problems
        for k, v in folder.checked.items():
            report.count(f"roots_{k}", v)
    progress.close()
    for problem in report.problems:
        print(f"{PROG}: audit: {problem}", file=sys.stderr)
    emit(report.to_json())
    return EXIT_OK if report.ok else EXIT_FAILED


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(data_dir(args.data), args.iss, args.records)


COMMANDS = {
    "init": cmd_init,
    "append": cmd_append,
    "checkpoint": cmd_checkpoint,
    "seal": cmd_seal,
    "timestamp": cmd_timestamp,
    "proof": cmd_proof,
    "consistency": cmd_consistency,
    "rotate-key": cmd_rotate_key,
    "export": cmd_export,
    "audit": cmd_audit,
    "serve": cmd_serve,
    "demo": cmd_demo,
}


if __name__ == "__main__":
    sys.exit(main())
