"""Witnesses follow a key rotation (issue #21, item 2), end to end with real processes: a log
(`capability-anchor serve`), our witness (`capability-anchor witness serve`) and aics-witness
(PyPI, `witnesskit.AicsWitness`), all on loopback.

Records go in before the rotation, through both phases (`rotate-key --notice 0`, then
`rotate-key --activate`, both while `serve` runs), then each witness learns the new key,
then more records:
- our witness by `witness update-log --origin O --vkey OLD --vkey NEW` (either key verifies
  during the overlap);
- aics-witness can take a key change too: its `add-log` with another vkey for a known origin
  adds that vkey to the log's keys ("added vkey"), and SIGHUP makes a running witness reload
  its configuration (`witnesskit.AicsWitness.add_vkey`).

Asserted: until then both witnesses refuse the new key's checkpoints (403) and the service
logs that once per witness, not once per tick; cosignatures by both resume within two
checkpoint intervals of the witnesses learning the key; `verify-proof --policy` passes for
records from before and after the rotation (against the policy, which lists both `log` keys
from the activation on); `monitor`, trusting only the keys from before the rotation, follows
across it with no alarm and notes the endorsed rotation once (and not again on its next run).
Measured here: cosignatures by both resumed 0.7 s after `update-log` (interval 2 s).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from pathlib import Path

from capability_anchor.log import Log
from tests.kit.logkit import CLI, run_cli
from tests.kit.obskit import observation
from tests.kit.serverkit import Server, start
from tests.kit.witnesskit import AicsWitness, start_witness, witness_cli

ISS = "https://resolver.example"
ORIGIN = "resolver.example/history"
INTERVAL = 2.0  # --checkpoint-interval
DEADLINE = 5.0  # --witness-deadline


def append(server: Server, tag: str, n: int = 2) -> None:
    with server.client() as client:
        answer = client.post(
            "/records",
            json={"records": [observation(k, tag, iss=ISS) for k in range(n)]},
            headers=server.writer_headers(),
        )
        assert answer.status_code == 200, answer.text


def newest(data: Path) -> tuple[int, set[str]]:
    """The newest checkpoint's size and who cosigned it (read as any reader would)."""
    db = sqlite3.connect(f"file:{data / 'log.sqlite3'}?mode=ro", uri=True)
    try:
        (size,) = db.execute("SELECT coalesce(max(size), 0) FROM checkpoints").fetchone()
        names = {
            r[0] for r in db.execute("SELECT witness FROM cosignatures WHERE size = ?", (size,))
        }
    finally:
        db.close()
    return int(size), names


