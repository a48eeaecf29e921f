"""A compromised key (SPEC §13.2): `rotate-key --compromised` rotates at once, removes the
old key from `/keys` and keys.json, and publishes a revocation signed by its successor;
`verify-proof` FAILs, and `monitor` alarms on, what the stolen key signs after the
revocation time, while what it signed before stays valid. And a monitor follows an
endorsed rotation with no alarm, noting it once. Real CLI processes, servers and files."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from capability_anchor import head as heads
from capability_anchor import jws
from capability_anchor.encoding import b64url_decode
from capability_anchor.keys import KeySet, load_key_file, trust
from capability_anchor.log import Log, rotation
from capability_anchor.store import HeadRow
from capability_anchor.store import open as stores
from tests.kit.logkit import Clock
from tests.kit.obskit import observation
from tests.kit.rotationkit import append, cli, kid_file, ok, served_kids, signed_kids
from tests.kit.serverkit import free_port, serve_argv, serving, uvicorn_argv

ISS = "https://resolver.example"
VERIFY_PROOF = Path(sys.executable).parent / "verify-proof"


def verify_proof(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VERIFY_PROOF), "--json", *map(str, args)], capture_output=True, text=True, check=False
    )


def checks(result: subprocess.CompletedProcess[str]) -> dict[str, dict[str, str]]:
    return {c["name"]: c for c in json.loads(result.stdout)["checks"]}


def monitor(target: Path, keys: Path, state: Path) -> tuple[int, list[dict[str, Any]]]:
    done = cli("monitor", target, "--keys", keys, "--state", state)
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()]


def _early_log(data: Path, clock: Clock) -> tuple[dict[str, Any], HeadRow]:
    """A new log at CLOCK (a time before the revocation to come) with two records, a head
    over them and a token for the first: what the old key signed in good standing."""
    with Log.init(data, iss=ISS, clock=clock) as log:
        log.append([observation(n, "early", iss=ISS) for n in range(2)])
        log.checkpoint()
        early = log.record(sub="example:early-0")
        head = log.store.newest_published()
    assert head is not None
    return early, head


def _late_record(compromised: dict[str, Any]) -> Path:
    """A record the new key signed after the revocation, which verify-proof passes as it is."""
    with Log.open(compromised["data"]) as log:
        late = log.record(sub="example:late-0")
    record = compromised["tmp"] / "late.json"
    record.write_text(json.dumps(late))
    assert verify_proof(record, "--roots", compromised["out"]).returncode == 0
    return record


@pytest.fixture
def compromised(tmp_path: Path) -> dict[str, Any]:
    """A log whose first records, head and token predate the revocation (the log's clock
    seam, a minute back), then `--compromised`, then records the new key signs."""
    start = int(time.time()) - 120
    clock = Clock(start)
    data = tmp_path / "data"
    early, _ = _early_log(data, clock)
    old = load_key_file(data / "signing-key.jwk")
    keys_before = tmp_path / "keys-before.json"
    keys_before.write_bytes(KeySet.of(old.public).to_json())
    state = tmp_path / "state"
    out = tmp_path / "roots"
    ok("export", "--data", data, out, "--tiles")
    code, _ = monitor(out, keys_before, state)
    assert code == 0
    clock.t = start + 60
    done = rotation.activate(data, lambda d: Log.open(d, clock=clock), compromised=True)
    assert done.revoked_at == start + 60 and done.old_kid == old.kid
    append(data, "late")  # signed now (real clock), after the revocation, by the new key
    ok("export", "--data", data, out, "--tiles")
    return {
        "data": data,
        "old": old,
        "new": done.kid,
        "revoked_at": start + 60,
        "early": early,
        "out": out,
        "state": state,
        "keys_before": keys_before,
        "tmp": tmp_path,
    }


def test_compromised_removes_the_old_key_from_keys_at_once(compromised: dict[str, Any]) -> None:
    data, old, new = compromised["data"], compromised["old"], compromised["new"]
    assert kid_file(data) == new
    assert set(signed_kids(data)["heads"][-1:]) == {new}
    with serving(data, "--rate-limit", "0") as live, live.client() as client:
        assert served_kids(client) == {new}
        records = client.get("/keys/records")
    assert records.status_code == 200
    iss, tokens = trust.read_key_records(records.content)
    chain = trust.closure(
        KeySet.of(load_key_file(data / "signing-key.jwk").public), tokens, iss=iss
    )
    revocation = chain.revocations[old.kid]
    assert (revocation.signer, revocation.revoked_at) == (new, compromised["revoked_at"])
    out = compromised["out"]
    assert set(KeySet.from_json((out / "keys.json").read_bytes()).kids) == {new}
    _, exported = trust.read_key_records((out / trust.KEY_RECORDS_FILE).read_bytes())
    assert exported == tokens
    assert ok("audit", "--data", data)["ok"] is True
    assert ok("audit", "--data", data, "--roots", out)["ok"] is True


def test_compromised_from_the_cli_prints_the_revocation(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ok("init", "--data", data, "--iss", ISS)
    old = kid_file(data)
    done = ok("rotate-key", "--data", data, "--compromised")
    assert done["revoked"] == old and done["revoked_at"].endswith("Z")
    assert kid_file(data) == done["kid"] != old
    assert not (data / "signing-key.jwk.new").exists()


def _forged_token(compromised: dict[str, Any]) -> str:
    """A record token the thief signs with the stolen key, dated half a minute from now
    (inside the clock skew a verifier allows, and after a revocation made just now)."""
    claims = json.loads(b64url_decode(compromised["early"]["jws"].split(".")[1]))
    leaf = {k: v for k, v in claims.items() if k not in ("iat", "exp", "anchor", "proof")}
    signed = jws.sign_record(
        leaf,
        anchor=claims["anchor"],
        proof=claims["proof"],
        key=compromised["old"],
        iat=int(time.time()) + 30,
        lifetime=3600,
    )
    return str(signed["jws"])


def test_verify_proof_fails_a_token_the_revoked_key_signed_after_the_revocation(
    compromised: dict[str, Any],
) -> None:
    out, tmp = compromised["out"], compromised["tmp"]
    forged = tmp / "forged.jws"
    forged.write_text(_forged_token(compromised))
    result = verify_proof(forged, "--roots", out)
    assert result.returncode == 1, result.stdout
    check = checks(result)["record_signature"]
    assert check["result"] == "FAIL"
    assert f"key {compromised['old'].kid} was revoked at" in check["detail"]
    # The token it signed before the revocation still passes, with the published keys
    # (keys.json lists only the new key; the records lead back to the old one).
    early = tmp / "early.jws"
    early.write_text(compromised["early"]["jws"])
    passed = verify_proof(early, "--roots", out, "--at", str(compromised["early"]["iat"]))
    assert passed.returncode == 0, passed.stdout


def _forge_newest_head(compromised: dict[str, Any]) -> Path:
    """The newest head in the export (signed by the new key after the revocation), its
    same claims signed again with the stolen key, in place of the log's document."""
    out = compromised["out"]
    day = max(p.name for p in out.iterdir() if p.is_dir() and p.name[:2] == "20")
    path = max((out / day).glob("*.json"), key=lambda p: int(p.stem))
    claims = heads.parse_document(path.read_bytes()).claims
    assert claims["iat"] > compromised["revoked_at"]
    path.write_bytes(heads.sign(claims, compromised["old"]).document())
    return path


