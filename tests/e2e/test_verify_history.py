"""verify-proof checks 8 `history` and 9 `witnesses` (SPEC §12.5), over tlog-proofs of real
heads of a real log, with the real console script.

One log per module: day 1 gets 5 entries and an unsealed checkpoint (a record is taken
against it), day 2 gets 3, both days are sealed, and the data dir is exported. The history
then holds three heads: day 1 unsealed 5 (leaf 0), day 1 sealed 5 (leaf 1), day 2 sealed 3
(leaf 2). Two test witnesses (`note.Cosigner`) of a stored 2-of-3 policy cosign the stored
checkpoint of size 3, and each head's tlog-proof is the log's own
(`log.read.history.tlog_proof`). The same proofs are rebuilt from their parts (the kernel's
inclusion path, `note.sign_checkpoint`, `Cosigner.cosign`), byte for byte, so every attack
is a file derived from a genuine one, named after the attack, and must exit 1 naming the
failing check.
"""

from __future__ import annotations

import http.server
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from capability_anchor import head as heads
from capability_anchor import jws
from capability_anchor.export.days import export
from capability_anchor.keys import SigningKey
from capability_anchor.log import Log
from capability_anchor.merkle import hash_leaf, inclusion_path, root_hash
from capability_anchor.note import (
    Checkpoint,
    Cosigner,
    Note,
    NoteSigner,
    TlogProof,
    origin_from_url,
    parse_note,
    parse_tlog_proof,
    sign_checkpoint,
)
from capability_anchor.store import CosignatureRow
from capability_anchor.verify.anchor import Anchor
from capability_anchor.verify.checks import CHECK_NAMES
from capability_anchor.verify.history_checks import check_history, check_witnesses, head_payload
from capability_anchor.verify.sources import ProofSource, StampSource
from tests.kit.logkit import Clock, at

VERIFY_PROOF = Path(sys.executable).parent / "verify-proof"
ISS = "https://resolver.example"
ORIGIN = origin_from_url(ISS)  # resolver.example/history
DAY1, DAY2, DAY3 = "2026-03-01", "2026-03-02", "2026-03-03"
FORBIDDEN = ("litestar", "sqlite_utils", "sqlite3", "httpx", "uvicorn", "msgspec", "rfc3161ng")


def server(sub: str, day: str) -> dict[str, Any]:
    return {
        "v": "0.2",
        "iss": ISS,
        "sub": f"example:{sub}",
        "url": f"https://{sub}.example",
        "status": "ok",
        "checked_at": f"{day}T01:00:00Z",
        "evidence": {"probe": sub},
    }


@dataclass
class World:
    root: Path
    folder: Path  # the export, plus genuine tlog-proofs of every head (no policy needed)
    bare: Path  # the export without tlog-proofs
    key: SigningKey  # the log's
    record: dict[str, Any]  # anchored to day 1's sealed head (history leaf 1)
    record_at: int
    unsealed: dict[str, Any]  # anchored to day 1's unsealed head of size 5 (leaf 0)
    heads: list[heads.Head]  # the history's leaves, in order
    witnesses: list[Cosigner]  # w1, w2, w3 of the policy
    policy: Path  # 2 of w1, w2, w3; the log's vkey
    entries: list[bytes]  # day 1's leaf hashes
    checkpoint_at: int  # when the test witnesses cosigned
    proofs: dict[int, bytes]  # history index -> the log's own tlog-proof (`tlog_proof`)

    def write(self, name: str, data: bytes | str) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path

    def signer(self) -> NoteSigner:
        return NoteSigner(ORIGIN, self.key)

    def genuine_note(self, cosigners: tuple[Cosigner, ...] | None = None) -> bytes:
        """The checkpoint of the whole history (size 3), cosigned by w1 and w2 (2 of 3)."""
        chosen = tuple(self.witnesses[:2]) if cosigners is None else cosigners
        return checkpoint_note(
            size=3,
            root=history_root(self.heads, 3),
            signer=self.signer(),
            cosigners=chosen,
            when=self.checkpoint_at,
        )


def history_root(leaves: list[heads.Head], size: int) -> bytes:
    return root_hash([hash_leaf(head_payload(h)) for h in leaves[:size]])


def checkpoint_note(
    *,
    size: int,
    root: bytes,
    signer: NoteSigner,
    cosigners: tuple[Cosigner, ...] = (),
    when: int = 0,
    origin: str = ORIGIN,
) -> bytes:
    """A checkpoint signed by `signer`, with a cosignature by each of `cosigners` at `when`."""
    note = parse_note(sign_checkpoint(Checkpoint(origin, size, root), signer))
    cosigs = tuple(c.cosign(note.text, when) for c in cosigners)
    return Note(note.text, note.signatures + cosigs).to_bytes()


