"""`capability-anchor witness serve`, a real process on 127.0.0.1, against request bodies built
by hand from c2sp.org/tlog-witness (and signed-note, tlog-checkpoint, tlog-cosignature): the
log in these tests signs with `cryptography`'s Ed25519 and its trees are `naive_rfc9162`'s,
so nothing here is the product's own code checking itself.

Non-project vectors: the "monkeys" log of github.com/transparency-dev/witness
(witness/witness_test.go, copied to tests/vectors/transparency-dev-witness/monkeys.json with
its commit). Interop: our log's witness client (`witnessing.run_round`) with our witness and
aics-witness (PyPI) in one policy, aics-tlog checking our cosignature, `verify-proof --policy`
with the quorum of both.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from capability_anchor.export.days import export
from capability_anchor.log import Log
from capability_anchor.witness.client import run_round
from tests.kit import paths
from tests.kit.c2spkit import ensure_venv, run_peer
from tests.kit.naive_rfc9162 import Naive, leaf
from tests.kit.obskit import observation
from tests.kit.serverkit import CLI, free_port, start
from tests.kit.witnesskit import AicsWitness, Running, start_witness, witness_cli

EM = "\u2014"
VECTORS = paths.TESTS / "vectors" / "transparency-dev-witness" / "monkeys.json"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def key_id(name: str, key_type: int, public: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([key_type]) + public).digest()[:4]


@dataclass
class HandLog:
    """A C2SP log written from the texts: Ed25519 note signatures, RFC 9162 trees."""

    origin: str
    key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    leaves: list[bytes] = field(default_factory=list)

    @property
    def public(self) -> bytes:
        return self.key.public_key().public_bytes_raw()

    @property
    def vkey(self) -> str:
        kid = key_id(self.origin, 0x01, self.public).hex()
        return f"{self.origin}+{kid}+{b64(bytes([0x01]) + self.public)}"

    def grow(self, n: int) -> None:
        self.leaves += [leaf(b"entry %d" % len(self.leaves)) for _ in range(n)]

    def root(self, size: int) -> bytes:
        return Naive(self.leaves).root(size)

    def proof(self, old: int, new: int) -> list[bytes]:
        return Naive(self.leaves).consistency(old, new)[0]

    def note(
        self, size: int, root: bytes | None = None, key: Ed25519PrivateKey | None = None
    ) -> str:
        text = f"{self.origin}\n{size}\n{b64(self.root(size) if root is None else root)}\n"
        key = key or self.key
        sig = key_id(self.origin, 0x01, self.public) + key.sign(text.encode())
        return f"{text}\n{EM} {self.origin} {b64(sig)}\n"


def body(old: int, proof: list[bytes], note: str) -> bytes:
    return (f"old {old}\n" + "".join(b64(h) + "\n" for h in proof) + "\n" + note).encode()


@pytest.fixture
def log() -> HandLog:
    hand = HandLog("log.test/hand")
    hand.grow(20)
    return hand


@pytest.fixture
def witness(tmp_path: Path, log: HandLog) -> Iterator[Running]:
    running = start_witness(tmp_path, (log.origin, log.vkey))
    try:
        yield running
    finally:
        running.server.kill()


def check_cosignature(running: Running, note: str, answer: bytes) -> int:
    """tlog-cosignature, from the text: one line `— <name> base64(keyID || u64 time || sig)`
    over `cosignature/v1\\ntime <t>\\n` + the checkpoint text, by the key of our vkey."""
    text = note[: note.index("\n\n") + 1]
    lines = answer.decode().splitlines(keepends=True)
    assert len(lines) == 1 and lines[0].endswith("\n")
    dash, name, blob = lines[0][:-1].split(" ")
    assert (dash, name) == (EM, running.name)
    raw = base64.b64decode(blob, validate=True)
    vname, vid, vblob = running.vkey.split("+", 2)
    material = base64.b64decode(vblob)
    assert material[0] == 0x04 and vname == running.name
    assert raw[:4] == bytes.fromhex(vid) == key_id(vname, 0x04, material[1:])
    at = int.from_bytes(raw[4:12], "big")
    message = f"cosignature/v1\ntime {at}\n".encode() + text.encode()
    Ed25519PublicKey.from_public_bytes(material[1:]).verify(raw[12:], message)
    return at


def refused(response: httpx.Response, status: int) -> dict[str, str]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    doc: dict[str, str] = response.json()
    assert set(doc) == {"v", "error", "note"}
    return doc


def size_conflict(response: httpx.Response, size: int) -> None:
    assert response.status_code == 409, response.text
    assert response.headers["content-type"] == "text/x.tlog.size"
    assert response.content == b"%d\n" % size


# --- every answer class ---------------------------------------------------------------------


def test_every_answer_class_in_the_order_tlog_witness_gives(witness: Running, log: HandLog) -> None:
    other = HandLog("log.test/unknown")
    other.grow(3)
    with httpx.Client(timeout=10) as c:
        assert refused(witness.post(c, b"old 0\n"), 400)["error"] == "bad_request"
        assert refused(witness.post(c, b"old 01\n\n" + log.note(4).encode()), 400)
        assert refused(witness.post(c, body(0, [b"short"], log.note(4))), 400)
        assert refused(witness.post(c, body(1, [b"\0" * 32] * 64, log.note(4))), 400)
        assert refused(witness.post(c, body(0, [], other.note(3))), 404)["error"] == "not_found"
        # Signed by a key the witness does not know under the log's name: ignored, so none.
        stranger = Ed25519PrivateKey.generate()
        assert refused(witness.post(c, body(0, [], log.note(4, key=stranger))), 403)
        # A failing signature by the trusted key's name and ID.
        bad = log.note(4).replace(log.origin + " ", log.origin + " ", 1)
        bad = (
            bad[: bad.rindex(" ") + 1] + b64(key_id(log.origin, 1, log.public) + b"\0" * 64) + "\n"
        )
        assert refused(witness.post(c, body(0, [], bad)), 403)["error"] == "forbidden"
        assert refused(witness.post(c, body(5, [], log.note(4))), 400)
        assert refused(witness.post(c, body(0, [b"\1" * 32], log.note(4))), 422)["error"] == (
            "unprocessable"
        )
        assert refused(witness.post(c, body(0, [], log.note(0, root=b"\0" * 32))), 422)
        # Size 0 with the empty tree's root: cosigned, and then trust on first use from 0.
        empty = log.note(0, root=hashlib.sha256(b"").digest())
        ok = witness.post(c, body(0, [], empty))
        assert ok.status_code == 200 and ok.headers["content-type"].startswith("text/plain")
        check_cosignature(witness, empty, ok.content)
        ok = witness.post(c, body(0, [], log.note(4)))
        assert ok.status_code == 200, ok.text
        check_cosignature(witness, log.note(4), ok.content)
        size_conflict(witness.post(c, body(0, [], log.note(6))), 4)
        size_conflict(witness.post(c, body(3, log.proof(3, 6), log.note(6))), 4)
        wrong = log.proof(4, 6)
        wrong[0] = bytes(32)
        assert refused(witness.post(c, body(4, wrong, log.note(6))), 422)
        assert refused(witness.post(c, body(4, log.proof(4, 7), log.note(6))), 422)
        # Same size, another root: tlog-witness says 409
        # (see docs/explanation/decisions/21-restore-rotation.md).
        size_conflict(witness.post(c, body(4, [], log.note(4, root=log.root(5)))), 4)
        ok = witness.post(c, body(4, log.proof(4, 6), log.note(6)))
        assert ok.status_code == 200, ok.text
        again = witness.post(c, body(6, [], log.note(6)))
        assert again.status_code == 200, again.text
        check_cosignature(witness, log.note(6), again.content)


def test_limits_and_error_hygiene(tmp_path: Path, log: HandLog) -> None:
    running = start_witness(tmp_path, (log.origin, log.vkey), rate_limit=5)
    try:
        with httpx.Client(timeout=10) as c:
            too_big = running.post(c, b"old 0\n" + b"A" * (70 * 1024))
            assert refused(too_big, 413)["error"] == "too_large"
            assert refused(c.get(f"{running.server.url}/add-checkpoint"), 405)
            assert refused(c.get(f"{running.server.url}/{'0' * 64}/checkpoint"), 404)
            statuses = [running.post(c, b"old x\n").status_code for _ in range(20)]
            assert 429 in statuses
    finally:
        running.server.kill()


def test_attack_trailing_slash_aliases_of_the_witness_are_404(
    witness: Running, log: HandLog
) -> None:
    # The log's one-spelling rule holds for the witness's service as well (the same edge).
    url = witness.server.url
    with httpx.Client(timeout=10) as c:
        assert c.get(f"{url}/healthz").status_code == 200
        monitoring = f"{url}/{hashlib.sha256(log.origin.encode()).hexdigest()}/checkpoint/"
        for answer in (
            c.get(f"{url}/healthz/"),
            c.get(monitoring),
            c.post(f"{url}/add-checkpoint/", content=b"old 0\n\n"),
        ):
            assert refused(answer, 404)["error"] == "not_found"
            assert answer.headers["cache-control"] == "no-store"


def test_the_monitoring_endpoint_serves_the_latest_cosigned_checkpoint(
    witness: Running, log: HandLog
) -> None:
    url = f"{witness.server.url}/{hashlib.sha256(log.origin.encode()).hexdigest()}/checkpoint"
    with httpx.Client(timeout=10) as c:
        assert refused(c.get(url), 404)
        assert witness.post(c, body(0, [], log.note(9))).status_code == 200
        got = c.get(url)
    assert got.status_code == 200
    note = got.text
    assert note.startswith(log.note(9))  # the log's note as received, then our line
    check_cosignature(witness, log.note(9), note[len(log.note(9)) :].encode())


# --- concurrency and crashes ----------------------------------------------------------------


def test_parallel_requests_from_one_old_size_give_exactly_one_cosignature(
    witness: Running, log: HandLog
) -> None:
    with httpx.Client(timeout=10) as c:
        assert witness.post(c, body(0, [], log.note(4))).status_code == 200
    payloads = [body(4, log.proof(4, n), log.note(n)) for n in range(5, 21)] * 2
    barrier = threading.Barrier(len(payloads))

    def send(payload: bytes) -> int:
        with httpx.Client(timeout=30) as c:
            barrier.wait()
            return witness.post(c, payload).status_code

    with ThreadPoolExecutor(len(payloads)) as pool:
        statuses = list(pool.map(send, payloads))
    assert statuses.count(200) == 1 and statuses.count(409) == len(payloads) - 1, statuses
    witness.server.kill()
    with sqlite3.connect(witness.data / "witness.sqlite3") as db:
        sizes = [r[0] for r in db.execute("SELECT size FROM cosigned ORDER BY seq")]
    assert len(sizes) == 2 and sizes[0] == 4 and sizes[1] > 4


def test_parallel_requests_for_several_logs_each_succeed(tmp_path: Path) -> None:
    """Requests for different logs share commits (the store's group commit); a refusal in
    one shares a transaction with the others' cosignatures and takes none of them back."""
    logs = [HandLog(f"log.test/p{k}") for k in range(6)]
    for hand in logs:
        hand.grow(12)
    running = start_witness(tmp_path, *((h.origin, h.vkey) for h in logs))
    try:
        barrier = threading.Barrier(len(logs) * 2, timeout=30)

        def chain(hand: HandLog) -> list[int]:
            statuses = []
            with httpx.Client(timeout=30) as c:
                barrier.wait()
                old = 0
                for new in range(1, 13):
                    proof = hand.proof(old, new) if old else []
                    statuses.append(running.post(c, body(old, proof, hand.note(new))).status_code)
                    old = new
            return statuses

        def stale(hand: HandLog) -> list[int]:
            with httpx.Client(timeout=30) as c:
                barrier.wait()
                return [
                    running.post(c, body(1, [], hand.note(1, root=bytes(32)))).status_code
                    for _ in range(12)
                ]

        with ThreadPoolExecutor(len(logs) * 2) as pool:
            chain_futures = [pool.submit(chain, h) for h in logs]
            stale_futures = [pool.submit(stale, h) for h in logs]
            chains = [f.result() for f in chain_futures]
            stales = [f.result() for f in stale_futures]
        assert all(statuses == [200] * 12 for statuses in chains), chains
        assert all(set(statuses) <= {403, 409, 422} for statuses in stales), stales
    finally:
        running.server.kill()
    with sqlite3.connect(running.data / "witness.sqlite3") as db:
        counts = dict(db.execute("SELECT origin, count(*) FROM cosigned GROUP BY origin"))
    assert counts == {h.origin: 12 for h in logs}


def test_kill_9_mid_load_keeps_the_store_consistent_and_never_goes_back(
    tmp_path: Path, log: HandLog
) -> None:
    log.grow(400)
    running = start_witness(tmp_path, (log.origin, log.vkey))
    acknowledged: list[int] = []
    stop = threading.Event()

    def load() -> None:
        old = 0
        with httpx.Client(timeout=5) as c:
            for new in range(1, len(log.leaves) + 1):
                if stop.is_set():
                    return
                proof = log.proof(old, new) if old else []
                try:
                    answer = running.post(c, body(old, proof, log.note(new)))
                except httpx.TransportError:
                    return
                if answer.status_code == 200:
                    acknowledged.append(new)
                    old = new

    thread = threading.Thread(target=load)
    thread.start()
    while len(acknowledged) < 30 and thread.is_alive():
        threading.Event().wait(0.01)
    running.server.kill()  # SIGKILL, mid-load
    stop.set()
    thread.join()
    assert acknowledged
    port = free_port()
    argv = [str(CLI), "witness", "serve", "--data", str(running.data), "--port", str(port)]
    again = start(running.data, port=port, argv=argv, logs=tmp_path)
    try:
        with httpx.Client(timeout=10) as c:
            answer = c.post(f"{again.url}/add-checkpoint", content=body(0, [], log.note(1)))
            assert answer.status_code == 409, answer.text
            last = int(answer.text)
            # Every acknowledged cosignature is stored; the one in flight may be stored too
            # (persisted before the answer that never left).
            assert acknowledged[-1] <= last <= acknowledged[-1] + 1
            nxt = c.post(
                f"{again.url}/add-checkpoint",
                content=body(last, log.proof(last, last + 1), log.note(last + 1)),
            )
            assert nxt.status_code == 200, nxt.text
    finally:
        again.kill()
    with sqlite3.connect(running.data / "witness.sqlite3") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        sizes = [r[0] for r in db.execute("SELECT size FROM cosigned ORDER BY seq")]
        assert sizes == sorted(sizes)
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            db.execute("UPDATE cosigned SET size = 0")
        with pytest.raises(sqlite3.IntegrityError, match="never goes back"):
            db.execute(
                "INSERT INTO cosigned (origin, size, root, checkpoint, cosignature, time) "
                "VALUES (?, 1, ?, x'', '', 0)",
                (log.origin, log.root(1)),
            )


# --- a log that is not ours -----------------------------------------------------------------


def test_the_transparency_dev_monkeys_log(tmp_path: Path) -> None:
    vectors = json.loads(VECTORS.read_text())
    proof = [bytes.fromhex(h) for h in vectors["proof_5_8_hex"]]
    running = start_witness(tmp_path, ("monkeys", vectors["log_vkey"]))
    try:
        with httpx.Client(timeout=10) as c:
            first = running.post(c, body(0, [], vectors["init"]))
            assert first.status_code == 200, first.text
            check_cosignature(running, vectors["init"], first.content)
            assert refused(running.post(c, body(5, proof[::-1], vectors["next"])), 422)
            nxt = running.post(c, body(5, proof, vectors["next"]))
            assert nxt.status_code == 200, nxt.text
            check_cosignature(running, vectors["next"], nxt.content)
            banana = vectors["next"].replace("monkeys", "bananas")
            assert refused(running.post(c, body(0, [], banana)), 404)
    finally:
        running.server.kill()


# --- the CLI --------------------------------------------------------------------------------


def test_cli_exit_codes(tmp_path: Path, log: HandLog) -> None:
    data = tmp_path / "w"
    # A key file in the way: init fails and leaves no store behind, so it can be run again.
    data.mkdir()
    (data / "witness-key.jwk").write_text("{}")
    assert witness_cli(data, "init", "--name", "w.test/x").returncode == 2
    assert not (data / "witness.sqlite3").exists()
    (data / "witness-key.jwk").unlink()
    assert witness_cli(data, "add-log", "--origin", "o", "--vkey", log.vkey).returncode == 2
    assert witness_cli(data, "init", "--name", "bad name").returncode == 2
    made = witness_cli(data, "init", "--name", "w.test/x")
    assert made.returncode == 0
    assert (data / "witness-key.jwk").stat().st_mode & 0o777 == 0o600
    assert json.loads(made.stdout)["vkey"].startswith("w.test/x+")
    assert witness_cli(data, "init", "--name", "w.test/x").returncode == 1
    assert witness_cli(data, "add-log", "--origin", "o", "--vkey", "nonsense").returncode == 2
    assert witness_cli(data, "add-log", "--origin", "o", "--vkey", log.vkey).returncode == 0
    assert witness_cli(data, "add-log", "--origin", "o", "--vkey", log.vkey).returncode == 0
    other = HandLog("log.test/other").vkey
    assert witness_cli(data, "add-log", "--origin", "o", "--vkey", other).returncode == 1


# --- update-log: the log rotated its key (issue #21) ----------------------------------------


def test_update_log_replaces_the_key_set_and_the_running_witness_adopts_it(
    witness: Running, log: HandLog
) -> None:
    """The log rotates: its new key is refused (403) until `update-log` names it, which the
    running `witness serve` adopts at its next request; during the overlap either key
    verifies, and once the old key is dropped it no longer does."""
    rotated = HandLog(log.origin, leaves=log.leaves)  # the same tree, signed by a new key
    with httpx.Client(timeout=10) as c:
        assert witness.post(c, body(0, [], log.note(5))).status_code == 200
        assert refused(witness.post(c, body(5, log.proof(5, 8), rotated.note(8))), 403)
        both = witness_cli(
            witness.data, "update-log", "--origin", log.origin, "--vkey", log.vkey,
            "--vkey", rotated.vkey,
        )  # fmt: skip
        assert both.returncode == 0, both.stderr
        assert json.loads(both.stdout) == {
            "origin": log.origin,
            "vkeys": [log.vkey, rotated.vkey],
            "old_vkeys": [log.vkey],
        }
        # The change is logged, naming the old and the new key set.
        assert f"[{log.vkey}] -> [{log.vkey}, {rotated.vkey}]" in both.stderr
        assert witness.post(c, body(5, log.proof(5, 8), rotated.note(8))).status_code == 200
        assert witness.post(c, body(8, log.proof(8, 10), log.note(10))).status_code == 200
        assert witness.post(c, body(10, log.proof(10, 12), rotated.note(12))).status_code == 200
        done = witness_cli(
            witness.data, "update-log", "--origin", log.origin, "--vkey", rotated.vkey
        )
        assert done.returncode == 0, done.stderr
        assert refused(witness.post(c, body(12, log.proof(12, 14), log.note(14))), 403)
        assert witness.post(c, body(12, log.proof(12, 14), rotated.note(14))).status_code == 200
    # The running witness logged each key set it adopted, naming the old and the new.
    served = witness.server.stderr()
    assert (
        f"now verified with the key set [{log.vkey}, {rotated.vkey}] (was [{log.vkey}])" in served
    )
    assert f"now verified with the key set [{rotated.vkey}] (was [{log.vkey}, " in served
    # add-log of the same origin with other keys still refuses, and names the fix.
    third = HandLog(log.origin).vkey
    again = witness_cli(witness.data, "add-log", "--origin", log.origin, "--vkey", third)
    assert again.returncode == 1 and "witness update-log" in again.stderr, again.stderr
    assert (
        witness_cli(
            witness.data, "add-log", "--origin", log.origin, "--vkey", rotated.vkey
        ).returncode
        == 0
    )
    # The key sets are kept, append-only, beside the log's first row.
    with sqlite3.connect(witness.data / "witness.sqlite3") as db:
        sets = [r[0].split("\n") for r in db.execute("SELECT vkeys FROM log_keys ORDER BY seq")]
        assert sets == [[log.vkey, rotated.vkey], [rotated.vkey]]
        for statement in ("UPDATE log_keys SET vkeys = 'x'", "DELETE FROM log_keys"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                db.execute(statement)


def test_attack_update_log_refuses_an_empty_set_an_unknown_origin_and_a_bad_vkey(
    tmp_path: Path, log: HandLog
) -> None:
    data = tmp_path / "w"
    assert witness_cli(data, "init", "--name", "w.test/x").returncode == 0
    assert witness_cli(data, "add-log", "--origin", log.origin, "--vkey", log.vkey).returncode == 0
    before = (data / "witness.sqlite3").read_bytes()
    empty = witness_cli(data, "update-log", "--origin", log.origin)
    assert empty.returncode == 2 and "at least one --vkey" in empty.stderr, empty.stderr
    unknown = witness_cli(data, "update-log", "--origin", "log.test/nope", "--vkey", log.vkey)
    assert unknown.returncode == 2 and "witness add-log" in unknown.stderr, unknown.stderr
    bad = witness_cli(data, "update-log", "--origin", log.origin, "--vkey", "nonsense")
    assert bad.returncode == 2, bad.stderr
    twice = witness_cli(
        data, "update-log", "--origin", log.origin, "--vkey", log.vkey, "--vkey", log.vkey
    )
    assert twice.returncode == 2, twice.stderr
    with sqlite3.connect(data / "witness.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM log_keys").fetchone() == (0,)
    assert (data / "witness.sqlite3").read_bytes() == before  # nothing stored


def vkey_args(vkeys: list[str]) -> list[str]:
    return [arg for vkey in vkeys for arg in ("--vkey", vkey)]


def test_attack_update_log_refuses_a_vkey_named_for_another_origin_and_stores_nothing(
    witness: Running, log: HandLog
) -> None:
    """Issue #35: a vkey named for another log's origin verifies none of this log's
    checkpoints; once stored, the witness refused every one. Now exit 2, nothing stored,
    and the log's own key still verifies."""
    other = HandLog("log.test/other")
    before = (witness.data / "witness.sqlite3").read_bytes()
    for vkeys in ([other.vkey], [log.vkey, other.vkey]):
        done = witness_cli(witness.data, "update-log", "--origin", log.origin, *vkey_args(vkeys))
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert f"named log.test/other, not the log's origin {log.origin}" in done.stderr
    assert (witness.data / "witness.sqlite3").read_bytes() == before
    log.grow(3)
    with httpx.Client(timeout=10) as c:
        assert witness.post(c, body(0, [], log.note(3))).status_code == 200


def test_attack_update_log_refuses_17_keys(tmp_path: Path, log: HandLog) -> None:
    """Issue #35: 20,000 keys were taken (12.7 s), and every later cosign request parsed
    them all. A log has at most 16 keys: 17 is exit 2 and nothing is stored; 16 is taken."""
    data = tmp_path / "w"
    assert witness_cli(data, "init", "--name", "w.test/x").returncode == 0
    assert witness_cli(data, "add-log", "--origin", log.origin, "--vkey", log.vkey).returncode == 0
    keys = [log.vkey] + [HandLog(log.origin).vkey for _ in range(16)]
    before = (data / "witness.sqlite3").read_bytes()
    many = witness_cli(data, "update-log", "--origin", log.origin, *vkey_args(keys))
    assert (many.returncode, many.stdout) == (2, ""), many.stderr
    assert "17 --vkey given; a log has at most 16 keys" in many.stderr, many.stderr
    assert (data / "witness.sqlite3").read_bytes() == before
    added = witness_cli(data, "add-log", "--origin", "log.test/many", *vkey_args(keys))
    assert added.returncode == 2, added.stderr
    sixteen = witness_cli(data, "update-log", "--origin", log.origin, *vkey_args(keys[:16]))
    assert sixteen.returncode == 0, sixteen.stderr
    assert json.loads(sixteen.stdout)["vkeys"] == keys[:16]


def test_witness_info_prints_the_name_vkey_and_the_submission_prefix_serve_answers_under(
    witness: Running, log: HandLog, tmp_path: Path
) -> None:
    """Issue #35: the vkey was printed once, at `init`, and a bare `serve`'s prefix had to
    be guessed. `witness info` prints both; a log submits under the prefix it prints."""
    port = witness.server.url.rsplit(":", 1)[1]
    done = witness_cli(witness.data, "info", "--port", port)
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info == {
        "name": witness.name,
        "vkey": witness.vkey,
        "submission_prefix": f"http://127.0.0.1:{port}",
        "data": str(witness.data),
    }
    bare = json.loads(witness_cli(witness.data, "info").stdout)  # a bare `witness serve`'s
    assert bare["submission_prefix"] == "http://127.0.0.1:8380"
    log.grow(2)
    with httpx.Client(timeout=10) as c:
        answer = c.post(
            f"{info['submission_prefix']}/add-checkpoint", content=body(0, [], log.note(2))
        )
    assert answer.status_code == 200, answer.text
    assert check_cosignature(witness, log.note(2), answer.content) > 0
    missing = witness_cli(tmp_path / "none", "info")
    assert missing.returncode == 2 and missing.stdout == "", missing.stderr


# --- interop: our log, aics-witness, aics-tlog, verify-proof --------------------------------

ISS = "https://resolver.example"
ORIGIN = "resolver.example/history"


def grow(log: Log, n: int, tag: str) -> None:
    log.append([observation(i, tag) for i in range(n)])
    log.checkpoint()


def test_our_log_is_cosigned_by_our_witness_and_aics_witness_and_verify_proof_passes(
    tmp_path: Path,
) -> None:
    Log.init(tmp_path / "data", iss=ISS, clock=time.time).close()
    with Log.open(tmp_path / "data", clock=time.time) as log:
        grow(log, 2, "a")
        vkey = log.read.history.vkey()
        ours = start_witness(tmp_path, (ORIGIN, vkey))
        try:
            with AicsWitness(tmp_path / "aics", ORIGIN, vkey) as aics:
                text = (
                    f"witness ours {ours.vkey} {ours.server.url}\n"
                    f"witness aics {aics.vkey} {aics.url}\n"
                    "group both 2 ours aics\nquorum both\n"
                ).encode()
                with log.writer.lock, log.store.write():
                    log.store.set_policy(text, int(log.clock()))
                for k in range(2):  # the second round sends a consistency proof to both
                    outcomes = run_round(log)
                    assert sorted(o.result for o in outcomes) == ["cosigned", "cosigned"], [
                        o.detail for o in outcomes
                    ]
                    grow(log, 1, f"b{k}")
                log.append([observation(0, "rec", iss=ISS)])
                log.checkpoint()
                assert [o.result for o in run_round(log)] == ["cosigned", "cosigned"]
                served = log.read.history.served_checkpoint()
                # aics-tlog, a client that is not ours, checks our witness's cosignature.
                answer = run_peer(
                    ensure_venv(),
                    {
                        "op": "verify",
                        "note": served.decode(),
                        "log_vkey": vkey,
                        "witness_vkeys": [ours.vkey, aics.vkey],
                        "quorum": 2,
                        "origin": ORIGIN,
                    },
                )
                assert answer["ok"] and len(answer["witnesses"]) == 2, answer
                folder = tmp_path / "public"
                export(log, folder)
                record = log.record(sub="example:rec-0")
        finally:
            ours.server.kill()
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
    assert "PASS witnesses" in done.stdout, done.stdout


@pytest.mark.parametrize("fmt", ["plain", "json"])
def test_witness_serve_writes_the_logs_services_access_and_event_lines(
    tmp_path: Path, log: HandLog, fmt: str
) -> None:
    running = start_witness(tmp_path, (log.origin, log.vkey), extra=["--log-format", fmt])
    url = running.server.url
    try:
        with httpx.Client(timeout=10) as c:
            assert c.get(f"{url}/healthz").status_code == 200
            assert refused(c.get(f"{url}/add-checkpoint"), 405)
            note = log.note(10)
            assert running.post(c, body(0, [], note)).status_code == 200
        assert running.server.stop() == 0
    finally:
        running.server.kill()
    text = running.server.stderr()
    assert "Traceback" not in text
    host = "127.0.0.1"
    if fmt == "plain":
        # The very format of `serve` (tests/e2e/test_serve_lifecycle.py): one line per request.
        assert re.search(rf'Z info {host} "GET /healthz" 200 [0-9.]+ ms\n', text), text
        assert f' warning {host} "GET /add-checkpoint" 405 ' in text
        assert f' info {host} "POST /add-checkpoint" 200 ' in text
        for event in ("service: started (pid", "service: SIGTERM received: finishing"):
            assert f" info {event}" in text, text
        assert " info service: stopped (pid " in text
        assert '"GET /healthz HTTP/1.1"' not in text  # uvicorn's own access log stays off
    else:
        lines = [json.loads(x) for x in text.splitlines() if x.startswith("{")]
        requests = [x for x in lines if x["event"] == "request"]
        # The first ones are the kit's own readiness probes of /healthz.
        assert [(r["method"], r["path"], r["status"]) for r in requests][-3:] == [
            ("GET", "/healthz", 200),
            ("GET", "/add-checkpoint", 405),
            ("POST", "/add-checkpoint", 200),
        ]
        assert requests[-2]["error"] == "method_not_allowed"
        events = [str(x["msg"]) for x in lines if x["event"] == "service"]
        assert events[0].startswith("started (pid") and events[-1].startswith("stopped (pid")
        assert any(m.startswith("SIGTERM received") for m in events)