def test_verify_proof_fails_a_head_the_revoked_key_signed_after_the_revocation(
    compromised: dict[str, Any],
) -> None:
    out = compromised["out"]
    record = _late_record(compromised)
    _forge_newest_head(compromised)
    result = verify_proof(record, "--roots", out)
    assert result.returncode == 1, result.stdout
    check = checks(result)["head_signature"]
    assert check["result"] == "FAIL" and "was revoked at" in check["detail"], check


def test_monitor_alarms_on_a_head_the_revoked_key_signed_after_the_revocation(
    compromised: dict[str, Any],
) -> None:
    forged = _forge_newest_head(compromised)
    code, lines = monitor(compromised["out"], compromised["keys_before"], compromised["state"])
    assert code == 1, lines
    (alarm,) = [line for line in lines if "alarm" in line]
    assert alarm["alarm"] == "key_revoked_signature"
    assert f"key {compromised['old'].kid} was revoked at" in alarm["detail"]
    assert f"{forged.parent.name}/{forged.stem}:" in alarm["detail"]


def test_monitor_follows_the_compromise_rotation_when_nothing_is_forged(
    compromised: dict[str, Any],
) -> None:
    code, lines = monitor(compromised["out"], compromised["keys_before"], compromised["state"])
    assert code == 0, lines
    notes = {line["note"] for line in lines if "note" in line}
    assert notes == {"key_rotation", "key_revoked"}


