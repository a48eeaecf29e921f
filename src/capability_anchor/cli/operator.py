"""`capability-anchor`: the operator CLI (SPEC §10).

Machine output is JSON on stdout, messages on stderr; exit 0 success, 1 a failed check or
refused operation, 2 usage or I/O error. Every subcommand takes `--data DIR` (default: env
CAPABILITY_ANCHOR_DATA, else ./data). The log's clock is the system clock: there is no way
to set it from here (tests inject it through the library).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

from ..errors import CapabilityAnchorError, InvalidRecord
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, emit, fail, quiet_broken_pipe

PROG = "capability-anchor"


def _data_dir(value: str | None) -> Path:
    return Path(value or os.environ.get("CAPABILITY_ANCHOR_DATA") or "data")


def _add_data(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data",
        metavar="DIR",
        default=None,
        help="data dir (default: $CAPABILITY_ANCHOR_DATA, else ./data)",
    )


def _add_tsa(p: argparse.ArgumentParser, *, deadline: bool = True) -> None:
    p.add_argument(
        "--tsa", metavar="URL", action="append", default=[], help="an RFC 3161 TSA (repeatable)"
    )
    p.add_argument(
        "--tsa-ca",
        metavar="PEM",
        action="append",
        default=[],
        help="trusted TSA CA certificates (repeatable; a file may hold several)",
    )
    if deadline:
        p.add_argument(
            "--tsa-deadline",
            type=float,
            default=None,
            metavar="S",
            help="total time allowed for one TSA exchange (default 10)",
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Transparency log and Merkle anchor service for Capability Resolution.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("init", help="create the store, an Ed25519 key and a writer token")
    _add_data(p)
    p.add_argument("--iss", required=True, metavar="ORIGIN", help="the resolver origin")
    p.add_argument("--public-url", metavar="URL", help="base of anchor URLs (default: iss)")
    _add_tsa(p, deadline=False)

    p = sub.add_parser("append", help="append JSON Lines records (FILE or -)")
    _add_data(p)
    p.add_argument("file", metavar="FILE|-")

    p = sub.add_parser("checkpoint", help="publish an unsealed head of today if it grew")
    _add_data(p)

    p = sub.add_parser("seal", help="seal every past day that is not sealed, then stamp it")
    _add_data(p)
    _add_tsa(p)

    p = sub.add_parser("timestamp", help="stamp every sealed head that a TSA has not stamped yet")
    _add_data(p)
    _add_tsa(p)

    p = sub.add_parser("proof", help="inclusion proof of an entry (as GET /proof)")
    _add_data(p)
    p.add_argument("--day", metavar="D")
    p.add_argument("--index", type=int, metavar="I")
    p.add_argument("--leaf-hash", metavar="H")
    p.add_argument("--tree-size", type=int, metavar="N")

    p = sub.add_parser("consistency", help="consistency proof (as GET /consistency)")
    _add_data(p)
    p.add_argument("--day", required=True, metavar="D")
    p.add_argument("--first", required=True, type=int, metavar="M")
    p.add_argument("--second", required=True, type=int, metavar="N")

    p = sub.add_parser(
        "rotate-key",
        help="make a new signing key; the old one endorses it and it endorses the old one",
    )
    _add_data(p)

    p = sub.add_parser("export", help="write the static publication (SPEC §8) to OUTDIR")
    _add_data(p)
    p.add_argument("outdir", metavar="OUTDIR")

    p = sub.add_parser("audit", help="re-derive and check the log and/or an exported folder")
    _add_data(p)
    p.add_argument("--roots", metavar="DIR", help="also audit an exported folder")
    p.add_argument("--keys", metavar="FILE", help="trusted JWKS for --roots (else its keys.json)")
    p.add_argument(
        "--tsa-ca",
        metavar="PEM",
        action="append",
        default=[],
        help="check that every stamp chains to one of these TSA CAs (repeatable)",
    )

    p = sub.add_parser("serve", help="run the HTTP service (SPEC §6) with background work")
    _add_data(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--public-url", metavar="URL", help="base of anchor URLs (default: iss)")
    p.add_argument("--checkpoint-interval", type=float, default=60.0, metavar="S")
    p.add_argument("--record-lifetime", type=int, default=24 * 3600, metavar="S")
    _add_tsa(p)
    p.add_argument(
        "--rate-limit", type=int, default=100, metavar="N", help="per client per second, 0 = off"
    )
    p.add_argument(
        "--header-timeout", type=float, default=10.0, metavar="S", help="for a request's headers"
    )
    p.add_argument(
        "--body-timeout", type=float, default=30.0, metavar="S", help="for a request's body"
    )
    p.add_argument(
        "--body-workers",
        type=int,
        default=1,
        metavar="N",
        help="processes checking request bodies (0: on the event loop)",
    )

    p = sub.add_parser(
        "demo", help="anchor sample (or given) records in memory, sign and verify them"
    )
    _add_data(p)
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

    return Log.open(_data_dir(args.data))


def cmd_init(args: argparse.Namespace) -> int:
    from ..log import Log
    from ..stamping import TsaConfig

    data = _data_dir(args.data)
    tsa = TsaConfig.from_files(args.tsa, args.tsa_ca)
    config = tsa.to_config() if tsa.urls or tsa.ca_pem else None
    with Log.init(data, iss=args.iss, public_url=args.public_url, config=config) as log:
        emit({"iss": log.iss, "first_day": log.first_day, "kid": log.key.kid, "data": str(data)})
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
    from .. import leaf
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
                print(f"{PROG}: line {number}: {exc}", file=sys.stderr)
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


def _emit_doc(doc: bytes | None) -> None:
    sys.stdout.write(("null" if doc is None else doc.decode("utf-8")) + "\n")


def cmd_checkpoint(args: argparse.Namespace) -> int:
    with _open(args) as log:
        _emit_doc(log.checkpoint())
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

    data = _data_dir(args.data)
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
    data = _data_dir(args.data)
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


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(EXIT_OK)


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ..api import Settings, create_app
    from ..api.nodelay import with_header_timeout
    from ..errors import UsageError
    from ..log import Log
    from ..store import Store

    data = _data_dir(args.data)
    if not 0 < args.record_lifetime <= 172800:
        raise UsageError("--record-lifetime must be 1..172800 seconds (48 h)")
    if not (args.header_timeout > 0 and args.body_timeout > 0 and args.body_workers >= 0):
        raise UsageError("--header-timeout and --body-timeout must be > 0, --body-workers >= 0")
    if not Store.exists(data):
        iss = f"http://{args.host}:{args.port}"
        Log.init(data, iss=iss, public_url=args.public_url).close()
        print(f"{PROG}: initialised a log in {data} (iss {iss})", file=sys.stderr)
    print(f"{PROG}: writer token in {data / 'writer-token'}", file=sys.stderr)
    settings = Settings(
        data_dir=data,
        public_url=args.public_url,
        checkpoint_interval=args.checkpoint_interval,
        record_lifetime=args.record_lifetime,
        rate_limit=args.rate_limit,
        tsa=tuple(args.tsa),
        tsa_ca=tuple(Path(p) for p in args.tsa_ca),
        tsa_deadline=args.tsa_deadline,
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        body_workers=args.body_workers,
    )
    # The log is opened and self-checked here, before uvicorn binds the port.
    app = create_app(settings)
    print(f"{PROG}: serving on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    # uvicorn stops accepting on SIGTERM/SIGINT and lets in-flight requests (and batches)
    # finish before the app's shutdown closes the log; then it re-raises the signal it caught
    # to the handler that was in place before it: these make that a clean exit 0.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _exit_cleanly)
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        timeout_graceful_shutdown=30,
        # The production form's protocol: TCP_NODELAY and the header timeout.
        http=with_header_timeout(settings.header_timeout),
    )
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(_data_dir(args.data), args.iss, args.records)


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
