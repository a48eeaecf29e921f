"""Replicas of one PostgreSQL log (SPEC §13.4), as an operator runs them: copies of one data
dir, each a real `capability-anchor serve` on its own port, all on the session's real
PostgreSQL. Concurrent writers on both: every acknowledged record is in the database at its
one index, the day's tree has no gap, every proof reaches a head the other replica serves,
and the audit passes while they write. The leader killed (-9) or paused (SIGSTOP): the other
replica takes the lease and signs within seconds, and the paused one, resumed, never signs a
conflicting head. Fault handling of the database itself: tests/e2e/test_pg_faults.py."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from capability_anchor import merkle
from tests.kit.obskit import observation, verify_answered_proof
from tests.kit.pgkit import PgServer
from tests.kit.serverkit import CLI, Server, clean_env, free_port, serve_argv, serving

ISS = "https://r.example"
SERVE_ARGS = ("--checkpoint-interval", "1", "--rate-limit", "0")
SIGN_WITHIN_S = 10.0


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), *map(str, args)],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=120,
        check=False,
    )


def audit_ok(data: Path) -> None:
    done = run("audit", "--data", data)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert json.loads(done.stdout)["ok"] is True, done.stdout


def new_log(pg: PgServer, tmp_path: Path, copies: int = 2) -> tuple[str, list[Path]]:
    """A PostgreSQL log and `copies` data dirs of it (the first the one `init` wrote)."""
    db = pg.fresh_database("rep")
    first = tmp_path / "r0"
    done = run("init", "--data", first, "--store", pg.url(db), "--iss", ISS)
    assert done.returncode == 0, done.stderr
    dirs = [first]
    for n in range(1, copies):
        dirs.append(tmp_path / f"r{n}")
        shutil.copytree(first, dirs[-1])
    return db, dirs


@contextlib.contextmanager
def replica(data: Path, env: dict[str, str] | None = None) -> Iterator[Server]:
    port = free_port()
    argv = serve_argv(data, port, SERVE_ARGS, init=False)
    logs = data.parent / f"{data.name}-logs"
    with serving(data, port=port, argv=argv, env=env, logs=logs) as server:
        yield server


def rows(pg: PgServer, db: str, sql: str) -> list[tuple[Any, ...]]:
    with pg.connect(db) as conn:
        found = conn.execute(sql.encode()).fetchall()
    return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in found]


@dataclass(eq=False)
class Writer(threading.Thread):
    """POSTs batches of 1-3 new records to one replica until stopped, every other batch with
    `?prove=1`; a 503 is retried (the same batch), counted; any other failure is kept."""

    server: Server
    tag: str
    prove: bool | None = None  # None: alternate
    stop_on_transport_error: bool = False
    timeout: float = 30.0
    stopped: threading.Event = field(default_factory=threading.Event)
    acked: list[dict[str, Any]] = field(default_factory=list)
    unavailable: int = 0
    transport_errors: int = 0
    failures: list[str] = field(default_factory=list)
    ok_times: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        threading.Thread.__init__(self, daemon=True, name=f"writer-{self.tag}")

    def run(self) -> None:
        headers = self.server.writer_headers()
        n = 0
        with httpx.Client(base_url=self.server.url, timeout=self.timeout) as client:
            while not self.stopped.is_set():
                batch = [observation(n + i, self.tag) for i in range(1 + n % 3)]
                prove = (n % 2 == 0) if self.prove is None else self.prove
                n += len(batch)
                while not self.stopped.is_set():
                    try:
                        answer = client.post(
                            "/records?prove=1" if prove else "/records",
                            json={"records": batch},
                            headers=headers,
                        )
                    except httpx.TransportError as exc:
                        self.transport_errors += 1
                        if self.stop_on_transport_error:
                            return
                        self.failures.append(f"transport: {exc!r}")
                        time.sleep(0.2)
                        continue
                    if answer.status_code == 503:
                        self.unavailable += 1
                        time.sleep(0.1)
                        continue
                    if answer.status_code != 200:
                        self.failures.append(f"{answer.status_code} {answer.text[:300]}")
                        time.sleep(0.1)
                        continue
                    entries = answer.json()["entries"]
                    assert len(entries) == len(batch)
                    self.acked.extend(entries)
                    self.ok_times.append(time.monotonic())
                    break
                time.sleep(0.02)

    def halt(self) -> None:
        self.stopped.set()
        self.join(60)
        assert not self.is_alive(), f"{self.name} did not stop"


@contextlib.contextmanager
def writing(*writers: Writer) -> Iterator[tuple[Writer, ...]]:
    for w in writers:
        w.start()
    try:
        yield writers
    finally:
        for w in writers:
            w.halt()


def check_acknowledged(pg: PgServer, db: str, writers: tuple[Writer, ...]) -> None:
    """Every acknowledged entry is in `entries` at its index with its hash; an index holds one
    hash and a hash one index (a retried batch answers duplicates at the first indexes)."""
    stored = {
        (d, i): h for d, i, h in rows(pg, db, "SELECT day, leaf_index, leaf_hash FROM entries")
    }
    by_index: dict[tuple[str, int], str] = {}
    by_hash: dict[tuple[str, str], int] = {}
    for w in writers:
        assert not w.failures, (w.tag, w.failures[:5])
        for e in w.acked:
            key = (e["day"], e["leaf_index"])
            assert by_index.setdefault(key, e["leaf_hash"]) == e["leaf_hash"], key
            assert by_hash.setdefault((e["day"], e["leaf_hash"]), e["leaf_index"]) == key[1]
            assert stored.get(key, b"").hex() == e["leaf_hash"], (key, e)


def check_tree(pg: PgServer, db: str) -> None:
    """No gap in any day's indexes, and every stored head's root is the root of the day's
    first tree_size stored entries (two signers cannot have signed two trees)."""
    for day, count, top in rows(
        pg, db, "SELECT day, count(*), max(leaf_index) FROM entries GROUP BY day"
    ):
        assert top + 1 == count, (day, top, count)
    leaves: dict[str, list[bytes]] = {}
    for day, h in rows(pg, db, "SELECT day, leaf_hash FROM entries ORDER BY day, leaf_index"):
        leaves.setdefault(day, []).append(h)
    heads = rows(pg, db, "SELECT day, tree_size, sealed, root FROM heads")
    assert len({(d, s, x) for d, s, x, _ in heads}) == len(heads)
    for day, size, _, root in heads:
        if size:
            assert merkle.root_hash(leaves[day][:size]) == root, (day, size)


def check_proofs(writers: tuple[Writer, ...], other_of: dict[str, Server]) -> int:
    """Every proved entry's proof reaches its anchor, whose root is the head the OTHER replica
    serves at /roots/DAY/SIZE; how many proofs."""
    served: dict[tuple[str, str, int], str] = {}
    checked = 0
    for w in writers:
        other = other_of[w.tag]
        with other.client() as client:
            for e in w.acked:
                if "proof" not in e:
                    continue
                verify_answered_proof(e)
                key = (other.url, e["day"], e["proof"]["tree_size"])
                if key not in served:
                    head = client.get(f"/roots/{key[1]}/{key[2]}")
                    assert head.status_code == 200, head.text
                    served[key] = head.json()["root"]
                assert served[key] == e["anchor"]["root"], (e, served[key])
                checked += 1
    return checked


def max_head(pg: PgServer, db: str) -> tuple[int, int]:
    """(largest tree_size of any head, its term); (0, 0) when none."""
    found = rows(pg, db, "SELECT tree_size, term FROM heads ORDER BY tree_size DESC LIMIT 1")
    return (int(found[0][0]), int(found[0][1])) if found else (0, 0)


def wait_for(predicate: Any, within: float, what: str) -> float:
    """Poll `predicate` until true; the seconds it took."""
    began = time.monotonic()
    while not predicate():
        assert time.monotonic() - began < within, f"{what}: not within {within} s"
        time.sleep(0.05)
    return time.monotonic() - began


def lead(server: Server) -> None:
    """Make `server` the leader: a proved write that it signs itself."""
    with server.client() as client:
        answer = client.post(
            "/records?prove=1",
            json={"records": [observation(0, f"lead-{server.port}")]},
            headers=server.writer_headers(),
        )
    assert answer.status_code == 200, answer.text
    assert "published a head" in server.stderr(), server.stderr()


def test_two_replicas_serve_one_gapless_log_with_cross_checked_proofs(
    postgres: PgServer, tmp_path: Path
) -> None:
    db, (a_dir, b_dir) = new_log(postgres, tmp_path)
    with replica(a_dir) as a, replica(b_dir) as b:
        writers: tuple[Writer, ...] = (Writer(a, "a1"), Writer(a, "a2", prove=True))
        writers += (Writer(b, "b1"), Writer(b, "b2", prove=True), Writer(b, "b3", prove=False))
        with writing(*writers):
            time.sleep(1.5)
            audit_ok(a_dir)  # while they write
            audit_ok(b_dir)
            time.sleep(0.5)
        others = {w.tag: (b if w.server is a else a) for w in writers}
        assert all(w.acked for w in writers), [(w.tag, w.failures[:3]) for w in writers]
        assert sum(w.unavailable for w in writers) == 0, [w.unavailable for w in writers]
        check_acknowledged(postgres, db, writers)
        proved = check_proofs(writers, others)
        assert proved >= 4
        # Both replicas signed nothing different: one root per (day, size, sealed).
        check_tree(postgres, db)
    audit_ok(a_dir)
    audit_ok(b_dir)


def test_attack_kill_9_of_the_leader_the_other_replica_signs_within_seconds(
    postgres: PgServer, tmp_path: Path
) -> None:
    db, (a_dir, b_dir) = new_log(postgres, tmp_path)
    with replica(a_dir) as a:
        lead(a)
        with replica(b_dir) as b:
            victim = Writer(a, "a", stop_on_transport_error=True)
            writers = (Writer(b, "b1"), Writer(b, "b2", prove=True), Writer(b, "b3"))
            with writing(victim, *writers):
                time.sleep(1.5)
                assert "published a head" not in b.stderr()
                size, term = max_head(postgres, db)
                assert size > 0 and term >= 1
                os.kill(a.pid, signal.SIGKILL)
                killed = time.monotonic()
                assert a.wait(10) == -signal.SIGKILL
                took = wait_for(
                    lambda: max_head(postgres, db)[0] > size, SIGN_WITHIN_S, "a head after kill"
                )
                time.sleep(1.5)
            after_kill = [t - killed for w in writers for t in w.ok_times if t > killed]
            assert len(after_kill) >= 3, after_kill
            assert "published a head" in b.stderr()
            assert max_head(postgres, db)[1] > term
            print(f"signed {took:.2f} s after the kill; 503s:", [w.unavailable for w in writers])
            check_acknowledged(postgres, db, (victim, *writers))
            check_tree(postgres, db)
            with b.client() as client:
                day = writers[0].acked[-1]["day"]
                size_now = max_head(postgres, db)[0]
                served = client.get(f"/roots/{day}/{size_now}")
                assert served.status_code == 200, served.text
    audit_ok(b_dir)


def test_attack_a_paused_leader_loses_the_lease_and_resumed_never_signs(
    postgres: PgServer, tmp_path: Path
) -> None:
    db, (a_dir, b_dir) = new_log(postgres, tmp_path)
    with replica(a_dir) as a:
        lead(a)
        with replica(b_dir) as b:
            writers = (Writer(b, "b1"), Writer(b, "b2", prove=True))
            with writing(*writers):
                time.sleep(1.0)
                size, term = max_head(postgres, db)
                paused_at = size
                os.killpg(a.pid, signal.SIGSTOP)
                try:
                    took = wait_for(
                        lambda: max_head(postgres, db)[0] > paused_at,
                        SIGN_WITHIN_S,
                        "a head while the leader is paused",
                    )
                    time.sleep(max(0.0, 8.0 - took))
                finally:
                    os.killpg(a.pid, signal.SIGCONT)
                signed_by_a = a.stderr().count("published a head")
                resumed = Writer(a, "a-resumed")
                with writing(resumed):
                    time.sleep(3.0)
                assert not resumed.failures, resumed.failures[:5]
                print(f"signed {took:.2f} s after SIGSTOP; a after SIGCONT: {len(resumed.acked)}")
                print(f"acked, {resumed.unavailable} 503s")
            assert a.alive()
            assert a.stderr().count("published a head") == signed_by_a, a.stderr()[-3000:]
            check_acknowledged(postgres, db, (*writers, resumed))
            check_tree(postgres, db)
            new_terms = {
                t for (t,) in rows(postgres, db, f"SELECT term FROM heads WHERE tree_size > {size}")
            }
            assert new_terms and min(new_terms) > term, (term, new_terms)
            # The resumed one's proofs, if any, are of heads B serves.
            check_proofs((resumed,), {"a-resumed": b})
            assert "published a head" in b.stderr()
    audit_ok(a_dir)
    audit_ok(b_dir)
