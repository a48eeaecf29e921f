"""The witness client (SPEC §12.3) end to end, with real logs in real data dirs and real
witnesses on loopback: the in-test witness written from the C2SP texts (`witnesskit`), with
its fault modes, and aics-witness from PyPI in its own venv.

For each fault: the §12.3 behaviour (the outcome, the witness's stored state and retry
time), nothing wrong stored, and a checkpoint and a seal made while the submission is in
flight are not delayed by it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from capability_anchor.audit import audit_store
from capability_anchor.export.days import export
from capability_anchor.keys import SigningKey
from capability_anchor.log import Log, utc_day
from capability_anchor.note import NoteSigner, check_cosignatures, parse_note, parse_policy
from capability_anchor.service.background import Background
from capability_anchor.witness.client import Witnessing, run_round, submit
from capability_anchor.witness.client.rounds import RETRY_MAX_S, retry_delay
from tests.kit.c2spkit import ensure_venv, run_peer
from tests.kit.logkit import CLI, run_cli
from tests.kit.obskit import observation
from tests.kit.serverkit import serving
from tests.kit.witnesskit import AicsWitness, TestWitness

ISS = "https://resolver.example"
ORIGIN = "resolver.example/history"
DAY = 86400


class Clock:
    """Today's real time, moved by the test (a day ahead to seal): cosignature timestamps
    are the witnesses' real time, never in the log's future."""

    def __init__(self) -> None:
        self.t = time.time()

    def __call__(self) -> float:
        return self.t


def grow(log: Log, n: int, tag: str) -> int:
    """Append N records and publish a head; the history's size after it."""
    log.append([observation(i, tag) for i in range(n)])
    log.checkpoint()
    return log.store.history_size()


def new_log(tmp: Path, clock: Clock | None = None, heads: int = 2) -> Log:
    data = tmp / "data"
    Log.init(data, iss=ISS, clock=clock or time.time).close()
    log = Log.open(data, clock=clock or time.time)
    for k in range(heads):
        grow(log, 2, f"h{k}")
    return log


def policy_of(*witnesses: TestWitness, quorum: str | None = None) -> bytes:
    lines = [f"witness w{i} {w.vkey} {w.url}" for i, w in enumerate(witnesses, 1)]
    return ("\n".join(lines) + f"\nquorum {quorum or 'w1'}\n").encode()


def set_policy(log: Log, text: bytes) -> None:
    log.set_policy(text)


def one(log: Log, witness: TestWitness, **kw: object):  # type: ignore[no-untyped-def]
    """One submission to WITNESS, stored as the policy (a witness the stored policy does not
    list gets nothing stored)."""
    text = policy_of(witness)
    if log.store.policy() != text:
        set_policy(log, text)
    policy = parse_policy(text)
    return submit(log, policy.witnesses[0], **kw)  # type: ignore[arg-type]


def state(log: Log, name: str = "w1"):  # type: ignore[no-untyped-def]
    with log.store.read():
        return log.store.witness_state(name)


def stored(log: Log, size: int) -> list:  # type: ignore[type-arg]
    with log.store.read():
        return log.store.cosignatures(size)


# --- the happy path ---------------------------------------------------------------------------


def test_a_witness_cosigns_each_new_checkpoint_with_a_consistency_proof(tmp_path: Path) -> None:
    with new_log(tmp_path) as log, TestWitness("witness.test/w1", log.read.history.vkey()) as w:
        n = log.store.history_size()
        outcome = one(log, w)
        assert (outcome.result, outcome.old, outcome.size) == ("cosigned", 0, n)
        assert w.requests[0] == b"old 0\n\n" + log.read.history.checkpoint(n)
        [row] = stored(log, n)
        assert (row.witness, row.size) == ("w1", n)
        note = parse_note(log.read.history.checkpoint(n) + row.line.encode() + b"\n")
        policy = parse_policy(policy_of(w))
        assert check_cosignatures(note, policy, at=int(time.time())).ok
        assert (state(log).size, state(log).status) == (n, "ok")
        # Nothing new: nothing sent.
        assert one(log, w).result == "current" and len(w.requests) == 1
        # The history grows: old = the size it cosigned, and the proof the witness checked.
        m = grow(log, 3, "more")
        outcome = one(log, w)
        assert (outcome.result, outcome.old, outcome.size) == ("cosigned", n, m)
        proof = log.read.history.consistency(n, m)
        assert w.requests[1].startswith(f"old {n}\n".encode())
        assert w.requests[1].count(b"\n") > len(proof)
        assert w.state[ORIGIN][0] == m and len(stored(log, m)) == 1