def _resign_checkpoint(out: Path, key: Any) -> bytes:
    """The export's checkpoint, its same text signed by `key` alone (the stolen key)."""
    from capability_anchor.note import NoteSigner, parse_note, sign_note

    path = out / "history" / "checkpoint"
    text = parse_note(path.read_bytes()).text
    forged = sign_note(text, NoteSigner(text.split("\n", 1)[0], key))
    path.write_bytes(forged)
    return forged


def test_monitor_alarms_on_a_checkpoint_only_the_revoked_key_signed_after_the_revocation(
    compromised: dict[str, Any],
) -> None:
    """The newest head the checkpoint covers is the new key's, after the revocation; the
    thief re-signs that checkpoint with the stolen key: it is no older than that head."""
    out, state, old = compromised["out"], compromised["state"], compromised["old"]
    forged = _resign_checkpoint(out, old)
    code, lines = monitor(out, compromised["keys_before"], state)
    assert code == 1, lines
    (alarm,) = [line for line in lines if "alarm" in line]
    assert alarm["alarm"] == "key_revoked_signature"
    assert alarm["detail"].startswith("history/checkpoint: ")
    assert f"key {old.kid} was revoked at" in alarm["detail"]
    evidence = state / "evidence" / alarm["alarm_id"]
    assert (evidence / "checkpoint").read_bytes() == forged
    revocation = (evidence / f"revocation-{old.kid}.jws").read_text()
    assert trust.is_revocation(revocation)
    # Nothing past the alarm is committed: the next run repeats it.
    assert monitor(out, compromised["keys_before"], state)[0] == 1


def test_monitor_takes_a_checkpoint_the_revoked_key_signed_before_the_revocation(
    tmp_path: Path,
) -> None:
    """The newest head is dated before the revocation, so a checkpoint of it that only the
    old key signed is one it signed in good standing, read after the revocation."""
    start = int(time.time()) - 120
    clock = Clock(start)
    data, out = tmp_path / "data", tmp_path / "roots"
    _early_log(data, clock)
    old = load_key_file(data / "signing-key.jwk")
    keys = tmp_path / "keys.json"
    keys.write_bytes(KeySet.of(old.public).to_json())
    clock.t = start + 60
    rotation.activate(data, lambda d: Log.open(d, clock=clock), compromised=True)
    ok("export", "--data", data, out, "--tiles")
    _resign_checkpoint(out, old)
    code, lines = monitor(out, keys, tmp_path / "state")
    assert code == 0, lines
    assert {line["note"] for line in lines if "note" in line} == {"key_rotation", "key_revoked"}


# --- an endorsed rotation, followed ----------------------------------------------------------


