"""The operator CLI as a user runs it (real processes, real files): SPEC §10 output shapes
and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from capability_anchor import leaf, merkle
from capability_anchor.log import Log
from tests.kit.obskit import observation

CLI = str(Path(sys.executable).parent / "capability-anchor")
ISS = "https://resolver.example"


def run(
    *args: str,
    data: Path | None = None,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    argv = [CLI, *args] + (["--data", str(data)] if data is not None else [])
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("CAPABILITY_ANCHOR")}
    full_env.update(env or {})
    return subprocess.run(
        argv, input=stdin, capture_output=True, text=True, env=full_env, timeout=60
    )


def records(n: int, start: int = 0) -> list[dict[str, object]]:
    return [observation(i, iss=ISS, sub=f"example:{i}", n=i) for i in range(start, start + n)]


def jsonl(rows: list[dict[str, object]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    result = run("init", "--iss", ISS, data=d)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["iss"] == ISS and out["kid"]
    assert "writer-token" in result.stderr
    return d


@pytest.fixture
def any_data(tmp_path: Path) -> Path:
    """A log that takes any JSON object SPEC §2 allows (`init --records any`)."""
    d = tmp_path / "any"
    result = run("init", "--iss", ISS, "--records", "any", data=d)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["records"] == "any"
    return d


def test_init_refuses_an_existing_log(data: Path) -> None:
    result = run("init", "--iss", ISS, data=data)
    assert result.returncode == 1
    assert "refusing to overwrite" in result.stderr


def test_init_rejects_a_path_in_iss(tmp_path: Path) -> None:
    result = run("init", "--iss", "https://r.example/x", data=tmp_path / "d")
    assert result.returncode == 2
    assert "origin" in result.stderr


def test_commands_without_a_log_are_io_errors(tmp_path: Path) -> None:
    for args in (
        ["checkpoint"],
        ["seal"],
        ["append", "-"],
        ["proof", "--day", "2026-01-01", "--index", "0"],
    ):
        result = run(*args, data=tmp_path / "none", stdin="")
        assert result.returncode == 2, args
        assert "init" in result.stderr


def test_append_prints_one_line_per_record(data: Path, tmp_path: Path) -> None:
    file = tmp_path / "in.jsonl"
    rows = records(3)
    file.write_text(jsonl(rows) + "\n" + json.dumps(rows[0]) + "\n")
    result = run("append", str(file), data=data)
    assert result.returncode == 0, result.stderr
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(o["leaf_index"], o["duplicate"]) for o in out] == [
        (0, False),
        (1, False),
        (2, False),
        (0, True),
    ]
    assert out[1]["leaf_hash"] == leaf.leaf_hash(rows[1]).hex()
    assert set(out[0]) == {"day", "leaf_index", "leaf_hash", "duplicate"}
    from_stdin = run("append", "-", data=data, stdin=jsonl(records(1, 10)))
    assert json.loads(from_stdin.stdout)["leaf_index"] == 3


@pytest.mark.parametrize(
    ("lines", "line_no", "reason", "code"),
    [
        # Malformed JSON is exit 2 in every command
        # (docs/explanation/decisions/19-up-to-19.md); a record rule, 1.
        (['{"a":1}', "", '{"a":1,"a":2}'], 3, "duplicate", 2),
        (['{"a":1}', "not json"], 2, "invalid JSON", 2),
        (['{"a":1}', '{"x":1e400}'], 2, "overflows", 2),
        (['{"a":1}', "[1,2]"], 2, "object", 1),
        (["", "", '{"iss":"https://other.example"}'], 3, "issuer", 1),
        (['{"a":NaN}'], 1, "NaN", 2),
    ],
)
def test_a_bad_line_stores_nothing(
    any_data: Path, lines: list[str], line_no: int, reason: str, code: int
) -> None:
    result = run("append", "-", data=any_data, stdin="\n".join(lines) + "\n")
    assert result.returncode == code
    assert f"line {line_no}:" in result.stderr and reason in result.stderr
    assert result.stdout == ""
    with Log.open(any_data) as log:
        assert log.store.entry_days() == []


def test_checkpoint_proof_and_consistency(data: Path) -> None:
    assert run("checkpoint", data=data).stdout.strip() == "null"
    rows = records(20)
    run("append", "-", data=data, stdin=jsonl(rows[:12]))
    first = run("checkpoint", data=data)
    assert first.returncode == 0
    head12 = json.loads(first.stdout)
    assert (
        first.stdout.rstrip("\n").encode()
        == json.dumps(head12, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()
    )
    run("append", "-", data=data, stdin=jsonl(rows[12:]))
    head20 = json.loads(run("checkpoint", data=data).stdout)
    day = head20["day"]
    proof = run("proof", "--day", day, "--index", "5", data=data)
    assert proof.returncode == 0, proof.stderr
    answer = json.loads(proof.stdout)
    assert answer["anchor"] == {"day": day, "root": head20["root"], "url": f"{ISS}/roots/{day}/20"}
    p = answer["proof"]
    merkle.verify_inclusion(
        leaf.leaf_hash(rows[5]),
        5,
        20,
        [bytes.fromhex(x) for x in p["path"]],
        bytes.fromhex(head20["root"]),
    )
    by_hash = run(
        "proof", "--leaf-hash", leaf.leaf_hash(rows[7]).hex(), "--tree-size", "12", data=data
    )
    assert json.loads(by_hash.stdout)["proof"]["tree_size"] == 12
    cons = json.loads(
        run("consistency", "--day", day, "--first", "12", "--second", "20", data=data).stdout
    )
    merkle.verify_consistency(
        12,
        20,
        bytes.fromhex(head12["root"]),
        bytes.fromhex(head20["root"]),
        [bytes.fromhex(x) for x in cons["path"]],
    )
    # Usage errors exit 2, refusals exit 1.
    assert run("proof", "--day", day, data=data).returncode == 2
    assert run("proof", "--leaf-hash", "XYZ", data=data).returncode == 2
    assert run("proof", "--day", "2026-02-30", "--index", "1", data=data).returncode == 2
    assert run("proof", "--day", day, "--index", "25", data=data).returncode == 1
    assert (
        run("consistency", "--day", day, "--first", "0", "--second", "20", data=data).returncode
        == 2
    )
    # Sizes in the wrong order name no proof, as an index past the head does: exit 1.
    assert (
        run("consistency", "--day", day, "--first", "20", "--second", "12", data=data).returncode
        == 1
    )
    # Today is not over: nothing to seal.
    sealed = run("seal", data=data)
    assert sealed.returncode == 0 and sealed.stdout == "[]\n"


def test_data_dir_from_environment(tmp_path: Path) -> None:
    d = tmp_path / "env-data"
    env = {"CAPABILITY_ANCHOR_DATA": str(d)}
    assert run("init", "--iss", ISS, env=env).returncode == 0
    assert (d / "log.sqlite3").exists()
    assert run("checkpoint", env=env).stdout.strip() == "null"
