"""`capability-anchor monitor` against real `serve` processes on 127.0.0.1, each run a real
CLI process (issue #14):

- a split view: two data dirs of one log (one key, one origin) that were one history, then
  grew apart to the same size, each behind its own `serve`; each monitor alone is
  consistent, `monitor compare` alarms, and a monitor moved from one to the other (the log
  "rewrote" its history) alarms `checkpoint_inconsistent` or `checkpoint_rollback`;
- a data dir tampered with past its triggers (raw sqlite3, as an attacker with the file
  would), served as it is: the monitor names the alarm, and names it again on the next run;
- bad answers (500, garbage, a body over the size limit, a server that dies mid-run) are
  exit 2 with the URL in the message, never an alarm, and leave the state as it was.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from capability_anchor.log import Log
from logkit import ISS, record, run_cli
from serverkit import Server, serving

ORIGIN = "resolver.example/history"  # logkit.ISS without its scheme, plus /history
SERVE_ARGS = ("--rate-limit", "0", "--body-workers", "0")


@dataclass
class Run:
    code: int
    lines: list[dict]
    stderr: str

    @property
    def alarms(self) -> list[str]:
        return [line["alarm"] for line in self.lines if "alarm" in line]


def monitor(url: str, state: Path, keys: Path, *extra: str) -> Run:
    """One monitor run as a user runs it. The origin is given: the servers' URLs are
    loopback ports, the log's origin is its public one."""
    done = run_cli("monitor", url, "--keys", keys, "--state", state, "--origin", ORIGIN, *extra)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return Run(done.returncode, lines, done.stderr)


def grow(data: Path, tag: str, heads: int = 1) -> None:
    """`heads` more unsealed heads (one record each), each a history leaf and checkpoint.
    The real clock: `serve` seals past days, and a day of the test's own would make it seal
    (and publish) while a monitor reads."""
    with Log.open(data) as log:
        for n in range(heads):
            rec = record(log.today(), 0)
            rec["sub"] = f"{tag}-{n}"
            log.append([rec])
            assert log.checkpoint() is not None


def new_log(data: Path) -> None:
    Log.init(data, iss=ISS).close()
    grow(data, "common", 2)


def state_files(state: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(state.iterdir())} if state.exists() else {}


# --- a split view ------------------------------------------------------------------------


@dataclass
class Split:
    """Four servers of one log: `a` and `b` at history size 3, grown apart from one history
    of size 2; `a4` and `b4` the same one head further."""

    servers: dict[str, Server]
    keys: Path


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Split]:
    tmp = tmp_path_factory.mktemp("split")
    new_log(tmp / "base")
    dirs = {}
    for name in ("a", "b"):
        shutil.copytree(tmp / "base", tmp / name)
        grow(tmp / name, f"only-{name}")
        shutil.copytree(tmp / name, tmp / f"{name}4")
        grow(tmp / f"{name}4", f"more-{name}")
        dirs[name], dirs[f"{name}4"] = tmp / name, tmp / f"{name}4"
    with (
        serving(dirs["a"], *SERVE_ARGS) as a,
        serving(dirs["b"], *SERVE_ARGS) as b,
        serving(dirs["a4"], *SERVE_ARGS) as a4,
        serving(dirs["b4"], *SERVE_ARGS) as b4,
    ):
        keys = tmp / "keys.json"
        with a.client() as client:
            keys.write_bytes(client.get("/keys").content)
        with b.client() as client:
            assert client.get("/keys").content == keys.read_bytes()  # one log identity
        yield Split({"a": a, "b": b, "a4": a4, "b4": b4}, keys)


def test_each_view_alone_is_consistent_and_compare_finds_the_split(
    split: Split, tmp_path: Path
) -> None:
    state_a, state_b = tmp_path / "a", tmp_path / "b"
    for state, name in ((state_a, "a"), (state_b, "b")):
        run = monitor(split.servers[name].url, state, split.keys, "--entries")
        assert run.code == 0, run
        assert run.lines[-1] == {**run.lines[-1], "size": 3, "origin": ORIGIN}
    for _ in range(2):  # compare only reads the states: it says the same every time
        done = run_cli("monitor", "compare", state_a, state_b)
        assert done.returncode == 1, done.stdout + done.stderr
        found = [json.loads(line) for line in done.stdout.splitlines()]
        assert [f["alarm"] for f in found] == ["split_view", "split_view"], found
        assert found[0]["size"] == 3 and found[1]["index"] == 2, found
    same = tmp_path / "a-again"
    assert monitor(split.servers["a4"].url, same, split.keys).code == 0
    done = run_cli("monitor", "compare", state_a, same)  # a prefix of one view: no split
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("first", "then", "alarm"),
    [
        ("a", "b", "checkpoint_inconsistent"),  # the same size, another root
        ("a", "b4", "checkpoint_inconsistent"),  # larger, but not an extension of a
        ("a4", "b", "checkpoint_rollback"),  # smaller than what the monitor saw
    ],
)
def test_a_monitor_moved_to_the_other_view_alarms(
    split: Split, tmp_path: Path, first: str, then: str, alarm: str
) -> None:
    state = tmp_path / "state"
    assert monitor(split.servers[first].url, state, split.keys).code == 0
    before = state_files(state)
    for _ in range(2):  # nothing is committed past an alarm: the next run repeats it
        run = monitor(split.servers[then].url, state, split.keys)
        assert (run.code, run.alarms) == (1, [alarm]), run
        assert run.lines[-1]["result"] == "alarm"
        assert state_files(state) == before