@pytest.mark.parametrize("over", ["folder", "http"])
def test_monitor_follows_an_endorsed_rotation_with_no_alarm_and_notes_it_once(
    tmp_path: Path, over: str
) -> None:
    data = tmp_path / "data"
    ok("init", "--data", data, "--iss", ISS)
    append(data, "one")
    keys = tmp_path / "keys.json"
    keys.write_bytes(KeySet.of(load_key_file(data / "signing-key.jwk").public).to_json())
    state = tmp_path / "state"
    out = tmp_path / "roots"

    def run() -> tuple[int, list[dict[str, Any]]]:
        if over == "folder":
            ok("export", "--data", data, out, "--tiles")
            return monitor(out, keys, state)
        with serving(data, "--rate-limit", "0") as live:
            done = cli(
                "monitor",
                live.url,
                "--keys",
                keys,
                "--state",
                state,
                "--origin",
                "resolver.example/history",
            )
            return done.returncode, [json.loads(x) for x in done.stdout.splitlines()]

    assert run()[0] == 0
    published = ok("rotate-key", "--data", data)
    ok("rotate-key", "--data", data, "--activate", "--force")
    append(data, "two")
    code, lines = run()
    assert code == 0, lines
    notes = [line for line in lines if "note" in line]
    assert [(n["note"], n["kid"]) for n in notes] == [("key_rotation", published["kid"])]
    assert not [line for line in lines if "alarm" in line]
    append(data, "three")
    code, lines = run()
    assert code == 0, lines
    assert not [line for line in lines if "note" in line]  # noted once, in the state too
    state_json = json.loads((state / "state.json").read_text())
    assert state_json["rotations"] == [published["kid"]]


def test_a_revocation_signed_by_a_revoked_key_counts_for_nothing() -> None:
    from capability_anchor.keys import SigningKey

    a, b = SigningKey.generate(), SigningKey.generate()
    tokens = [
        trust.make_key_record(a, b.public, iss=ISS, iat=1),
        trust.make_key_record(b, a.public, iss=ISS, iat=1),
        trust.make_revocation(b, a.kid, iss=ISS, revoked_at=5),
        trust.make_revocation(a, b.kid, iss=ISS, revoked_at=6),
    ]
    chain = trust.closure([b.public], tokens, iss=ISS)
    assert set(chain.revocations) == {a.kid}
    assert 3 in chain.problems and "revoked" in chain.problems[3]
    # A record the revoked key signs after its revocation is not followed.
    thief = SigningKey.generate()
    late = trust.make_key_record(a, thief.public, iss=ISS, iat=9)
    chain = trust.closure([b.public], [*tokens[:3], late], iss=ISS)
    assert thief.kid not in chain.keys
    assert "revoked" in chain.problems[3]


def test_a_running_serve_drops_the_revoked_key_at_once_and_verify_proof_reads_its_records(
    tmp_path: Path,
) -> None:
    """`--compromised` while `serve` runs: `/keys` lists only the new key from then on, and
    `verify-proof --keys URL/keys` follows `/keys/records` to FAIL a token the stolen key
    signs now, naming the revocation, and to PASS one it signed before."""
    data = tmp_path / "data"
    early, head = _early_log(data, Clock(int(time.time()) - 120))
    old = load_key_file(data / "signing-key.jwk")
    (tmp_path / "head.json").write_bytes(head.doc)
    (tmp_path / "early.jws").write_text(early["jws"])
    with serving(data, "--rate-limit", "0") as live, live.client() as client:
        assert served_kids(client) == {old.kid}
        done = ok("rotate-key", "--data", data, "--compromised")
        assert served_kids(client) == {done["kid"]}
        forged = _forged_token({"early": early, "old": old})
        (tmp_path / "forged.jws").write_text(forged)
        keys = f"{live.url}/keys"
        result = verify_proof(
            tmp_path / "forged.jws", "--keys", keys, "--head", tmp_path / "head.json"
        )
        assert result.returncode == 1, result.stdout
        detail = checks(result)["record_signature"]["detail"]
        assert f"key {old.kid} was revoked at {done['revoked_at']}" in detail
        passed = verify_proof(
            tmp_path / "early.jws",
            "--keys",
            keys,
            "--head",
            tmp_path / "head.json",
            "--at",
            str(early["iat"]),
        )
        assert passed.returncode == 0, passed.stdout


