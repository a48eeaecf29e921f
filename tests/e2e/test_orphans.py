"""No orphans (issue #21, item 6): after a kill -9 of `serve`, of uvicorn's supervisor or of
one uvicorn worker, none of its helper processes (the resource tracker, the forkserver, the
body workers, uvicorn's workers) outlives it, and nothing keeps `log.sqlite3` or its WAL
open. Real processes throughout: the process tree is read from /proc before the kill, and
each test then waits at most 5 s for all of it to be gone.

The red team's crash loop (kill -9 of `serve`, start it again, 48 times) left 81 helpers
using 2.4 GB; here it runs 8 times and the count of helpers left stays 0.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from tests.kit.logkit import run_cli
from tests.kit.obskit import observation
from tests.kit.serverkit import (
    Server,
    command_line,
    descendants,
    free_port,
    holders,
    left_alive,
    process_alive,
    serve_crash_loop,
    serving,
    start,
    uvicorn_argv,
)

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads the process tree from /proc"
)

GONE_WITHIN_S = 5.0
ISS = "https://resolver.example"


def _write(server: Server, tag: str) -> None:
    """A batch through the append workers: each opens the log and keeps it open."""
    batch = {"records": [observation(i, tag, sub=f"example:{tag}-{i}") for i in range(3)]}
    with server.client() as client:
        r = client.post("/records", json=batch, headers=server.writer_headers())
    assert r.status_code == 200, r.text


def _helpers(tree: dict[int, str], kind: str) -> list[int]:
    return [pid for pid, cmd in tree.items() if f"multiprocessing.{kind}" in cmd]


def _kill_9(pid: int) -> None:
    """SIGKILL that one process, not its group: what a crash or the OOM killer does."""
    os.kill(pid, signal.SIGKILL)


def _described(pids: set[int], tree: dict[int, str]) -> str:
    return "; ".join(f"{pid} {tree.get(pid) or command_line(pid)}" for pid in sorted(pids))


@pytest.mark.parametrize("body_workers", [1, 2])
def test_kill_9_of_serve_leaves_no_helper_alive(tmp_path: Path, body_workers: int) -> None:
    data = tmp_path / "data"
    with serving(data, "--body-workers", str(body_workers)) as server:
        _write(server, "a")
        tree = descendants(server.pid)
        # The helpers the red team found left behind all exist before the kill.
        assert len(_helpers(tree, "resource_tracker")) == 1, tree
        # The forkserver and, forked by it, the body workers (N for public bodies, N for
        # writers) and the sequencer candidate, which leads: it has the database open.
        assert len(_helpers(tree, "forkserver")) == 1 + 2 * body_workers + 1, tree
        _kill_9(server.pid)
        assert server.wait(30) == -signal.SIGKILL
        left = left_alive(tree, GONE_WITHIN_S)
        assert not left, _described(left, tree)
    assert not holders(data / "log.sqlite3")
    # The log is whole and takes writes again.
    assert run_cli("audit", "--data", data).returncode == 0
    with serving(data) as again:
        _write(again, "b")


def _uvicorn(data: Path, workers: int) -> Server:
    assert run_cli("init", "--data", data, "--iss", ISS).returncode == 0
    port = free_port()
    return start(
        data,
        port=port,
        argv=uvicorn_argv(port, workers),
        env={"CAPABILITY_ANCHOR_DATA": str(data)},
    )


def _workers(server: Server) -> dict[int, dict[int, str]]:
    """Each uvicorn worker, with its own tree (its forkserver and body worker), once every
    worker has started its body workers."""
    for n in range(40):  # the kernel spreads connections over the workers that accept
        _write(server, f"w{n}")
        tree = descendants(server.pid)
        workers = [p for p, cmd in tree.items() if "spawn_main" in cmd]
        per = {w: descendants(w) for w in workers}
        if len(workers) == 2 and all(len(_helpers(t, "forkserver")) >= 2 for t in per.values()):
            return per
    return per


def test_kill_9_of_the_uvicorn_supervisor_leaves_no_worker_alive(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = _uvicorn(data, 2)
    try:
        _write(server, "a")
        _workers(server)
        tree = descendants(server.pid)
        assert len([p for p, cmd in tree.items() if "spawn_main" in cmd]) == 2, tree
        assert _helpers(tree, "forkserver"), tree
        _kill_9(server.pid)
        assert server.wait(30) == -signal.SIGKILL
        left = left_alive(tree, GONE_WITHIN_S)
        assert not left, _described(left, tree)
    finally:
        server.kill()
    assert not holders(data / "log.sqlite3")


def test_kill_9_of_one_uvicorn_worker_leaves_none_of_its_helpers(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = _uvicorn(data, 2)
    try:
        per = _workers(server)
        victim, tree = next((w, t) for w, t in per.items() if _helpers(t, "forkserver"))
        _kill_9(victim)
        left = left_alive([victim, *tree], GONE_WITHIN_S)
        assert not left, _described(left, tree)
        # uvicorn starts a new worker in its place; the service goes on taking writes.
        _write(server, "after")
        assert server.alive()
    finally:
        server.stop()
        server.kill()


def test_a_crash_loop_of_kill_9_does_not_grow_the_process_count(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seen: dict[int, str] = {}
    left_after: list[int] = []
    loop = serve_crash_loop(data, 8, lambda server, n: _write(server, f"loop{n}"), logs=tmp_path)
    for tree, left in loop:
        assert _helpers(tree, "forkserver"), tree
        seen.update(tree)
        left_after.append(len(left))
    assert left_after == [0] * 8, _described({p for p in seen if process_alive(p)}, seen)
    assert not holders(data / "log.sqlite3")
    assert run_cli("audit", "--data", data).returncode == 0
