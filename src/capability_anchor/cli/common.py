"""What every command shares: the error-to-exit-code map and message printing.

Exit codes (SPEC §10): 0 success, 1 a failed check or refused operation, 2 usage or I/O
error. The map is by exception class, never by message.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ..errors import (
    KeyFileError,
    StartupCheckFailed,
    StoreError,
    TokenError,
    UsageError,
)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def exit_code_for(exc: BaseException) -> int:
    """2 for usage and I/O (bad arguments, unreadable files, a missing or unopenable store,
    key or token file problems); 1 for everything the log or a check refused."""
    if isinstance(exc, StartupCheckFailed):
        return EXIT_FAILED
    if isinstance(exc, UsageError | KeyFileError | TokenError | StoreError | OSError):
        return EXIT_USAGE
    return EXIT_FAILED


def fail(prog: str, exc: BaseException) -> int:
    print(f"{prog}: {exc}", file=sys.stderr)
    return exit_code_for(exc)


def emit(obj: Any) -> None:
    """One JSON document per line on stdout (machine output)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
