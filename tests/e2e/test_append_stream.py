"""`capability-anchor append` streams its input (#23): its memory does not grow with the input,
from a file or from a pipe, and it still stores nothing when any line is bad, wherever that
line is. Real processes and real data dirs; the peak RSS is the command's own (`ru_maxrss`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.kit.logkit import CLI, raw, run_cli
from tests.kit.obskit import observation

# The bound, for any input size.
RSS_BOUND_MB = 200
# 25,000 records of 3 KB: an 80 MB input, on which the append that held its input peaked at
# 316 MB (538 MB on a 68 MB input of 340-byte records); streaming, 67 MB.
BIG, PAD = 25_000, 3000
# A child's ru_maxrss counts the pages it had before its exec, a copy of this (large) pytest
# process's: the command is started by a small Python process, which reads its child's.
_MEASURED = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
child.returncode = os.waitstatus_to_exitcode(status)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
sys.exit(child.returncode)
"""


@pytest.fixture
def data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    assert run_cli("init", "--iss", "https://resolver.example", "--data", data).returncode == 0
    return data


def _lines(n: int, tag: str = "s", pad: int = 0, start: int = 0) -> Iterator[bytes]:
    for i in range(start, start + n):
        extra = {"pad": "p" * pad} if pad else {}
        yield json.dumps(observation(i, tag, **extra)).encode() + b"\n"


def _stored(data: Path) -> int:
    with raw(data) as conn:
        return int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CAPABILITY_ANCHOR_")}


def _feed(pipe: IO[bytes], lines: Iterator[bytes]) -> threading.Thread:
    def run() -> None:
        with pipe:
            for line in lines:
                pipe.write(line)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("source", ["file", "pipe"])
def test_append_memory_stays_bounded_on_an_input_that_would_not_fit(
    data: Path, tmp_path: Path, source: str
) -> None:
    before = set(os.listdir(data))
    out, err, peak = tmp_path / "out.jsonl", tmp_path / "err.txt", tmp_path / "peak"
    arg = "-"
    if source == "file":
        arg = str(tmp_path / "in.jsonl")
        with open(arg, "wb") as f:
            f.writelines(_lines(BIG, pad=PAD))
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _MEASURED,
                str(peak),
                str(CLI),
                "append",
                "--data",
                str(data),
                arg,
            ],
            stdin=subprocess.PIPE if source == "pipe" else subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            env=_env(),
        )
        # Generated while the command reads it: the input never exists whole, not even here.
        feeder = _feed(proc.stdin, _lines(BIG, pad=PAD)) if proc.stdin is not None else None
        proc.wait(timeout=600)
    if feeder is not None:
        feeder.join()
    assert proc.returncode == 0, err.read_text()
    peak_mb = int(peak.read_text()) / 1024  # KiB on Linux
    assert peak_mb <= RSS_BOUND_MB, f"peak RSS {peak_mb:.0f} MB"
    answers = [json.loads(line) for line in out.read_text().splitlines()]
    assert [a["leaf_index"] for a in answers] == list(range(BIG))
    assert _stored(data) == BIG
    # The progress has the total the first pass counted.
    assert f"append: {BIG:,}/{BIG:,}" in err.read_text()
    # The spool had no name: nothing is left beside the database but SQLite's own files.
    assert set(os.listdir(data)) - before <= {"log.sqlite3-wal", "log.sqlite3-shm"}


def _append(data: Path, text: bytes, via: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    args = [str(CLI), "append", "--data", str(data)]
    if via == "file":
        (tmp_path / "in.jsonl").write_bytes(text)
        args.append(str(tmp_path / "in.jsonl"))
        text = b""
    else:
        args.append("-")
    done = subprocess.run(args, input=text, capture_output=True, env=_env(), timeout=300)
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


GOOD_LINES = list(_lines(2500))  # three batches: 1,000, 1,000, 500
GOOD = b"".join(GOOD_LINES)
REFUSED = json.dumps(observation(9, "s", status="maybe")).encode() + b"\n"
OVERLONG = b'{"v": "0.2", "pad": "' + b"p" * (2**20 + 1) + b'"}\n'


@pytest.mark.parametrize("via", ["file", "pipe"])
@pytest.mark.parametrize(
    ("tail", "line_no", "reason", "code"),
    [
        (REFUSED, 2501, "status: must be one of", 1),
        (b"\n\n" + REFUSED, 2503, "status: must be one of", 1),  # blank lines are counted
        (b'{"v": "0.2", "sub": \n', 2501, "invalid JSON", 2),
        (OVERLONG, 2501, "longer than 1048576 bytes", 1),
        # The first refused line is the one said, also when a longer one follows it.
        (REFUSED + OVERLONG, 2501, "status: must be one of", 1),
        # Malformed JSON anywhere is exit 2, also after a refused record: the rest is parsed.
        (REFUSED + b"".join(GOOD_LINES[:3]) + b"[1,\n" + GOOD, 2505, "invalid JSON", 2),
        (OVERLONG + b"NaN\n", 2502, "invalid JSON", 2),
    ],
)
def test_a_bad_line_after_whole_batches_stores_nothing(
    data: Path, tmp_path: Path, via: str, tail: bytes, line_no: int, reason: str, code: int
) -> None:
    done = _append(data, GOOD + tail, via, tmp_path)
    assert done.returncode == code, done.stderr
    assert f"capability-anchor: line {line_no}: " in done.stderr and reason in done.stderr
    assert done.stdout == ""
    assert _stored(data) == 0


@pytest.mark.parametrize(
    "text",
    [
        b"\n \n" + json.dumps(observation(1), indent=2).encode(),  # `{` alone, after blanks
        b'\n\n{"v": "0.2",\n "sub": "example:1"}\n',  # one object over two lines, after blanks
    ],
)
def test_the_json_lines_hint_looks_past_leading_blank_lines(
    data: Path, tmp_path: Path, text: bytes
) -> None:
    done = _append(data, text, "pipe", tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("capability-anchor: line 3: invalid JSON")
    assert done.stderr.rstrip().endswith("; input is JSON Lines: one object per line")


def test_ctrl_c_while_the_input_is_validated_stores_nothing(data: Path) -> None:
    before = set(os.listdir(data))
    proc = subprocess.Popen(
        [str(CLI), "append", "--data", str(data), "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
        # As a terminal gives it (a background job would start with SIGINT ignored).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.write(b"".join(_lines(1500)))
        proc.stdin.flush()
        # The first pass says how far it read after 1,000 records; the input stays open, so
        # the command is still reading it when the signal comes.
        assert proc.stderr.readline().decode().startswith("validate (lines): 1,000")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert out == b""
    assert (
        "interrupted: 0 records stored; rerun the same input to continue "
        "(stored ones come back as duplicates)"
    ) in err.decode().splitlines()
    assert _stored(data) == 0
    assert set(os.listdir(data)) - before <= {"log.sqlite3-wal", "log.sqlite3-shm"}
