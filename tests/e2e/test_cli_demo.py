"""The console scripts as a user runs them: real processes, real files, an independent JOSE
library checking what the demo signed."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from joserfc import jws as jose_jws
from joserfc.jwk import OKPKey

from capability_anchor import leaf, merkle
from capability_anchor.keys import KeySet, SigningKey
from capability_anchor.verify.checks import CHECKS

BIN = Path(sys.executable).parent


def run(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CAPABILITY_ANCHOR_DATA"} | (env or {})
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]], capture_output=True, text=True, cwd=cwd, env=env
    )


def jose_verify(token: str, jwk: dict[str, str]) -> bytes:
    key = OKPKey.import_key(jwk)
    with warnings.catch_warnings():
        # joserfc flags EdDSA as a deprecated *name* (RFC 9864 prefers "Ed25519"); the
        # signature check itself is what this test is after.
        warnings.simplefilter("ignore")
        return jose_jws.deserialize_compact(token, key, algorithms=["EdDSA"]).payload


def test_demo_signs_and_anchors_records_that_verify_independently(tmp_path: Path) -> None:
    result = run("capability-anchor", "demo", "--data", "data", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "all passed" in result.stderr
    out = tmp_path / "data" / "demo"  # told where: DIR/demo
    key_file = out / "signing-key.jwk"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    (jwk,) = json.loads((out / "keys.json").read_text())["keys"]
    assert "d" not in jwk
    head = json.loads(result.stdout)
    head_file = next(out.glob("head-*.json")).read_bytes()
    assert head_file == result.stdout.strip().encode()
    assert not head_file.endswith(b"\n")
    claims = json.loads(jose_verify(head["jws"], jwk))
    assert claims == {k: v for k, v in head.items() if k != "jws"}
    root = bytes.fromhex(claims["root"])
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == claims["tree_size"] == 5
    for i, record in enumerate(records):
        signed = json.loads(jose_verify(record["jws"], jwk))
        assert signed["proof"]["leaf_index"] == i
        path = [bytes.fromhex(h) for h in signed["proof"]["path"]]
        merkle.verify_inclusion(leaf.leaf_hash(signed), i, claims["tree_size"], path, root)

    # A second run reuses the key (same kid) and refuses a key file others can read.
    again = run("capability-anchor", "demo", "--data", "data", cwd=tmp_path)
    assert again.returncode == 0
    assert json.loads((out / "keys.json").read_text())["keys"][0]["kid"] == jwk["kid"]
    key_file.chmod(0o644)
    refused = run("capability-anchor", "demo", "--data", "data", cwd=tmp_path)
    assert refused.returncode == 2
    assert "0644" in refused.stderr


def test_demo_anchors_given_records_and_rejects_bad_lines(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    lines = [
        json.dumps(
            {
                "v": "0.2",
                "iss": "https://resolver.example",
                "sub": f"x:{n}",
                "url": f"https://a{n}.example/mcp",
                "status": "ok",
                "checked_at": "2026-11-30T00:00:00Z",
                "evidence": {"n": n},
            }
        )
        for n in range(2)
    ]
    good.write_text(lines[0] + "\n\n" + lines[1] + "\n")
    result = run("capability-anchor", "demo", "--data", str(tmp_path / "d"), "--records", str(good))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["tree_size"] == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a":1,"a":2}\n')
    result = run("capability-anchor", "demo", "--data", str(tmp_path / "d"), "--records", str(bad))
    assert result.returncode == 2  # malformed JSON is exit 2 in every command
    assert "duplicate" in result.stderr
    bad.write_text("[1, 2]\n")  # JSON, but not a record: refused, exit 1
    result = run("capability-anchor", "demo", "--data", str(tmp_path / "d"), "--records", str(bad))
    assert result.returncode == 1
    assert "object" in result.stderr


def test_demo_writes_to_a_temporary_folder_unless_told_otherwise(tmp_path: Path) -> None:
    # A first try from a clean checkout, even one with $CAPABILITY_ANCHOR_DATA naming a
    # real log, leaves nothing in the working folder or beside that log.
    checkout, temp, real_log = tmp_path / "checkout", tmp_path / "tmp", tmp_path / "log"
    for folder in (checkout, temp, real_log):
        folder.mkdir()
    env = {"TMPDIR": str(temp), "CAPABILITY_ANCHOR_DATA": str(real_log)}
    result = run("capability-anchor", "demo", cwd=checkout, env=env)
    assert result.returncode == 0, result.stderr
    assert list(checkout.iterdir()) == [] and list(real_log.iterdir()) == []
    (out,) = temp.iterdir()
    assert out.name.startswith("capability-anchor-demo-")
    assert f"wrote {out}/keys.json" in result.stderr
    assert {p.name for p in out.iterdir()} >= {"signing-key.jwk", "keys.json", "records.jsonl"}


def test_no_subcommand_is_a_usage_error() -> None:
    assert run("capability-anchor").returncode == 2


def test_verify_proof_lists_the_nine_checks_in_order() -> None:
    result = run("verify-proof", "--help")
    assert result.returncode == 0
    listed = result.stdout.split("checks, always all listed, in this order:")[1]
    positions = [listed.index(f"{n}. {name}:") for n, (name, _) in enumerate(CHECKS, 1)]
    assert positions == sorted(positions)
    assert [name for name, _ in CHECKS] == [
        "record_signature",
        "record_lifetime",
        "leaf",
        "inclusion",
        "head_signature",
        "head_matches",
        "timestamp",
        "history",
        "witnesses",
    ]


def test_verify_proof_never_passes_without_a_proof(tmp_path: Path) -> None:
    record = tmp_path / "r.json"
    record.write_text("{}")
    result = run("verify-proof", str(record))
    assert result.returncode == 2
    assert "no trusted keys" in result.stderr
    keys = tmp_path / "keys.json"
    keys.write_bytes(KeySet.of(SigningKey.generate().public).to_json())
    result = run("verify-proof", str(record), "--keys", str(keys))
    assert result.returncode == 2
    assert "no anchor and proof" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("module", ["capability_anchor.cli.operator", "capability_anchor.cli.demo"])
def test_cli_modules_import(module: str) -> None:
    __import__(module)
