"""The service's witness submissions under dead witnesses (issue #21, item 6), with a real
`serve` process: a loopback server that accepts every connection and never answers stands
for any number of hanging witnesses, `witnesskit.TestWitness` (written from the C2SP texts)
for the honest ones.

- SIGTERM returns within one witness deadline plus 5 s with 100 witnesses that hang (the
  red-team round measured 67.5 s with a 10 s deadline): the bound is the issue's.
- With 190 hanging witnesses listed ahead of 10 honest ones, every honest one cosigns within
  two checkpoint intervals (the red-team round: none in 40 s).
- At most `MAX_IN_FLIGHT` submissions are open at once, whatever the number of witnesses,
  beside at most `LEARN_PARALLEL` reads of the witnesses' monitoring views (what the log
  learns before it signs: SPEC §13.3), which skip a witness in its backoff.
"""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

from capability_anchor.log import Log
from capability_anchor.log.published import LEARN_PARALLEL
from capability_anchor.witness.client.schedule import MAX_IN_FLIGHT
from tests.kit.obskit import observation
from tests.kit.serverkit import Server, start
from tests.kit.witnesskit import HangingServer, TestWitness, cosignature_vkey

ISS = "https://resolver.example"


def hanging_policy(hang: HangingServer, n: int, honest: list[TestWitness]) -> bytes:
    """N hanging witnesses first (the order `due` would break ties by), then the honest."""
    lines = [
        f"witness h{i} {cosignature_vkey(f'witness.test/h{i}')} {url}"
        for i, url in enumerate(hang.urls(n))
    ]
    lines += [f"witness ok{i} {w.vkey} {w.url}" for i, w in enumerate(honest)]
    return ("\n".join(lines) + "\nquorum none\n").encode()


def new_log(data: Path) -> str:
    Log.init(data, iss=ISS).close()
    with Log.open(data) as log:
        return log.read.history.vkey()


def set_policy(data: Path, text: bytes) -> None:
    with Log.open(data) as log, log.writer.lock, log.store.write():
        log.store.set_policy(text, int(log.clock()))


def append(server: Server, tag: str) -> None:
    with server.client() as client:
        answer = client.post(
            "/records", json={"records": [observation(0, tag)]}, headers=server.writer_headers()
        )
        assert answer.status_code == 200, answer.text


def checkpoint_size(data: Path) -> int:
    db = sqlite3.connect(f"file:{data / 'log.sqlite3'}?mode=ro", uri=True)
    try:
        (size,) = db.execute("SELECT coalesce(max(size), 0) FROM checkpoints").fetchone()
    finally:
        db.close()
    return int(size)


def wait_for(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s: {what}")


@contextlib.contextmanager
def honest_witnesses(n: int, log_vkey: str) -> Iterator[list[TestWitness]]:
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(TestWitness(f"witness.test/ok{i}", log_vkey)) for i in range(n)]


def test_attack_sigterm_with_100_hanging_witnesses_returns_within_a_deadline_plus_5_s(
    tmp_path: Path,
) -> None:
    deadline = 10.0  # the red-team round's
    data = tmp_path / "data"
    new_log(data)
    with HangingServer() as hang:
        set_policy(data, hanging_policy(hang, 100, []))
        args = ("--checkpoint-interval", "1", "--witness-deadline", str(deadline))
        server = start(data, *args, "--rate-limit", "0")
        try:
            append(server, "sigterm")
            # Every place in flight is taken by a witness that will never answer.
            wait_for(lambda: hang.open >= MAX_IN_FLIGHT, 30, "the submissions are in flight")
            sent = time.monotonic()
            server.signal(signal.SIGTERM)
            code = server.wait(deadline + 5 + 10)  # waited longer, to measure what it took
            took = time.monotonic() - sent
        finally:
            server.kill()
        assert code == 0, server.stderr()
        assert took <= deadline + 5, f"SIGTERM took {took:.1f} s with a {deadline:g} s deadline"
        assert hang.most_open <= MAX_IN_FLIGHT + LEARN_PARALLEL, hang.most_open
        # Submissions never went past the bound, and none was logged once per tick.
        err = server.stderr()
        assert err.count("witness h0:") <= 2, err[-3000:]


def test_attack_190_hanging_witnesses_ahead_of_10_honest_ones_cannot_starve_them(
    tmp_path: Path,
) -> None:
    deadline, interval = 2.0, 6.0
    data = tmp_path / "data"
    vkey = new_log(data)
    with HangingServer() as hang, honest_witnesses(10, vkey) as honest:
        set_policy(data, hanging_policy(hang, 190, honest))
        args = ("--checkpoint-interval", str(interval), "--witness-deadline", str(deadline))
        server = start(data, *args, "--rate-limit", "0")
        try:
            append(server, "fair")
            wait_for(lambda: checkpoint_size(data) >= 1, 2 * interval, "the first checkpoint")
            signed = time.time()
            wait_for(
                lambda: all(w.times for w in honest),
                4 * interval,
                "every honest witness was asked",
            )
            last = max(w.times[0] for w in honest) - signed
            assert last <= 2 * interval, (
                f"the last honest witness was first asked {last:.1f} s after the checkpoint"
            )
            # And each cosigned it: the log stored their cosignatures.
            wait_for(lambda: stored_by(data) >= {f"ok{i}" for i in range(10)}, 10, "stored")
            assert hang.most_open <= MAX_IN_FLIGHT + LEARN_PARALLEL, hang.most_open
        finally:
            server.stop()


def stored_by(data: Path) -> set[str]:
    db = sqlite3.connect(f"file:{data / 'log.sqlite3'}?mode=ro", uri=True)
    try:
        return {row[0] for row in db.execute("SELECT DISTINCT witness FROM cosignatures")}
    finally:
        db.close()
