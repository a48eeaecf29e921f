"""The monitor never cries wolf (issue #20): exit 1 only on evidence that the log
misbehaved, everything else exit 2 naming the fix; staleness is a warning; an alarm is kept
with its evidence and repeated until `monitor --acknowledge ID`; head documents, the first
run's hash tiles and the failure classes are checked as the red team asked. Each case is
a real CLI process on a folder (`monitorkit.HandLog`, the shipped sample, a real export) or
on a real `serve` on loopback."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import rfc8785

from capability_anchor.keys import KeySet, SigningKey
from capability_anchor.log import Log
from capability_anchor.log.policies import log_vkey
from capability_anchor.merkle import TiledTree
from capability_anchor.note import (
    Checkpoint,
    Cosigner,
    NoteSigner,
    open_checkpoint,
    parse_note,
    sign_checkpoint,
)
from capability_anchor.verify.history_checks import log_verifiers
from tests.kit import paths
from tests.kit.logkit import ISS, build_history, record, run_cli
from tests.kit.monitorkit import DAY1, DAY2, ORIGIN, HandLog, good_log
from tests.kit.serverkit import serving

ROOT = paths.ROOT
SAMPLE = ROOT / "roots"


class Run:
    def __init__(self, source: str | Path, state: Path, *extra: str | Path, keys: Path) -> None:
        done = run_cli("monitor", source, "--keys", keys, "--state", state, *extra)
        self.code, self.stderr = done.returncode, done.stderr
        self.lines: list[dict[str, Any]] = [json.loads(x) for x in done.stdout.splitlines()]

    @property
    def alarms(self) -> list[str]:
        return [line["alarm"] for line in self.lines if "alarm" in line]

    @property
    def warnings(self) -> list[dict[str, Any]]:
        return [line for line in self.lines if "warning" in line]

    def __repr__(self) -> str:
        return f"exit {self.code}\n{self.lines}\n{self.stderr}"


def monitor(log: HandLog | Path, state: Path, *extra: str | Path) -> Run:
    folder = log.folder if isinstance(log, HandLog) else log
    return Run(folder, state, *extra, keys=folder / "keys.json")


@pytest.fixture
def good(tmp_path: Path) -> HandLog:
    return good_log(tmp_path / "log", SigningKey.generate())


def committed(state: Path) -> dict[str, bytes]:
    return {name: (state / name).read_bytes() for name in ("state.json", "leaves")}


# --- false alarms ---------------------------------------------------------------------


def test_the_samples_policy_with_its_log_line_gives_no_alarm(tmp_path: Path) -> None:
    """roots/policy.txt names the log's key in its `log` line, as keys.json does."""
    assert (SAMPLE / "policy.txt").read_text().startswith("log ")
    run = monitor(SAMPLE, tmp_path / "state", "--policy", SAMPLE / "policy.txt", "--entries")
    assert run.code == 0 and run.lines[-1]["result"] == "consistent", run


def test_a_policy_log_key_that_is_also_in_keys_is_the_same_key(
    good: HandLog, tmp_path: Path
) -> None:
    witness = Cosigner("witness.example/w1", SigningKey.generate())
    policy = tmp_path / "policy.txt"
    policy.write_text(
        f"log {log_vkey(ISS, good.key)}\nwitness w1 {witness.verifier.vkey()}\nquorum w1\n"
    )
    path = good.folder / "history" / "checkpoint"
    note = parse_note(path.read_bytes())
    path.write_bytes(path.read_bytes() + witness.cosign(note.text, 1_700_000_000).line().encode())
    run = monitor(good, tmp_path / "state", "--policy", policy)
    assert run.code == 0 and run.lines[-1]["origin"] == ORIGIN, run
    assert len(log_verifiers(ORIGIN, KeySet.of(good.key.public), None)) == 1


