"""`capability-anchor`: the operator CLI (SPEC §10). Subcommands grow with each issue."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..errors import CapabilityAnchorError
from .common import EXIT_USAGE, fail


def _data_dir(value: str | None) -> Path:
    return Path(value or os.environ.get("CAPABILITY_ANCHOR_DATA") or "data")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="capability-anchor",
        description="Transparency log and Merkle anchor service for Capability Resolution.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="anchor sample (or given) records, sign a head and resolver-2 records, verify all",
    )
    demo.add_argument(
        "--data", help="data dir (default: $CAPABILITY_ANCHOR_DATA, else ./data)", default=None
    )
    demo.add_argument("--iss", default="https://resolver.example", help="the resolver origin")
    demo.add_argument(
        "--records", type=Path, default=None, help="JSON Lines of records (default: samples)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        if args.command == "demo":
            from .demo import run_demo

            return run_demo(_data_dir(args.data), args.iss, args.records)
    except (CapabilityAnchorError, OSError) as exc:  # the edge: message and exit code
        return fail(parser.prog, exc)
    return EXIT_USAGE  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
