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

import contextlib
import http.server
import json
import queue
import re
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx
import pytest

from capability_anchor import head as heads
from capability_anchor.keys import SigningKey, load_key_file
from capability_anchor.log import KEY_FILE, Log
from capability_anchor.note import NoteSigner, parse_note, sign_checkpoint
from capability_anchor.note.checkpoint import parse_checkpoint
from capability_anchor.read.source import FETCH_LIMIT
from tests.kit.logkit import CLI, ISS, raw, record, run_cli
from tests.kit.serverkit import Server, ThreadServer, serving

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
            rec["sub"] = f"example:{tag}-{n}"
            log.append([rec])
            assert log.checkpoint() is not None


def new_log(data: Path) -> None:
    Log.init(data, iss=ISS).close()
    grow(data, "common", 2)


def state_files(state: Path) -> dict[str, bytes]:
    """What the state committed (an alarm adds its evidence beside it: `state.py`)."""
    files = [state / "state.json", state / "leaves"]
    return {p.name: p.read_bytes() for p in files if p.exists()}


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


# --- a tampered log ----------------------------------------------------------------------


def tamper(data: Path, trigger: str, sql: str, *params: object) -> None:
    """Past the trigger, as an attacker with the file would (autocommit: each stands)."""
    with raw(data) as conn:
        conn.execute(f"DROP TRIGGER {trigger}")
        assert conn.execute(sql, params).rowcount == 1


def first_head(data: Path) -> tuple[str, dict]:
    """The day and claims of the history's first head (never the newest: the log's start-up
    self-check verifies that one, and would refuse to serve)."""
    with raw(data) as conn:
        day, doc = conn.execute(
            "SELECT h.day, h.doc FROM history x JOIN heads h ON h.day = x.day "
            "AND h.tree_size = x.tree_size AND h.sealed = x.sealed WHERE x.idx = 0"
        ).fetchone()
    return day, heads.parse_document(doc).claims


def replace_first_head(data: Path, claims: dict, key: SigningKey) -> None:
    doc = heads.document(claims, heads.sign(claims, key).jws)
    tamper(
        data,
        "heads_no_update",
        "UPDATE heads SET doc = ? WHERE day = ? AND tree_size = ? AND sealed = 0",
        doc,
        claims["day"],
        claims["tree_size"],
    )


def head_by_an_unknown_key(data: Path) -> None:
    """The same claims (so the same history leaf), signed by a key the log never had."""
    replace_first_head(data, first_head(data)[1], SigningKey.generate())


def head_that_is_not_the_leaf(data: Path) -> None:
    """Claims one second younger, signed by the log's own key: the history's entry bundle,
    made of the stored heads' payloads, no longer gives the signed checkpoint's root."""
    claims = first_head(data)[1]
    replace_first_head(data, {**claims, "iat": claims["iat"] + 1}, load_key_file(data / KEY_FILE))


def checkpoint_by_an_unknown_key(data: Path) -> None:
    """The newest checkpoint's text under the log's name, signed by another key."""
    with raw(data) as conn:
        size, note = conn.execute(
            "SELECT size, note FROM checkpoints ORDER BY size DESC LIMIT 1"
        ).fetchone()
    checkpoint = parse_checkpoint(parse_note(note).text)
    forged = sign_checkpoint(checkpoint, NoteSigner(ORIGIN, SigningKey.generate()))
    tamper(
        data,
        "checkpoints_no_update",
        "UPDATE checkpoints SET note = ? WHERE size = ?",
        forged,
        size,
    )


@pytest.fixture(scope="module")
def clean_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("tamper") / "data"
    new_log(data)
    grow(data, "more", 2)
    return data


@pytest.mark.parametrize(
    ("attack", "alarm"),
    [
        (head_by_an_unknown_key, "bad_head_signature"),
        (head_that_is_not_the_leaf, "entries_mismatch"),
    ],
)
def test_a_log_tampered_with_past_its_triggers_is_caught_over_http(
    clean_log: Path, tmp_path: Path, attack: Callable[[Path], None], alarm: str
) -> None:
    data = tmp_path / "data"
    shutil.copytree(clean_log, data)
    attack(data)
    with serving(data, *SERVE_ARGS) as server:
        keys = tmp_path / "keys.json"
        with server.client() as client:
            keys.write_bytes(client.get("/keys").content)
        for _ in range(2):  # an alarm is never committed past: every run repeats it
            run = monitor(server.url, tmp_path / "state", keys, "--entries")
            assert (run.code, run.alarms) == (1, [alarm]), run
            assert run.lines[-1] == {**run.lines[-1], "result": "alarm", "size": 0}