def wait_cosigned(data: Path, above: int, timeout: float) -> float:
    """Wait until a checkpoint above size ABOVE is cosigned by both; when that was seen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        size, names = newest(data)
        if size > above and names >= {"ours", "aics"}:
            return time.monotonic()
        time.sleep(0.05)
    raise AssertionError(f"no checkpoint above {above} cosigned by both within {timeout} s")


def record(server: Server, sub: str, folder: Path, name: str) -> Path:
    with server.client() as client:
        answer = client.get("/record", params={"id": sub})
        assert answer.status_code == 200, answer.text
    path = folder / name
    path.write_text(answer.text)
    return path


def verify(record_file: Path, roots: Path, policy: Path) -> str:
    iat = json.loads(record_file.read_text())["iat"]
    argv = [str(CLI.parent / "verify-proof"), str(record_file), "--roots", str(roots)]
    argv += ["--policy", str(policy), "--at", str(iat)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS witnesses" in done.stdout and "PASS history" in done.stdout, done.stdout
    return done.stdout


def test_witnesses_follow_a_two_phase_rotation_with_update_log(tmp_path: Path) -> None:
    data = tmp_path / "data"
    Log.init(data, iss=ISS).close()
    with Log.open(data) as log:
        old_vkey = log.read.history.vkey()
    ours = start_witness(tmp_path, (ORIGIN, old_vkey))
    aics = AicsWitness(tmp_path / "aics", ORIGIN, old_vkey).start()
    server: Server | None = None
    try:
        policy = (
            f"log {old_vkey}\n"
            f"witness ours {ours.vkey} {ours.server.url}\n"
            f"witness aics {aics.vkey} {aics.url}\n"
            "group both 2 ours aics\nquorum both\n"
        ).encode()
        (tmp_path / "policy-before.txt").write_bytes(policy)
        assert run_cli("policy", "--data", data, tmp_path / "policy-before.txt").returncode == 0
        args = ("--checkpoint-interval", str(INTERVAL), "--witness-deadline", str(DEADLINE))
        server = start(data, *args, "--rate-limit", "0")
        keys_before = tmp_path / "keys-before.json"
        with server.client() as client:
            keys_before.write_bytes(client.get("/keys").content)
        state = tmp_path / "monitor"
        # Before the rotation: cosigned by both, and a monitor starts following.
        append(server, "before")
        wait_cosigned(data, 0, 10 * INTERVAL)
        before = record(server, "example:before-0", tmp_path, "before.json")
        first = run_cli(
            "monitor", server.url, "--keys", keys_before, "--state", state, "--origin", ORIGIN
        )
        assert first.returncode == 0, first.stdout + first.stderr

        # Phase 1 while serve runs: the next key is published, nothing is signed with it.
        published = run_cli("rotate-key", "--data", data, "--notice", "0")
        assert published.returncode == 0, published.stderr
        new_vkey = json.loads(published.stdout.splitlines()[0])["vkey"]
        append(server, "published")
        size, _ = newest(data)
        wait_cosigned(data, size - 1, 10 * INTERVAL)  # still the old key: still cosigned

        # Phase 2 while serve runs: the new key signs; the witnesses do not know it yet.
        activated = run_cli("rotate-key", "--data", data, "--activate")
        assert activated.returncode == 0, activated.stderr
        with server.client() as client:
            assert client.get("/history/vkey").text.strip() == new_vkey
            served_policy = client.get("/history/policy").content
        assert f"log {old_vkey}".encode() in served_policy
        assert f"log {new_vkey}".encode() in served_policy
        size, _ = newest(data)
        append(server, "activated")
        time.sleep(4 * INTERVAL)  # several ticks of 403s from both witnesses
        unknown, names = newest(data)
        assert unknown > size and not names, "a witness cosigned a key it was never told of"

        # Each witness learns the new key; cosignatures resume within two intervals.
        updated = witness_cli(
            ours.data, "update-log", "--origin", ORIGIN, "--vkey", old_vkey, "--vkey", new_vkey
        )
        assert updated.returncode == 0, updated.stderr
        aics.add_vkey(new_vkey)
        told = time.monotonic()
        resumed = wait_cosigned(data, unknown - 1, 10 * INTERVAL) - told
        assert resumed <= 2 * INTERVAL, f"cosignatures resumed {resumed:.1f} s after update-log"
        append(server, "after")
        size, _ = newest(data)
        wait_cosigned(data, size, 10 * INTERVAL)
        after = record(server, "example:after-0", tmp_path, "after.json")
        again = record(server, "example:before-0", tmp_path, "before-again.json")

        # The problem was logged once per witness, not once per tick (nor per submission).
        err = server.stderr()
        for name in ("ours", "aics"):
            assert err.count(f"witness {name}: HTTP 403") == 1, err[-4000:]

        # verify-proof --policy: records from before and after the rotation.
        roots = tmp_path / "public"
        exported = run_cli("export", "--data", data, roots)
        assert exported.returncode == 0, exported.stderr
        (tmp_path / "policy.txt").write_bytes(served_policy)
        for token in (before, again, after):
            verify(token, roots, tmp_path / "policy.txt")

        # monitor follows across the rotation, trusting only the keys from before it.
        second = run_cli(
            "monitor", server.url, "--keys", keys_before, "--state", state, "--origin", ORIGIN
        )
        assert second.returncode == 0, second.stdout + second.stderr
        lines = [json.loads(line) for line in second.stdout.splitlines()]
        assert not [line for line in lines if "alarm" in line], lines
        noted = [line for line in lines if line.get("note") == "key_rotation"]
        assert len(noted) == 1 and noted[0]["kid"] != noted[0]["endorsed_by"], lines
        append(server, "later")
        size, _ = newest(data)
        wait_cosigned(data, size, 10 * INTERVAL)
        third = run_cli(
            "monitor", server.url, "--keys", keys_before, "--state", state, "--origin", ORIGIN
        )
        assert third.returncode == 0, third.stdout + third.stderr
        assert "key_rotation" not in third.stdout and "alarm" not in third.stdout, third.stdout
    finally:
        if server is not None:
            server.stop()
        aics.close()
        ours.server.kill()
