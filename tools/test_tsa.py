#!/usr/bin/env python3
"""A throwaway RFC 3161 Time-Stamp Authority on a free loopback port, by hand or for
`tools/make_sample.py`: the script face of `tests/kit/tsa_server.py`, where the tests import it
from (its docstring lists the fault modes).

    python tools/test_tsa.py --port 0 --key ec [--mode ok] [--dir DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # repo root: tests.kit

# Found through the path set just above.
from tests.kit.tsa_server import (
    MODES,
    OPENSSL,
    QUERY_TYPE,
    REPLY_TYPE,
    Pki,
    TestTsa,
    closed_port_url,
    main,
    make_pki,
    parse_query,
)

__all__ = [
    "MODES",
    "OPENSSL",
    "QUERY_TYPE",
    "REPLY_TYPE",
    "Pki",
    "TestTsa",
    "closed_port_url",
    "main",
    "make_pki",
    "parse_query",
]

if __name__ == "__main__":
    sys.exit(main())