def test_a_checkpoint_by_an_unknown_key_over_http_is_exit_2(
    clean_log: Path, tmp_path: Path
) -> None:
    """Past the log's triggers, its newest checkpoint re-signed by a stranger: no trusted
    key signed it, so no evidence against the log; exit 2 naming the URL, nothing kept."""
    data = tmp_path / "data"
    shutil.copytree(clean_log, data)
    checkpoint_by_an_unknown_key(data)
    with serving(data, *SERVE_ARGS) as server:
        keys = tmp_path / "keys.json"
        with server.client() as client:
            keys.write_bytes(client.get("/keys").content)
        run = monitor(server.url, tmp_path / "state", keys)
    assert (run.code, run.lines) == (2, []), run
    assert f"{server.url}/history/checkpoint: not signed by a trusted key" in run.stderr
    assert state_files(tmp_path / "state") == {}


# --- bad answers are I/O errors, never alarms ----------------------------------------------


class Relay:
    """A loopback HTTP server in a thread, between the monitor and a real `serve`: it passes
    every GET on, except those whose path `marker` (a regex) finds, which it answers as
    `mode` says: `500`, `404`, `garbage` (200, 11 bytes no tile has), `body` (200, `body`),
    `oversize` (200, one byte
    over the monitor's limit), `flood` (200, FLOOD bytes of no stated length), `hangup`
    (closes the connection, no answer), `stop` (stops the real server first, then passes
    on: the monitor sees the log go away mid-run), `drip-headers` and `drip-body` (a status
    line, then one byte every DRIP_S seconds of headers or of a body, until closed).
    `marker` may be changed while it runs."""

    def __init__(self, upstream: Server, marker: str, mode: str, body: bytes = b"") -> None:
        self.upstream, self.marker, self.mode, self.body = upstream, marker, mode, body
        self.broken: list[str] = []
        self.closing = threading.Event()
        self.server = ThreadServer(self.answer)
        self.url = self.server.url

    def answer(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        if re.search(self.marker, handler.path) and self.mode != "stop":
            self.broken.append(handler.path)
            if self.mode == "hangup":
                handler.close_connection = True
                handler.connection.shutdown(socket.SHUT_RDWR)
                return
            if self.mode == "flood":
                self._flood(handler)
                return
            if self.mode.startswith("drip-"):
                self._drip(handler, self.mode == "drip-body")
                return
            status, body = {
                "500": (500, b"internal error\n"),
                "404": (404, b"not found\n"),
                "garbage": (200, b"not a tile\n"),
                "oversize": (200, bytes(FETCH_LIMIT + 1)),
                "body": (200, self.body),
            }[self.mode]
            self._send(handler, status, body)
            return
        if re.search(self.marker, handler.path):
            self.broken.append(handler.path)
            if self.upstream.alive():
                self.upstream.stop()
        try:
            got = httpx.get(self.upstream.url + handler.path, timeout=10)
        except httpx.TransportError:  # the server is gone: so is its answer
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        self._send(handler, got.status_code, got.content)

    @staticmethod
    def _flood(handler: http.server.BaseHTTPRequestHandler) -> None:
        """FLOOD bytes with no length: HTTP/1.0, the body ends when the connection does."""
        handler.send_response(200)
        handler.end_headers()
        chunk = bytes(1 << 20)
        with contextlib.suppress(OSError):  # the monitor may hang up first: that is a pass
            for _ in range(FLOOD >> 20):
                handler.wfile.write(chunk)
        handler.close_connection = True

    def _drip(self, handler: http.server.BaseHTTPRequestHandler, body: bool) -> None:
        """Never a whole answer, and never DRIP_S seconds without a byte: a per-read timeout
        never fires."""
        handler.close_connection = True
        with contextlib.suppress(OSError):  # the client hung up: that is the point
            if body:
                handler.send_response(200)
                handler.send_header("Content-Length", "100000")
                handler.end_headers()
            else:
                handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Drip: ")
            while not self.closing.wait(DRIP_S):
                handler.wfile.write(b"x")

    @staticmethod
    def _send(handler: http.server.BaseHTTPRequestHandler, status: int, body: bytes) -> None:
        handler.send_response(status)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def close(self) -> None:
        self.closing.set()
        self.server.close()


@contextlib.contextmanager
def relaying(upstream: Server, marker: str, mode: str, body: bytes = b"") -> Iterator[Relay]:
    relay = Relay(upstream, marker, mode, body)
    try:
        yield relay
    finally:
        relay.close()


FLOOD = 256 << 20
DRIP_S = 0.5  # the red team dripped a byte every 5 s; any pace under the deadline is one


@dataclass
class Grown:
    """A monitor state that saw history size 4, and a server of that log at size 6."""

    server: Server
    keys: Path
    state: Path


@pytest.fixture(scope="module")
def grown_log(
    clean_log: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, Path, Path]]:
    """The log at size 6, served (the tests that stop a server start their own), its keys,
    and a state that followed it at size 4 (each test uses a copy)."""
    tmp = tmp_path_factory.mktemp("grown")
    data, keys, state = tmp / "data", tmp / "keys.json", tmp / "state"
    shutil.copytree(clean_log, data)
    with serving(data, *SERVE_ARGS) as server:
        with server.client() as client:
            keys.write_bytes(client.get("/keys").content)
        assert monitor(server.url, state, keys).code == 0
    grow(data, "grown", 2)
    with serving(data, *SERVE_ARGS) as server:
        yield server, keys, state


