"""`verify-proof`: the offline auditor command (SPEC §9).

The seven checks are named here once, in the order SPEC §9 fixes; the verification itself
arrives with the verify-proof issue. Until then the command states that and exits 2, so no
script can mistake it for a passing verification.
"""

from __future__ import annotations

import argparse
import sys

from .common import EXIT_USAGE

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
    build_parser().parse_args(argv)
    print("verify-proof: verification is not implemented in this version", file=sys.stderr)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
