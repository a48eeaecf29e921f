"""The log's `capability-anchor cosign` against our own witness, every part a real process as
an operator runs them (docs/how-to/witness.md, "Running a witness"): `witness init` /
`add-log` (with the vkey the log's `serve` publishes at `/history/vkey`) / `serve`; `init`,
`append`, `checkpoint`, `policy`, `cosign` and `export` on the log; `serve` to read what it
publishes; `verify-proof --policy` on a record. The cosignatures are checked with `note`,
from the witness's vkey alone."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from capability_anchor.note import (
    cosignature_verifier,
    note_verifier,
    open_checkpoint,
    open_note,
    parse_note,
)
from tests.kit.logkit import CLI, run_cli
from tests.kit.obskit import observation
from tests.kit.serverkit import Server, free_port, serving, start

ISS = "https://resolver.example"
ORIGIN = "resolver.example/history"
WITNESS = "witness.test/ours"


def ok(*args: str | Path) -> str:
    done = run_cli(*args)
    assert done.returncode == 0, f"{args}: {done.returncode}\n{done.stdout}{done.stderr}"
    return done.stdout


def append(data: Path, tmp: Path, tag: str, count: int) -> None:
    """`count` records by `append`, then one unsealed head (a history leaf and checkpoint)."""
    lines = tmp / f"{tag}.jsonl"
    lines.write_text("".join(json.dumps(observation(n, tag, iss=ISS)) + "\n" for n in range(count)))
    ok("append", "--data", data, lines)
    ok("checkpoint", "--data", data)


def cosign(data: Path) -> dict:
    out = ok("cosign", "--data", data).splitlines()
    assert len(out) == 1, out  # one witness in the policy: one line
    line: dict = json.loads(out[0])
    return line


@dataclass
class Witness:
    server: Server
    vkey: str

    def monitoring(self) -> bytes:
        """C2SP tlog-witness: GET <prefix>/<hex SHA-256 of the origin>/checkpoint."""
        path = hashlib.sha256(ORIGIN.encode()).hexdigest()
        got = httpx.get(f"{self.server.url}/{path}/checkpoint", timeout=10)
        assert got.status_code == 200, got.text
        return got.content


@pytest.fixture
def log_vkey(tmp_path: Path) -> str:
    data = tmp_path / "log"
    ok("init", "--data", data, "--iss", ISS)
    append(data, tmp_path, "first", 2)
    with serving(data, "--rate-limit", "0") as server, server.client() as client:
        vkey = client.get("/history/vkey").text.strip()
    assert vkey.startswith(ORIGIN + "+"), vkey
    return vkey


@pytest.fixture
def witness(tmp_path: Path, log_vkey: str) -> Iterator[Witness]:
    data = tmp_path / "witness"
    made = json.loads(ok("witness", "init", "--name", WITNESS, "--data", data))
    ok("witness", "add-log", "--data", data, "--origin", ORIGIN, "--vkey", log_vkey)
    port = free_port()
    argv = [str(CLI), "witness", "serve", "--data", str(data), "--port", str(port)]
    server = start(data, port=port, argv=[*argv, "--rate-limit", "0"], logs=tmp_path)
    try:
        yield Witness(server, made["vkey"])
    finally:
        server.stop()


def served_checkpoint(data: Path) -> bytes:
    with serving(data, "--rate-limit", "0") as server, server.client() as client:
        got = client.get("/history/checkpoint")
        assert got.status_code == 200, got.text
        return got.content


def test_cosign_gets_our_witnesses_cosignature_then_one_through_a_consistency_proof(
    tmp_path: Path, log_vkey: str, witness: Witness
) -> None:
    data = tmp_path / "log"
    policy = tmp_path / "policy.txt"
    policy.write_text(f"witness ours {witness.vkey} {witness.server.url}\nquorum ours\n")
    ok("policy", "--data", data, policy)
    verifiers = [note_verifier(log_vkey), cosignature_verifier(witness.vkey)]

    first = cosign(data)
    assert first == {**first, "witness": "ours", "old": 0, "size": 1, "result": "cosigned"}
    served = served_checkpoint(data)
    opened = open_note(served, verifiers)
    assert sorted(s.name for s in opened.verified) == [ORIGIN, WITNESS]
    assert open_checkpoint(served, verifiers, origin=ORIGIN).checkpoint.size == 1
    # The witness shows the checkpoint it cosigned: the log's note and its own line.
    shown = witness.monitoring()
    assert parse_note(shown).text == parse_note(served).text
    assert sorted(s.name for s in open_note(shown, verifiers).verified) == [ORIGIN, WITNESS]

    append(data, tmp_path, "second", 3)
    append(data, tmp_path, "rec", 1)
    again = cosign(data)  # from the size it last cosigned: with the proof 1 -> 3
    assert again == {**again, "old": 1, "size": 3, "result": "cosigned"}, again
    served = served_checkpoint(data)
    assert open_checkpoint(served, verifiers, origin=ORIGIN).checkpoint.size == 3
    assert WITNESS in [s.name for s in open_note(served, verifiers).verified]
    assert parse_note(witness.monitoring()).text == parse_note(served).text
    nothing = cosign(data)  # nothing new: nothing is sent
    assert nothing == {**nothing, "old": 3, "size": 3, "result": "current"}, nothing

    # An auditor's check 9 on a record of the newest head: the export's tlog-proof carries
    # the cosignature, and the policy (with the log's own line) requires it.
    with serving(data, "--rate-limit", "0") as server, server.client() as client:
        got = client.get("/record", params={"id": "example:rec-0"})
        assert got.status_code == 200, got.text
        record = got.json()
    (tmp_path / "record.json").write_text(json.dumps(record))
    ok("export", "--data", data, tmp_path / "public")
    audit = tmp_path / "audit-policy.txt"
    audit.write_text(f"log {log_vkey}\n" + policy.read_text())
    done = run_verify_proof(tmp_path / "record.json", tmp_path / "public", audit)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS witnesses" in done.stdout and "cosigned by ours" in done.stdout, done.stdout


def run_verify_proof(record: Path, roots: Path, policy: Path) -> subprocess.CompletedProcess[str]:
    argv = [str(CLI.parent / "verify-proof"), str(record), "--roots", str(roots)]
    return subprocess.run(
        [*argv, "--policy", str(policy)], capture_output=True, text=True, check=False
    )