@pytest.fixture
def grown(grown_log: tuple[Server, Path, Path], tmp_path: Path) -> Grown:
    server, keys, state = grown_log
    shutil.copytree(state, tmp_path / "state")
    return Grown(server, keys, tmp_path / "state")


CHECKPOINT = "^/history/checkpoint$"  # read first (garbage there: see CASES)
HASH_TILE = "^/history/tile/0/"  # the hash tile of the history's consistency proof 4 -> 6
BUNDLE = "^/history/tile/entries/"  # the new history leaves
DAY_TILE = "^/roots/[^/]+/tile/"  # a day's tile: the proof of the day's heads 4 -> 6
MODES = ("500", "garbage", "oversize", "hangup", "stop")
CASES = [
    pytest.param(
        marker,
        mode,
        id=f"{name}-{mode}",
    )
    for name, marker in (
        ("checkpoint", CHECKPOINT),
        ("hash-tile", HASH_TILE),
        ("bundle", BUNDLE),
        ("day-tile", DAY_TILE),
    )
    for mode in MODES
]


def committed(state: Path) -> tuple[int, int]:
    data = json.loads((state / "state.json").read_text())
    return data["size"], data["checked"]


@pytest.mark.parametrize(("marker", "mode"), CASES)
def test_a_bad_answer_is_exit_2_naming_the_url_and_the_state_stays(
    grown: Grown, tmp_path: Path, marker: str, mode: str
) -> None:
    """A bad answer before the checkpoint is proven (its consistency proof, its leaves)
    leaves the state byte for byte; one after (a day's tile, read for the head rules) leaves
    the proven checkpoint committed and no head past the old ones checked, as a crash would
    (follow.py), and the next good run finishes from there."""
    before = state_files(grown.state)
    with contextlib.ExitStack() as stack:
        server = grown.server
        if mode == "stop":  # a server of its own, as this one is stopped
            data = tmp_path / "stopped"
            shutil.copytree(server.data, data)
            server = stack.enter_context(serving(data, *SERVE_ARGS))
        relay = stack.enter_context(relaying(server, marker, mode))
        done = run_cli(
            "monitor", relay.url, "--keys", grown.keys, "--state", grown.state, "--origin", ORIGIN
        )
    assert relay.broken, f"the monitor read no path {marker!r} finds"
    assert (done.returncode, done.stdout) == (2, ""), done.stdout + done.stderr
    assert f"{relay.url}{relay.broken[0]}" in done.stderr, done.stderr
    if marker == DAY_TILE:
        assert committed(grown.state) == (6, 4)
    else:
        assert state_files(grown.state) == before
    if mode != "stop":  # the log itself was fine all along
        run = monitor(grown.server.url, grown.state, grown.keys)
        assert run.code == 0 and committed(grown.state) == (6, 6), run


RSS_LIMIT_MB = 200  # issue 14's bound on the monitor