def test_a_second_cosignature_of_one_size_is_not_stored(tmp_path: Path) -> None:
    with new_log(tmp_path) as log, TestWitness("witness.test/w1", log.read.history.vkey()) as w:
        n = log.store.history_size()
        assert one(log, w).result == "cosigned"
        # The witness cosigns size n again (we lost our state): the first line stays.
        with log.writer.lock, log.store.write():
            log.store.set_witness_state(
                state(log).__class__("w1", 0, "ok", 0, 0, "reset by the test", 0)
            )
        w.state.clear()
        first = stored(log, n)
        time.sleep(1.1)  # a later timestamp: another line
        assert one(log, w).result == "cosigned"
        assert stored(log, n) == first


# --- the fault modes ------------------------------------------------------------------------


def _in_flight_while_sealing(log: Log, clock: Clock, witness: TestWitness, **kw: object):  # type: ignore[no-untyped-def]
    """Submit in a thread; meanwhile append, checkpoint and seal (a day ahead), each timed.
    Returns (outcome, seconds the checkpoint took, seconds the seal took)."""
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(one(log, witness, **kw)))
    thread.start()
    time.sleep(0.3)  # the exchange is under way
    started = time.monotonic()
    grow(log, 2, "during")
    checkpoint_s = time.monotonic() - started
    clock.t += DAY
    started = time.monotonic()
    sealed = log.seal()
    seal_s = time.monotonic() - started
    clock.t -= DAY  # back: the witness's state is written at the test's "now"
    assert sealed, "the day was sealed while the witness was being asked"
    thread.join(30)
    return result[0], checkpoint_s, seal_s


FAULTS = [
    # mode, conflict size (None: the log's size + 5), result, status, retry window (s)
    ("down", 0, "failed", "retry", (24, 36)),
    ("hang", 0, "failed", "retry", (24, 36)),
    ("409-larger", None, "stopped", "stopped", None),
    ("422", 0, "stopped", "stopped", None),
    ("403", 0, "failed", "retry", (3590, 3610)),
    ("404", 0, "failed", "retry", (3590, 3610)),
    ("500", 0, "failed", "retry", (24, 36)),
    ("wrong-key", 0, "failed", "retry", (24, 36)),
    ("other-checkpoint", 0, "failed", "retry", (24, 36)),
]


@pytest.mark.parametrize(("mode", "conflict", "result", "status", "window"), FAULTS)
def test_each_fault_gets_spec_12_3_s_behaviour_and_sealing_goes_on(
    tmp_path: Path,
    mode: str,
    conflict: int | None,
    result: str,
    status: str,
    window: tuple[int, int] | None,
) -> None:
    clock = Clock()
    with (
        new_log(tmp_path, clock) as log,
        TestWitness("witness.test/w1", log.read.history.vkey()) as w,
    ):
        n = log.store.history_size()
        w.mode, w.conflict_size = mode, n + 5 if conflict is None else conflict
        if mode == "down":
            w.down()
        notes = {k: log.read.history.checkpoint(k) for k in range(1, n + 1)}
        outcome, checkpoint_s, seal_s = _in_flight_while_sealing(log, clock, w, deadline=2.0)
        assert (outcome.result, outcome.old, outcome.size) == (result, 0, n), outcome.detail
        assert checkpoint_s < 1.0 and seal_s < 1.0, "witnessing delayed the log"
        after = state(log)
        assert after.status == status and after.size == 0 and after.failures == 1
        if window is None:
            assert after.retry_at == 0
        else:
            assert window[0] <= after.retry_at - int(clock()) <= window[1]
        # Nothing stored for any size; no checkpoint changed.
        with log.store.read():
            assert list(log.store.iter_cosignatures()) == []
        assert all(log.read.history.checkpoint(k) == notes[k] for k in notes)
        assert audit_store(log).ok


