"""What the docs generators share (`cli_reference`, `errors_table`): write a generated page
only when its text changed, and say so on stderr."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rewrite(path: Path, text: str, source: str) -> None:
    """`path` holds `text` afterwards; a changed page is named on stderr with its `source`."""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
        print(f"{path.relative_to(ROOT)}: rewritten from {source}", file=sys.stderr)