def test_an_endless_answer_is_cut_off_at_the_limit(grown: Grown) -> None:
    """A tile answer that never ends is refused once it passes the limit (exit 2), and the
    monitor's RSS stays within the issue's bound; measured from a parent process of its
    own (ru_maxrss of its one child)."""
    wrapper = (
        "import resource, subprocess, sys\n"
        "code = subprocess.run(sys.argv[1:]).returncode\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    with relaying(grown.server, BUNDLE, "flood") as relay:
        argv = [str(CLI), "monitor", relay.url, "--keys", str(grown.keys)]
        argv += ["--state", str(grown.state), "--origin", ORIGIN]
        done = subprocess.run(
            [sys.executable, "-c", wrapper, *argv], capture_output=True, text=True, check=False
        )
    assert done.returncode == 2, done.stdout + done.stderr
    peak_mb = int(done.stderr.splitlines()[-1]) / 1024
    assert peak_mb <= RSS_LIMIT_MB, f"the monitor peaked at {peak_mb:.0f} MB"


# --- deadlines: a server that drips cannot hold a reader ------------------------------------

DEADLINE = "2"
WAIT_S = 120  # a generous bound on each run: without a deadline, a drip never ends


@pytest.mark.parametrize("mode", ["drip-headers", "drip-body"])
def test_attack_a_dripping_log_is_exit_2_at_the_deadline_and_the_state_stays(
    grown: Grown, mode: str
) -> None:
    # The red team's finding: a byte every 5 s held the monitor for ever (each read within
    # urllib3's per-read timeout). Each GET now has one deadline in all.
    before = state_files(grown.state)
    with relaying(grown.server, CHECKPOINT, mode) as relay:
        done = run_cli(
            "monitor", relay.url, "--keys", grown.keys, "--state", grown.state,
            "--origin", ORIGIN, "--deadline", DEADLINE, timeout=WAIT_S,
        )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, ""), done.stdout + done.stderr
    assert f"GET {relay.url}/history/checkpoint: no complete answer within the 2 s deadline" in (
        done.stderr
    )
    assert state_files(grown.state) == before


@pytest.mark.parametrize("mode", ["drip-headers", "drip-body"])
@pytest.mark.parametrize("what", ["RECORD", "--keys", "--policy"])
def test_attack_a_dripping_server_holds_verify_proof_no_longer_than_the_deadline(
    grown: Grown, tmp_path: Path, mode: str, what: str
) -> None:
    with relaying(grown.server, "^/drip", mode) as relay:
        url = f"{relay.url}/drip"
        record = tmp_path / "record.json"
        record.write_text("{}")
        args: list[str | Path] = {
            "RECORD": [url, "--keys", grown.keys],
            "--keys": [record, "--keys", url],
            "--policy": [record, "--keys", grown.keys, "--policy", url],
        }[what]
        done = subprocess.run(
            [str(CLI.parent / "verify-proof"), *map(str, args), "--deadline", DEADLINE],
            capture_output=True, text=True, check=False, timeout=WAIT_S,
        )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"GET {url}: no complete answer within the 2 s deadline" in done.stderr


def test_a_bad_deadline_is_a_usage_error(grown: Grown) -> None:
    for bad in ("0", "-1", "inf", "nan"):
        done = run_cli("monitor", grown.server.url, "--keys", grown.keys, "--state",
                       grown.state, "--deadline", bad, timeout=WAIT_S)  # fmt: skip
        assert done.returncode == 2 and "--deadline must be a positive" in done.stderr, bad


def lines_of(stream: IO[str]) -> queue.Queue[str]:
    """The lines of a child's pipe as they come, read on a thread of their own."""
    got: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [got.put(line) for line in stream], daemon=True).start()
    return got


def next_matching(got: queue.Queue[str], text: str) -> str:
    while True:
        line = got.get(timeout=WAIT_S)  # queue.Empty fails the test
        if text in line:
            return line


