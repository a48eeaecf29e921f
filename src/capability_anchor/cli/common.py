"""What every command shares: the error-to-exit-code map and message printing.

Exit codes (SPEC §10): 0 success, 1 a failed check or refused operation, 2 usage or I/O
error. The map is by exception class, never by message.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ..errors import (
    CapabilityAnchorError,
    InvalidRecord,
    KeyFileError,
    UsageError,
    VerificationError,
)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def exit_code_for(exc: BaseException) -> int:
    if isinstance(exc, UsageError | KeyFileError | OSError):
        return EXIT_USAGE
    if isinstance(exc, InvalidRecord | VerificationError | CapabilityAnchorError):
        return EXIT_FAILED
    return EXIT_USAGE


def fail(prog: str, exc: BaseException) -> int:
    print(f"{prog}: {exc}", file=sys.stderr)
    return exit_code_for(exc)


def emit(obj: Any) -> None:
    """One JSON document per line on stdout (machine output)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
