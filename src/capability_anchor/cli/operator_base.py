"""What the operator commands share: the program name, the data dir, opening the log."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..envvars import DATA

PROG = "capability-anchor"


def data_dir(value: str | None) -> Path:
    return Path(value or DATA.get() or "data")


def open_log(args: argparse.Namespace) -> Any:
    from ..log import Log

    return Log.open(data_dir(args.data))


def emit_doc(doc: bytes | None) -> None:
    sys.stdout.write(("null" if doc is None else doc.decode("utf-8")) + "\n")
