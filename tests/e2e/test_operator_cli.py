"""The operator CLI's front door: help texts with defaults and exit codes, `--version`, and
output that is JSON (or says why not) in the cases the issue found silent or confusing."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from capability_anchor import __version__
from capability_anchor.cli.exitcodes import EXIT_CODES_OF
from capability_anchor.cli.operator import build_parser
from tests.kit.logkit import CLI, raw, run_cli
from tests.kit.obskit import observation

NO_DEFAULT = (None, False, [], argparse.SUPPRESS)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def test_every_option_of_every_command_has_help_and_its_default() -> None:
    commands = _subparsers(build_parser())
    assert {"init", "append", "serve", "seal", "proof", "audit", "export"} <= set(commands)
    for name, sub in commands.items():
        formatter = sub._get_formatter()
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            where = f"{name} {'/'.join(action.option_strings) or action.dest}"
            assert action.help, f"{where} has no help text"
            shown = formatter._expand_help(action)
            if action.option_strings and action.default not in NO_DEFAULT:
                assert "default" in shown, f"{where}: {shown!r} does not give its default"
                assert str(action.default) in shown or "default:" in shown, where


def test_help_lists_defaults_and_exit_codes() -> None:
    top = run_cli("--help")
    assert top.returncode == 0
    assert "exit codes:" in top.stdout
    for code in ("0  done", "1  refused", "2  usage or I/O error"):
        assert code in top.stdout
    serve = run_cli("serve", "--help")
    assert serve.returncode == 0
    assert "exit codes:" in serve.stdout
    text = " ".join(serve.stdout.split())  # argparse wraps lines
    assert "per client address, 0 = off (default: 100)" in text
    assert "--log-format {plain,json}" in text
    assert "(default: 8000)" in text


def _listed_codes(help_text: str) -> list[int]:
    block = help_text.split("exit codes:\n", 1)[1]
    return [int(line.split()[0]) for line in block.splitlines() if line.strip()]


def _every_help() -> dict[str, argparse.ArgumentParser]:
    commands = _subparsers(build_parser())
    found = dict(commands)
    for name, sub in _subparsers(commands["witness"]).items():
        found[f"witness {name}"] = sub
    return found


def test_each_commands_help_lists_only_the_exit_codes_it_can_give() -> None:
    helps = _every_help()
    assert set(helps) == set(EXIT_CODES_OF)
    for name, sub in helps.items():
        assert _listed_codes(sub.format_help()) == list(EXIT_CODES_OF[name]), name
    # Only append is interrupted with a count (130); the witness service refuses nothing (1).
    assert [n for n, codes in EXIT_CODES_OF.items() if 130 in codes] == ["append"]
    assert 1 not in EXIT_CODES_OF["witness serve"]
    # As a user sees it, from the installed command.
    shown = run_cli("append", "--help")
    assert shown.returncode == 0
    assert _listed_codes(shown.stdout) == [0, 1, 2, 130]
    assert _listed_codes(run_cli("witness", "serve", "--help").stdout) == [0, 2]


def test_the_exit_codes_a_help_lists_are_the_ones_the_command_gives(
    data: Path, tmp_path: Path
) -> None:
    # A sample of each listed refusal, run for real: the table is not a guess.
    assert run_cli("init", "--iss", "https://resolver.example", "--data", data).returncode == 1
    assert run_cli("proof", "--data", data, "--day", "2020-01-01", "--index", "0").returncode == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(_record(1) | {"status": "maybe"}) + "\n")
    assert run_cli("append", "--data", data, bad).returncode == 1
    assert run_cli("append", "--data", tmp_path / "none", bad).returncode == 2
    nowitness = run_cli("witness", "serve", "--data", tmp_path / "nowitness", "--port", "0")
    assert nowitness.returncode == 2 and "no witness at" in nowitness.stderr


def test_version() -> None:
    done = run_cli("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"capability-anchor {__version__}"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    assert run_cli("init", "--iss", "https://resolver.example", "--data", data).returncode == 0
    return data


def _record(n: int) -> dict[str, object]:
    return observation(n)


def test_seal_with_nothing_to_seal_prints_an_empty_json_list(data: Path) -> None:
    done = run_cli("seal", "--data", data)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[]\n"
    assert json.loads(done.stdout) == []
    assert "nothing to seal" in done.stderr


def test_seal_with_no_service_whose_clocks_disagree_writes_no_clock_ack_and_says_nothing_of_it(
    data: Path,
) -> None:
    # A new user found DATA/clock-ack after a seal that said "nothing to seal" and nothing
    # about the file: every file `seal` writes is named on stderr. Issue #35: every seal then
    # spoke of "a running service whose clocks disagree" when nothing disagreed. The
    # acknowledgement is written, and said, only for a running service whose clocks
    # disagree (test_clock); an episode left behind by a process that is gone is no such.
    ack = data / "clock-ack"
    gone = subprocess.Popen(["true"])
    gone.wait()
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    (data / "clock-disagrees").write_text(
        json.dumps({"pid": gone.pid, "boot_id": boot, "since": "x", "skew": "+19d"})
    )
    done = run_cli("seal", "--data", data)
    assert done.returncode == 0, done.stderr
    assert not ack.exists()
    assert "clock" not in done.stderr, done.stderr


def test_checkpoint_says_when_the_tree_did_not_grow(data: Path, tmp_path: Path) -> None:
    empty = run_cli("checkpoint", "--data", data)
    assert empty.returncode == 0
    assert empty.stdout == "null\n"
    assert "no entries" in empty.stderr
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps(_record(1)) + "\n")
    assert run_cli("append", "--data", data, records).returncode == 0
    grew = run_cli("checkpoint", "--data", data)
    assert grew.returncode == 0
    assert json.loads(grew.stdout)["tree_size"] == 1
    assert "did not grow" not in grew.stderr
    again = run_cli("checkpoint", "--data", data)
    assert again.returncode == 0
    assert again.stdout == grew.stdout  # the newest head, still JSON
    assert "the tree did not grow since its newest head (tree size 1)" in again.stderr


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(_record(1), indent=2),  # a first line that is `{` alone
        json.dumps([_record(1), _record(2)], indent=1),  # `[` alone
        '{"v": "0.2",\n "sub": "example:1"}\n',  # one object over two lines
    ],
)
def test_append_of_one_pretty_printed_document_says_json_lines(
    data: Path, tmp_path: Path, text: str
) -> None:
    path = tmp_path / "pretty.json"
    path.write_text(text)
    done = run_cli("append", "--data", data, path)
    assert (
        done.returncode == 2
    )  # malformed JSON is exit 2 in every command (docs/explanation/decisions/19-up-to-19.md)
    assert done.stdout == ""
    assert done.stderr.startswith("capability-anchor: line 1: invalid JSON")
    assert done.stderr.rstrip().endswith("; input is JSON Lines: one object per line")


def test_a_bad_line_of_real_json_lines_gets_no_such_hint(data: Path, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"v": "0.2", "sub": \n' + json.dumps(_record(2)) + "\n")
    done = run_cli("append", "--data", data, path)
    assert (
        done.returncode == 2
    )  # malformed JSON is exit 2 in every command (docs/explanation/decisions/19-up-to-19.md)
    assert "line 1: invalid JSON" in done.stderr
    assert "JSON Lines" not in done.stderr


def _stored(data: Path) -> int:
    with raw(data) as conn:
        return int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])


def test_ctrl_c_during_append_says_how_many_are_stored_and_exits_130(
    data: Path, tmp_path: Path
) -> None:
    # More answer lines than a pipe holds (~120 bytes each): while the test does not read,
    # the append is blocked writing them, so the SIGINT surely comes before it ends.
    total = 5000
    lines = [json.dumps(_record(n)) for n in range(total)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPABILITY_ANCHOR_")}
    proc = subprocess.Popen(
        [str(CLI), "append", "--data", str(data), "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        # A shell's background job starts with SIGINT ignored, and Python then installs no
        # KeyboardInterrupt handler: give the child the default a terminal would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(("\n".join(lines) + "\n").encode())
        proc.stdin.close()
        proc.stdin = None  # communicate() must not flush it again
        acknowledged = [json.loads(proc.stdout.readline()) for _ in range(3)]
        assert [e["leaf_index"] for e in acknowledged] == [0, 1, 2]
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    stderr = err.decode()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    stored = _stored(data)
    assert 3 <= stored < total
    assert (
        f"interrupted: {stored} records stored; rerun the same input to continue "
        "(stored ones come back as duplicates)"
    ) in stderr.splitlines()
    # Every line printed is a stored entry (the signal may cut a line a write was in).
    printed = [x for x in rest.decode().splitlines() if x.startswith('{"') and x.endswith("}")]
    assert len(acknowledged) + len(printed) <= stored

    # The rerun the line promises: the stored ones come back as duplicates, the rest is new.
    source = tmp_path / "records.jsonl"
    source.write_text("\n".join(lines) + "\n")
    again = run_cli("append", "--data", data, source)
    assert again.returncode == 0, again.stderr
    answers = [json.loads(x) for x in again.stdout.splitlines()]
    assert [a["duplicate"] for a in answers] == [True] * stored + [False] * (total - stored)
    assert _stored(data) == total
