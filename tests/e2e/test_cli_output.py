"""Output hygiene of both commands as a shell user meets it (real processes): a reader that
stops reading ends the output quietly, and malformed JSON is exit 2 in every command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from capability_anchor.log import Log
from tests.kit import paths
from tests.kit.obskit import observation

BIN = Path(sys.executable).parent
ROOTS = paths.ROOT / "roots"
SAMPLE = ROOTS / "records" / "2026-11-01-calendar.json"
SAMPLE_AT = "1793797200"
ISS = "https://resolver.example"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CAPABILITY_ANCHOR")}


def closed_pipe(*argv: str | Path, stdin: bytes = b"") -> tuple[int, str]:
    """Run with stdout a pipe whose reader has already gone (what `| head -c 0` becomes
    once head exits), deterministically: every write to it fails with EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [str(a) for a in argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            input=stdin,
            env=_env(),
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    return proc.returncode, proc.stderr.decode()


def run(*argv: str | Path, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(a) for a in argv], input=stdin, capture_output=True, env=_env(), timeout=120
    )


# --- broken pipes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "args", "code"),
    [
        ("json", [SAMPLE, "--roots", ROOTS, "--at", SAMPLE_AT, "--json"], 0),
        ("human_explain", [SAMPLE, "--roots", ROOTS, "--at", SAMPLE_AT, "--explain"], 0),
        ("failing", [SAMPLE, "--roots", ROOTS], 1),  # expired now: the verdict survives
        ("help", ["--help"], 0),
        ("version", ["--version"], 0),
    ],
)
def test_verify_proof_into_a_closed_pipe_exits_quietly(
    case: str, args: list[str | Path], code: int
) -> None:
    rc, stderr = closed_pipe(BIN / "verify-proof", *args)
    assert rc == code, stderr
    assert stderr == ""


def test_verify_proof_piped_to_head_c_0_in_a_shell() -> None:
    """The issue's own reproduction (the race can only make it pass more easily)."""
    script = (
        f"'{BIN / 'verify-proof'}' '{SAMPLE}' --roots '{ROOTS}' --at {SAMPLE_AT} --json "
        "| head -c 0; echo ${PIPESTATUS[0]} >&2"
    )
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.stderr == "0\n"


def test_capability_anchor_into_a_closed_pipe_exits_quietly_and_still_stores(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    rc, stderr = closed_pipe(BIN / "capability-anchor", "init", "--iss", ISS, "--data", data)
    assert rc == 0 and "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    # Enough lines that stdout's buffer fills and the pipe breaks in the middle of the run.
    lines = "".join(json.dumps(observation(n, iss=ISS)) + "\n" for n in range(3000))
    rc, stderr = closed_pipe(
        BIN / "capability-anchor", "append", "-", "--data", data, stdin=lines.encode()
    )
    assert rc == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    with Log.open(data) as log:  # a reader leaving changes nothing the command does
        assert log.store.entry_days() != []
    proc = run(BIN / "capability-anchor", "checkpoint", "--data", data)
    assert json.loads(proc.stdout)["tree_size"] == 3000


# --- malformed JSON: exit 2 everywhere --------------------------------------------------------

MALFORMED = {
    "syntax": b'{"v": "0.2", "sub": ',
    "duplicate_member": b'{"v": "0.2", "v": "0.3"}',
    "nan": b'{"v": NaN}',
    "byte_order_mark": b'\xef\xbb\xbf{"v": "0.2"}',
    "not_utf8": b'{"v": "\xff"}',
}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("malformed") / "data"
    assert run(BIN / "capability-anchor", "init", "--iss", ISS, "--data", path).returncode == 0
    return path


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_json_is_exit_2_in_every_command(case: str, data: Path, tmp_path: Path) -> None:
    text = MALFORMED[case]
    bad = tmp_path / f"{case}.json"
    bad.write_bytes(text)
    results = {
        "append": run(BIN / "capability-anchor", "append", "-", "--data", data, stdin=text),
        "verify-proof RECORD": run(BIN / "verify-proof", bad, "--roots", ROOTS),
        "verify-proof --keys": run(BIN / "verify-proof", SAMPLE, "--keys", bad),
        "audit --keys": run(
            BIN / "capability-anchor",
            "audit",
            "--data",
            tmp_path / "none",
            "--roots",
            ROOTS,
            "--keys",
            bad,
        ),
    }
    codes = {name: r.returncode for name, r in results.items()}
    assert codes == dict.fromkeys(results, 2), {n: r.stderr for n, r in results.items()}
    assert b"line 1: invalid JSON" in results["append"].stderr
    with Log.open(data) as log:
        assert log.store.entry_days() == []


def test_a_json_line_that_is_not_a_record_stays_exit_1(data: Path) -> None:
    """The other half of the rule: JSON the log can read but refuses is a refusal (1)."""
    result = run(
        BIN / "capability-anchor",
        "append",
        "-",
        "--data",
        data,
        stdin=b'{"iss": "https://other.example"}\n',
    )
    assert result.returncode == 1
    assert b"line 1:" in result.stderr
