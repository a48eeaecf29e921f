"""`POST /records` appending in the body-check worker process (`appendworker.py`), against
real server processes on 127.0.0.1: the same answers as the in-process path
(`--body-workers 0`), errors of the same class and note, and a worker killed mid-append
answered with the documented 503, after which re-sending is safe."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from capability_anchor.api import appendworker
from capability_anchor.api.appendworker import check_and_append, rebuild
from capability_anchor.errors import Conflict, InvalidRecord, StoreBusy, StoreError
from capability_anchor.log import Log
from capability_anchor.log.clockguard import monotonic
from capability_anchor.store.sqlite import DB_NAME
from tests.e2e.test_api_e2e import record, verify_entry_proof
from tests.e2e.test_http_edge import children
from tests.kit.apikit import wait_clear_of_midnight
from tests.kit.serverkit import Server, holders, serving

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


def test_worker_appends_answer_as_the_in_process_path(tmp_path: Path) -> None:
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
    for name, args in (("worker", ()), ("in-process", ("--body-workers", "0"))):
        with serving(tmp_path / name, "--rate-limit", "0", *args) as srv:
            with srv.client() as client:
                answers[name] = [comparable(post(client, srv, r, p)) for r, p in steps]
            assert "Traceback" not in srv.stderr()
    assert answers["worker"] == answers["in-process"]
    worker = answers["worker"]
    assert [e["leaf_index"] for e in worker[0][1]] == list(range(40))
    assert [e["duplicate"] for e in worker[1][1]] == [True] * 10 + [False] * 15
    assert [e["leaf_index"] for e in worker[1][1]][:10] == list(range(10, 20))
    assert all(e["duplicate"] for e in worker[3][1])
    assert [e["anchor"] for e in worker[3][1]] == [e["anchor"] for e in worker[2][1]]
    for rec, entry in zip(proved, worker[2][1], strict=True):
        verify_entry_proof(rec, entry["anchor"], entry["proof"])
    assert worker[4][0] == 400 and worker[4][1]["error"] == "invalid_record"
    assert worker[4][1]["note"].startswith("record 2: ")  # counted from 1, like CLI lines


def writer_worker(server: Server) -> int:
    # The forkserver is the server's child; the workers are the forkserver's. The writers'
    # lane's worker is the one that has the log open (the public lane's never opens it).
    workers = [w for f in children(server.pid) for w in children(f)]
    writers = [w for w in workers if w in holders(server.data / DB_NAME)]
    assert len(writers) == 1, (workers, writers)
    return writers[0]


def test_a_worker_killed_mid_append_answers_503_and_resending_is_safe(tmp_path: Path) -> None:
    batch = [record("killed") for _ in range(20)]
    with serving(tmp_path / "data", "--rate-limit", "0", "--body-workers", "1") as srv:
        with srv.client() as client:
            assert post(client, srv, [record("warm")], False).status_code == 200
            worker = writer_worker(srv)
            # Hold the database's write lock, so the worker's append waits inside it.
            lock = sqlite3.connect(srv.data / DB_NAME, isolation_level=None)
            lock.execute("BEGIN IMMEDIATE")
            answers: list[httpx.Response] = []
            sender = threading.Thread(target=lambda: answers.append(post(client, srv, batch, True)))
            sender.start()
            time.sleep(1.0)
            os.kill(worker, signal.SIGKILL)
            sender.join(30)
            lock.execute("ROLLBACK")
            lock.close()
            assert len(answers) == 1
            lost = answers[0]
            assert lost.status_code == 503, lost.text
            assert lost.json() == {"v": "0.2", "error": "unavailable", "note": LOST_NOTE}
            assert lost.headers["retry-after"] == "1"
            # Nothing was committed, so the re-sent batch is stored now; sent once more it
            # is all duplicates, at the same indices.
            again = post(client, srv, batch, True)
            assert again.status_code == 200, again.text
            entries = again.json()["entries"]
            assert [e["duplicate"] for e in entries] == [False] * 20
            assert [e["leaf_index"] for e in entries] == list(range(1, 21))
            once_more = post(client, srv, batch, False)
            assert once_more.status_code == 200, once_more.text
            assert [e["duplicate"] for e in once_more.json()["entries"]] == [True] * 20
            assert [e["leaf_index"] for e in once_more.json()["entries"]] == list(range(1, 21))
        stderr = srv.stderr()
    assert "Traceback" not in stderr
    assert "worker died" in stderr


def test_worker_errors_keep_their_class_and_note(tmp_path: Path) -> None:
    data = tmp_path / "data"
    Log.init(data, iss="https://log.example", records="any").close()
    body = b'{"records": [{"a": 1}]}'
    code, described = check_and_append(body, "https://log.example", 10, data, False, 0.0, 0.0)
    assert code == "error"
    exc = rebuild(described)
    assert type(exc) is Conflict and "before the log's first day" in str(exc)
    code, note = check_and_append(
        b'{"records": [{"a": 1}, {"b": 1e300}]}', "https://log.example", 10, data, False, 0, 0
    )
    assert code == "invalid_record" and note.startswith("record 2: ")
    invalid = rebuild(("InvalidRecord", "bad", 3))
    assert isinstance(invalid, InvalidRecord) and invalid.position == 3
    busy = rebuild(("StoreBusy", "/secret/path is locked", None))
    assert type(busy) is StoreBusy and busy.note == StoreBusy.note
    # Not an error class of the project, or one that needs more than a message: a 503.
    for described in (("ValueError", "x", None), ("RootMismatch", "x", None)):
        assert type(rebuild(described)) is StoreError
    code, out = check_and_append(
        body, "https://log.example", 10, data, True, time.time(), monotonic()
    )
    assert code == "ok"
    entry = json.loads(out[0])[0]
    # The head it published is an event line for the service's log to replay.
    assert any(m.startswith("prove: published a head of") for _, _, m in out[1]), out[1]
    assert entry["leaf_index"] == 0 and entry["duplicate"] is False and "proof" in entry
    appendworker._forget(data)
    # The worker checks by the log's own rule: a default log takes only observations.
    strict = tmp_path / "strict"
    Log.init(strict, iss="https://log.example").close()
    code, note = check_and_append(
        body, "https://log.example", 10, strict, False, time.time(), monotonic()
    )
    assert code == "invalid_record" and note.startswith("record 1: missing members"), note
    appendworker._forget(strict)
