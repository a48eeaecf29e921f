"""The integrity issue's red-team scenario on PostgreSQL (#24 point 4): two replicas of one
log, each with four HTTP writers posting 50-record batches with `?prove=1` back to back, and
a CLI `append` beside them, with the audit of both data dirs run during the load and after.
Replica A is `serve`; replica B is the production form (uvicorn, two workers), so three
processes contend for the lease while all of them write.

What must hold, as on SQLite (tests/e2e/test_concurrency_e2e.py):
- every batch answered 200 is stored whole, at the contiguous indexes the answer names, and
  each proof verifies, against a head the other replica serves with the same root;
- every batch answered with a refusal (not 200, not 503) is absent, wholly; a 503 is
  retried with the same batch, as the note says (Unproven: its records come back as
  duplicates, with proofs);
- no gap in a day's indexes, and no two heads of one size with different roots;
- no traceback in any replica's log."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.test_pg_replicas import audit_ok, check_tree, new_log, replica, rows
from tests.kit.obskit import observation, verify_answered_proof
from tests.kit.pgkit import PgServer
from tests.kit.serverkit import CLI, Server, clean_env, free_port, serving, uvicorn_argv

DURATION_S = 20.0  # at least; then until each writer kind and the audits have done enough
GIVE_UP_S = 600.0
BATCH = 50
HTTP_WRITERS = 4  # on each replica
RETRIES = 20


def batch(tag: str) -> list[dict[str, Any]]:
    return [observation(n, tag) for n in range(BATCH)]


@dataclass
class Outcomes:
    lock: threading.Lock = field(default_factory=threading.Lock)
    accepted: dict[str, tuple[str, list[dict[str, Any]]]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    unavailable: list[str] = field(default_factory=list)  # the notes of 503s, retried
    errors: list[str] = field(default_factory=list)


def http_writer(server: Server, w: str, stop: threading.Event, out: Outcomes) -> None:
    headers = server.writer_headers()
    with httpx.Client(base_url=server.url, timeout=60.0) as client:
        b = 0
        while not stop.is_set():
            tag = f"{w}-b{b}"
            b += 1
            for _ in range(RETRIES):
                try:
                    r = client.post(
                        "/records?prove=1", json={"records": batch(tag)}, headers=headers
                    )
                except httpx.HTTPError as exc:
                    with out.lock:
                        out.errors.append(f"{tag}: {exc!r}")
                    break
                if r.status_code == 503:
                    with out.lock:
                        out.unavailable.append(r.json().get("note", ""))
                    time.sleep(0.1)
                    continue
                with out.lock:
                    if r.status_code == 200:
                        out.accepted[tag] = (server.url, r.json()["entries"])
                    else:
                        out.refused[tag] = f"{r.status_code} {r.text[:200]}"
                break


def cli_writer(data: Path, stop: threading.Event, out: Outcomes) -> None:
    b = 0
    while not stop.is_set():
        tag = f"cli-b{b}"
        b += 1
        lines = "".join(json.dumps(rec) + "\n" for rec in batch(tag))
        done = subprocess.run(
            [str(CLI), "append", "--data", str(data), "-"],
            input=lines,
            capture_output=True,
            text=True,
            env=clean_env(),
            timeout=120,
            check=False,
        )
        with out.lock:
            if done.returncode == 0:
                out.accepted[tag] = ("", [json.loads(line) for line in done.stdout.splitlines()])
            else:
                out.refused[tag] = f"exit {done.returncode}: {done.stderr[:200]}"


def stored(pg: PgServer, db: str) -> dict[str, tuple[str, int]]:
    """sub -> (day, leaf_index) of every entry in the database."""
    found = rows(pg, db, "SELECT day, leaf_index, claims FROM entries")
    return {json.loads(c)["sub"]: (str(d), int(i)) for d, i, c in found}


def check_batches(pg: PgServer, db: str, out: Outcomes, others: dict[str, Server]) -> int:
    """The acknowledged whole and contiguous, the refused absent; how many proofs checked."""
    where_stored = stored(pg, db)
    roots: dict[tuple[str, str, int], str] = {}
    proofs = 0
    for tag, (url, entries) in out.accepted.items():
        found = [where_stored.get(rec["sub"]) for rec in batch(tag)]
        where = [w for w in found if w is not None]
        assert len(where) == BATCH, f"{tag} was acknowledged but is not stored whole"
        assert len({d for d, _ in where}) == 1, tag
        indexes = [i for _, i in where]
        assert indexes == list(range(indexes[0], indexes[0] + BATCH)), tag
        assert [e["leaf_index"] for e in entries] == indexes, tag
        if not url:
            continue  # the CLI's entries carry no proofs
        other = others[url]
        for e in entries:
            verify_answered_proof(e)
            key = (other.url, e["day"], e["proof"]["tree_size"])
            if key not in roots:
                with other.client() as client:
                    head = client.get(f"/roots/{key[1]}/{key[2]}")
                assert head.status_code == 200, head.text
                roots[key] = head.json()["root"]
            assert roots[key] == e["anchor"]["root"], (tag, e["leaf_index"])
            proofs += 1
    for tag, why in out.refused.items():
        present = [rec["sub"] for rec in batch(tag) if rec["sub"] in where_stored]
        assert not present, f"{tag} was refused ({why}) but {len(present)} records are stored"
    return proofs


def enough(out: Outcomes) -> bool:
    """Five proved batches on each replica and one CLI batch acknowledged."""
    with out.lock:
        tags = [t for t, (url, _) in out.accepted.items() if url]
        cli = any(t.startswith("cli") for t in out.accepted)
    return cli and all(sum(t.startswith(r) for t in tags) >= 5 for r in "ab")


def test_attack_red_team_four_proving_writers_on_each_of_two_replicas(
    postgres: PgServer, tmp_path: Path
) -> None:
    db, (a_dir, b_dir) = new_log(postgres, tmp_path)
    port = free_port()
    env = {"CAPABILITY_ANCHOR_DATA": str(b_dir), "CAPABILITY_ANCHOR_CHECKPOINT_INTERVAL": "1"}
    env["CAPABILITY_ANCHOR_RATE_LIMIT"] = "0"
    out = Outcomes()
    audits = 0
    with replica(a_dir) as a, serving(b_dir, argv=uvicorn_argv(port, 2), env=env, port=port) as b:
        start, stop = time.monotonic(), threading.Event()
        threads = [
            threading.Thread(target=http_writer, args=(server, f"{name}{w}", stop, out))
            for name, server in (("a", a), ("b", b))
            for w in range(HTTP_WRITERS)
        ]
        threads.append(threading.Thread(target=cli_writer, args=(a_dir, stop, out)))
        for t in threads:
            t.start()
        # The audit reads one snapshot while they write; the load goes on until what the
        # assertions below count has happened (a loaded machine takes longer, not fewer).
        while time.monotonic() - start < GIVE_UP_S:
            audit_ok(a_dir if audits % 2 == 0 else b_dir)
            audits += 1
            if time.monotonic() - start >= DURATION_S and audits >= 2 and enough(out):
                break
            time.sleep(1)
        stop.set()
        for t in threads:
            t.join(120)
            assert not t.is_alive()
        logs = a.stderr() + a.stdout() + b.stderr() + b.stdout()
        proofs = check_batches(postgres, db, out, {a.url: b, b.url: a})

    assert audits >= 2
    assert "Traceback" not in logs, logs[-4000:]
    assert not out.errors, out.errors[:5]
    http = [t for t, (url, _) in out.accepted.items() if url]
    assert sum(t.startswith("a") for t in http) >= 5 and sum(t.startswith("b") for t in http) >= 5
    assert any(t.startswith("cli") for t in out.accepted), out.refused
    assert proofs == len(http) * BATCH
    check_tree(postgres, db)
    audit_ok(a_dir)
    audit_ok(b_dir)
    print(f"{len(http)} proved batches, {len(out.refused)} refused, 503s: {len(out.unavailable)}")
