"""`capability-anchor monitor` (issue #14): a clean log passes, over HTTP (a real `serve`)
and from an export folder; each attack the issue lists, built on purpose with the log's key
(`monitorkit.HandLog`), raises its named alarm; the state survives kill -9; `--watch` picks
up new heads and backs off while the log is unreachable; `--policy` requires the quorum;
`monitor compare` catches a split view."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from capability_anchor.keys import KeySet, SigningKey
from capability_anchor.note import Cosigner, parse_note
from tests.kit.logkit import CLI, History, build_history, run_cli
from tests.kit.monitorkit import DAY1, DAY2, DAY3, HandLog, good_log
from tests.kit.serverkit import free_port, serving


def monitor(
    source: str | Path, state: Path, *extra: str | Path, keys: Path | None = None
) -> tuple[int, list[dict]]:
    keys = Path(source) / "keys.json" if keys is None else keys
    done = run_cli("monitor", source, "--keys", keys, "--state", state, *extra)
    assert done.returncode != 2, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return done.returncode, lines


def alarms(lines: list[dict]) -> list[str]:
    return [line["alarm"] for line in lines if "alarm" in line]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    return build_history(tmp_path_factory.mktemp("monitor-log"))


@pytest.fixture
def good(tmp_path: Path) -> HandLog:
    return good_log(tmp_path / "log", SigningKey.generate())


def test_a_clean_export_passes_with_entries_and_again(history: History, tmp_path: Path) -> None:
    out = tmp_path / "roots"
    assert run_cli("export", "--data", history.data, out, "--tiles").returncode == 0
    code, lines = monitor(out, tmp_path / "state", "--entries")
    assert code == 0, lines
    assert lines[-1]["result"] == "consistent" and lines[-1]["size"] == 9
    code, lines = monitor(out, tmp_path / "state", "--entries")
    assert (code, lines[-1]["old_size"], lines[-1]["size"]) == (0, 9, 9)


def test_a_clean_log_over_http_from_a_real_server(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with serving(tmp_path / "data", "--rate-limit", "0") as s, s.client() as c:
        keys = tmp_path / "keys.json"
        keys.write_bytes(c.get("/keys").content)
        for n in range(3):
            record = {
                "v": "0.2",
                "iss": s.url,
                "sub": f"example:{n}",
                "url": f"https://mcp{n}.example.com",
                "status": "ok",
                "checked_at": "2026-12-01T09:00:00Z",
                "evidence": {"http_status": 200},
            }
            r = c.post("/records?prove=1", json={"records": [record]}, headers=s.writer_headers())
            assert r.status_code == 200, r.text
            code, lines = monitor(s.url, state, "--entries", keys=keys)
            assert code == 0, lines
        assert lines[-1]["size"] >= 3
        assert lines[-1]["origin"] == s.url.removeprefix("http://") + "/history"


def test_a_hand_built_good_log_passes(good: HandLog, tmp_path: Path) -> None:
    code, lines = monitor(good.folder, tmp_path / "state", "--entries")
    assert code == 0, lines
    assert lines[-1]["size"] == 4


def test_a_checkpoint_inconsistent_with_the_previous_one(good: HandLog, tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert monitor(good.folder, state)[0] == 0
    other = HandLog(tmp_path / "other", good.key)  # the same key, another history
    other.entries(DAY1, 5)
    other.head(DAY1, 4)
    other.head(DAY1, 5, sealed=True)
    other.entries(DAY2, 9)
    for size in (1, 2, 3):
        other.head(DAY2, size)
    other.publish()
    code, lines = monitor(other.folder, state)
    assert code == 1 and alarms(lines) == ["checkpoint_inconsistent"], lines
    again = monitor(other.folder, state)  # nothing was committed: it stays alarmed
    assert again[0] == 1


def test_a_smaller_checkpoint_is_a_rollback(good: HandLog, tmp_path: Path) -> None:
    """A smaller checkpoint of another history (issue #35: an older one of the log's own
    history is the `checkpoint_older` warning, test_monitor_wolf)."""
    state = tmp_path / "state"
    good.head(DAY2, 7)
    good.publish()
    assert monitor(good.folder, state)[0] == 0
    (good.folder / "history" / "checkpoint").write_bytes(good.forged_checkpoint(4))
    code, lines = monitor(good.folder, state)
    assert code == 1 and alarms(lines) == ["checkpoint_rollback"], lines


def test_a_head_with_another_root_at_the_same_size(good: HandLog, tmp_path: Path) -> None:
    good.head(DAY2, 2, sealed=True, root=bytes(32))
    good.publish()
    code, lines = monitor(good.folder, tmp_path / "state")
    assert code == 1 and alarms(lines) == ["root_conflict"], lines
    assert lines[0]["index"] == 4 and lines[0]["day"] == DAY2


def test_two_sealed_heads_for_one_day(good: HandLog, tmp_path: Path) -> None:
    log = HandLog(tmp_path / "two", good.key)
    log.entries(DAY1, 5)
    log.head(DAY1, 3, sealed=True)
    log.head(DAY1, 5, sealed=True, prev=None)
    log.publish()
    code, lines = monitor(log.folder, tmp_path / "state")
    # The second sealed file replaced the first: that one is also no longer served.
    assert code == 1 and alarms(lines) == ["head_not_leaf", "two_sealed_heads"], lines


def test_a_broken_prev(good: HandLog, tmp_path: Path) -> None:
    good.head(DAY2, 9, prev="00" * 32)
    good.publish()
    code, lines = monitor(good.folder, tmp_path / "state")
    assert code == 1 and alarms(lines) == ["prev_broken"], lines


def test_a_day_missing_from_the_sealed_chain(good: HandLog, tmp_path: Path) -> None:
    good.head(DAY2, 2, sealed=True)
    good.entries("2026-03-04", 1)  # 2026-03-03 is never sealed
    good.head("2026-03-04", 1)
    good.publish()
    code, lines = monitor(good.folder, tmp_path / "state")
    assert code == 1 and alarms(lines) == ["prev_broken"], lines
    assert "not sealed" in lines[0]["detail"]


def test_a_day_head_that_shrinks(good: HandLog, tmp_path: Path) -> None:
    good.entries(DAY3, 10)
    good.head(DAY2, 2, sealed=True)
    good.head(DAY3, 8)
    good.head(DAY3, 6, sealed=True)
    good.publish()
    code, lines = monitor(good.folder, tmp_path / "state")
    assert code == 1 and alarms(lines) == ["day_head_shrinks"], lines


def test_a_day_head_inconsistent_with_the_previous_one(good: HandLog, tmp_path: Path) -> None:
    good.days[DAY2][0] = b'{"rewritten":true}'  # day 2's first entry changes after its head
    good.head(DAY2, 4)
    good.publish()
    code, lines = monitor(good.folder, tmp_path / "state")
    assert code == 1 and alarms(lines) == ["day_inconsistent"], lines
    code, lines = monitor(good.folder, tmp_path / "state2", "--entries")
    assert alarms(lines) == ["day_inconsistent", "day_root_mismatch"], lines


def test_entries_that_do_not_give_the_head_root(good: HandLog, tmp_path: Path) -> None:
    good.head(DAY2, 9, root=bytes(32))  # a root no entries give, at a fresh size
    good.publish()
    code, lines = monitor(good.folder, tmp_path / "state")
    assert code == 1 and alarms(lines) == ["day_inconsistent"], lines
    code, lines = monitor(good.folder, tmp_path / "state2", "--entries")
    assert "day_root_mismatch" in alarms(lines), lines


def test_a_head_signed_by_an_unknown_key(good: HandLog, tmp_path: Path) -> None:
    good.head(DAY2, 4, key=SigningKey.generate())
    good.publish()
    code, lines = monitor(good.folder, tmp_path / "state")
    assert code == 1 and alarms(lines) == ["bad_head_signature"], lines


def test_a_checkpoint_signed_by_an_unknown_key_is_no_evidence_exit_2(
    good: HandLog, tmp_path: Path
) -> None:
    """No trusted key signed it, so it is no statement of the log's: exit 2 naming --keys,
    before a first good run and after one alike, and nothing committed."""
    keys = tmp_path / "keys.json"
    keys.write_bytes((good.folder / "keys.json").read_bytes())
    state = tmp_path / "state"
    assert monitor(good.folder, state, keys=keys)[0] == 0
    for folder in (tmp_path / "fresh", state):
        good.key = SigningKey.generate()
        good.publish()
        done = run_cli("monitor", good.folder, "--keys", keys, "--state", folder)
        assert (done.returncode, done.stdout) == (2, ""), done.stdout + done.stderr
        assert "not signed by a trusted key" in done.stderr and "--keys" in done.stderr
    assert not (tmp_path / "fresh" / "state.json").exists()


def test_a_history_leaf_that_is_not_a_valid_head(good: HandLog, tmp_path: Path) -> None:
    good.leaves.append(b'{"day":"2026-03-02","not":"a head"}')
    good.publish()
    code, lines = monitor(good.folder, tmp_path / "state")
    assert code == 1 and alarms(lines) == ["invalid_head_leaf"], lines


def test_a_split_view_is_found_by_compare(good: HandLog, tmp_path: Path) -> None:
    """The log shows monitor A one history and monitor B another of the same size, both
    signed by its key: each alone is consistent, `compare` of their states alarms."""
    split = HandLog(tmp_path / "split", good.key)
    split.entries(DAY1, 5)
    split.head(DAY1, 3)
    split.head(DAY1, 5)
    split.head(DAY1, 5, sealed=True)
    split.entries(DAY2, 300)
    split.head(DAY2, 3)  # where `good` has size 2
    split.publish()
    a, b = tmp_path / "a", tmp_path / "b"
    assert monitor(good.folder, a)[0] == 0
    assert monitor(split.folder, b)[0] == 0
    done = run_cli("monitor", "compare", a, b)
    assert done.returncode == 1, done.stdout + done.stderr
    found = [json.loads(line) for line in done.stdout.splitlines()]
    assert [f["alarm"] for f in found] == ["split_view", "split_view"], found
    same = run_cli("monitor", "compare", a, a)
    assert same.returncode == 0 and json.loads(same.stdout)["consistent"] is True


def _long_log(folder: Path, key: SigningKey, heads: int) -> HandLog:
    log = HandLog(folder, key)
    log.entries(DAY1, heads)
    for size in range(1, heads + 1):
        log.head(DAY1, size)
    return log


def test_the_state_survives_kill_9(tmp_path: Path) -> None:
    log = _long_log(tmp_path / "log", SigningKey.generate(), 1500)
    log.publish()
    state = tmp_path / "state"
    argv = [str(CLI), "monitor", str(log.folder), "--keys", str(log.folder / "keys.json")]
    argv += ["--state", str(state)]
    kills = 0
    for delay in (0.3, 0.6, 0.9):
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.communicate()
    assert kills, "the monitor finished before any kill: make the log longer"
    code, lines = monitor(log.folder, state)
    assert code == 0 and lines[-1]["size"] == 1500, lines
    fresh = tmp_path / "fresh"
    assert monitor(log.folder, fresh)[0] == 0
    assert (state / "leaves").read_bytes() == (fresh / "leaves").read_bytes()
    assert run_cli("monitor", "compare", state, fresh).returncode == 0


def test_watch_picks_up_new_heads(good: HandLog, tmp_path: Path) -> None:
    argv = [str(CLI), "monitor", str(good.folder), "--keys", str(good.folder / "keys.json")]
    argv += ["--state", str(tmp_path / "state"), "--watch", "0.2"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert first["size"] == 4, first
        good.head(DAY2, 50)
        good.publish()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = json.loads(proc.stdout.readline())
            if line.get("size") == 5:
                break
        assert line == {**line, "old_size": 4, "size": 5, "result": "consistent"}
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()


def test_io_errors_exit_2(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"keys": [SigningKey.generate().public.jwk()]}))
    done = run_cli("monitor", tmp_path / "nowhere", "--keys", keys, "--state", tmp_path / "s")
    assert done.returncode == 2 and "not a folder" in done.stderr


def test_policy_quorum(good: HandLog, tmp_path: Path) -> None:
    """--policy: the checkpoint must carry the quorum's cosignatures before it is committed;
    one without them is refused (exit 2), not alarmed (the witnesses may only lag)."""
    witness = Cosigner("witness.example/w1", SigningKey.generate())
    policy = tmp_path / "policy.txt"
    policy.write_text(f"witness w1 {witness.verifier.vkey()}\nquorum w1\n")
    argv = ("--keys", good.folder / "keys.json", "--state", tmp_path / "state")
    done = run_cli("monitor", good.folder, *argv, "--policy", policy)
    assert (done.returncode, done.stdout) == (2, ""), done.stdout + done.stderr
    assert "not witnessed as --policy requires" in done.stderr
    assert not (tmp_path / "state" / "state.json").exists()  # nothing committed
    path = good.folder / "history" / "checkpoint"
    note = parse_note(path.read_bytes())
    path.write_bytes(
        path.read_bytes() + witness.cosign(note.text, int(time.time())).line().encode()
    )
    code, lines = monitor(good.folder, tmp_path / "state", "--policy", policy)
    assert code == 0, lines


def test_watch_backs_off_while_the_log_is_unreachable(tmp_path: Path) -> None:
    """I/O errors are not alarms; the pause doubles (0.1, 0.2, 0.4, ... s), so a 2-second
    outage costs a handful of attempts, not twenty. The count is bounded by the window the
    test really gave it (from its start to the kill, at least 2 s and until it has retried),
    so a slow start on a loaded machine cannot make it look wrong either way."""
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"keys": [SigningKey.generate().public.jwk()]}))
    url = f"http://127.0.0.1:{free_port()}"
    argv = [str(CLI), "monitor", url, "--keys", str(keys), "--state", str(tmp_path / "s")]
    started = time.monotonic()
    proc = subprocess.Popen(
        [*argv, "--watch", "0.1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines: list[str] = []
    assert proc.stderr is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")))
    reader.start()
    tried = "capability-anchor monitor: GET"
    while time.monotonic() - started < 2.0 or sum(tried in x for x in lines) < 2:
        assert time.monotonic() - started < 300 and proc.poll() is None, lines
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    window = time.monotonic() - started
    out, _ = proc.communicate()
    reader.join()
    err = "".join(lines)
    attempts = err.count(tried)
    # Pauses of 0.1 * 2**k: n attempts need at least 0.1 * (2**(n-1) - 1) s; one spare.
    allowed = 2 + int(math.log2(window / 0.1 + 1))
    assert 2 <= attempts <= allowed, (window, err)
    assert out == ""


class _Crash(BaseException):
    """Stands for the process dying (not an Exception: nothing may catch it)."""


def test_a_catch_up_cut_short_goes_on_from_its_last_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fault injected at the read seam after two chunks of 256 heads: the state keeps
    the proven checkpoint and the 512 checked heads; the next run checks only the rest and
    ends where a run that never crashed ends. 700 heads: a third chunk to cut, no more."""
    from capability_anchor.monitor import Monitor, MonitorOptions, follow, open_source
    from capability_anchor.monitor import state as states
    from capability_anchor.read.source import ReadAhead

    heads = 700  # more than two chunks of 256, so the third can be cut

    monkeypatch.setattr(follow, "CHUNK_BUNDLES", 1)
    log = _long_log(tmp_path / "log", SigningKey.generate(), heads)
    log.publish()
    keys = KeySet.of(log.key.public)
    source = open_source(str(log.folder))
    calls = 0
    real = source.read_ahead

    def crashing(paths: list[str]) -> ReadAhead:
        nonlocal calls
        if paths and paths[0].startswith("roots/"):  # a chunk's head documents
            calls += 1
            if calls == 3:
                raise _Crash
        return real(paths)

    monkeypatch.setattr(source, "read_ahead", crashing)
    state_dir = tmp_path / "state"
    with pytest.raises(_Crash):
        Monitor(source, MonitorOptions(keys=keys, state_dir=state_dir)).run_once()
    cut = states.load(state_dir)
    assert (cut.size, cut.checked) == (heads, 512)
    again = Monitor(open_source(str(log.folder)), MonitorOptions(keys=keys, state_dir=state_dir))
    result = again.run_once()
    assert not result.alarmed and result.summary["size"] == heads, result
    done = states.load(state_dir)
    fresh_dir = tmp_path / "fresh"
    fresh = Monitor(open_source(str(log.folder)), MonitorOptions(keys=keys, state_dir=fresh_dir))
    assert not fresh.run_once().alarmed
    assert done.to_json() == states.load(fresh_dir).to_json()


def test_attack_an_endless_file_in_an_export_folder_is_refused_as_it_is_read(
    good: HandLog, tmp_path: Path
) -> None:
    # A folder is bounded as HTTP is: the checkpoint swapped for /dev/zero is exit 2 naming
    # the file and the limit after reading 1 MiB + 1 byte, not an endless read.
    checkpoint = good.folder / "history" / "checkpoint"
    before = checkpoint.read_bytes()
    checkpoint.unlink()
    checkpoint.symlink_to("/dev/zero")
    try:
        done = run_cli("monitor", good.folder, "--keys", good.folder / "keys.json",
                       "--state", tmp_path / "state", timeout=120)  # fmt: skip
    finally:
        checkpoint.unlink()
        checkpoint.write_bytes(before)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{checkpoint}: larger than 1048576 bytes, the limit for this input" in done.stderr