def test_a_409_below_our_size_is_retried_once_from_the_witness_s_size(tmp_path: Path) -> None:
    clock = Clock()
    with (
        new_log(tmp_path, clock, heads=3) as log,
        TestWitness("witness.test/w1", log.read.history.vkey()) as w,
    ):
        n = log.store.history_size()
        # The witness cosigned size 2 before (our record of it was lost).
        two = parse_note(log.read.history.checkpoint(2)).text.split("\n")
        w.state[ORIGIN] = (2, base64.b64decode(two[2]))
        w.delay = 0.6  # slow enough for a checkpoint and a seal in between
        outcome, checkpoint_s, seal_s = _in_flight_while_sealing(log, clock, w)
        assert (outcome.result, outcome.old, outcome.size) == ("cosigned", 2, n), outcome.detail
        assert checkpoint_s < 1.0 and seal_s < 1.0, "witnessing delayed the log"
        assert [r.split(b"\n")[0] for r in w.requests] == [b"old 0", b"old 2"]
        assert (state(log).size, len(stored(log, n))) == (n, 1)
        assert audit_store(log).ok


def test_a_second_409_after_the_retry_is_a_failure_from_that_size(tmp_path: Path) -> None:
    with (
        new_log(tmp_path, heads=3) as log,
        TestWitness("witness.test/w1", log.read.history.vkey()) as w,
    ):
        w.mode, w.conflict_size = "409-smaller", 1
        outcome = one(log, w)
        # 409 naming 1 (≠ old 0): retried from 1; 409 naming 1 again = the old size sent.
        assert outcome.result == "stopped" and len(w.requests) == 2


def test_a_stopped_witness_is_skipped_until_the_operator_resumes(tmp_path: Path) -> None:
    with new_log(tmp_path) as log, TestWitness("witness.test/w1", log.read.history.vkey()) as w:
        w.mode = "422"
        assert one(log, w).result == "stopped"
        w.mode = None
        assert one(log, w).result == "stopped" and len(w.requests) == 1
        assert one(log, w, resume=True).result == "cosigned"
        assert state(log).status == "ok" and state(log).failures == 0


def test_the_retry_delay_doubles_to_an_hour_with_jitter() -> None:
    for failures, base in ((1, 30), (2, 60), (3, 120), (7, 1920)):
        delays = [retry_delay(failures) for _ in range(200)]
        assert base * 0.8 <= min(delays) and max(delays) <= base * 1.2
        assert max(delays) - min(delays) > base * 0.1  # jittered
    assert all(retry_delay(k) <= RETRY_MAX_S for k in (8, 12, 100))


# --- the background -----------------------------------------------------------------------


def test_a_hanging_witness_never_delays_background_checkpoints_or_seals(tmp_path: Path) -> None:
    clock = Clock()
    data = tmp_path / "data"
    Log.init(data, iss=ISS, clock=clock).close()

    async def scenario() -> None:
        with (
            Log.open(data, clock=clock) as log,
            TestWitness("witness.test/w1", log.read.history.vkey()) as hang,
            TestWitness("witness.test/w2", log.read.history.vkey()) as good,
        ):
            hang.mode = "hang"
            set_policy(log, policy_of(hang, good, quorum="w2"))
            witnessing = Witnessing(log, 0.0, deadline=3.0)
            bg = Background(log, data, 0.0, witnessing=witnessing)
            await bg.start()
            sizes: list[int] = []
            for k in range(6):
                await asyncio.to_thread(log.append, [observation(k, "bg")])
                await asyncio.sleep(1.2)  # a tick or so: a head per append
                sizes.append(log.store.history_size())
            clock.t += DAY  # past midnight: sealed at the next tick
            await asyncio.sleep(1.5)
            sealed = log.store.sealed_head(utc_day(clock.t - DAY))
            await bg.stop()
            assert sealed is not None, "the day was not sealed while a witness hung"
            assert sizes == sorted(sizes) and sizes[-1] >= sizes[0] + 4, sizes
            assert bg.stopped_by is None
            # The good witness cosigned as the history grew; the hanging one got requests
            # (one in flight at a time) and nothing was stored for it.
            with log.store.read():
                rows = list(log.store.iter_cosignatures())
            assert rows and {r.witness for r in rows} == {"w2"}
            assert 1 <= len(hang.requests) <= 3

    asyncio.run(scenario())