def test_a_log_monitored_by_its_loopback_url_is_exit_2_saying_pass_origin(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with Log.init(data, iss=ISS) as log:
        log.append([record(log.today(), 0)])
        log.checkpoint()
    with serving(data, "--rate-limit", "0") as server:
        keys = tmp_path / "keys.json"
        with server.client() as client:
            keys.write_bytes(client.get("/keys").content)
        run = Run(server.url, tmp_path / "state", keys=keys)
        assert (run.code, run.lines) == (2, []), run
        loopback = server.url.removeprefix("http://") + "/history"
        assert f"origin is {ORIGIN}, expected {loopback}" in run.stderr, run
        assert f"pass --origin {ORIGIN}" in run.stderr, run
        assert not (tmp_path / "state" / "state.json").exists()
        run = Run(server.url, tmp_path / "state", "--origin", ORIGIN, keys=keys)
        assert run.code == 0, run


def test_a_wrong_origin_for_a_folder_is_exit_2_and_a_pinned_one_too(
    good: HandLog, tmp_path: Path
) -> None:
    run = monitor(good, tmp_path / "state", "--origin", "other.example/history")
    assert run.code == 2 and f"pass --origin {ORIGIN}" in run.stderr, run
    assert monitor(good, tmp_path / "state").code == 0
    run = monitor(good, tmp_path / "state", "--origin", "other.example/history")
    assert run.code == 2 and "use another --state" in run.stderr, run


def test_an_export_without_day_tiles_names_the_file_and_export_tiles(tmp_path: Path) -> None:
    history = build_history(tmp_path / "log")
    out = tmp_path / "public"
    assert run_cli("export", "--data", history.data, out).returncode == 0
    run = monitor(out, tmp_path / "state")
    assert run.code == 2 and run.lines == [], run
    assert f"{out}/" in run.stderr and "/tile/0/" in run.stderr, run
    assert f"{out}/roots/" not in run.stderr and "export" in run.stderr, run
    assert "--tiles" in run.stderr, run
    assert run_cli("export", "--data", history.data, out, "--tiles").returncode == 0
    assert monitor(out, tmp_path / "state").code == 0


# --- staleness ------------------------------------------------------------------------


def lagging(log: HandLog, **head: Any) -> bytes:
    """One more head published (tiles, bundles) while the checkpoint stays the old one, as
    the log serves it while its witnesses have not cosigned the new size; the new note."""
    old = (log.folder / "history" / "checkpoint").read_bytes()
    log.head(DAY2, 7, **head)
    new = log.publish()
    (log.folder / "history" / "checkpoint").write_bytes(old)
    return new


def test_heads_past_the_checkpoint_for_longer_than_max_lag_warn(
    good: HandLog, tmp_path: Path
) -> None:
    """The head past the checkpoint is unsealed, published at its `iat` (March 2026)."""
    new = lagging(good)
    run = monitor(good, tmp_path / "state")
    assert run.code == 0 and run.lines[-1]["result"] == "consistent", run
    (warning,) = run.warnings
    assert warning["warning"] == "checkpoint_stale" and warning["size"] == 4, warning
    assert warning["behind_since"] == "2026-03-02T23:00:00Z" and warning["max_lag_s"] == 3600
    assert warning["lag_s"] > 3600
    strict = monitor(good, tmp_path / "state", "--strict")
    assert strict.code == 1 and strict.alarms == [] and strict.warnings, strict
    patient = monitor(good, tmp_path / "state", "--max-lag", str(10**10), "--strict")
    assert patient.code == 0 and patient.warnings == [], patient
    (good.folder / "history" / "checkpoint").write_bytes(new)  # the witnesses caught up
    run = monitor(good, tmp_path / "state", "--strict")
    assert run.code == 0 and run.warnings == [], run
    assert json.loads((tmp_path / "state" / "state.json").read_text())["behind"] is None


def test_a_sealed_head_past_the_checkpoint_counts_from_the_run_that_first_saw_it(
    good: HandLog, tmp_path: Path
) -> None:
    """A sealed head's `iat` is the end of its day, before it was published: the lag is
    measured from the first run that saw it, kept in the state across runs."""
    old = (good.folder / "history" / "checkpoint").read_bytes()
    good.head(DAY2, 2, sealed=True)
    good.publish()
    (good.folder / "history" / "checkpoint").write_bytes(old)
    first = monitor(good, tmp_path / "state", "--max-lag", "0")
    assert first.code == 0 and first.warnings == [], first
    since = json.loads((tmp_path / "state" / "state.json").read_text())["behind"]
    assert since["size"] == 4
    second = monitor(good, tmp_path / "state", "--max-lag", "0", "--strict")
    assert second.code == 1 and [w["warning"] for w in second.warnings] == ["checkpoint_stale"]
    assert json.loads((tmp_path / "state" / "state.json").read_text())["behind"] == since


# --- an alarm is never committed past ---------------------------------------------------


def evidence(state: Path, ident: str) -> dict[str, bytes]:
    folder = state / "evidence" / ident
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def events(state: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (state / "alarms.jsonl").read_text().splitlines()]


def acknowledge(state: Path, ident: str) -> dict[str, Any]:
    done = run_cli("monitor", "--acknowledge", ident, "--state", state)
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def test_a_rollback_alarm_is_repeated_against_the_honest_view_until_acknowledged(
    good: HandLog, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    old = good.forged_checkpoint(4)  # smaller, and of another history (issue #35)
    good.head(DAY2, 7)
    honest = good.publish()
    assert monitor(good, state).code == 0
    before = committed(state)
    (good.folder / "history" / "checkpoint").write_bytes(old)
    run = monitor(good, state)
    assert run.code == 1 and run.alarms == ["checkpoint_rollback"], run
    ident = run.lines[0]["alarm_id"]
    assert run.lines[-1]["alarm_id"] == ident
    assert evidence(state, ident) == {
        "checkpoint": old,
        "checkpoint.last": honest,
        "findings.json": rfc8785.dumps(
            [{k: v for k, v in run.lines[0].items() if k != "alarm_id"}]
        ),
    }
    (good.folder / "history" / "checkpoint").write_bytes(honest)  # the honest view again
    for _ in range(2):
        again = monitor(good, state)
        assert again.code == 1 and again.alarms == ["checkpoint_rollback"], again
        assert again.lines[-1]["pending"] == [ident] and again.lines[-1]["result"] == "alarm"
        assert f"monitor --acknowledge {ident} --state {state}" in again.stderr
        assert committed(state) == before
    cleared = acknowledge(state, ident)
    assert cleared["acknowledged"] == ident and cleared["by"] and cleared["at"] > 0
    assert [e.get("raised") or e.get("acknowledged") for e in events(state)] == [ident, ident]
    assert acknowledge(state, ident)["pending"] is False  # nothing more recorded
    assert len(events(state)) == 2
    run = monitor(good, state)
    assert run.code == 0 and run.lines[-1]["result"] == "consistent", run
    assert evidence(state, ident)["checkpoint"] == old  # the evidence stays


def test_a_fork_signed_with_the_logs_own_key_keeps_both_checkpoints(
    good: HandLog, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    assert monitor(good, state).code == 0
    honest = (good.folder / "history" / "checkpoint").read_bytes()
    fork = HandLog(tmp_path / "fork", good.key)  # the same key, another history
    fork.entries(DAY1, 5)
    fork.head(DAY1, 4)
    fork.head(DAY1, 5, sealed=True)
    fork.entries(DAY2, 9)
    for size in (1, 2, 3):
        fork.head(DAY2, size)
    forged = fork.publish()
    run = monitor(fork, state)
    assert run.code == 1 and run.alarms == ["checkpoint_inconsistent"], run
    ident = run.lines[0]["alarm_id"]
    kept = evidence(state, ident)
    assert (kept["checkpoint"], kept["checkpoint.last"]) == (forged, honest)
    verifiers = log_verifiers(ORIGIN, KeySet.of(good.key.public), None)
    sizes = [
        open_checkpoint(kept[n], verifiers).checkpoint.size
        for n in ("checkpoint", "checkpoint.last")
    ]
    assert sizes == [5, 4]  # both signed by the log's key: the proof of the fork
    run = monitor(good, state)  # the honest view: still alarmed
    assert run.code == 1 and run.alarms == ["checkpoint_inconsistent"], run
    acknowledge(state, ident)
    run = monitor(fork, state)  # the fork again: the same alarm, raised again
    assert run.code == 1 and run.lines[0]["alarm_id"] == ident, run
    assert monitor(good, state).code == 1
    assert [e.get("raised") or e.get("acknowledged") for e in events(state)] == [ident] * 3


def test_a_head_alarm_keeps_the_leaf_and_the_document_served(good: HandLog, tmp_path: Path) -> None:
    good.head(DAY2, 4, key=SigningKey.generate())
    good.publish()
    run = monitor(good, tmp_path / "state")
    assert run.code == 1 and run.alarms == ["bad_head_signature"], run
    kept = evidence(tmp_path / "state", run.lines[0]["alarm_id"])
    assert kept["leaf-4"] == good.leaves[4]
    assert kept["head-4.json"] == (good.folder / DAY2 / "4.json").read_bytes()
    assert kept["checkpoint.last"] == (good.folder / "history" / "checkpoint").read_bytes()


def test_a_stale_mirror_serving_an_older_honest_checkpoint_is_a_warning_not_an_alarm(
    good: HandLog, tmp_path: Path
) -> None:
    """Issue #35: a mirror or cache that lags shows an older checkpoint of the log's own
    history. That proves nothing against the log: the `checkpoint_older` warning (exit 0,
    --strict 1), no alarm kept, nothing committed; the honest view again goes on."""
    state = tmp_path / "state"
    older = (good.folder / "history" / "checkpoint").read_bytes()  # size 4
    good.head(DAY2, 7)
    honest = good.publish()  # size 5
    assert monitor(good, state).code == 0
    before = committed(state)
    (good.folder / "history" / "checkpoint").write_bytes(older)
    for extra in ((), ("--strict",)):
        run = monitor(good, state, *extra)
        assert run.code == (1 if extra else 0) and run.alarms == [], run
        (warning,) = run.warnings
        assert (warning["warning"], warning["size"], warning["seen_size"]) == (
            "checkpoint_older",
            4,
            5,
        ), warning
        assert run.lines[-1]["result"] == "consistent" and run.lines[-1]["size"] == 5, run
        assert committed(state) == before and not (state / "alarms.jsonl").exists()
    (good.folder / "history" / "checkpoint").write_bytes(honest)
    run = monitor(good, state)
    assert run.code == 0 and run.lines[-1] == {**run.lines[-1], "old_size": 5, "size": 5}, run
    # An older checkpoint never seen as such (size 2): its root from the proven leaves.
    tree = [hashlib.sha256(b"\x00" + leaf).digest() for leaf in good.leaves[:2]]
    two = sign_checkpoint(
        Checkpoint(ORIGIN, 2, TiledTree(tree).root()), NoteSigner(ORIGIN, good.key)
    )
    (good.folder / "history" / "checkpoint").write_bytes(two)
    run = monitor(good, state)
    assert run.code == 0 and [w["size"] for w in run.warnings] == [2], run


def test_a_forked_older_checkpoint_is_still_a_lasting_rollback_alarm(
    good: HandLog, tmp_path: Path
) -> None:
    """An older checkpoint that is not a prefix of what the monitor proved: evidence."""
    state = tmp_path / "state"
    good.head(DAY2, 7)
    good.publish()
    assert monitor(good, state).code == 0
    honest = (good.folder / "history" / "checkpoint").read_bytes()
    (good.folder / "history" / "checkpoint").write_bytes(good.forged_checkpoint(2))
    run = monitor(good, state)
    assert run.code == 1 and run.alarms == ["checkpoint_rollback"] and not run.warnings, run
    (good.folder / "history" / "checkpoint").write_bytes(honest)
    again = monitor(good, state)
    assert again.code == 1 and again.lines[-1]["pending"] == [run.lines[0]["alarm_id"]], again


def test_acknowledging_an_alarm_never_raised_is_exit_2(good: HandLog, tmp_path: Path) -> None:
    assert monitor(good, tmp_path / "state").code == 0
    done = run_cli("monitor", "--acknowledge", "0123456789abcdef", "--state", tmp_path / "state")
    assert done.returncode == 2 and "no alarm 0123456789abcdef" in done.stderr, done.stderr


# --- head documents -----------------------------------------------------------------------


def test_a_head_document_whose_plain_claims_contradict_its_jws(
    good: HandLog, tmp_path: Path
) -> None:
    path = good.folder / DAY2 / "2.json"
    doc = json.loads(path.read_bytes())
    path.write_bytes(rfc8785.dumps({**doc, "tree_size": doc["tree_size"] + 1}))
    run = monitor(good, tmp_path / "state")
    assert run.code == 1 and run.alarms == ["head_document_mismatch"], run
    assert "tree_size differ from its signed claims" in run.lines[0]["detail"]


def test_a_head_document_that_is_not_its_jcs_form(good: HandLog, tmp_path: Path) -> None:
    path = good.folder / DAY2 / "2.json"
    path.write_text(json.dumps(json.loads(path.read_bytes()), indent=1))
    run = monitor(good, tmp_path / "state")
    assert run.code == 1 and run.alarms == ["head_document_mismatch"], run
    assert "not the JCS bytes" in run.lines[0]["detail"]


def test_a_truncated_head_document_is_io(good: HandLog, tmp_path: Path) -> None:
    path = good.folder / DAY2 / "2.json"
    path.write_bytes(path.read_bytes()[:-40])
    run = monitor(good, tmp_path / "state")
    assert run.code == 2 and run.lines == [], run
    assert f"{good.folder}/roots/{DAY2}/2: not a head document" in run.stderr, run


# --- the first run's hash tiles ---------------------------------------------------------------


@pytest.fixture
def wide(tmp_path: Path) -> HandLog:
    """260 heads: history tiles 0/000, 0/001.p/4 and 1/000.p/1."""
    log = HandLog(tmp_path / "wide", SigningKey.generate())
    log.entries(DAY1, 260)
    for size in range(1, 261):
        log.head(DAY1, size)
    log.publish()
    return log


def hash_tiles(log: HandLog) -> list[Path]:
    tiles = log.folder / "history" / "tile"
    return sorted(p for p in tiles.rglob("*") if p.is_file() and "entries" not in p.parts)


def test_every_hash_tile_corrupted_alarms_on_the_first_run(wide: HandLog, tmp_path: Path) -> None:
    assert len(hash_tiles(wide)) == 3
    for tile in hash_tiles(wide):
        tile.write_bytes(bytes(len(tile.read_bytes())))
    run = monitor(wide, tmp_path / "state")
    assert run.code == 1 and run.alarms == ["tile_mismatch"], run
    assert not (tmp_path / "state" / "state.json").exists()


def test_an_upper_level_tile_corrupted_alarms_on_the_first_run(
    wide: HandLog, tmp_path: Path
) -> None:
    """Level 1 holds the root of tile 0/000: it is checked too, not only the leaves."""
    (tile,) = [t for t in hash_tiles(wide) if t.parts[-2] == "1" or t.parts[-3] == "1"]
    tile.write_bytes(bytes(32))
    run = monitor(wide, tmp_path / "state")
    assert run.code == 1 and run.alarms == ["tile_mismatch"], run
    assert run.lines[0]["tile"] == "history/tile/1/000.p/1"


def test_a_short_hash_tile_on_the_first_run_is_io(wide: HandLog, tmp_path: Path) -> None:
    tile = hash_tiles(wide)[0]
    tile.write_bytes(tile.read_bytes()[:100])
    run = monitor(wide, tmp_path / "state")
    assert run.code == 2 and run.lines == [] and str(tile) in run.stderr, run


# --- the classes ------------------------------------------------------------------------------


def test_an_empty_checkpoint_body_is_io(good: HandLog, tmp_path: Path) -> None:
    (good.folder / "history" / "checkpoint").write_bytes(b"")
    run = monitor(good, tmp_path / "state")
    assert run.code == 2 and run.lines == [] and "not a checkpoint" in run.stderr, run


def test_a_checkpoint_gone_after_300_heads_is_an_alarm(tmp_path: Path) -> None:
    """Gone for longer than --max-lag (issue #35: before that it is exit 2, as any
    unreachable answer: test_monitor_http)."""
    log = HandLog(tmp_path / "log", SigningKey.generate())
    log.entries(DAY1, 300)
    for size in range(1, 301):
        log.head(DAY1, size)
    log.publish()
    state = tmp_path / "state"
    assert monitor(log, state).code == 0
    checkpoint = log.folder / "history" / "checkpoint"
    kept = checkpoint.read_bytes()
    checkpoint.unlink()
    first = monitor(log, state, "--max-lag", "0")
    assert first.code == 2 and first.lines == [], first
    assert f"{checkpoint}: not found: no checkpoint, since" in first.stderr, first
    run = monitor(log, state, "--max-lag", "0")
    assert run.code == 1 and run.alarms == ["checkpoint_missing"], run
    assert evidence(state, run.lines[0]["alarm_id"])["checkpoint.last"] == kept
    checkpoint.write_bytes(kept)
    assert monitor(log, state).code == 1  # repeated until acknowledged
    checkpoint.unlink()
    run = monitor(log, tmp_path / "fresh")  # nothing seen yet: nothing to miss
    assert run.code == 0 and run.lines[-1]["size"] == 0, run


def test_acknowledge_with_the_log_named_records_then_runs(good: HandLog, tmp_path: Path) -> None:
    state = tmp_path / "state"
    good.head(DAY2, 7)
    honest = good.publish()
    assert monitor(good, state).code == 0
    (good.folder / "history" / "checkpoint").write_bytes(good.forged_checkpoint(4))
    ident = monitor(good, state).lines[0]["alarm_id"]
    (good.folder / "history" / "checkpoint").write_bytes(honest)
    run = monitor(good, state, "--acknowledge", ident)
    assert run.code == 0, run
    assert run.lines[0]["acknowledged"] == ident and run.lines[-1]["result"] == "consistent"
    usage = run_cli("monitor", good.folder, "--acknowledge", ident, "--state", state)
    assert usage.returncode == 2 and "usage: monitor --acknowledge" in usage.stderr
    assert len(events(state)) == 2  # the usage error recorded nothing
