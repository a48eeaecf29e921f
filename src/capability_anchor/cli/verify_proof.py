"""`verify-proof`: the offline auditor command (SPEC §9).

The seven checks are named here once, in the order SPEC §9 fixes; the verification itself is
`capability_anchor.verify.verify` (which audit can reuse). This module only parses arguments,
reads RECORD and the trusted keys, and prints. Exit 0: every check that ran passed; 1: a check
failed; 2: usage or I/O error (no keys, unreadable files, unreachable URLs, malformed JSON in
RECORD, --keys or keys.json).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE

CHECKS = (
    ("record_signature", "the record token's JWS verifies with a trusted key"),
    ("record_lifetime", "Capability Resolution §8 expiry rules at --at"),
    ("leaf", "the leaf hash recomputed from the signed claims (SPEC §2)"),
    ("inclusion", "the RFC 9162 inclusion proof reaches the anchored root"),
    ("head_signature", "the head's JWS verifies (typ capability-anchor+jws, trusted kid)"),
    ("head_matches", "the head's day, tree_size, root and sealed agree with anchor and proof"),
    ("timestamp", "an RFC 3161 stamp of the sealed head verifies against --tsa-ca"),
)


def build_parser() -> argparse.ArgumentParser:
    checks = "\n".join(f"  {n}. {name}: {what}" for n, (name, what) in enumerate(CHECKS, 1))
    parser = argparse.ArgumentParser(
        prog="verify-proof",
        description="Verify a resolver-2 record's anchor and proof offline.",
        epilog=f"checks, always all listed, in this order:\n{checks}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("record", metavar="RECORD", help="record JSON or compact JWS, or -")
    parser.add_argument("--head", metavar="FILE|URL")
    parser.add_argument("--roots", metavar="DIR")
    parser.add_argument("--keys", metavar="FILE|URL")
    parser.add_argument("--iss", metavar="ORIGIN")
    parser.add_argument("--tsa-ca", metavar="PEM", action="append", default=[])
    parser.add_argument("--at", metavar="TIME")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--explain", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Imported here so `--help` stays as light as argparse.
    from ..errors import UsageError
    from ..verify import (
        CHECK_NAMES,
        follow_key_records,
        load_keys,
        parse_at,
        read_source,
        verify,
    )

    assert tuple(name for name, _ in CHECKS) == CHECK_NAMES
    try:
        at = None if args.at is None else parse_at(args.at)
        # Trust: only --keys, else the folder's keys.json, followed through the folder's key
        # rotation records; never the record or the head.
        if args.keys is not None:
            keys = load_keys(read_source(args.keys), args.keys)
        elif args.roots is not None:
            where = str(Path(args.roots) / "keys.json")
            keys = load_keys(read_source(where), where)
        else:
            raise UsageError("no trusted keys: give --keys FILE|URL or --roots DIR (keys.json)")
        if args.roots is not None:
            # Rotation records only extend trust from keys already trusted (SPEC proposal).
            keys = follow_key_records(keys, Path(args.roots))
        record = sys.stdin.buffer.read() if args.record == "-" else read_source(args.record)
        result = verify(
            record,
            keys=keys,
            head=args.head,
            roots=None if args.roots is None else Path(args.roots),
            iss=args.iss,
            tsa_ca=args.tsa_ca,
            at=at,
        )
    except (UsageError, OSError) as exc:
        print(f"verify-proof: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.explain:
        out = sys.stderr if args.json else sys.stdout
        for line in result.explain or ["inclusion: no hash steps (the check did not run)"]:
            print(f"explain: {line}", file=out)
    if args.json:
        sys.stdout.write(json.dumps(result.to_json(), ensure_ascii=False) + "\n")
    else:
        for name, outcome, detail in result.checks:
            print(f"{outcome} {name}: {detail}")
    return EXIT_OK if result.ok else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