def tlog_proof(
    leaves: list[heads.Head], index: int, note: bytes, *, extra: bytes | None = None
) -> bytes:
    """The tlog-proof of history leaf `index` in the checkpoint `note` (whose size it uses),
    built from the history's leaves with the kernel (the log's history read side gives the
    same path: test_history_read_side_agrees)."""
    size = int(note.decode().split("\n")[1])
    hashes = [hash_leaf(head_payload(h)) for h in leaves[:size]]
    path = tuple(inclusion_path(hashes, index, size))
    token = leaves[index].jws.encode("ascii") if extra is None else extra
    return TlogProof(index=index, path=path, note=note, extra=token).to_bytes()


def _history_heads(log: Log) -> list[heads.Head]:
    """The published heads in SPEC §12.1's order, read back from the log's history leaves."""
    found = []
    for leaf in log.store.iter_history():
        row = log.read.head_for(leaf.day, leaf.tree_size)
        doc = heads.parse_document(row.doc)
        if doc.sealed != leaf.sealed:  # head_for prefers the unsealed head of a size
            sealed = [r for r in log.store.sealed_heads() if r.day == leaf.day]
            doc = heads.parse_document(sealed[0].doc)
        assert hash_leaf(head_payload(doc)) == leaf.leaf_hash
        found.append(doc)
    return found


def _policy_text(log_vkey: str, witnesses: list[Cosigner]) -> str:
    return (
        f"log {log_vkey}\n"
        + "".join(f"witness w{n} {c.verifier.vkey()}\n" for n, c in enumerate(witnesses, 1))
        + "group two-of-three 2 w1 w2 w3\nquorum two-of-three\n"
    )


