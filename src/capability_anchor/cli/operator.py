"""`capability-anchor`, the operator CLI (SPEC §10): the parser and the dispatch. JSON on stdout,
messages on stderr; every subcommand takes `--data DIR`; the clock is the system's. The commands
live in `operator_write`, `operator_append`, `operator_read`, `operator_recover` and `serve`, what
they share in `operator_base`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from capability_anchor import __version__
from capability_anchor.envvars import STORE
from capability_anchor.errors import CapabilityAnchorError, UsageError

from .common import EXIT_USAGE, exit_code_for, quiet_broken_pipe
from .demo import cmd_demo
from .exitcodes import ALL, epilog, epilog_of
from .monitor import add_monitor_arguments, cmd_monitor
from .operator_append import cmd_append
from .operator_base import PROG, add_data, add_published, add_tsa, add_witness_deadline, data_dir
from .operator_read import cmd_audit, cmd_consistency, cmd_export, cmd_proof
from .operator_recover import cmd_backup, cmd_migrate, cmd_recover, cmd_reindex
from .operator_write import (
    cmd_checkpoint,
    cmd_cosign,
    cmd_init,
    cmd_policy,
    cmd_rotate_key,
    cmd_seal,
    cmd_timestamp,
)
from .serve import add_serve_arguments, cmd_serve
from .witness import add_witness_arguments, cmd_witness

# Imported inside functions: the store's registry ~40 ms (python -X importtime after
# `cli.operator`, min of 7 runs, 2026-12-05): only the command that needs it.

EXIT_CODES = epilog(ALL)


class _Help(argparse.RawDescriptionHelpFormatter):
    """Each option's default appended to its help unless said already; the epilog as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if "default" in text or default in (None, False, [], argparse.SUPPRESS):
            return text
        if not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def _seconds(text: str) -> int:
    """A whole number of seconds, 0 or more (argparse reports anything else as exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the notice cannot be negative")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Transparency log and Merkle anchor service for Capability Resolution. "
        "JSON on stdout, messages on stderr.",
        epilog=EXIT_CODES,
        formatter_class=_Help,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(
        name: str, text: str, run: Callable[[argparse.Namespace], int], data: bool = True
    ) -> argparse.ArgumentParser:
        # Each command's own exit codes, only those it can give (exitcodes.py); --data and
        # --store first where the command works on a data dir.
        p = sub.add_parser(
            name, help=text, description=text, epilog=epilog_of(name), formatter_class=_Help
        )
        p.set_defaults(run=run)
        if data:
            add_data(p)
        return p

    p = command("init", "create the store, an Ed25519 key and a writer token", cmd_init)
    p.add_argument(
        "--service-role",
        metavar="ROLE",
        default=None,
        help="with --store (as the database's owner): grant this existing login role only "
        "what the service needs (SELECT and INSERT on the log's tables) and bind the data dir "
        "to the URL as ROLE",
    )
    p.add_argument("--iss", required=True, metavar="ORIGIN", help="the resolver origin (required)")
    p.add_argument("--public-url", metavar="URL", help="base of anchor URLs (default: iss)")
    p.add_argument(
        "--records",
        choices=("observation", "any"),
        default="observation",
        help="what append accepts: Capability Resolution 0.2 observations, or any JSON object "
        "SPEC §2 allows (stored in the signed config)",
    )
    p.add_argument(
        "--id-namespace",
        metavar="NS",
        help="the resolver's discovery id_namespace: every record's sub must be NS:<local> "
        "(1 to 32 of a-z, 0-9 and -; stored in the signed config)",
    )
    add_tsa(p, deadline=False)
    p.add_argument(
        "--witness-policy",
        metavar="FILE",
        help="a C2SP tlog-policy file: the witnesses to submit checkpoints to (SPEC §12.3)",
    )

    p = command("append", "append JSON Lines records: one object per line", cmd_append)
    p.add_argument("file", metavar="FILE|-", help="JSON Lines file, or - for stdin")

    p = command("checkpoint", "publish an unsealed head of today if the tree grew", cmd_checkpoint)
    add_published(p)

    p = command("seal", "seal every past day that is not sealed, then stamp it", cmd_seal)
    add_tsa(p)
    add_published(p)

    p = command(
        "timestamp", "stamp every sealed head that a TSA has not stamped yet", cmd_timestamp
    )
    add_tsa(p)

    p = command("proof", "inclusion proof of an entry (as GET /proof)", cmd_proof)
    p.add_argument("--day", metavar="D", help="UTC day YYYY-MM-DD (needed with --index)")
    p.add_argument("--index", type=int, metavar="I", help="leaf index in that day's tree")
    p.add_argument("--leaf-hash", metavar="H", help="the entry's leaf hash, 64 hex digits")
    p.add_argument(
        "--tree-size",
        type=int,
        metavar="N",
        help="prove against this tree size (default: the newest published head)",
    )

    p = command("consistency", "consistency proof (as GET /consistency)", cmd_consistency)
    p.add_argument("--day", required=True, metavar="D", help="UTC day YYYY-MM-DD (required)")
    p.add_argument("--first", required=True, type=int, metavar="M", help="older tree size")
    p.add_argument("--second", required=True, type=int, metavar="N", help="newer tree size")

    p = command(
        "rotate-key",
        "rotate the signing key in two phases: publish the next key, later --activate it",
        cmd_rotate_key,
    )
    p.add_argument(
        "--notice",
        type=_seconds,
        default=3600,
        metavar="SECONDS",
        help="phase 1: how long the next key is published before it may sign (default: 3600)",
    )
    p.add_argument(
        "--activate",
        action="store_true",
        help="phase 2: sign with the published next key from now on (default: off)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with --activate: activate before the notice has passed (default: off)",
    )
    p.add_argument(
        "--compromised",
        action="store_true",
        help="both phases at once, and revoke the current key: it leaves /keys at once, and "
        "anything it signs from now on is reported (default: off)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="only the JSON line on stdout, no text on stderr (default: both)",
    )

    p = command("export", "write the static publication (SPEC §8) to OUTDIR", cmd_export)
    p.add_argument("outdir", metavar="OUTDIR", help="folder to write (created if missing)")
    p.add_argument(
        "--tiles", action="store_true", help="also write each day's tlog-tiles to <day>/tile/"
    )

    p = command("audit", "re-derive and check the log and/or an exported folder", cmd_audit)
    p.add_argument("--roots", metavar="DIR", help="audit an exported folder (alone: only it)")
    p.add_argument(
        "--keys", metavar="FILE", help="trusted JWKS for --roots (default: its keys.json)"
    )
    p.add_argument(
        "--policy",
        metavar="FILE",
        help="a tlog-policy: --roots' checkpoint must carry its quorum of cosignatures",
    )
    p.add_argument(
        "--tsa-ca",
        metavar="PEM",
        action="append",
        default=[],
        help="check that every stamp chains to one of these TSA CAs (repeatable)",
    )

    p = command(
        "backup", "copy the log, its keys and token to DEST, while writers go on", cmd_backup
    )
    p.add_argument("dest", metavar="DEST", help="a new or empty folder (created mode 0700)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")

    p = command(
        "migrate",
        "move a SQLite log to PostgreSQL exactly, prove the copy, then switch DIR to it",
        cmd_migrate,
        data=False,
    )
    p.add_argument(
        "--from", dest="source", required=True, metavar="DIR", help="the SQLite log's data dir"
    )
    p.add_argument(
        "--to",
        dest="target",
        required=True,
        metavar="URL",
        help="the new store, postgresql://USER@HOST/DBNAME, as its owner (no log there yet)",
    )

    p = command("policy", "set or replace the witness policy (a C2SP tlog-policy file)", cmd_policy)
    p.add_argument("file", metavar="FILE", help="the tlog-policy file")

    p = command("cosign", "submit the newest checkpoint to every policy witness now", cmd_cosign)
    p.add_argument(
        "--policy",
        metavar="FILE",
        help="ask the witnesses of this tlog-policy file, this once (default: the stored one); "
        "only the answers of witnesses the stored policy lists, with the same keys, are stored",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="also submit to witnesses stopped after a 409 or 422 (the operator has looked)",
    )
    add_witness_deadline(p)
    add_published(p)

    p = command(
        "recover",
        "bring back the entries and heads this data dir lacks from what the log published",
        cmd_recover,
    )
    p.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="URL|DIR",
        help="the log's public mirror (a serving log or a static export over HTTP) or an "
        "export folder (`export --tiles`) (required)",
    )

    p = command(
        "reindex",
        "rebuild the /record index from the stored entries, adding the rows it lacks (a repair)",
        cmd_reindex,
    )

    add_monitor_arguments(
        command(
            "monitor", "follow a log: check each checkpoint and new head", cmd_monitor, data=False
        )
    )

    add_serve_arguments(
        command(
            "serve", "run the HTTP service (SPEC §6) with background work", cmd_serve, data=False
        )
    )

    add_witness_arguments(
        command("witness", "run a C2SP tlog-witness for other logs", cmd_witness, data=False)
    )

    p = command(
        "demo",
        "anchor sample (or given) records in memory, sign and verify them",
        cmd_demo,
        data=False,
    )
    p.add_argument(
        "--data",
        metavar="DIR",
        default=None,
        help="write the demo's key and files to DIR/demo (default: a new temporary folder)",
    )
    p.add_argument("--iss", default="https://resolver.example", help="the resolver origin")
    p.add_argument("--records", type=Path, default=None, help="JSON Lines of records")
    return parser


def main(argv: list[str] | None = None) -> int:
    with quiet_broken_pipe():
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        try:
            _check_store(args)
            return int(args.run(args))
        except (CapabilityAnchorError, OSError) as exc:  # the edge: a message and an exit code
            print(f"{PROG}: {exc}", file=sys.stderr)
            return exit_code_for(exc)


def _check_store(args: argparse.Namespace) -> None:
    """Check `--store` (or the env) against the data dir; `args.store`: the URL, else None."""
    if "store" not in vars(args):
        return
    url = args.store if args.store is not None else STORE.get()
    if url is None:
        return
    if not url.strip():
        raise UsageError(f"--store (or ${STORE.name}) is set but empty: give the store's URL")
    from capability_anchor.store import open as stores

    creating = args.command == "init" or bool(getattr(args, "init", False))
    args.store = stores.given(data_dir(args.data), url, creating=creating)
    STORE.set(url.strip())  # for the processes the command starts (serve's sequencer, workers)


if __name__ == "__main__":
    sys.exit(main())