def test_verify_proof_fails_a_checkpoint_only_the_revoked_key_signed_after_the_revocation(
    compromised: dict[str, Any],
) -> None:
    """The head is the new key's (after the revocation); the thief re-signs the checkpoint
    that proves it with the stolen key: a checkpoint is no later than nothing it covers."""
    from capability_anchor.note import NoteSigner, parse_note, sign_note

    out = compromised["out"]
    record = _late_record(compromised)
    for path in out.rglob("*.tlog-proof"):
        text = path.read_text()
        at = text.index("\n\n") + 2  # the checkpoint note follows the proof's blank line
        note = parse_note(text[at:].encode())
        name = note.text.split("\n", 1)[0]
        path.write_text(
            text[:at] + sign_note(note.text, NoteSigner(name, compromised["old"])).decode()
        )
    result = verify_proof(record, "--roots", out)
    assert result.returncode == 1, result.stdout
    check = checks(result)["history"]
    assert (
        check["result"] == "FAIL"
        and "no signature by a key that is not revoked" in (check["detail"])
    ), check


def test_compromised_drops_the_old_log_line_and_the_new_key_vouches_for_the_policies(
    tmp_path: Path,
) -> None:
    """The stored policies' statement (policytrust) is re-signed by the successor in the
    activation's transaction: the audit, which checks it, passes, and the policy no longer
    lists the revoked key."""
    from capability_anchor.keys import SigningKey
    from capability_anchor.log.policies import POLICIES_META
    from capability_anchor.note import Cosigner, parse_policy

    data = tmp_path / "data"
    with Log.init(data, iss=ISS) as log:
        log.append([observation(n, "early", iss=ISS) for n in range(2)])
        log.checkpoint()
        old_vkey = log.read.history.vkey()
    witness = Cosigner("w.example", SigningKey.generate()).verifier.vkey()
    policy = tmp_path / "policy.txt"
    policy.write_text(f"log {old_vkey}\nwitness w1 {witness}\nquorum w1\n")
    ok("policy", "--data", data, policy)
    ok("rotate-key", "--compromised", "--data", data)
    with Log.open(data) as log:
        stored = log.store.policy()
        new_vkey = log.read.history.vkey()
        statement = log.store.meta()[POLICIES_META]
    assert stored is not None
    assert {e.verifier.vkey() for e in parse_policy(stored).logs} == {new_vkey}
    assert json.loads(b64url_decode(statement.split(".")[0]))["kid"] == kid_file(data)
    assert ok("audit", "--data", data)["ok"] is True


# --- a revocation under load: never crossed by the log's own signatures ----------------------

LOAD_WRITERS = 2  # of each kind: plain batches, `?prove=1` batches, `/record` readers
ROTATIONS = 5
BATCH = 200  # records per batch: commits long enough that the rotation queues behind them


