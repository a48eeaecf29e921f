"""`verify-proof`, the offline auditor command (SPEC §9, §12.5): parses arguments and prints. The
checks are `verify.checks.CHECKS`, the verification `verify.record.verify` over what `cli.inputs`
reads; exit codes are `EXIT_CODES` below."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from capability_anchor import __version__
from capability_anchor.bounded.read import DEFAULT_DEADLINE_S, check_deadline
from capability_anchor.errors import MalformedNote, UsageError
from capability_anchor.verify.checks import CHECKS

from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, quiet_broken_pipe

if TYPE_CHECKING:
    from capability_anchor.verify.record import Result

# Imported inside functions: `cli.inputs` ~110 ms and `note` ~90 ms (python -X importtime after
# `cli.verify_proof`, min of 7 runs, 2026-12-05): `verify-proof --help` skips them.

PROG = "verify-proof"
EXIT_CODES = (
    (EXIT_OK, "every check that ran passed (SKIPs do not fail)"),
    (
        EXIT_FAILED,
        "a check failed: a forged, altered or mismatched record, proof, head, stamp or history "
        "proof, or a witness quorum not met (a head that was read but is not a valid head "
        "document or JWS, bad JSON included, is a FAIL)",
    ),
    (
        EXIT_USAGE,
        "usage or I/O error: bad arguments, no trusted keys, missing or unreadable files, an "
        "unreachable URL or one that did not answer within --deadline, a file or reply over "
        "its size limit, malformed JSON in RECORD, --keys or keys.json, a malformed --policy",
    ),
)


def _item(label: str, text: str) -> str:
    return textwrap.fill(
        text, width=88, initial_indent=f"  {label} ", subsequent_indent=" " * (len(label) + 3)
    )


def build_parser() -> argparse.ArgumentParser:
    checks = "\n".join(_item(f"{n}. {name}:", what) for n, (name, what) in enumerate(CHECKS, 1))
    codes = "\n".join(_item(f"{code}", what) for code, what in EXIT_CODES)
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=textwrap.fill(
            "Verify a resolver-2 record's anchor and proof offline (SPEC §9), and its head's "
            "place in the log's witnessed history (SPEC §12.5). Trust comes only from --keys "
            "or --roots DIR/keys.json (and --policy), never from the record or the head.",
            width=88,
        ),
        epilog=f"checks, always all listed, in this order:\n{checks}\n\nexit codes:\n{codes}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "record",
        metavar="RECORD",
        help="a record JSON object (as /record serves it, or any object with anchor and "
        "proof) or a compact record JWS: a file path, or - for stdin",
    )
    parser.add_argument(
        "--head",
        metavar="FILE|URL",
        help="the head: a head document or a bare compact JWS (default: from --roots, else "
        "the anchor's url)",
    )
    parser.add_argument(
        "--roots",
        metavar="DIR",
        help="an exported folder: heads (<day>.json, <day>/<tree_size>.json), stamps, "
        "keys.json and key-records.json (default: none)",
    )
    parser.add_argument(
        "--keys",
        metavar="FILE|URL",
        help="the trusted JWK Set; replaces the folder's keys.json (default: --roots "
        "DIR/keys.json; with neither, exit 2)",
    )
    parser.add_argument(
        "--iss",
        metavar="ORIGIN",
        help="the expected issuer: the head's iss and the record's must equal it (default: "
        "not checked beyond record iss = head iss)",
    )
    parser.add_argument(
        "--tsa-ca",
        metavar="PEM",
        action="append",
        default=[],
        help="a trusted TSA CA certificate file, repeatable (default: none, so timestamp SKIPs)",
    )
    parser.add_argument(
        "--at",
        metavar="TIME",
        help="the time for the record lifetime rules and the cosignature time limit (60 s "
        "after it): RFC 3339 with a zone, or epoch seconds (default: now)",
    )
    parser.add_argument(
        "--history-proof",
        metavar="FILE",
        help="the head's C2SP tlog-proof in the history (default: --roots DIR/<day>.tlog-proof "
        "or <day>/<tree_size>.tlog-proof, else <base>/history/proof when the head came from "
        "the anchor's url; none: history SKIPs)",
    )
    parser.add_argument(
        "--policy",
        metavar="FILE",
        help="a C2SP tlog-policy: its log keys are trusted for checkpoints, its witnesses' "
        "cosignatures must meet its quorum, and history must then find a proof (default: "
        "none, so witnesses SKIPs)",
    )
    parser.add_argument(
        "--origin",
        metavar="ORIGIN",
        help="the expected checkpoint origin (default: the policy's log key name, else the "
        "anchor's <base> without scheme + /history)",
    )
    parser.add_argument(
        "--deadline",
        metavar="S",
        type=float,
        default=DEFAULT_DEADLINE_S,
        help="how long one URL read may take in all, from connecting to its last byte "
        f"(default: {DEFAULT_DEADLINE_S:g})",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help='print {"ok", "checks": [{"name", "result", "detail"}]} on stdout (default: '
        "one line per check)",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="also print each hash step of the inclusion check and of the history "
        "inclusion, on stdout (stderr with --json) (default: off)",
    )
    parser.add_argument(
        "--version", action="version", version=f"{PROG} {__version__}", help="print the version"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    with quiet_broken_pipe():
        args = build_parser().parse_args(argv)
        # Imported here so `--help` stays as light as argparse.
        from capability_anchor.bounded.read import read_stream

        from .inputs import load_keys, parse_at, read_source, trust_chain, verify_inputs

        try:
            deadline = check_deadline(args.deadline)
            at = None if args.at is None else parse_at(args.at)
            # Trust: only --keys, else the folder's keys.json, followed through the key
            # rotation records (which only extend trust from keys already trusted); never
            # the record or the head.
            if args.keys is not None:
                where = args.keys
            elif args.roots is not None:
                where = str(Path(args.roots) / "keys.json")
            else:
                raise UsageError("no trusted keys: give --keys FILE|URL or --roots DIR (keys.json)")
            keys = load_keys(read_source(where, deadline=deadline), where)
            # CR §8: a kid SHOULD be the key's thumbprint; tell the auditor which are not.
            for key in keys.non_thumbprint_keys:
                print(
                    f"{PROG}: notice: {where}: trusted key kid {key.kid!r} is not its RFC 7638 "
                    f"thumbprint ({key.thumbprint}); tokens are matched to it by that kid",
                    file=sys.stderr,
                )
            roots = None if args.roots is None else Path(args.roots)
            chain = trust_chain(keys, where, roots, deadline=deadline)
            if args.record == "-":
                record = read_stream(sys.stdin.buffer, "stdin (RECORD -)")
            else:
                record = read_source(args.record, deadline=deadline)
            result = verify_inputs(
                record,
                keys=chain.keys,
                head=args.head,
                roots=roots,
                iss=args.iss,
                tsa_ca=args.tsa_ca,
                at=at,
                history_proof=args.history_proof,
                policy=args.policy,
                origin=None if args.origin is None else _origin(args.origin),
                deadline=deadline,
                revocations=chain.revocations,
            )
        except (UsageError, OSError) as exc:
            print(f"{PROG}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        return _report(result, args)


def _origin(origin: str) -> str:
    """`--origin` must be a signed-note key name (it names the checkpoint's signer)."""
    from capability_anchor.note.signed import check_key_name

    try:
        return check_key_name(origin)
    except MalformedNote as exc:
        raise UsageError(f"--origin: {exc}") from None


def _report(result: Result, args: argparse.Namespace) -> int:
    if args.explain:
        out = sys.stderr if args.json else sys.stdout
        for line in result.explain or ["inclusion: no hash steps (the check did not run)"]:
            print(f"explain: {line}", file=out)
        for line in result.explain_history or ["no hash steps (the check did not run)"]:
            print(f"explain: history: {line}", file=out)
    if args.json:
        sys.stdout.write(json.dumps(result.to_json(), ensure_ascii=False) + "\n")
    else:
        for check in result.checks:
            print(f"{check.outcome.value} {check.name}: {check.detail}")
        for note in result.notes:
            print(f"note: {note}")
    return EXIT_OK if result.ok else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