def _cosign(log: Log, witnesses: list[Cosigner], size: int, when: int) -> None:
    """w1 and w2 (2 of 3) cosign the stored checkpoint of `size`; the rows are stored as
    the witness client stores what it received (SPEC §12.3)."""
    text = parse_note(log.read.history.checkpoint(size)).text
    with log.store.write():
        for n, cosigner in enumerate(witnesses[:2], 1):
            line = cosigner.cosign(text, when)
            row = CosignatureRow(f"w{n}", line.key_id, size, when, line.line().rstrip("\n"))
            assert log.store.insert_cosignature(row, when)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("history")
    clock = Clock(at(DAY1, 3600))
    witnesses = [Cosigner(f"w{n}.example", SigningKey.generate()) for n in (1, 2, 3)]
    with Log.init(root / "data", iss=ISS, clock=clock) as log:
        log.append([server(f"s{n}", DAY1) for n in range(5)])
        clock.t += 30
        assert log.checkpoint() is not None
        unsealed = log.record(sub="example:s2")
        clock.t = at(DAY2, 3600)
        log.append([server(f"t{n}", DAY2) for n in range(3)])
        clock.t = at(DAY3, 60)
        log.seal()
        record = log.record(sub="example:s3")
        record_at = int(clock.t)
        export(log, root / "bare")
        # "bare" is a folder without tlog-proofs, whether or not export writes them.
        for made in (root / "bare").glob("**/*.tlog-proof"):
            made.unlink()
        key = log.key
        leaves = _history_heads(log)
        entries = [bytes.fromhex(e["leaf_hash"]) for e in log.entries(DAY1)]
        assert log.store.history_size() == log.store.checkpoint_size() == 3
        assert log.read.history.origin() == ORIGIN
        for size in (1, 2, 3):
            assert log.read.history.root(size) == history_root(leaves, size)
        policy = _policy_text(log.read.history.vkey(), witnesses)
        with log.store.write():
            log.store.set_policy(policy.encode(), record_at)
        _cosign(log, witnesses, 3, record_at - 10)
        proofs = {
            i: log.read.history.tlog_proof(hash_leaf(head_payload(h))) for i, h in enumerate(leaves)
        }
        served = log.read.history.served_checkpoint()
    assert [(h.day, h.tree_size, h.sealed) for h in leaves] == [
        (DAY1, 5, False),
        (DAY1, 5, True),
        (DAY2, 3, True),
    ]
    w = World(
        root=root,
        folder=root / "folder",
        bare=root / "bare",
        key=key,
        record=record,
        record_at=record_at,
        unsealed=unsealed,
        heads=leaves,
        witnesses=witnesses,
        policy=root / "policy.txt",
        entries=entries,
        checkpoint_at=record_at - 10,
        proofs=proofs,
    )
    w.policy.write_text(policy)
    # The log's served checkpoint is the one the tests rebuild from the C2SP texts' parts.
    assert served == w.genuine_note()
    shutil.copytree(w.bare, w.folder)
    (w.folder / f"{DAY1}.tlog-proof").write_bytes(proofs[1])
    (w.folder / DAY1 / "5.tlog-proof").write_bytes(proofs[0])
    (w.folder / f"{DAY2}.tlog-proof").write_bytes(proofs[2])
    return w


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VERIFY_PROOF), *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def outcome(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    got = {}
    for line in result.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASS", "FAIL", "SKIP"):
            got[rest.split(":", 1)[0]] = word
    assert tuple(got) == CHECK_NAMES, result.stdout + result.stderr
    return got


def detail(result: subprocess.CompletedProcess[str], name: str) -> str:
    for line in result.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASS", "FAIL", "SKIP") and rest.startswith(f"{name}:"):
            return line
    raise AssertionError(f"no {name} line in {result.stdout}")


def record_file(w: World, name: str, record: dict[str, Any] | None = None) -> Path:
    return w.write(f"{name}.json", json.dumps(w.record if record is None else record))


def genuine_args(w: World, *extra: str | Path) -> list[str | Path]:
    return [record_file(w, "genuine"), "--roots", w.folder, "--at", str(w.record_at), *extra]


def head_args(w: World, proof: bytes, name: str, *extra: str | Path) -> list[str | Path]:
    """The genuine record and its sealed head with the tlog-proof `proof` (`--history-proof`)."""
    return [
        record_file(w, "genuine"),
        "--head",
        w.folder / f"{DAY1}.json",
        "--keys",
        w.folder / "keys.json",
        "--history-proof",
        w.write(f"{name}.tlog-proof", proof),
        "--at",
        str(w.record_at),
        *extra,
    ]


def assert_fails(result: subprocess.CompletedProcess[str], check: str, *words: str) -> None:
    assert result.returncode == 1, result.stdout + result.stderr
    got = outcome(result)
    assert got[check] == "FAIL", result.stdout
    failed = [name for name, res in got.items() if res == "FAIL"]
    assert failed in ([check], [check, "witnesses"]), result.stdout
    for word in words:
        assert word in detail(result, check), detail(result, check)


# --- genuine --------------------------------------------------------------------------------


def test_the_logs_tlog_proofs_are_the_ones_rebuilt_from_the_c2sp_parts(world: World) -> None:
    """The log's `history.tlog_proof` (stored checkpoint, stored cosignatures in policy
    order, history tiles) is byte for byte what the kernel and note/ build from the heads:
    so the attack files below, built the second way, differ from genuine ones only where
    each attack says."""
    for index in range(3):
        assert world.proofs[index] == tlog_proof(world.heads, index, world.genuine_note())


def test_roots_offline_passes_history_and_skips_witnesses(world: World) -> None:
    result = run(*genuine_args(world))
    assert result.returncode == 0, result.stdout + result.stderr
    got = outcome(result)
    assert got["history"] == "PASS" and got["witnesses"] == "SKIP"
    line = detail(result, "history")
    assert f"{DAY1}.tlog-proof" in line and "history leaf 1 of size 3" in line
    assert f"{ORIGIN}+{world.signer().verifier.key_id.hex()}" in line
    assert "no --policy given" in detail(result, "witnesses")


def test_an_unsealed_anchor_reads_its_own_tlog_proof(world: World) -> None:
    path = record_file(world, "unsealed", world.unsealed)
    result = run(path, "--roots", world.folder, "--at", str(world.record_at - 86400))
    assert result.returncode == 0, result.stdout + result.stderr
    assert outcome(result)["history"] == "PASS"
    assert f"{DAY1}/5.tlog-proof" in detail(result, "history")
    assert "history leaf 0 of size 3" in detail(result, "history")


def test_history_proof_file_with_head_and_keys(world: World) -> None:
    result = run(*head_args(world, world.proofs[1], "genuine"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert outcome(result)["history"] == "PASS"


def test_policy_with_two_of_three_passes_naming_the_witnesses(world: World) -> None:
    result = run(*genuine_args(world, "--policy", world.policy))
    assert result.returncode == 0, result.stdout + result.stderr
    got = outcome(result)
    assert got["history"] == got["witnesses"] == "PASS"
    line = detail(result, "witnesses")
    assert f"checkpoint {ORIGIN} 3: quorum two-of-three met" in line
    assert "w1 (time" in line and "w2 (time" in line
    assert "w3" not in line


def test_policy_names_the_origin_and_trusts_its_log_key(world: World) -> None:
    """With --policy the expected origin is its log key's name; --origin overrides it."""
    result = run(*genuine_args(world, "--policy", world.policy, "--origin", ORIGIN))
    assert result.returncode == 0, result.stdout + result.stderr
    wrong = run(*genuine_args(world, "--origin", "other.example/history"))
    assert_fails(wrong, "history", "'resolver.example/history'", "--origin")


def test_no_proof_and_no_policy_skips(world: World) -> None:
    result = run(record_file(world, "bare"), "--roots", world.bare, "--at", str(world.record_at))
    assert result.returncode == 0, result.stdout + result.stderr
    got = outcome(result)
    assert got["history"] == got["witnesses"] == "SKIP"
    assert "no tlog-proof of the head" in detail(result, "history")


def test_policy_without_a_proof_fails(world: World) -> None:
    result = run(
        record_file(world, "bare2"),
        "--roots",
        world.bare,
        "--policy",
        world.policy,
        "--at",
        str(world.record_at),
    )
    assert result.returncode == 1, result.stdout + result.stderr
    got = outcome(result)
    assert got["history"] == "FAIL" and got["witnesses"] == "FAIL"
    assert "--policy is given but there is no tlog-proof" in detail(result, "history")


def test_a_head_given_with_head_is_not_followed_to_the_network(world: World) -> None:
    """--head FILE without --history-proof: nothing is fetched, history SKIPs."""
    result = run(
        record_file(world, "headonly"),
        "--head",
        world.folder / f"{DAY1}.json",
        "--keys",
        world.folder / "keys.json",
        "--at",
        str(world.record_at),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert outcome(result)["history"] == "SKIP"
    assert "give --history-proof" in detail(result, "history")


def test_explain_narrates_the_history_inclusion(world: World) -> None:
    result = run(*genuine_args(world, "--explain"))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith("explain: history: ")]
    leaf = hash_leaf(head_payload(world.heads[1]))
    assert lines[0] == f"explain: history: leaf hash = {leaf.hex()} (leaf_index 1, tree_size 3)"
    proof = parse_tlog_proof((world.folder / f"{DAY1}.tlog-proof").read_bytes())
    assert sum("parent = " in ln for ln in lines) == len(proof.path) == 2
    root = history_root(world.heads, 3).hex()
    assert f"explain: history: calculated root = {root}" in lines
    assert lines[-1] == f"explain: history: expected root   = {root} (the checkpoint's, {ORIGIN} 3)"
    # the day inclusion is still narrated first
    day = [ln for ln in result.stdout.splitlines() if ln.startswith("explain: ")]
    assert day[0].startswith("explain: leaf hash = ")


def test_explain_says_when_the_history_check_did_not_run(world: World) -> None:
    result = run(record_file(world, "bare3"), "--roots", world.bare, "--explain")
    assert "explain: history: no hash steps (the check did not run)" in result.stdout


def test_json_lists_nine_checks(world: World) -> None:
    result = run(*genuine_args(world, "--policy", world.policy, "--json", "--explain"))
    doc = json.loads(result.stdout)
    assert doc["ok"] is True
    assert [c["name"] for c in doc["checks"]] == list(CHECK_NAMES)
    assert "explain: history: leaf hash" in result.stderr


# --- attacks: each exits 1 naming the check --------------------------------------------------


def test_attack_history_proof_for_another_head(world: World) -> None:
    """Day 2's genuine tlog-proof offered for day 1's head."""
    proof = tlog_proof(world.heads, 2, world.genuine_note())
    result = run(*head_args(world, proof, "history_proof_for_another_head"))
    assert_fails(result, "history", "another head (day 2026-03-02", "not for this head")


def test_attack_another_heads_path_under_this_heads_extra(world: World) -> None:
    """This head's JWS as extra, but leaf 2's index and path: the path reaches no root."""
    other = parse_tlog_proof(tlog_proof(world.heads, 2, world.genuine_note()))
    proof = replace(other, extra=world.heads[1].jws.encode()).to_bytes()
    result = run(*head_args(world, proof, "path_of_another_head"))
    assert_fails(result, "history", "RootMismatch")


@pytest.mark.parametrize("element", [0, 1])
def test_attack_path_bit_flipped(world: World, element: int) -> None:
    genuine = parse_tlog_proof(world.proofs[1])
    path = list(genuine.path)
    path[element] = bytes([path[element][0] ^ 0x01]) + path[element][1:]
    proof = replace(genuine, path=tuple(path)).to_bytes()
    result = run(*head_args(world, proof, f"path_bit_flipped_{element}"))
    assert_fails(result, "history", "the history inclusion", "RootMismatch")


def test_attack_checkpoint_signed_by_an_untrusted_key(world: World) -> None:
    evil = NoteSigner(ORIGIN, SigningKey.generate())
    note = checkpoint_note(
        size=3, root=history_root(world.heads, 3), signer=evil, when=world.checkpoint_at
    )
    result = run(*head_args(world, tlog_proof(world.heads, 1, note), "checkpoint_untrusted_key"))
    assert_fails(result, "history", "no signature by a known key")


def test_attack_checkpoint_of_a_forked_history_signed_by_an_untrusted_key(world: World) -> None:
    """A split view: a history with a head the log never published, under another key."""
    evil = NoteSigner(ORIGIN, SigningKey.generate())
    root = root_hash([bytes(32), hash_leaf(head_payload(world.heads[1])), bytes(32)])
    note = checkpoint_note(size=3, root=root, signer=evil)
    result = run(*head_args(world, tlog_proof(world.heads, 1, note), "forked_history"))
    assert_fails(result, "history", "checkpoint")


def test_attack_origin_changed(world: World) -> None:
    """The log's own key signs a checkpoint under another origin (another log's name)."""
    other = "evil.example/history"
    note = checkpoint_note(
        size=3,
        root=history_root(world.heads, 3),
        signer=NoteSigner(other, world.key),
        origin=other,
    )
    result = run(*head_args(world, tlog_proof(world.heads, 1, note), "origin_changed"))
    assert_fails(result, "history", "'evil.example/history'", "not 'resolver.example/history'")
    with_policy = run(
        *head_args(
            world, tlog_proof(world.heads, 1, note), "origin_changed2", "--policy", world.policy
        )
    )
    assert_fails(with_policy, "history", "the policy's log line")


def test_attack_cosignature_by_a_witness_outside_the_policy(world: World) -> None:
    """w1 and an outsider cosign: the outsider does not count, so 2 of 3 is not met."""
    outsider = Cosigner("w2.example", SigningKey.generate())  # even w2's name
    note = world.genuine_note((world.witnesses[0], outsider))
    result = run(
        *head_args(
            world,
            tlog_proof(world.heads, 1, note),
            "cosigned_by_outsider",
            "--policy",
            world.policy,
        )
    )
    assert result.returncode == 1, result.stdout
    got = outcome(result)
    assert got["history"] == "PASS" and got["witnesses"] == "FAIL"
    line = detail(result, "witnesses")
    assert "quorum two-of-three not met" in line and "has 1" in line and "missing w2, w3" in line


def test_attack_quorum_not_met(world: World) -> None:
    note = world.genuine_note((world.witnesses[2],))
    result = run(
        *head_args(
            world, tlog_proof(world.heads, 1, note), "quorum_not_met", "--policy", world.policy
        )
    )
    assert result.returncode == 1
    assert outcome(result)["witnesses"] == "FAIL"
    assert "missing w1, w2" in detail(result, "witnesses")
    assert "cosigned by w3" in detail(result, "witnesses")


def test_attack_cosignature_timestamp_in_the_future(world: World) -> None:
    """w2 cosigned 61 s after --at: its line fails, and is named, though w1+w3 would do."""
    note = parse_note(world.genuine_note((world.witnesses[0], world.witnesses[2])))
    late = world.witnesses[1].cosign(note.text, world.record_at + 61)
    note_bytes = Note(note.text, (*note.signatures, late)).to_bytes()
    args = head_args(
        world,
        tlog_proof(world.heads, 1, note_bytes),
        "cosignature_in_the_future",
        "--policy",
        world.policy,
    )
    result = run(*args)
    assert result.returncode == 1
    assert outcome(result)["witnesses"] == "FAIL"
    assert "w2: cosignature time" in detail(result, "witnesses")
    assert "more than 60 s after" in detail(result, "witnesses")
    # 60 s after --at is still fine
    ok_note = parse_note(world.genuine_note((world.witnesses[0],)))
    ok = world.witnesses[1].cosign(ok_note.text, world.record_at + 60)
    ok_bytes = Note(ok_note.text, (*ok_note.signatures, ok)).to_bytes()
    fine = run(
        *head_args(
            world,
            tlog_proof(world.heads, 1, ok_bytes),
            "cosignature_at_60s",
            "--policy",
            world.policy,
        )
    )
    assert fine.returncode == 0, fine.stdout


def test_attack_extra_payload_differs_from_the_anchor_head(world: World) -> None:
    """extra: a head JWS the log's key signed, over claims that differ in `iat` only."""
    claims = dict(world.heads[1].claims)
    claims["iat"] += 1
    forged = jws.sign_claims(claims, world.key, jws.HEAD_TYP).encode()
    proof = tlog_proof(world.heads, 1, world.genuine_note(), extra=forged)
    result = run(*head_args(world, proof, "extra_payload_differs"))
    assert_fails(result, "history", "another head", "not for this head")


def test_attack_extra_not_signed_by_a_trusted_key(world: World) -> None:
    forged = jws.sign_claims(world.heads[1].claims, SigningKey.generate(), jws.HEAD_TYP).encode()
    proof = tlog_proof(world.heads, 1, world.genuine_note(), extra=forged)
    result = run(*head_args(world, proof, "extra_untrusted"))
    assert_fails(result, "history", "not a head JWS by a trusted key", "UnknownKeyError")


def test_attack_no_extra_and_not_a_tlog_proof(world: World) -> None:
    genuine = parse_tlog_proof(world.proofs[1])
    result = run(*head_args(world, replace(genuine, extra=None).to_bytes(), "no_extra"))
    assert_fails(result, "history", "no extra")
    garbage = run(*head_args(world, b"c2sp.org/tlog-proof@v1\nindex x\n\n", "garbage"))
    assert_fails(garbage, "history", "is not a tlog-proof")


def _unpublished_head(w: World) -> tuple[Path, Path, heads.Head]:
    """A head of day 1 at size 4 that the log's key signed but the log never published (so
    it is no leaf of the history), and a record anchored to it, signed by the same key."""
    claims = heads.make_claims(
        iss=ISS,
        day=DAY1,
        tree_size=4,
        root=root_hash(w.entries[:4]),
        sealed=False,
        prev=None,
        iat=int(at(DAY1, 3700)),
    )
    forged = heads.sign(claims, w.key)
    signed = jws.verify_claims(w.unsealed["jws"], heads_keys(w), jws.RECORD_TYP)
    leaf = {k: v for k, v in signed.items() if k not in ("iat", "exp", "anchor", "proof")}
    record = jws.sign_record(
        leaf,
        anchor={"day": DAY1, "root": claims["root"], "url": f"{ISS}/roots/{DAY1}/4"},
        proof=heads.proof_json(2, 4, inclusion_path(w.entries[:4], 2, 4)),
        key=w.key,
        iat=int(at(DAY1, 3700)),
        lifetime=3600,
    )
    return (
        record_file(w, "unpublished_head", record),
        w.write("unpublished.json", forged.document()),
        forged,
    )


def heads_keys(w: World) -> Any:
    from capability_anchor.keys import KeySet

    return KeySet.from_json((w.folder / "keys.json").read_bytes())


def test_attack_unsealed_head_missing_from_the_history(world: World) -> None:
    record, head, forged = _unpublished_head(world)
    base: list[str | Path] = [
        record,
        "--head",
        head,
        "--keys",
        world.folder / "keys.json",
        "--at",
        str(int(at(DAY1, 3800))),
    ]
    # Checks 1-7 cannot tell: the log's key signed both the record and the head.
    plain = run(*base)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    # Its own extra over a genuine checkpoint: no path from its leaf reaches the root.
    for index in (0, 1):
        proof = tlog_proof(world.heads, index, world.genuine_note(), extra=forged.jws.encode())
        path = world.write(f"unpublished_{index}.tlog-proof", proof)
        result = run(*base, "--history-proof", path)
        assert_fails(result, "history", "the history inclusion")
    # Asked for the history (a policy), with no proof to show: FAIL.
    result = run(*base, "--policy", world.policy)
    assert_fails(result, "history", "--policy is given but there is no tlog-proof")


# --- over HTTP: <base>/history/proof -------------------------------------------------------


@dataclass
class Site:
    base: str
    requests: list[str]
    status: dict[str, int]


@pytest.fixture(scope="module")
def site(world: World) -> Iterator[Site]:
    """A loopback HTTP server (a real socket) that serves the sealed head at /roots/<day>
    and, at /history/proof?leaf_hash=<hex>, the tlog-proof of the head with that history
    leaf hash (404 for any other); `status` forces an answer code."""
    proofs = {
        hash_leaf(head_payload(h)).hex(): tlog_proof(world.heads, i, world.genuine_note())
        for i, h in enumerate(world.heads)
    }
    head_doc = (world.folder / f"{DAY1}.json").read_bytes()
    seen: list[str] = []
    status: dict[str, int] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            parts = urlsplit(self.path)
            body = None
            if parts.path == f"/roots/{DAY1}":
                body = head_doc
            elif parts.path == "/history/proof":
                body = proofs.get(parse_qs(parts.query).get("leaf_hash", [""])[0])
            code = status.get(parts.path, 200 if body is not None else 404)
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            if code == 200 and body is not None:
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            del args

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield Site(f"http://127.0.0.1:{httpd.server_address[1]}", seen, status)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def _record_at(w: World, base: str) -> Path:
    """The genuine record, signed again by the log's key with its anchor at `base`."""
    signed = jws.verify_claims(w.record["jws"], heads_keys(w), jws.RECORD_TYP)
    anchor = {**signed["anchor"], "url": f"{base}/roots/{DAY1}"}
    leaf = {k: v for k, v in signed.items() if k not in ("iat", "exp", "anchor", "proof")}
    record = jws.sign_record(
        leaf,
        anchor=anchor,
        proof=signed["proof"],
        key=w.key,
        iat=signed["iat"],
        lifetime=signed["exp"] - signed["iat"],
    )
    return record_file(w, "at_site", record)


def test_history_proof_from_the_anchors_base(world: World, site: Site) -> None:
    site.status.clear()
    path = _record_at(world, site.base)
    args: list[str | Path] = [
        path,
        "--keys",
        world.folder / "keys.json",
        "--at",
        str(world.record_at),
    ]
    result = run(*args, "--policy", world.policy)
    assert result.returncode == 0, result.stdout + result.stderr
    got = outcome(result)
    assert got["history"] == got["witnesses"] == "PASS"
    leaf = hash_leaf(head_payload(world.heads[1])).hex()
    assert f"/history/proof?leaf_hash={leaf}" in site.requests
    assert f"{site.base}/history/proof?leaf_hash={leaf}" in detail(result, "history")
    # Without a policy the origin comes from the anchor's base, which is not the log's.
    result = run(*args)
    assert_fails(result, "history", "127.0.0.1", "the anchor's base")
    result = run(*args, "--origin", ORIGIN)
    assert result.returncode == 0, result.stdout


def test_history_proof_404_skips_and_500_exits_2(world: World, site: Site) -> None:
    path = _record_at(world, site.base)
    args: list[str | Path] = [
        path,
        "--keys",
        world.folder / "keys.json",
        "--at",
        str(world.record_at),
    ]
    site.status["/history/proof"] = 404
    try:
        result = run(*args)
        assert result.returncode == 0, result.stdout + result.stderr
        assert outcome(result)["history"] == "SKIP"
        assert "answered 404" in detail(result, "history")
        assert_fails(run(*args, "--policy", world.policy), "history", "answered 404")
        site.status["/history/proof"] = 500
        result = run(*args)
        assert result.returncode == 2 and "HTTP 500" in result.stderr
    finally:
        site.status.clear()


# --- usage, imports, speed ------------------------------------------------------------------


def test_a_malformed_policy_or_origin_is_a_usage_error(world: World) -> None:
    bad = world.write("bad_policy.txt", "witness w1 not-a-vkey\nquorum w1\n")
    result = run(*genuine_args(world, "--policy", bad))
    assert result.returncode == 2 and "policy line 1" in result.stderr
    result = run(*genuine_args(world, "--origin", "has space"))
    assert result.returncode == 2 and "--origin" in result.stderr
    result = run(*genuine_args(world, "--history-proof", world.root / "missing.tlog-proof"))
    assert result.returncode == 2 and "cannot read" in result.stderr


def test_offline_checks_8_and_9_load_no_http_or_storage_code(world: World) -> None:
    args = [str(a) for a in genuine_args(world, "--policy", world.policy)]
    code = (
        "import sys, json\n"
        "from capability_anchor.cli.verify_proof import main\n"
        f"rc = main({args!r})\n"
        f"print(json.dumps([rc, [m for m in {FORBIDDEN!r} if m in sys.modules]]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert "PASS history:" in result.stdout and "PASS witnesses:" in result.stdout
    assert json.loads(lines[-1]) == [0, []]


def test_a_run_without_proof_or_policy_does_not_load_note(world: World) -> None:
    args = [str(record_file(world, "light")), "--roots", str(world.bare)]
    code = (
        "import sys\n"
        "from capability_anchor.cli.verify_proof import main\n"
        f"rc = main({args!r})\n"
        "print('NOTE', 'capability_anchor.note' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.stdout.strip().splitlines()[-1] == "NOTE False", result.stdout


def test_the_library_runs_checks_8_and_9_over_loaded_inputs(world: World) -> None:
    """`verify.verify` with a parsed policy and a folder `Sources`, as the audit calls it."""
    from capability_anchor.keys import KeySet
    from capability_anchor.note import parse_policy
    from capability_anchor.verify.record import Outcome, verify
    from capability_anchor.verify.sources import FolderSources

    keys = KeySet.from_json((world.folder / "keys.json").read_bytes())
    policy = parse_policy(world.policy.read_bytes())
    result = verify(
        json.dumps(world.record).encode(),
        keys=keys,
        sources=FolderSources(world.folder),
        at=world.record_at,
        policy=policy,
    )
    got = {c.name: c.outcome for c in result.checks}
    assert got["history"] is got["witnesses"] is Outcome.PASS, result.checks
    assert result.explain_history[-1].endswith(f"(the checkpoint's, {ORIGIN} 3)")
    # the same record and folder, but a policy whose quorum is another witness set
    other = Cosigner("w9.example", SigningKey.generate())
    strict = parse_policy(f"witness w9 {other.verifier.vkey()}\nquorum w9\n".encode())
    result = verify(
        json.dumps(world.record).encode(),
        keys=keys,
        sources=FolderSources(world.folder),
        at=world.record_at,
        policy=strict,
    )
    witnesses = result.checks[CHECK_NAMES.index("witnesses")]
    assert witnesses.outcome is Outcome.FAIL and "no cosignature by w9" in witnesses.detail
    # without a log line in the policy, the origin comes from the anchor's base again
    assert result.checks[CHECK_NAMES.index("history")].outcome is Outcome.PASS


# --- against the real service ---------------------------------------------------------------


def test_against_the_real_service(tmp_path: Path) -> None:
    """The record, its head and its tlog-proof all from a real `capability-anchor serve`
    (iss and public URL http://127.0.0.1:<port>, so the origin follows from the anchor's
    base): history PASSes once the service answers /history/proof (SPEC §12.4), and SKIPs,
    saying the server answered 404, while it has no such route."""
    from tests.kit import serverkit

    with serverkit.serving(tmp_path / "data") as srv, srv.client() as client:
        observation = {**server("live", DAY1), "iss": srv.url, "checked_at": "2026-12-01T09:00:00Z"}
        posted = client.post(
            "/records?prove=1", json={"records": [observation]}, headers=srv.writer_headers()
        )
        assert posted.status_code == 200, posted.text
        record = client.get("/record", params={"id": "example:live"})
        assert record.status_code == 200, record.text
        path = tmp_path / "record.json"
        path.write_bytes(record.content)
        head = heads.parse_document(client.get(record.json()["anchor"]["url"]).content)
        leaf = hash_leaf(head_payload(head)).hex()
        served = client.get("/history/proof", params={"leaf_hash": leaf}).status_code
        assert served in (200, 404)
        result = run(path, "--keys", f"{srv.url}/keys", "--explain")
    assert result.returncode == 0, result.stdout + result.stderr
    got = outcome(result)
    if served == 200:
        assert got["history"] == "PASS", result.stdout
        assert f"{srv.url}/history/proof?leaf_hash={leaf}" in detail(result, "history")
        assert "explain: history: calculated root = " in result.stdout
    else:
        assert got["history"] == "SKIP" and "answered 404" in detail(result, "history")
    assert got["witnesses"] == "SKIP"


# --- every mutation of a genuine tlog-proof fails --------------------------------------------


@dataclass
class _OneProof:
    """A `Sources` that hands over one tlog-proof (checks 8-9 read nothing else)."""

    data: bytes
    names_head = True

    def head(self, anchor: Anchor | None) -> tuple[bytes, str]:
        raise AssertionError("not asked")

    def stamps(self, day: str, anchor: Anchor | None) -> StampSource:
        raise AssertionError("not asked")

    def history_proof(self, anchor: Anchor | None, leaf_hash: bytes) -> ProofSource:
        return ProofSource("memory", self.data)


def _checks_8_and_9(world: World, data: bytes) -> tuple[str, str]:
    from capability_anchor.keys import KeySet
    from capability_anchor.note import parse_policy
    from capability_anchor.verify.anchor import parse_anchor

    keys = KeySet.from_json((world.folder / "keys.json").read_bytes())
    policy = parse_policy(world.policy.read_bytes())
    anchor = parse_anchor(world.record["anchor"])
    history = check_history(
        world.heads[1],
        anchor,
        _OneProof(data),
        keys,
        policy=policy,
    )
    witnesses = check_witnesses(history.checkpoint, policy, world.record_at, history.check)
    return history.check.outcome.value, witnesses.outcome.value


def test_every_one_bit_change_of_a_genuine_tlog_proof_fails(world: World) -> None:
    """Flipping the low bit of any byte (header, extra, index, path, checkpoint text, the
    log's signature, either cosignature) turns a PASS of checks 8-9 into a FAIL of one."""
    genuine = world.proofs[1]
    assert _checks_8_and_9(world, genuine) == ("PASS", "PASS")
    passed = []
    for i in range(len(genuine)):
        mutated = genuine[:i] + bytes([genuine[i] ^ 0x01]) + genuine[i + 1 :]
        if _checks_8_and_9(world, mutated) == ("PASS", "PASS"):
            passed.append(i)
    assert passed == [], [genuine[max(0, i - 20) : i + 20] for i in passed[:3]]


def test_structural_mutations_of_a_genuine_tlog_proof_fail(world: World) -> None:
    """transparency-dev/merkle's mutation set, on the tlog-proof: index ±1, a path element
    removed, repeated or inserted, extra truncated, a line appended or dropped."""
    genuine = parse_tlog_proof(world.proofs[1])
    raw = world.proofs[1].decode()
    head, _, note = raw.partition("\n\n")
    lines = head.split("\n")  # header, extra, index, then the path
    assert lines[2] == "index 1" and len(lines[3:]) == len(genuine.path) == 2

    def proof(*body: str) -> bytes:
        return ("\n".join(body) + "\n\n" + note).encode()

    mutations = {
        "index+1": proof(*lines[:2], "index 2", *lines[3:]),
        "index-1": proof(*lines[:2], "index 0", *lines[3:]),
        "extra truncated": replace(genuine, extra=(genuine.extra or b"")[:-1]).to_bytes(),
        "extra dropped": proof(lines[0], *lines[2:]),
        "garbage prepended": b"x" + world.proofs[1],
        "garbage appended": world.proofs[1] + b"x\n",
        "path element removed": proof(*lines[:-1]),
        "path element repeated": proof(*lines, lines[-1]),
        "zero hash inserted": proof(*lines[:3], base64_of(bytes(32)), *lines[3:]),
        "path reversed": proof(*lines[:3], *reversed(lines[3:])),
        "checkpoint dropped": proof(*lines)[: -len(note)],
    }
    for name, data in mutations.items():
        assert _checks_8_and_9(world, data)[0] == "FAIL", name


def base64_of(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


def test_quorum_none_passes_witnesses_with_no_cosignature(world: World) -> None:
    from capability_anchor.keys import KeySet
    from capability_anchor.note import parse_policy
    from capability_anchor.verify.anchor import parse_anchor

    keys = KeySet.from_json((world.folder / "keys.json").read_bytes())
    # the log's signature line only: drop w1's and w2's cosignature lines
    bare = b"".join(
        line
        for line in world.proofs[1].splitlines(keepends=True)
        if b" w1." not in line and b" w2." not in line
    )
    assert bare.count("\u2014".encode()) == 1
    policy = parse_policy(f"log {world.signer().verifier.vkey()}\nquorum none\n".encode())
    anchor = parse_anchor(world.record["anchor"])
    source = _OneProof(bare)
    history = check_history(world.heads[1], anchor, source, keys, policy=policy)
    assert history.check.outcome.value == "PASS", history.check
    witnesses = check_witnesses(history.checkpoint, policy, world.record_at, history.check)
    assert witnesses.outcome.value == "PASS"
    assert "quorum none met" in witnesses.detail and "no policy witness" in witnesses.detail