def test_attack_a_watch_moves_on_after_a_deadline(grown: Grown) -> None:
    # `monitor --watch` used to sit in the first dripping read for ever. Now a round past
    # its deadline is an I/O error: the state stays, the watch backs off and runs the next
    # round, and once the log answers again a round goes through.
    before = state_files(grown.state)
    with relaying(grown.server, CHECKPOINT, "drip-body") as relay:
        argv = [str(CLI), "monitor", relay.url, "--keys", str(grown.keys)]
        argv += ["--state", str(grown.state), "--origin", ORIGIN]
        child = subprocess.Popen(
            [*argv, "--watch", "0.2", "--deadline", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert child.stdout is not None and child.stderr is not None
            out, err = lines_of(child.stdout), lines_of(child.stderr)
            for _ in range(2):  # two rounds, each cut off at its deadline
                next_matching(err, "no complete answer within the 1 s deadline")
            assert state_files(grown.state) == before
            relay.marker = "(?!)"  # the log answers in full again
            summary = json.loads(next_matching(out, '"result"'))
            assert summary["result"] == "consistent", summary
            assert committed(grown.state) == (6, 6)
        finally:
            child.terminate()
            child.wait(timeout=WAIT_S)
            child.stdout.close()  # type: ignore[union-attr]
            child.stderr.close()  # type: ignore[union-attr]


def test_heads_past_a_lagging_checkpoint_over_http_warn_checkpoint_stale(
    grown: Grown, tmp_path: Path
) -> None:
    """The log at size 6 shows its size-4 checkpoint as `/history/checkpoint` (as it does
    while the witnesses have not cosigned 5 and 6): the unsealed head at index 4 is past it
    since its `iat`, read from the next size's entry bundle."""
    with grown.server.client() as client:
        stale = client.get("/history/checkpoint/4").content
    with relaying(grown.server, CHECKPOINT, "body", stale) as relay:
        run = monitor(relay.url, tmp_path / "fresh", grown.keys, "--max-lag", "0", "--strict")
    assert run.code == 1 and run.alarms == [], run
    (warning,) = [line for line in run.lines if "warning" in line]
    assert warning["warning"] == "checkpoint_stale" and warning["size"] == 4, warning
    run = monitor(grown.server.url, tmp_path / "fresh", grown.keys, "--max-lag", "0", "--strict")
    assert run.code == 0 and run.lines[-1]["size"] == 6, run


# --- issue #35: alarms stay provable ------------------------------------------------------


def test_a_stale_mirror_over_http_shows_an_older_checkpoint_a_warning_not_an_alarm(
    grown: Grown,
) -> None:
    """A cache in front of the log still serving its size-4 checkpoint to a monitor that
    saw 6: `checkpoint_older`, exit 0, nothing kept; the log itself again: consistent."""
    assert monitor(grown.server.url, grown.state, grown.keys).code == 0
    before = state_files(grown.state)
    with grown.server.client() as client:
        older = client.get("/history/checkpoint/4").content
    with relaying(grown.server, CHECKPOINT, "body", older) as relay:
        run = monitor(relay.url, grown.state, grown.keys)
    assert run.code == 0 and run.alarms == [], run
    assert [(w["warning"], w["size"]) for w in run.lines if "warning" in w] == [
        ("checkpoint_older", 4)
    ], run
    assert state_files(grown.state) == before
    assert not (grown.state / "alarms.jsonl").exists()
    run = monitor(grown.server.url, grown.state, grown.keys)
    assert run.code == 0 and run.lines[-1]["size"] == 6, run


def test_a_checkpoint_404_is_exit_2_naming_the_url_and_an_alarm_only_past_max_lag(
    grown: Grown,
) -> None:
    """A 404 for history/checkpoint is what a misrouted proxy or a mirror being rebuilt
    answers too: exit 2 naming the URL, as a 503 or a 410 are, and `checkpoint_missing`
    only once it has lasted longer than --max-lag since the first run that found it."""
    before = state_files(grown.state)["leaves"]
    with relaying(grown.server, CHECKPOINT, "404") as relay:
        url = f"{relay.url}/history/checkpoint"
        for _ in range(2):  # within the default --max-lag (an hour)
            run = monitor(relay.url, grown.state, grown.keys)
            assert (run.code, run.lines) == (2, []), run
            assert f"GET {url}: HTTP 404" in run.stderr and "--max-lag" in run.stderr, run
        assert state_files(grown.state)["leaves"] == before
    # Served again: the wait is over, and the next 404 starts a new one.
    assert monitor(grown.server.url, grown.state, grown.keys).code == 0
    with relaying(grown.server, CHECKPOINT, "404") as relay:
        run = monitor(relay.url, grown.state, grown.keys, "--max-lag", "0")
        assert run.code == 2 and f"GET {relay.url}/history/checkpoint" in run.stderr, run
        run = monitor(relay.url, grown.state, grown.keys, "--max-lag", "0")
    assert run.code == 1 and run.alarms == ["checkpoint_missing"], run
    assert run.lines[0]["old_size"] == 6 and run.lines[0]["max_lag_s"] == 0, run
    again = monitor(grown.server.url, grown.state, grown.keys)  # kept until acknowledged
    assert again.code == 1 and again.alarms == ["checkpoint_missing"], again
