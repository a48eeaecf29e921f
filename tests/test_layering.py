"""The verifying path imports no server, storage or HTTP code, so an auditor's run starts fast
and its trust does not depend on code it does not need."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = ("sqlite3", "sqlite_utils", "litestar", "httpx", "uvicorn", "msgspec", "rfc3161ng")
VERIFYING_PATH = (
    "capability_anchor.merkle",
    "capability_anchor.leaf",
    "capability_anchor.keys",
    "capability_anchor.jws",
    "capability_anchor.trust",
    "capability_anchor.encoding",
    "capability_anchor.strictjson",
    "capability_anchor.errors",
    "capability_anchor.cli.verify_proof",
)


def test_verifying_path_imports_no_server_or_storage_code() -> None:
    code = (
        "import sys, json\n"
        + "".join(f"import {m}\n" for m in VERIFYING_PATH)
        + f"print(json.dumps([m for m in {FORBIDDEN!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_an_offline_timestamp_check_loads_no_http_or_storage_code() -> None:
    """verify-proof with --tsa-ca on the sample folder: rfc3161-client and cryptography are
    loaded to check the stamp, never an HTTP client, SQLite or the request builder."""
    from pathlib import Path

    roots = Path(__file__).resolve().parent.parent / "roots"
    record = roots / "records" / "2026-11-01-calendar.json"
    code = (
        "import sys, json\n"
        "from capability_anchor.cli.verify_proof import main\n"
        f"code = main([{str(record)!r}, '--roots', {str(roots)!r}, '--at', '1793797200',\n"
        f"             '--tsa-ca', {str(roots / 'tsa-ca.pem')!r}, '--json'])\n"
        f"print(json.dumps([code, [m for m in {FORBIDDEN!r} if m in sys.modules]]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    last = out.stdout.strip().splitlines()[-1]
    assert json.loads(last) == [0, []], out.stdout
