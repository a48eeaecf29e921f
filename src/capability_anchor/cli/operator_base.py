"""What the operator commands share: the program name, the data dir, opening the log, the options
several commands take."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from capability_anchor.envvars import DATA, PUBLISHED
from capability_anchor.errors import UsageError

# Imported inside functions: the log ~380 ms (python -X importtime after `cli.operator`, min of
# 7 runs, 2026-12-05): `--help` and the commands that open no log skip it.

PROG = "capability-anchor"
MAX_DEADLINE_S = 600.0


def _deadline(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= MAX_DEADLINE_S:
        raise argparse.ArgumentTypeError("must be more than 0 and at most 600 seconds")
    return value


def add_witness_deadline(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--witness-deadline",
        type=_deadline,
        default=10.0,
        metavar="S",
        help="total time allowed for one witness exchange",
    )


def read_policy(name: str) -> bytes:
    try:
        return Path(name).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read the policy file {name}: {exc.strerror}") from None


def data_dir(value: str | None) -> Path:
    return Path(value or DATA.get() or "data")


def open_log(args: argparse.Namespace) -> Any:
    from capability_anchor.log import Log

    return Log.open(data_dir(args.data))


def emit_doc(doc: bytes | None) -> None:
    sys.stdout.write(("null" if doc is None else doc.decode("utf-8")) + "\n")


def add_data(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data",
        metavar="DIR",
        default=None,
        help="data dir (default: $CAPABILITY_ANCHOR_DATA, else ./data)",
    )
    p.add_argument(
        "--store",
        metavar="URL",
        default=None,
        help="the log's store, postgresql://USER@HOST/DBNAME (no password: ~/.pgpass or "
        "PGPASSWORD): init binds the data dir to it, any other command checks it is the data "
        "dir's (default: $CAPABILITY_ANCHOR_STORE, else the data dir's own)",
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


def add_published(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--published",
        metavar="URL|DIR",
        default=None,
        help="the log's public mirror (a serving log or a static export) or an export folder: "
        "nothing is signed if it shows more than this data dir holds; a copy `backup` made "
        "signs only once one reference showed what it holds; `none`: nothing was ever "
        f"published (default: ${PUBLISHED.name}, else only the policy witnesses are asked)",
    )


def published_of(args: argparse.Namespace) -> str | None:
    return getattr(args, "published", None) or PUBLISHED.get() or None


def refuse_if_behind(log: Any, args: argparse.Namespace) -> None:
    """Refuse to sign when the data dir is behind what was published, or an uncompared copy."""
    from capability_anchor.log.published import learn

    state = learn(log, published_of(args), before_signing=True)
    if state is not None:
        raise state.error()