class _Load:
    """Writers and readers against a live server until `stop`: every `/record` token it got,
    and every answer that was not 200."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.headers = url, {"Authorization": f"Bearer {token}"}
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.tokens: list[str] = []
        self.failures: list[str] = []
        self.threads = [
            threading.Thread(target=self._write, args=(f"{kind}{w}", kind == "p"))
            for kind in ("b", "p")
            for w in range(LOAD_WRITERS)
        ] + [threading.Thread(target=self._read, args=(w,)) for w in range(LOAD_WRITERS)]

    def __enter__(self) -> _Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()

    def _failed(self, what: str, answer: httpx.Response) -> None:
        with self.lock:
            self.failures.append(f"{what}: {answer.status_code} {answer.text[:300]}")

    def _write(self, tag: str, prove: bool) -> None:
        path = "/records?prove=1" if prove else "/records"
        with httpx.Client(base_url=self.url, timeout=60.0) as client:
            for b in itertools.count():
                if self.stop.is_set():
                    return
                records = [observation(n, f"{tag}-{b}", iss=self.url) for n in range(BATCH)]
                answer = client.post(path, json={"records": records}, headers=self.headers)
                if answer.status_code != 200:
                    self._failed(f"POST {path}", answer)

    def _read(self, w: int) -> None:
        with httpx.Client(base_url=self.url, timeout=60.0) as client:
            while not self.stop.is_set():
                answer = client.get("/record", params={"id": f"example:seed-{w}"})
                if answer.status_code != 200:
                    self._failed("GET /record", answer)
                    continue
                with self.lock:
                    self.tokens.append(str(answer.json()["jws"]))


def _late_signatures(data: Path, tokens: Sequence[str]) -> list[str]:
    """Every head and `/record` token that a revoked key signed after its revocation."""
    store = stores.open_readonly(data)
    try:
        heads_signed = store.all_heads()
        records = [token for _, _, _, token in store.key_records()]
        iss = store.meta()["iss"]
    finally:
        store.close()
    chain = trust.closure([load_key_file(data / "signing-key.jwk").public], records, iss=iss)
    assert not chain.problems and len(chain.revocations) == ROTATIONS
    late = [
        f"head {h.day} size {h.tree_size} sealed={h.sealed} by {h.kid} at {h.iat}: "
        + gone.describe()
        for h in heads_signed
        if (gone := trust.voided(chain.revocations, h.kid, h.iat)) is not None
    ]
    for token in tokens:
        kid = jws.unverified_header(token)["kid"]
        iat = json.loads(b64url_decode(token.split(".")[1]))["iat"]
        if (gone := trust.voided(chain.revocations, kid, iat)) is not None:
            late.append(f"/record token by {kid} at {iat}: {gone.describe()}")
    return late


@pytest.mark.parametrize("form", ["serve", "uvicorn", "postgresql"])
def test_compromised_rotation_is_never_crossed_by_a_signature(
    tmp_path: Path, form: str, request: pytest.FixtureRequest
) -> None:
    """`rotate-key --compromised`, five times, while plain and `?prove=1` writers and
    `/record` readers run (on `serve`, on uvicorn with two workers sharing the store, and
    on `serve` over PostgreSQL): no head, checkpoint, seal or token is signed by a revoked
    key after its `revoked_at`, every request is answered 200, and the audit passes."""
    data, port = tmp_path / "data", free_port()
    store: tuple[str, ...] = ()
    if form == "postgresql":
        pg = request.getfixturevalue("postgres")
        store = ("--store", pg.url(pg.fresh_database("revoke")))
    ok("init", "--data", data, "--iss", f"http://127.0.0.1:{port}", *store)
    if form != "uvicorn":
        argv = serve_argv(data, port, ["--checkpoint-interval", "1", "--rate-limit", "0"])
        env: dict[str, str] = {}
    else:
        argv = uvicorn_argv(port, 2)
        env = {
            "CAPABILITY_ANCHOR_DATA": str(data),
            "CAPABILITY_ANCHOR_CHECKPOINT_INTERVAL": "1",
            "CAPABILITY_ANCHOR_RATE_LIMIT": "0",
        }
    with serving(data, argv=argv, env=env, port=port) as live:
        with live.client() as client:
            seed = [observation(n, "seed", iss=live.url) for n in range(LOAD_WRITERS)]
            answer = client.post(
                "/records?prove=1", json={"records": seed}, headers=live.writer_headers()
            )
            assert answer.status_code == 200, answer.text
        with _Load(live.url, live.token()) as load:
            for _ in range(ROTATIONS):
                time.sleep(1.5)
                ok("rotate-key", "--data", data, "--compromised")
            time.sleep(1.5)
        assert not load.failures, load.failures[:5]
        assert load.tokens
        late = _late_signatures(data, load.tokens)
    assert not late, f"{len(late)} late signatures: {late[:5]}"
    assert ok("audit", "--data", data)["ok"] is True


def test_a_revocation_is_dated_no_earlier_than_the_newest_iat_its_key_signed(
    tmp_path: Path,
) -> None:
    """A clock that reads earlier at the revocation than at the old key's newest head (a
    step back, another process's clock): `revoked_at` is that head's `iat`, not the clock's
    reading, so the head stays the log's."""
    start = int(time.time()) - 120
    clock = Clock(start)
    data = tmp_path / "data"
    with Log.init(data, iss=ISS, clock=clock) as log:
        clock.t = start + 90
        log.append([observation(n, "early", iss=ISS) for n in range(2)])
        log.checkpoint()
    clock.t = start + 60
    done = rotation.activate(data, lambda d: Log.open(d, clock=clock), compromised=True)
    assert done.revoked_at == start + 90
    assert ok("audit", "--data", data)["ok"] is True