def _cosigned_up_to_date(data: Path, at_least: int) -> bool:
    db = sqlite3.connect(f"file:{data / 'log.sqlite3'}?mode=ro", uri=True)
    try:
        (checkpoint,) = db.execute("SELECT max(size) FROM checkpoints").fetchone()
        (cosigned,) = db.execute("SELECT max(size) FROM cosignatures").fetchone()
    finally:
        db.close()
    return checkpoint is not None and checkpoint >= at_least and cosigned == checkpoint


def test_serve_submits_to_its_witnesses_and_a_hanging_one_costs_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    Log.init(data, iss=ISS).close()
    with Log.open(data) as log:
        vkey = log.read.history.vkey()
    with TestWitness("witness.test/w1", vkey) as hang, TestWitness("witness.test/w2", vkey) as good:
        hang.mode = "hang"
        with Log.open(data) as log:
            set_policy(log, policy_of(hang, good, quorum="w2"))
        args = ("--checkpoint-interval", "1", "--witness-deadline", "5", "--rate-limit", "0")
        with serving(data, *args) as server, server.client() as client:
            for k in range(4):
                answer = client.post(
                    "/records",
                    json={"records": [observation(k, "serve")]},
                    headers=server.writer_headers(),
                )
                assert answer.status_code == 200, answer.text
                time.sleep(1.2)
            # The last head and its cosignature by w2 follow within a few ticks.
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and not _cosigned_up_to_date(data, 4):
                time.sleep(0.2)
        with Log.open(data) as log:
            size = log.store.history_size()
            assert size >= 4, "a head per append, while one witness hung"
            with log.store.read():
                rows = list(log.store.iter_cosignatures())
            assert {r.witness for r in rows} == {"w2"} and max(r.size for r in rows) == size
            served = parse_note(log.read.history.served_checkpoint())
            policy = parse_policy(policy_of(hang, good, quorum="w2"))
            assert check_cosignatures(served, policy, at=int(time.time())).ok
            assert audit_store(log).ok
        assert 1 <= len(hang.requests) <= 3  # one in flight at a time, 5 s each


# --- the CLI --------------------------------------------------------------------------------


def test_policy_and_cosign_on_the_command_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with (
        TestWitness("witness.test/w1", "x+00000000+AQ==") as w1,
        TestWitness("witness.test/w2", "x") as w2,
    ):
        bad = tmp_path / "bad.txt"
        bad.write_text("witness w1 nonsense\nquorum w1\n")
        done = run_cli("init", "--data", data, "--iss", ISS, "--witness-policy", bad)
        assert done.returncode == 2 and "policy line 1" in done.stderr
        assert not (data / "log.sqlite3").exists()
        good = tmp_path / "policy.txt"
        good.write_bytes(policy_of(w1, w2))
        done = run_cli("init", "--data", data, "--iss", ISS, "--witness-policy", good)
        assert done.returncode == 0, done.stderr
        with Log.open(data) as log:
            vkey = log.read.history.vkey()
            assert log.store.policy() == good.read_bytes()
            grow(log, 2, "cli")
        w1.log_vkey = w2.log_vkey = vkey
        w2.mode = "500"
        done = run_cli("cosign", "--data", data, "--witness-deadline", "3")
        assert done.returncode == 1, done.stderr
        lines = [json.loads(x) for x in done.stdout.splitlines()]
        assert [(x["witness"], x["result"]) for x in lines] == [
            ("w1", "cosigned"),
            ("w2", "failed"),
        ]
        assert set(lines[0]) == {"witness", "old", "size", "result", "detail"}
        # The operator's audit (read-only, one snapshot) verifies the stored cosignature.
        done = run_cli("audit", "--data", data)
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["checked"]["cosignatures"] == 1
        # A log line must be our own vkey.
        other = NoteSigner(ORIGIN, SigningKey.generate()).verifier.vkey()
        foreign = tmp_path / "foreign.txt"
        foreign.write_text(f"log {other}\nquorum none\n")
        done = run_cli("policy", "--data", data, foreign)
        assert done.returncode == 2 and "must be the log's own vkey" in done.stderr
        ours = tmp_path / "ours.txt"
        ours.write_text(f"log {vkey}\nwitness w1 {w1.vkey} {w1.url}\nquorum w1\n")
        done = run_cli("policy", "--data", data, ours)
        assert done.returncode == 0, done.stderr
        with Log.open(data) as log:
            assert log.store.policy() == ours.read_bytes()
        done = run_cli("cosign", "--data", data)
        assert done.returncode == 0 and json.loads(done.stdout)["result"] == "current"
        # --policy: this once, that file's witnesses; the stored policy stays. w2 is not in
        # it, so what w2 answers is not stored: the audit could not verify it (issue #21).
        w2.mode = None
        once = tmp_path / "once.txt"
        once.write_text(f"witness w2 {w2.vkey} {w2.url}\nquorum w2\n")
        done = run_cli("cosign", "--data", data, "--policy", once)
        assert done.returncode == 1, done.stderr
        assert json.loads(done.stdout)["result"] == "failed"
        assert "the stored policy does not list witness w2" in done.stderr
        with Log.open(data) as log:
            assert log.store.policy() == ours.read_bytes()
            assert [c.witness for c in log.store.iter_cosignatures()] == ["w1"]
            assert log.store.witness_state("w2") is None or log.store.witness_state("w2").size == 0
        assert run_cli("audit", "--data", data).returncode == 0


