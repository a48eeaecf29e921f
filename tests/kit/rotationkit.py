"""What the rotation tests share: a log made by the real CLI, records posted to a real
server, and everything a data dir has signed, by kid (heads, settings, checkpoint notes)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import httpx

from capability_anchor import jws
from capability_anchor.keys import KeySet, load_key_file
from capability_anchor.note import TYPE_ED25519, key_id, parse_note

from .logkit import run_cli
from .obskit import observation


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


def ok(*args: str | Path) -> dict[str, Any]:
    """Run the CLI, expect exit 0, and return its (last) JSON line."""
    done = cli(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout.splitlines()[-1]))


def log_iss(data: Path) -> str:
    conn = sqlite3.connect(f"file:{data / 'log.sqlite3'}?mode=ro", uri=True)
    try:
        return str(conn.execute("SELECT value FROM meta WHERE key = 'iss'").fetchone()[0])
    finally:
        conn.close()


def append(data: Path, tag: str, count: int = 2) -> None:
    iss = log_iss(data)
    path = data.parent / f"{tag}.jsonl"
    lines = (json.dumps(observation(n, tag, iss=iss)) + "\n" for n in range(count))
    path.write_text("".join(lines))
    ok("append", "--data", data, path)
    ok("checkpoint", "--data", data)


def kid_file(data: Path, name: str = "signing-key.jwk") -> str:
    return load_key_file(data / name).kid


def signed_kids(data: Path) -> dict[str, list[str]]:
    """The kid of everything the data dir signed: heads and settings by their rows, and the
    checkpoint notes by their signature's key ID (mapped back to a kid of the key table)."""
    conn = sqlite3.connect(f"file:{data / 'log.sqlite3'}?mode=ro", uri=True)
    try:
        heads = [str(k) for (k,) in conn.execute("SELECT kid FROM heads ORDER BY rowid")]
        settings = [str(k) for (k,) in conn.execute("SELECT kid FROM settings ORDER BY id")]
        origin = str(
            conn.execute("SELECT value FROM meta WHERE key = 'history_origin'").fetchone()[0]
        )
        jwks = [json.loads(j) for (j,) in conn.execute("SELECT jwk FROM keys")]
        notes = [bytes(n) for (n,) in conn.execute("SELECT note FROM checkpoints ORDER BY size")]
    finally:
        conn.close()
    by_id = {
        key_id(origin, TYPE_ED25519, key.raw): key.kid for key in KeySet.from_jwks({"keys": jwks})
    }
    checkpoints = [by_id.get(parse_note(n).signatures[0].key_id, "?") for n in notes]
    return {"heads": heads, "settings": settings, "checkpoints": checkpoints}


def token_kid(token: str) -> str:
    return jws.unverified_header(token)["kid"]


def post(client: httpx.Client, headers: dict[str, str], tag: str, count: int = 2) -> list[Any]:
    """POST records with ?prove=1 (so a head is signed over them at once); 200 expected."""
    records = [observation(n, tag, iss=str(client.base_url).rstrip("/")) for n in range(count)]
    answer = client.post("/records?prove=1", json={"records": records}, headers=headers)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["entries"])


def record_token(client: httpx.Client, tag: str) -> str:
    answer = client.get("/record", params={"id": f"example:{tag}-0"})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["jws"])


def served_kids(client: httpx.Client) -> set[str]:
    answer = client.get("/keys")
    assert answer.status_code == 200, answer.text
    return set(KeySet.from_json(answer.content).kids)
