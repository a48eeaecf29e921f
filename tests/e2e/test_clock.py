"""Clock sanity (issue 10, point 5): a jump of the wall clock never seals a day that has not
ended and never puts entries on a day that has not begun.

The guard's rules are checked with clocks the test moves (both are inputs of the guard, as
the Log's clock is one of the Log); the service is then run as a real process under
libfaketime, whose wall clock the test jumps 19 days ahead and back while the monotonic clock
runs on (FAKETIME_DONT_FAKE_MONOTONIC), as the incident did.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import logging
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from capability_anchor.errors import ClockDisagrees
from capability_anchor.log import Log
from capability_anchor.log.clockguard import (
    ACK_FILE,
    DISAGREES_FILE,
    TOLERANCE_S,
    ClockGuard,
    acknowledge,
)
from capability_anchor.service.background import Background
from tests.kit import paths
from tests.kit.logkit import CLI, raw
from tests.kit.obskit import observation
from tests.kit.serverkit import Server, clean_env, serving
from tests.kit.systools import ensure_tool

ISS = "https://resolver.example"
ROOT = paths.ROOT
# The synchronised build: the plain one, re-reading its offset file in every thread
# (FAKETIME_NO_CACHE), races on a static buffer and hands about one reading in 250 of a
# many-threaded process the un-offset time (libfaketime issue #151, fixed upstream by PR
# #547, later than Debian's 0.9.10); the service is many-threaded, so a guard that is right
# saw its clocks agree for one reading and ended the episode early.
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1")
DAY = 86400.0
T0 = dt.datetime(2026, 11, 2, 23, 58, 0, tzinfo=dt.UTC).timestamp()


class Clocks:
    """A wall clock and a monotonic clock the test moves: `advance` moves both (time
    passing), `jump` only the wall clock (someone set it)."""

    def __init__(self, wall: float = T0, mono: float = 1000.0) -> None:
        self.t_wall = wall
        self.t_mono = mono

    def wall(self) -> float:
        return self.t_wall

    def mono(self) -> float:
        return self.t_mono

    def advance(self, seconds: float) -> None:
        self.t_wall += seconds
        self.t_mono += seconds

    def jump(self, seconds: float) -> None:
        self.t_wall += seconds

    def guard(self, data: Path) -> ClockGuard:
        return ClockGuard(data, wall=self.wall, mono=self.mono)


def warnings_of(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return sum(text in r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


# --- the guard's rules -------------------------------------------------------------------------


def test_agreeing_clocks_give_the_wall_time_and_never_run_ahead(tmp_path: Path) -> None:
    clocks = Clocks()
    guard = clocks.guard(tmp_path)
    assert guard.now() == T0
    clocks.advance(30)
    assert guard.now() == T0 + 30
    # A forward jump within the tolerance, across midnight: the service's time stays on the
    # monotonic measure, so the day does not end early.
    clocks.jump(TOLERANCE_S - 10)
    assert guard.now() == T0 + 30
    clocks.jump(-(TOLERANCE_S - 10) - 2)  # a step back is taken as it is
    assert guard.now() == T0 + 28
    assert guard.episodes == 0


@pytest.mark.parametrize("jump", [19 * DAY, TOLERANCE_S + 1, -(TOLERANCE_S + 1), -3 * DAY])
def test_disagreeing_clocks_refuse_and_agreeing_again_resumes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, jump: float
) -> None:
    caplog.set_level(logging.WARNING, "capability_anchor.clock")
    clocks = Clocks()
    guard = clocks.guard(tmp_path)
    clocks.jump(jump)
    for _ in range(50):
        with pytest.raises(ClockDisagrees, match=r"capability-anchor seal") as caught:
            guard.now()
        clocks.advance(0.1)
    assert "disagrees with its monotonic clock by " + ("+" if jump > 0 else "-") in str(
        caught.value
    )
    assert caught.value.code == "unavailable"
    assert not guard.agrees()
    clocks.jump(-jump)
    assert guard.now() == pytest.approx(T0 + 5.0)
    # Logged once per episode, however many refusals it had.
    assert warnings_of(caplog, "disagrees with the monotonic clock") == 1
    assert warnings_of(caplog, "agrees with the monotonic clock again") == 1
    clocks.jump(jump)
    assert not guard.agrees()
    assert warnings_of(caplog, "disagrees with the monotonic clock") == 2
    assert guard.episodes == 2


def test_a_pinned_call_keeps_its_first_verdict(tmp_path: Path) -> None:
    """`POST /records?prove=1` appends, then checkpoints: a jump in between must not refuse
    the checkpoint of a batch already stored."""
    clocks = Clocks()
    guard = clocks.guard(tmp_path)

    def append_then_checkpoint() -> tuple[float, float]:
        first = guard.now()
        clocks.advance(0.5)
        clocks.jump(19 * DAY)
        return first, guard.now()

    assert guard.pinned(append_then_checkpoint)() == (T0, T0 + 0.5)
    with pytest.raises(ClockDisagrees):
        guard.now()  # outside the call: refused
    # A call that begins while they disagree is refused at its first reading.
    with pytest.raises(ClockDisagrees):
        guard.pinned(guard.now)()
    clocks.jump(-19 * DAY)
    assert guard.pinned(guard.now)() == T0 + 0.5


def test_the_operators_acknowledgement_rebaselines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "capability_anchor.clock")
    clocks = Clocks()
    # One already there at start is the past: it is never taken.
    acknowledge(tmp_path, wall=T0 + 50 * DAY, mono=clocks.t_mono + 5)
    guard = clocks.guard(tmp_path)
    clocks.advance(10)
    # Written after the start but before the jump: it does not excuse the jump.
    acknowledge(tmp_path, wall=clocks.t_wall, mono=clocks.t_mono)
    clocks.advance(1)
    clocks.jump(19 * DAY)
    assert not guard.agrees()
    clocks.advance(1)
    acknowledge(tmp_path, wall=clocks.t_wall, mono=clocks.t_mono)  # `seal` now
    clocks.advance(2)
    assert guard.now() == pytest.approx(T0 + 19 * DAY + 14)
    assert warnings_of(caplog, "operator acknowledged the wall clock") == 2
    assert warnings_of(caplog, "agrees with the monotonic clock again") == 1
    # A later jump is a new episode: the acknowledgement covered the clock as it was.
    clocks.jump(-19 * DAY)
    assert not guard.agrees()


def test_an_acknowledgement_from_another_boot_or_unreadable_is_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "capability_anchor.clock")
    clocks = Clocks()
    guard = clocks.guard(tmp_path)
    clocks.advance(5)
    clocks.jump(DAY)
    ack = {"v": 1, "wall": clocks.t_wall, "mono": clocks.t_mono, "boot_id": "another-boot"}
    (tmp_path / ACK_FILE).write_text(json.dumps(ack))
    assert not guard.agrees()
    assert warnings_of(caplog, "written on another boot or machine") == 1
    (tmp_path / ACK_FILE).write_text('{"v": 1, "wall": "soon"')
    assert not guard.agrees()
    assert warnings_of(caplog, "ignoring the clock acknowledgement") == 2
    assert not guard.agrees()  # an unchanged file is read once
    assert warnings_of(caplog, "ignoring the clock acknowledgement") == 2


def test_the_background_seals_nothing_while_the_clocks_disagree(tmp_path: Path) -> None:
    """In-process: the service's background with the guard as its writer's clock."""
    data = tmp_path / "d"
    clocks = Clocks()
    Log.init(data, iss=ISS, clock=clocks.wall).close()

    async def scenario() -> None:
        guard = clocks.guard(data)
        with Log.open(data, clock=guard.now) as writer:
            writer.append([observation(1)])
            bg = Background(writer, data, checkpoint_interval=0.0, guard=guard)
            await bg.start()
            await asyncio.sleep(0.2)
            assert [h.tree_size for h in writer.store.heads("2026-11-02")] == [1]
            clocks.advance(1)
            clocks.jump(19 * DAY)  # 19 days ahead: 2026-11-21 by the wall clock
            await asyncio.sleep(2.5)
            assert writer.store.sealed_heads() == []
            with pytest.raises(ClockDisagrees):
                writer.append([observation(2)])
            ticks = bg.ticks
            clocks.jump(-19 * DAY)
            await asyncio.sleep(1.5)
            assert bg.ticks > ticks
            writer.append([observation(3)])
            assert writer.store.sealed_heads() == []
            clocks.advance(180)  # the day really ends: now it is sealed
            await asyncio.sleep(1.5)
            await bg.stop()
            assert [h.day for h in writer.store.sealed_heads()] == ["2026-11-02"]
            assert writer.store.day_size("2026-11-02") == 2

    asyncio.run(scenario())


# --- the service under libfaketime --------------------------------------------------------------


@pytest.fixture(scope="module")
def libfaketime() -> Path:
    return ensure_tool(LIBFAKETIME, "faketime", "libfaketime", timeout=600)


class FakeTime:
    """libfaketime's offset file for the processes started with `env`: rewritten whole
    (a rename), re-read by them at every clock reading (FAKETIME_NO_CACHE)."""

    def __init__(self, lib: Path, path: Path) -> None:
        self.path = path
        self.set("+0")
        self.env = {
            "LD_PRELOAD": str(lib),
            "FAKETIME_TIMESTAMP_FILE": str(path),
            "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }

    def set(self, offset: str) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(offset + "\n")
        os.replace(tmp, self.path)

    def cli(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(CLI), *map(str, args)],
            capture_output=True,
            text=True,
            env=clean_env(self.env),
            check=False,
            timeout=120,
        )


@pytest.fixture
def faketime(libfaketime: Path, tmp_path: Path) -> FakeTime:
    return FakeTime(libfaketime, tmp_path / "faketime.rc")


@pytest.fixture
def server(faketime: FakeTime, tmp_path: Path) -> Iterator[Server]:
    data = tmp_path / "data"
    with serving(data, *SERVER_ARGS, env=faketime.env) as running:
        yield running


SERVER_ARGS = ("--checkpoint-interval", "1", "--rate-limit", "0")
_serial = itertools.count()


def batch(tag: str, n: int = 5) -> dict[str, Any]:
    """`n` new records (never duplicates of earlier ones)."""
    return {"records": [observation(next(_serial), tag, tag=tag) for _ in range(n)]}


def shift(day: str, days: int) -> str:
    return (dt.date.fromisoformat(day) + dt.timedelta(days=days)).isoformat()


def assert_paused(answer: httpx.Response) -> None:
    assert answer.status_code == 503, answer.text
    body = answer.json()
    assert body["error"] == "unavailable"
    assert "disagrees with its monotonic clock by +19d" in body["note"]
    assert "capability-anchor seal" in body["note"]


def stored_days(data: Path) -> tuple[set[str], list[tuple[str, int]]]:
    with raw(data) as conn:
        entries = {d for (d,) in conn.execute("SELECT DISTINCT day FROM entries")}
        heads = list(conn.execute("SELECT day, sealed FROM heads ORDER BY day, tree_size"))
    return entries, heads


def test_a_jump_19_days_ahead_and_back_seals_nothing_and_stores_nothing(
    server: Server, faketime: FakeTime
) -> None:
    headers = server.writer_headers()
    observed = {
        "v": "0.2",
        "iss": server.url,
        "sub": "urn:agent:clock",
        "url": "https://api.example/cap/clock",
        "status": "ok",
        "checked_at": "2026-11-30T12:00:00Z",
        "evidence": {"record": "sha256:" + "0" * 64},
        "tag": "before",
    }
    with server.client() as client:
        first = batch("before")
        first["records"].append(observed)
        before = client.post("/records?prove=1", json=first, headers=headers)
        assert before.status_code == 200, before.text
        today = before.json()["entries"][0]["day"]
        assert client.get("/record", params={"id": "urn:agent:clock"}).status_code == 200
        faketime.set("+19d")
        # No record token is signed with a time 19 days ahead.
        answers = [client.get("/record", params={"id": "urn:agent:clock"})]
        refused = 0
        # The incident's 6 s, with appends with and without proofs, and checkpoints.
        until = time.monotonic() + 6
        while time.monotonic() < until:
            for path in ("/records", "/records?prove=1"):
                answers.append(client.post(path, json=batch("during"), headers=headers))
                refused += 1
            answers.append(client.post("/checkpoint", headers=headers))
            time.sleep(0.2)
        for answer in answers:
            assert_paused(answer)
        # Reads go on (they need no clock).
        assert client.get(f"/roots/{today}").status_code == 200
        faketime.set("+0")
        after = client.post("/records?prove=1", json=batch("after"), headers=headers)
        assert after.status_code == 200, after.text
        assert {e["day"] for e in after.json()["entries"]} == {today}
        plain = client.post("/records", json=batch("plain"), headers=headers)
        assert plain.status_code == 200, plain.text
        assert client.get("/roots").json()["days"] == []  # nothing sealed
    assert refused >= 20
    assert server.stop() == 0
    entries, heads = stored_days(server.data)
    assert entries == {today}
    assert heads and all(day == today and not sealed for day, sealed in heads)
    with raw(server.data) as conn:
        tags = [json.loads(c)["tag"] for (c,) in conn.execute("SELECT claims FROM entries")]
    assert sorted(set(tags)) == ["after", "before", "plain"] and len(tags) == 16
    stderr = server.stderr()
    assert stderr.count("disagrees with the monotonic clock") == 1, stderr
    assert stderr.count("agrees with the monotonic clock again") == 1, stderr
    assert "Traceback" not in stderr
    audit = faketime.cli("audit", "--data", server.data)
    assert audit.returncode == 0, audit.stderr


def test_an_operators_seal_makes_the_service_go_on_with_the_new_time(
    server: Server, faketime: FakeTime
) -> None:
    headers = server.writer_headers()
    with server.client() as client:
        first = client.post("/records", json=batch("before"), headers=headers)
        assert first.status_code == 200, first.text
        today = first.json()["entries"][0]["day"]
        faketime.set("+19d")
        assert_paused(client.post("/records", json=batch("during"), headers=headers))
        # The operator decides the new time is right: `seal` (under the same clock).
        sealed = faketime.cli("seal", "--data", server.data)
        assert sealed.returncode == 0, sealed.stderr
        assert "acknowledged for a running service" in sealed.stderr
        days = [json.loads(line)["day"] for line in sealed.stdout.splitlines()]
        assert days == [shift(today, n) for n in range(19)]
        answer = client.post("/records?prove=1", json=batch("after"), headers=headers)
        assert answer.status_code == 200, answer.text
        assert {e["day"] for e in answer.json()["entries"]} == {shift(today, 19)}
        listed = client.get("/roots").json()["days"]
        assert [d["day"] for d in listed] == [shift(today, n) for n in range(18, -1, -1)]
    assert server.stop() == 0
    entries, _ = stored_days(server.data)
    assert entries == {today, shift(today, 19)}
    stderr = server.stderr()
    assert stderr.count("operator acknowledged the wall clock") == 1, stderr
    assert stderr.count("agrees with the monotonic clock again") == 1, stderr
    audit = faketime.cli("audit", "--data", server.data)
    assert audit.returncode == 0, audit.stderr


def test_seal_speaks_of_the_clock_only_while_the_running_services_clocks_disagree(
    server: Server, faketime: FakeTime
) -> None:
    """Issue #35: every `seal` said the clock was acknowledged "for a running service whose
    clocks disagree", even when nothing disagreed. It writes DATA/clock-ack, and says so,
    only while the running service's clocks disagree (its `clock-disagrees`)."""
    headers = server.writer_headers()
    ack, episode = server.data / ACK_FILE, server.data / DISAGREES_FILE
    with server.client() as client:
        assert client.post("/records", json=batch("agree"), headers=headers).status_code == 200
        quiet = faketime.cli("seal", "--data", server.data)
        assert quiet.returncode == 0, quiet.stderr
        assert "clock" not in quiet.stderr and not ack.exists(), quiet.stderr
        faketime.set("+19d")
        assert_paused(client.post("/records", json=batch("during"), headers=headers))
        assert episode.is_file()
        sealed = faketime.cli("seal", "--data", server.data)
        assert sealed.returncode == 0, sealed.stderr
        assert f"wrote {ack}: the wall clock (" in sealed.stderr
        assert "whose clocks disagree (by +19d" in sealed.stderr, sealed.stderr
        answer = client.post("/records", json=batch("after"), headers=headers)
        assert answer.status_code == 200, answer.text
        assert not episode.exists()
        ack.unlink()
        again = faketime.cli("seal", "--data", server.data)
        assert again.returncode == 0 and "clock" not in again.stderr, again.stderr
        assert not ack.exists()
    assert server.stop() == 0
