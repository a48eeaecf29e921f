"""Concurrent writers as production runs them: the operations guide's production form (uvicorn,
two workers, background checkpoints every second) on one data dir, four HTTP clients posting
50-record batches with `?prove=1` back to back, and two CLI `append` processes beside them,
for 30 s, with the audit run during the load and after it.

What must hold (the integrity issue's points 0 and 1, which broke here before):
- every batch answered 2xx is stored whole, at the contiguous indices the answer names, and
  each proof in the answer verifies against the root of the head it names;
- every batch answered otherwise is absent, wholly;
- no head's signed root differs from its entries' root (the audit recomputes all of them),
  during the load and after it;
- the server log holds no traceback.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from tests.kit.obskit import observation, verify_answered_proof
from tests.kit.serverkit import CLI, clean_env, free_port, serving, uvicorn_argv

DURATION_S = 30.0
BATCH = 50
HTTP_WRITERS = 4
CLI_WRITERS = 2


def _batch(tag: str) -> list[dict[str, Any]]:
    return [observation(n, tag, sub=f"example:{tag}-r{n}", n=n) for n in range(BATCH)]


class Outcomes:
    """Every batch sent, by tag: its records and what the log answered."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.accepted: dict[str, list[dict[str, Any]]] = {}  # tag -> answered entries
        self.refused: dict[str, str] = {}  # tag -> why
        self.errors: list[str] = []

    def accept(self, tag: str, entries: list[dict[str, Any]]) -> None:
        with self.lock:
            self.accepted[tag] = entries

    def refuse(self, tag: str, why: str) -> None:
        with self.lock:
            self.refused[tag] = why


def _http_writer(url: str, token: str, w: int, stop: float, out: Outcomes) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, timeout=60.0) as client:
        b = 0
        while time.monotonic() < stop:
            tag = f"h{w}-b{b}"
            b += 1
            try:
                r = client.post("/records?prove=1", json={"records": _batch(tag)}, headers=headers)
            except httpx.HTTPError as exc:
                # No answer: the batch may or may not be stored; it is checked as neither.
                with out.lock:
                    out.errors.append(f"{tag}: {exc!r}")
                continue
            if 200 <= r.status_code < 300:
                out.accept(tag, r.json()["entries"])
            else:
                out.refuse(tag, f"{r.status_code} {r.text[:200]}")


def _cli_writer(data: Path, w: int, stop: float, out: Outcomes) -> None:
    b = 0
    while time.monotonic() < stop:
        tag = f"c{w}-b{b}"
        b += 1
        lines = "".join(json.dumps(rec) + "\n" for rec in _batch(tag))
        done = subprocess.run(
            [str(CLI), "append", "--data", str(data), "-"],
            input=lines.encode(),
            capture_output=True,
            env=clean_env(),
            timeout=120,
        )
        if done.returncode == 0:
            out.accept(tag, [json.loads(line) for line in done.stdout.splitlines()])
        else:
            out.refuse(tag, f"exit {done.returncode}: {done.stderr.decode()[:200]}")


def _audit(data: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), "audit", "--data", str(data)],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=300,
    )


def _stored(data: Path) -> dict[str, tuple[str, int]]:
    """sub -> (day, leaf_index) of every stored entry, read with plain sqlite3."""
    conn = sqlite3.connect(f"file:{data / 'log.sqlite3'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT day, leaf_index, claims FROM entries").fetchall()
    finally:
        conn.close()
    return {json.loads(c)["sub"]: (str(d), int(i)) for d, i, c in rows}


def test_concurrent_http_and_cli_writers_keep_every_batch_whole(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    init = subprocess.run(
        [str(CLI), "init", "--data", str(data), "--iss", f"http://127.0.0.1:{port}"],
        capture_output=True,
        env=clean_env(),
    )
    assert init.returncode == 0, init.stderr
    env = {"CAPABILITY_ANCHOR_DATA": str(data), "CAPABILITY_ANCHOR_CHECKPOINT_INTERVAL": "1"}
    out = Outcomes()
    audits_during: list[subprocess.CompletedProcess[str]] = []
    with serving(data, argv=uvicorn_argv(port, 2), env=env, port=port) as server:
        stop = time.monotonic() + DURATION_S
        threads = [
            threading.Thread(target=_http_writer, args=(server.url, server.token(), w, stop, out))
            for w in range(HTTP_WRITERS)
        ] + [
            threading.Thread(target=_cli_writer, args=(data, w, stop, out))
            for w in range(CLI_WRITERS)
        ]
        for t in threads:
            t.start()
        # The audit reads one snapshot: concurrent writes never make it fail.
        while time.monotonic() < stop - 8:
            audits_during.append(_audit(data))
            time.sleep(2)
        for t in threads:
            t.join()
        server_log = server.stderr() + server.stdout()

    after = _audit(data)
    assert after.returncode == 0, after.stderr
    assert "Traceback" not in server_log, server_log[-4000:]
    assert not out.errors, out.errors[:5]

    stored = _stored(data)
    http_accepted = [t for t in out.accepted if t.startswith("h")]
    assert len(http_accepted) >= 20, (len(out.accepted), list(out.refused.items())[:5])
    assert len(out.accepted) + len(out.refused) >= 40
    for tag, entries in out.accepted.items():
        records = _batch(tag)
        assert len(entries) == BATCH
        where = [stored.get(rec["sub"]) for rec in records]
        assert None not in where, f"{tag} was acknowledged but is not stored whole"
        days = {d for d, _ in where}  # type: ignore[misc]
        indices = [i for _, i in where]  # type: ignore[misc]
        assert len(days) == 1 and indices == list(range(indices[0], indices[0] + BATCH)), tag
        assert [e["leaf_index"] for e in entries] == indices, tag
        for e in entries:
            assert e["duplicate"] is False
            if tag.startswith("h"):
                verify_answered_proof(e)
    for tag, why in out.refused.items():
        present = [rec["sub"] for rec in _batch(tag) if rec["sub"] in stored]
        assert not present, f"{tag} was refused ({why}) but {len(present)} records are stored"
    for n, audit in enumerate(audits_during):
        assert audit.returncode == 0, f"audit {n} during the load: {audit.stderr}"
    assert audits_during, "no audit ran during the load"