def test_audit_reports_a_signature_by_a_revoked_key_after_its_revocation(tmp_path: Path) -> None:
    """What the log signed before this fix: a head (and its checkpoint) by the old key dated
    after the revocation it stores. `audit` fails, naming each, where it passed before."""
    start = int(time.time()) - 120
    clock = Clock(start)
    data = tmp_path / "data"
    with Log.init(data, iss=ISS, clock=clock) as log:
        clock.t = start + 90
        log.append([observation(n, "late", iss=ISS) for n in range(2)])
        log.checkpoint()
        old = log.key
    rotation.publish(data, lambda d: Log.open(d, clock=clock))
    rotation.activate(data, lambda d: Log.open(d, clock=clock), force=True)
    with Log.open(data, clock=clock) as log:
        new = log.signing_key()
        token = trust.make_revocation(new, old.kid, iss=ISS, revoked_at=start + 60)
        with log.store.write():
            log.store.add_key_record(new.kid, old.kid, token, start + 60)
    done = cli("audit", "--data", data)
    assert done.returncode == 1, done.stdout
    problems = json.loads(done.stdout.splitlines()[-1])["problems"]
    late = [p for p in problems if f"after its key's revocation: key {old.kid} was revoked" in p]
    assert [p.split(":")[0] for p in late] == [
        f"head {time.strftime('%Y-%m-%d', time.gmtime(start + 90))} size 2 unsealed",
        "history checkpoint 1",
    ], problems
    assert f"signed at iat {start + 90}" in late[0]


def test_a_crash_between_the_activation_and_the_revocation_resumes_with_the_revocation(
    tmp_path: Path,
) -> None:
    """`--compromised` commits the activation, then the revocation: killed between them, the
    log refuses to open and the audit names the revocation owed; a rerun stores it (dated
    after the activation) and swaps the key file."""
    from tests.kit.logkit import raw

    data = tmp_path / "data"
    ok("init", "--data", data, "--iss", ISS)
    append(data, "one")
    ok("rotate-key", "--data", data)
    done = ok("rotate-key", "--data", data, "--activate", "--force")
    backup = data / f"signing-key.{done['old_kid']}.jwk"
    (data / "signing-key.jwk").rename(data / "signing-key.jwk.new")
    shutil.copy2(backup, data / "signing-key.jwk")
    with raw(data) as conn:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?)", (rotation.REVOKING, done["old_kid"])
        )
    refused = cli("checkpoint", "--data", data)
    assert refused.returncode == 1 and "rotate-key --activate" in refused.stderr
    audit = cli("audit", "--data", data)
    assert audit.returncode == 1 and f"meta.{rotation.REVOKING}" in audit.stdout, audit.stdout
    resumed = ok("rotate-key", "--data", data, "--compromised")
    assert (resumed["revoked"], resumed["kid"]) == (done["old_kid"], done["kid"])
    assert kid_file(data) == done["kid"]
    with serving(data, "--rate-limit", "0") as live, live.client() as client:
        assert served_kids(client) == {done["kid"]}
    assert ok("audit", "--data", data)["ok"] is True
    # Nothing is owed any more: a second rerun is a new compromise, of the new key.
    with raw(data) as conn:
        assert conn.execute("SELECT COUNT(*) FROM meta WHERE key = 'revoking'").fetchone()[0] == 0
