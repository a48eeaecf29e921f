"""`POST /records` handed to the log's sequencer (`service/sequencer.py`, `service/sequencing.py`),
against real server processes on 127.0.0.1: the same answers as the in-process path
(`--body-workers 0`); a sequencer killed mid-append answered with the documented 503, after
which re-sending is safe and a new candidate leads; a full write queue answered 503 busy with
Retry-After, storing nothing; uvicorn workers handing one-record writes to ONE sequencer, a
standby taking over from a leader killed with -9 while writes go on; and errors of the
sequencer keep their class and note."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from capability_anchor.errors import Conflict, InvalidRecord, StoreBusy, StoreError
from capability_anchor.log import Log
from capability_anchor.log.handoff import LOCK_NAME, Handoff, rebuild
from capability_anchor.service.sequencer import BUSY_NOTE
from capability_anchor.store.sqlite import DB_NAME
from tests.e2e.test_api_e2e import record, verify_entry_proof
from tests.kit.apikit import wait_clear_of_midnight
from tests.kit.obskit import observation
from tests.kit.serverkit import (
    CLI,
    Server,
    clean_env,
    descendants,
    free_port,
    holders,
    serving,
    uvicorn_argv,
)

LOST_NOTE = (
    "the writer process stopped before answering: the batch may or may not be stored; "
    "re-sending it is safe (records already stored are answered with duplicate: true)"
)


def post(client: httpx.Client, server: Server, records: list[Any], prove: bool) -> httpx.Response:
    return client.post(
        "/records",
        params={"prove": 1} if prove else None,
        json={"records": records},
        headers=server.writer_headers(),
    )


def comparable(answer: httpx.Response) -> Any:
    """An answer without what names the server (its URL, in each anchor's `url`)."""
    if answer.status_code != 200:
        return answer.status_code, answer.json()
    out = []
    for entry in answer.json()["entries"]:
        entry = dict(entry)
        if "anchor" in entry:
            entry["anchor"] = {k: v for k, v in entry["anchor"].items() if k != "url"}
        out.append(entry)
    return 200, out


def test_the_sequencer_answers_as_the_in_process_path(tmp_path: Path) -> None:
    wait_clear_of_midnight()
    first = [record("same") for _ in range(40)]
    second = first[10:20] + [record("same") for _ in range(15)]
    proved = first[:5] + [record("same") for _ in range(30)]
    bad = [record("same"), {"b": 1e300}]
    steps: list[tuple[list[Any], bool]] = [
        (first, False),
        (second, False),
        (proved, True),
        (proved, True),  # all duplicates of a published size
        (bad, False),
        (bad, True),
        (first[:3], True),
    ]
    answers: dict[str, list[Any]] = {}
    for name, args in (("sequencer", ()), ("in-process", ("--body-workers", "0"))):
        with serving(tmp_path / name, "--rate-limit", "0", *args) as srv:
            with srv.client() as client:
                answers[name] = [comparable(post(client, srv, r, p)) for r, p in steps]
            assert "Traceback" not in srv.stderr()
    assert answers["sequencer"] == answers["in-process"]
    handed = answers["sequencer"]
    assert [e["leaf_index"] for e in handed[0][1]] == list(range(40))
    assert [e["duplicate"] for e in handed[1][1]] == [True] * 10 + [False] * 15
    assert [e["leaf_index"] for e in handed[1][1]][:10] == list(range(10, 20))
    assert all(e["duplicate"] for e in handed[3][1])
    assert [e["anchor"] for e in handed[3][1]] == [e["anchor"] for e in handed[2][1]]
    for rec, entry in zip(proved, handed[2][1], strict=True):
        verify_entry_proof(rec, entry["anchor"], entry["proof"])
    assert handed[4][0] == 400 and handed[4][1]["error"] == "invalid_record"
    assert handed[4][1]["note"].startswith("record 2: ")  # counted from 1, like CLI lines


def candidates(server: Server) -> tuple[list[int], list[int]]:
    """(leaders, standbys) among the server's sequencer candidates: each holds the lease
    file open; only the one holding the lease has opened the database too."""
    below = set(descendants(server.pid))
    holding = holders(server.data / LOCK_NAME) & below
    with_db = holders(server.data / DB_NAME)
    # A serving process has the database open too (its reader), but never the lease file.
    leaders = sorted(p for p in holding if p in with_db)
    return leaders, sorted(holding - set(leaders))


def wait_for(what: str, check: Any, within: float = 30.0) -> Any:
    give_up = time.monotonic() + within
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < give_up, f"{what}: not within {within} s"
        time.sleep(0.05)


def the_leader(server: Server) -> int:
    leaders = wait_for("a sequencer leads", lambda: candidates(server)[0])
    assert len(leaders) == 1, leaders
    return int(leaders[0])


@contextlib.contextmanager
def write_lock_held(data: Path) -> Iterator[None]:
    """The database's write lock taken by another connection: a commit waits inside it."""
    lock = sqlite3.connect(data / DB_NAME, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        lock.execute("ROLLBACK")
        lock.close()


def test_a_sequencer_killed_mid_append_answers_503_and_resending_is_safe(tmp_path: Path) -> None:
    batch = [record("killed") for _ in range(20)]
    with serving(tmp_path / "data", "--rate-limit", "0", "--body-workers", "1") as srv:
        with srv.client() as client:
            assert post(client, srv, [record("warm")], False).status_code == 200
            leader = the_leader(srv)
            answers: list[httpx.Response] = []
            with write_lock_held(srv.data):
                sender = threading.Thread(
                    target=lambda: answers.append(post(client, srv, batch, True))
                )
                sender.start()
                time.sleep(1.0)  # the batch is sent and its commit waits for the lock
                os.kill(leader, signal.SIGKILL)
                sender.join(30)
            assert len(answers) == 1
            lost = answers[0]
            assert lost.status_code == 503, lost.text
            assert lost.json() == {"v": "0.2", "error": "unavailable", "note": LOST_NOTE}
            assert lost.headers["retry-after"] == "1"
            # Nothing was committed, so the re-sent batch is stored now, by a new candidate;
            # sent once more it is all duplicates, at the same indices.
            again = post(client, srv, batch, True)
            assert again.status_code == 200, again.text
            entries = again.json()["entries"]
            assert [e["duplicate"] for e in entries] == [False] * 20
            assert [e["leaf_index"] for e in entries] == list(range(1, 21))
            once_more = post(client, srv, batch, False)
            assert once_more.status_code == 200, once_more.text
            assert [e["duplicate"] for e in once_more.json()["entries"]] == [True] * 20
            assert [e["leaf_index"] for e in once_more.json()["entries"]] == list(range(1, 21))
            assert the_leader(srv) != leader
        stderr = srv.stderr()
    assert "Traceback" not in stderr


def test_a_full_write_queue_answers_busy_and_stores_nothing_of_it(tmp_path: Path) -> None:
    first = [record("queue-a") for _ in range(1000)]
    second = [record("queue-b") for _ in range(1000)]
    refused = [record("queue-c")]
    args = ("--rate-limit", "0", "--write-queue", "1000")
    with serving(tmp_path / "data", *args) as srv, srv.client() as client:
        assert post(client, srv, [record("warm")], False).status_code == 200
        answers: dict[str, httpx.Response] = {}

        def send(name: str, records: list[Any]) -> None:
            answers[name] = post(client, srv, records, False)

        with write_lock_held(srv.data):
            senders = [threading.Thread(target=send, args=("first", first))]
            senders[0].start()
            time.sleep(2.0)  # taken by the committer, which waits for the lock
            senders.append(threading.Thread(target=send, args=("second", second)))
            senders[1].start()
            time.sleep(2.0)  # queued: the queue holds its bound, 1,000 records
            send("refused", refused)
            busy = answers["refused"]
            assert busy.status_code == 503, busy.text
            assert busy.json() == {"v": "0.2", "error": "unavailable", "note": BUSY_NOTE}
            assert busy.headers["retry-after"] == "1"
        for sender in senders:
            sender.join(60)
        assert answers["first"].status_code == 200, answers["first"].text
        assert answers["second"].status_code == 200, answers["second"].text
        day = answers["first"].json()["entries"][0]["day"]
        size = client.get(f"/entries/{day}", params={"start": 2001, "limit": 10})
        assert size.status_code in (200, 404)
        assert size.status_code == 404 or size.json()["entries"] == [], size.text
        # Sent again once the queue has room, the refused record is stored: it was not.
        again = post(client, srv, refused, False)
        assert again.json()["entries"][0] == {**again.json()["entries"][0], "duplicate": False}
        assert again.json()["entries"][0]["leaf_index"] == 2001


def _one_record_writer(
    url: str, token: str, w: int, count: int, acked: dict[str, int], lock: threading.Lock
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, timeout=60.0) as client:
        for n in range(count):
            rec = observation(n, f"w{w}")
            while True:  # a client that resends what it was not told is stored
                r = client.post("/records", json={"records": [rec]}, headers=headers)
                if r.status_code == 200:
                    break
                assert r.status_code == 503, r.text
                time.sleep(0.05)
            entry = r.json()["entries"][0]
            with lock:
                acked[entry["leaf_hash"]] = entry["leaf_index"]


def both(server: Server) -> tuple[list[int], list[int]] | None:
    leaders, standbys = candidates(server)
    return (leaders, standbys) if leaders and standbys else None


def test_uvicorn_workers_hand_writes_to_one_sequencer_and_a_standby_takes_over(
    tmp_path: Path,
) -> None:
    wait_clear_of_midnight()
    data = tmp_path / "data"
    subprocess.run(
        [str(CLI), "init", "--data", str(data), "--iss", "https://log.example"],
        check=True,
        capture_output=True,
        env=clean_env(),
    )
    port = free_port()
    env = {
        "CAPABILITY_ANCHOR_DATA": str(data),
        "CAPABILITY_ANCHOR_RATE_LIMIT": "0",
        "CAPABILITY_ANCHOR_CHECKPOINT_INTERVAL": "1",
    }
    acked: dict[str, int] = {}
    lock = threading.Lock()
    with serving(data, argv=uvicorn_argv(port, 2), port=port, env=env) as srv:
        token = (data / "writer-token").read_text().strip()
        leaders, standbys = wait_for(
            "a leader and a standby",
            lambda: (lambda c: c if c[0] and c[1] else None)(candidates(srv)),
        )
        assert len(leaders) == 1 and len(standbys) == 1, (leaders, standbys)
        writers = [
            threading.Thread(target=_one_record_writer, args=(srv.url, token, w, 150, acked, lock))
            for w in range(8)
        ]
        for t in writers:
            t.start()
        wait_for("writes under way", lambda: len(acked) > 200)
        os.kill(leaders[0], signal.SIGKILL)
        wait_for("the standby leads", lambda: candidates(srv)[0] == standbys)
        for t in writers:
            t.join(120)
        assert len(acked) == 8 * 150
        audit = subprocess.run(
            [str(CLI), "audit", "--data", str(data)],
            capture_output=True,
            text=True,
            env=clean_env(),
        )
        assert audit.returncode == 0, audit.stdout + audit.stderr
        assert "Traceback" not in srv.stderr()
    # Every acknowledged record is stored once, at the index it was answered with.
    with Log.open(data) as log:
        day = log.today()
        stored = {e["leaf_hash"]: e["leaf_index"] for e in log.entries(day, 0, 2000)}
    assert {h: stored.get(h) for h in acked} == acked
    assert sorted(stored.values()) == list(range(len(stored)))


def test_sequencer_errors_keep_their_class_and_note(tmp_path: Path) -> None:
    import multiprocessing

    from capability_anchor.service import sequencer

    data = tmp_path / "data"
    Log.init(data, iss="https://log.example", records="any").close()
    candidate = multiprocessing.get_context("forkserver").Process(
        target=sequencer.main, args=(str(data), 2000, None), daemon=True
    )
    candidate.start()
    try:
        handoff = wait_for("the sequencer listens", lambda: Handoff.connect(data))
        prepared = Log.open(data).prepare([{"a": 1}])
        try:
            handoff.append(prepared, False, 0.0)
        except Conflict as exc:
            assert "before the log's first day" in str(exc)
        else:
            raise AssertionError("an append before the first day was stored")
        entries = handoff.append(prepared, True, time.time())
        assert entries[0]["leaf_index"] == 0 and "proof" in entries[0]
        results = handoff.append(prepared, False, time.time())
        assert results[0].duplicate and results[0].leaf_index == 0
        handoff.close()
    finally:
        candidate.terminate()
        candidate.join(10)
    assert candidate.exitcode == 0
    assert not (data / "sequencer.sock").exists()
    invalid = rebuild(("InvalidRecord", "bad", 3))
    assert isinstance(invalid, InvalidRecord) and invalid.position == 3
    busy = rebuild(("StoreBusy", "/secret/path is locked", None))
    assert type(busy) is StoreBusy and busy.note == StoreBusy.note
    # Not an error class of the project, or one that needs more than a message: a 503.
    for described in (("ValueError", "x", None), ("RootMismatch", "x", None)):
        assert type(rebuild(described)) is StoreError


def test_library_and_cli_writers_share_the_sequencers_commits(tmp_path: Path) -> None:
    """A `Log` opened beside `serve` hands its batches to the sequencer: with the database's
    write lock held while both wait, its batch and an HTTP write are committed in ONE
    transaction (a commit of 2 batches in the metrics), each answered with its own entries.
    `capability-anchor append` appends through the same `Log` call, beside it."""
    from prometheus_client.parser import text_string_to_metric_families

    wait_clear_of_midnight()
    lines = tmp_path / "records.jsonl"
    lines.write_text("".join(json.dumps(observation(n, "cli")) + "\n" for n in range(5)))
    token = "metrics-token-for-the-scraper-0123456789"
    args = ("--rate-limit", "0", "--metrics-token", token)
    with serving(tmp_path / "data", *args) as srv, srv.client() as client:
        assert post(client, srv, [observation(0, "warm")], False).status_code == 200
        the_leader(srv)
        answers: list[Any] = []
        with Log.open(srv.data) as library:
            prepared = library.prepare([observation(n, "lib") for n in range(3)])

            def http_write(tag: str) -> None:
                answers.append(post(client, srv, [observation(1, tag)], False))

            def library_write() -> None:
                answers.append(library.append_prepared(prepared))

            with write_lock_held(srv.data):
                # The first write's commit waits for the lock; the two sent meanwhile queue
                # behind it and share the next commit.
                first = threading.Thread(target=http_write, args=("first",))
                first.start()
                time.sleep(1.0)
                rest = [
                    threading.Thread(target=library_write),
                    threading.Thread(target=http_write, args=("h",)),
                ]
                for t in rest:
                    t.start()
                time.sleep(2.0)  # both handed over, queued behind the first
            for t in [first, *rest]:
                t.join(60)
        assert len(answers) == 3
        http = [a for a in answers if isinstance(a, httpx.Response)]
        results = next(a for a in answers if isinstance(a, list))
        assert [h.status_code for h in http] == [200, 200], [h.text for h in http]
        assert [r.duplicate for r in results] == [False] * 3
        indices = {r.leaf_index for r in results}
        indices |= {h.json()["entries"][0]["leaf_index"] for h in http}
        assert indices == {1, 2, 3, 4, 5}
        cli = subprocess.run(
            [str(CLI), "append", "--data", str(srv.data), str(lines)],
            capture_output=True,
            env=clean_env(),
            timeout=60,
        )
        assert cli.returncode == 0, cli.stderr
        assert [json.loads(x)["leaf_index"] for x in cli.stdout.splitlines()] == [6, 7, 8, 9, 10]
        text = client.get("/metrics", headers={"Authorization": f"Bearer {token}"}).text
    buckets = {
        s.labels["le"]: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "capability_anchor_commit_batches_bucket"
    }
    # The warm-up, the shared commit, the CLI's: one of them held more than one batch.
    assert buckets["+Inf"] - buckets["1.0"] >= 1, buckets