# --- aics-witness, the real third-party witness -------------------------------------------


def test_aics_witness_cosigns_our_checkpoints(tmp_path: Path) -> None:
    with new_log(tmp_path) as log:
        vkey = log.read.history.vkey()
        with AicsWitness(tmp_path / "aics", ORIGIN, vkey) as aics:
            text = f"witness aics {aics.vkey} {aics.url}\nquorum aics\n".encode()
            set_policy(log, text)
            policy = parse_policy(text)
            for k in range(2):
                [outcome] = run_round(log)
                assert outcome.result == "cosigned", (outcome.detail, aics.log())
                n = log.store.history_size()
                [row] = stored(log, n)
                note = parse_note(log.read.history.checkpoint(n) + row.line.encode() + b"\n")
                assert check_cosignatures(note, policy, at=int(time.time())).ok
                # Its monitoring endpoint shows our checkpoint, with its cosignature.
                monitored = aics.monitored()
                assert monitored.startswith(
                    parse_note(log.read.history.checkpoint(n)).text.encode()
                )
                assert row.line.encode() in monitored
                grow(log, 1, f"aics{k}")
            served = parse_note(log.read.history.served_checkpoint())
            assert check_cosignatures(served, policy, at=int(time.time())).ok
            # A second third party, aics-tlog, reads the checkpoint we serve with the first's
            # cosignature and finds the quorum met.
            answer = run_peer(
                ensure_venv(),
                {
                    "op": "verify",
                    "note": log.read.history.served_checkpoint().decode(),
                    "log_vkey": vkey,
                    "witness_vkeys": [aics.vkey],
                    "quorum": 1,
                    "origin": ORIGIN,
                },
            )
            assert answer["ok"] and len(answer["witnesses"]) == 1, answer
            # And verify-proof, offline from an export, passes checks 8 and 9 with aics-witness
            # as the policy's quorum.
            log.append([observation(0, "aicsrec", iss=ISS)])  # a record /record can issue
            log.checkpoint()
            assert run_round(log)[0].result == "cosigned"
            folder = tmp_path / "public"
            export(log, folder)
            record = log.record(sub="example:aicsrec-0")
            (tmp_path / "record.json").write_text(json.dumps(record))
            (tmp_path / "policy.txt").write_bytes(f"log {vkey}\n".encode() + text)
            done = subprocess.run(
                [
                    str(CLI.parent / "verify-proof"),
                    str(tmp_path / "record.json"),
                    *("--roots", str(folder), "--policy", str(tmp_path / "policy.txt")),
                    *("--at", str(record["iat"])),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            assert "PASS history" in done.stdout, done.stdout
            assert "PASS witnesses" in done.stdout and "aics" in done.stdout, done.stdout


# --- the audit -------------------------------------------------------------------------------


def _raw_insert(
    log: Log, witness: str, key_id: bytes, size: int, timestamp: int, line: str
) -> None:
    """A row written past the product (as whoever can write the database could)."""
    db = sqlite3.connect(log.data_dir / "log.sqlite3")
    with db:
        db.execute(
            "INSERT INTO cosignatures (witness, key_id, size, timestamp, line, added) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (witness, key_id, size, timestamp, line, int(time.time())),
        )
    db.close()


def test_the_audit_verifies_every_stored_cosignature(tmp_path: Path) -> None:
    with (
        new_log(tmp_path, heads=3) as log,
        TestWitness("witness.test/w1", log.read.history.vkey()) as w,
    ):
        set_policy(log, policy_of(w))
        assert run_round(log)[0].result == "cosigned"
        report = audit_store(log)
        assert report.ok and report.checked["cosignatures"] == 1
        # A line by the witness's key over checkpoint 2, stored as if it were of size 1.
        text2 = parse_note(log.read.history.checkpoint(2)).text
        now = int(time.time())
        line = w.cosign(text2, now).rstrip("\n")
        kid = parse_note(log.read.history.checkpoint(2) + line.encode() + b"\n").signatures[1]
        _raw_insert(log, "w1", kid.key_id, 1, now, line)
        report = audit_store(log)
        assert any(
            "cosignature by w1 of size 1 does not verify over the stored checkpoint" in p
            for p in report.problems
        ), report.problems
        # A row whose timestamp is not its line's.
        _raw_insert(log, "w1", kid.key_id, 2, 7, line)
        assert any("timestamp is not its line's" in p for p in audit_store(log).problems)


def test_a_cosignature_by_a_witness_dropped_later_is_checked_against_its_policy(
    tmp_path: Path,
) -> None:
    with new_log(tmp_path) as log, TestWitness("witness.test/w1", log.read.history.vkey()) as w:
        set_policy(log, policy_of(w))
        assert run_round(log)[0].result == "cosigned"
        set_policy(log, b"quorum none\n")  # the witness is dropped; its line is kept
        report = audit_store(log)
        assert report.ok, report.problems
        # Verified with the key of the policy in force when it was stored.
        assert report.checked["cosignatures"] == 1


# --- crash ----------------------------------------------------------------------------------


def test_kill_9_during_witnessing_leaves_the_audit_clean(tmp_path: Path) -> None:
    with (
        new_log(tmp_path, heads=3) as log,
        TestWitness("witness.test/w1", log.read.history.vkey()) as w,
    ):
        set_policy(log, policy_of(w))
        notes = {k: log.read.history.checkpoint(k) for k in range(1, log.store.history_size() + 1)}
        data = log.data_dir
        w.mode = "hang"
        for delay in (0.3, 0.6, 1.0):
            child = subprocess.Popen(
                [str(CLI), "cosign", "--data", str(data), "--witness-deadline", "30"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(delay)
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        # The witness records the checkpoint, then is slow to answer: killed before the
        # answer came, the log has no record that it cosigned.
        w.mode, w.delay = None, 3.0
        child = subprocess.Popen(
            [str(CLI), "cosign", "--data", str(data), "--witness-deadline", "30"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while not w.state:
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        assert all(log.read.history.checkpoint(k) == notes[k] for k in notes)
        assert audit_store(log).ok
        with log.store.read():
            assert list(log.store.iter_cosignatures()) == []
        # Witnessing goes on: old 0 gets a 409 naming the size it cosigned, retried from it.
        w.delay = 0.0
        [outcome] = run_round(log)
        assert (outcome.result, outcome.old) == ("cosigned", log.store.history_size())
        assert audit_store(log).ok


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))


# --- episodes, the schedule's order, policies across a rotation (issue #21) -----------------


def test_a_problem_is_logged_once_when_it_starts_and_once_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging

    from capability_anchor.witness.client.rounds import REFUSED, UNREACHABLE
    from capability_anchor.witness.client.schedule import Episodes

    problems = Episodes(logging.getLogger("capability_anchor.witnessing"))
    with caplog.at_level(logging.INFO, "capability_anchor.witnessing"):
        for _ in range(50):  # fifty ticks of the same problem
            problems.seen("w1", UNREACHABLE, "cannot connect")
        problems.seen("w1", REFUSED, "HTTP 403")  # another kind: the first episode ends
        problems.seen("w1", REFUSED, "HTTP 403")
        problems.cleared("w1")
        problems.cleared("w1")  # nothing going on: nothing logged
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4, lines
    assert "cannot connect" in lines[0] and "unreachable problem has ended" in lines[1]
    assert "HTTP 403" in lines[2] and "refused problem has ended" in lines[3]
    states = {(s.witness, s.problem): s for s in problems.snapshot()}
    assert states["w1", UNREACHABLE].occurrences == 50 and states["w1", UNREACHABLE].episodes == 1
    assert states["w1", REFUSED].occurrences == 2 and not states["w1", REFUSED].active


def test_attack_a_policy_without_the_current_key_stops_submissions_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from capability_anchor.witness.client.schedule import POLICY

    other = NoteSigner(ORIGIN, SigningKey.generate()).verifier.vkey()
    with new_log(tmp_path) as log, TestWitness("witness.test/w1", log.read.history.vkey()) as w:
        witnessing = Witnessing(log, 60.0)
        set_policy(log, f"log {other}\n".encode() + policy_of(w))
        with caplog.at_level(logging.INFO, "capability_anchor.witnessing"):
            for _ in range(5):  # five ticks
                assert witnessing.due() == []
            set_policy(log, f"log {log.read.history.vkey()}\n".encode() + policy_of(w))
            assert [x.name for x in witnessing.due()] == ["w1"]
        lines = [r.getMessage() for r in caplog.records if r.name.endswith(".witnessing")]
        assert len(lines) == 2, lines
        assert "must be the log's own vkey" in lines[0] and "has ended" in lines[1]
        [state] = [s for s in witnessing.problems.snapshot() if s.problem == POLICY]
        assert (state.occurrences, state.episodes, state.active) == (5, 1, False)


def test_a_policy_may_list_the_logs_other_keys_but_must_list_the_current_one() -> None:
    from capability_anchor.errors import MalformedPolicy
    from capability_anchor.log.policies import check_policy

    current, old, stranger = (
        NoteSigner(ORIGIN, SigningKey.generate()).verifier.vkey() for _ in range(3)
    )
    quorum = b"quorum none\n"
    both = check_policy(f"log {old}\nlog {current}\n".encode() + quorum, (current, old))
    assert [entry.verifier.vkey() for entry in both.logs] == [old, current]
    with pytest.raises(MalformedPolicy, match=re.escape(f"add `log {current}`")):
        check_policy(f"log {old}\n".encode() + quorum, (current, old))
    with pytest.raises(MalformedPolicy, match="must be the log's own vkey"):
        check_policy(f"log {current}\nlog {stranger}\n".encode() + quorum, (current, old))
    assert check_policy(quorum, (current, old)).logs == ()


def test_places_in_flight_go_oldest_first_up_to_the_bound(tmp_path: Path) -> None:
    with new_log(tmp_path) as log:
        vkey = log.read.history.vkey()
        with (
            TestWitness("witness.test/w1", vkey) as w1,
            TestWitness("witness.test/w2", vkey) as w2,
            TestWitness("witness.test/w3", vkey) as w3,
        ):
            set_policy(log, policy_of(w1, w2, w3))
            witnessing = Witnessing(log, 0.0, in_flight=2)
            first = witnessing.due()
            assert [w.name for w in first] == ["w1", "w2"]
            assert witnessing.due() == []  # both places taken

            async def submit() -> str:
                try:
                    return (await witnessing.run(first[0])).result
                finally:
                    await witnessing.aclose()

            assert asyncio.run(submit()) == "cosigned"
            assert [w.name for w in witnessing.due()] == ["w3"]  # never asked: before w1
            assert witnessing.in_flight == 2
