"""The documentation's examples, run as written, so the docs and the code cannot drift apart.

- "The first five minutes": the service is started as `tools/dev.py run` starts it
  (`capability-anchor serve --init`, checked below), in an empty folder holding a link to
  `.venv`; then every `$ ` command of the marked block runs, in order, in one bash session
  (so `TOKEN` and the activated venv carry over). Each must exit 0 and print exactly the
  lines shown, where `…` stands for any text. Only two things are substituted: the port
  (8000 may be taken here) and the README's fixed date 2026-12-01 (today's UTC day).
- "Embedding the log in a Python resolver" (docs/how-to/embed.md): the marked block runs in
  an empty folder.
- Every monitor, verify-proof, audit and `openssl ts` command of README.md, docs/**/*.md and
  roots/README.md that reads a folder runs on the shipped sample (`roots/`), exit 0.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.kit import paths
from tests.kit.serverkit import clean_env, free_port

ROOT = paths.ROOT
README = ROOT / "README.md"
EMBEDDING = ROOT / "docs" / "how-to" / "embed.md"
# README.md and every page of docs/: where the commands run on the sample are looked for.
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
README_DAY = "2026-12-01"
README_PORT = "8000"
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z")


def _block(marker: str, page: Path = README) -> str:
    text = page.read_text()
    at = text.index(f"<!-- {marker}")
    fence = text.index("```", at)
    body = text.index("\n", fence) + 1
    return text[body : text.index("```", body)]


def _block_after(heading: str) -> str:
    text = README.read_text()
    at = text.index(heading)
    fence = text.index("```", at)
    body = text.index("\n", fence) + 1
    return text[body : text.index("```", body)]


def _session(block: str) -> list[tuple[str, list[str]]]:
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            assert steps, f"output before any command: {line!r}"
            steps[-1][1].append(line)
    return steps


def _pattern(expected: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in expected.split("…")))


def _match_streams(expected: list[str], out: list[str], err: list[str]) -> None:
    """Every expected line, in order, is the next line of stdout or of stderr (the two are
    separate streams, so only the order within each is fixed), and nothing is left over."""
    o = e = 0
    for line in expected:
        pattern = _pattern(line)
        if o < len(out) and pattern.fullmatch(out[o]):
            o += 1
        elif e < len(err) and pattern.fullmatch(err[e]):
            e += 1
        else:
            raise AssertionError(f"expected {line!r}\nstdout: {out[o:]}\nstderr: {err[e:]}")
    assert o == len(out) and e == len(err), f"unexpected output: {out[o:]} {err[e:]}"


def _today() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")


def test_the_readme_is_short_and_shows_the_two_commands_first() -> None:
    """Issue #22: at most 200 lines, the two commands on the first screen, links for the rest."""
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, len(lines)
    first_screen = "\n".join(lines[:20])
    assert "python3 tools/dev.py run " in first_screen
    assert "python3 tools/dev.py test " in first_screen
    assert "](docs/README.md)" in README.read_text()


def test_dev_run_is_serve_init() -> None:
    dev = paths.tool("dev")
    saved = os.environ.pop("CAPABILITY_ANCHOR_DATA", None)
    try:
        argv = dev.run_argv([])
    finally:
        if saved is not None:
            os.environ["CAPABILITY_ANCHOR_DATA"] = saved
    assert Path(argv[0]).name == "capability-anchor"
    assert argv[1:] == ["serve", "--init"]


def test_the_first_five_minutes(tmp_path: Path) -> None:
    port = str(free_port())
    today = _today()

    def local(text: str) -> str:
        return text.replace(README_PORT, port).replace(README_DAY, today)

    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    env = clean_env({"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(
        p for p in env["PATH"].split(os.pathsep) if not p.startswith(str(ROOT / ".venv"))
    )

    (start, server_out), *_ = _session(local(_block_after("## The first five minutes")))
    assert start == "python3 tools/dev.py run"
    serve = [str(tmp_path / ".venv" / "bin" / "capability-anchor"), "serve", "--init"]
    if port != README_PORT:
        serve += ["--port", port]
    err_path = tmp_path / "serve.err"
    with open(err_path, "wb") as err:
        server = subprocess.Popen(
            serve, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=err, stderr=err
        )
    try:
        deadline = time.monotonic() + 30
        while "info service: started" not in err_path.read_text():
            assert server.poll() is None, err_path.read_text()
            assert time.monotonic() < deadline, err_path.read_text()
            time.sleep(0.05)
        shown = [TIMESTAMP.sub("…", re.sub(r"pid \d+", "pid …", x)) for x in server_out]
        _match_streams(shown, [], err_path.read_text().splitlines()[: len(shown)])

        session = _session(local(_block("first-five-minutes")))
        script = []
        for n, (command, _) in enumerate(session):
            # `$?` of each command is kept for the next one, as in an interactive shell.
            script.append(
                f"{{ {command}\n}} > out.{n} 2> err.{n}; rc=$?; echo $rc > rc.{n}; (exit $rc)"
            )
        done = subprocess.run(
            ["bash", "-c", "\n".join(script)], cwd=tmp_path, env=env, timeout=120, check=False
        )
        assert done.returncode == 0
        for n, (command, expected) in enumerate(session):
            out = (tmp_path / f"out.{n}").read_text().splitlines()
            err = (tmp_path / f"err.{n}").read_text().splitlines()
            code = int((tmp_path / f"rc.{n}").read_text())
            assert code == 0, f"$ {command}\nexit {code}\n{out}\n{err}"
            _match_streams(expected, out, err)
    finally:
        server.terminate()
        server.wait(30)
    assert server.returncode == 0, err_path.read_text()


def test_the_embedding_example(tmp_path: Path) -> None:
    code = _block("embedding", EMBEDDING)
    check = "\nassert served['sub'] == 'example:1' and served['jws']\nprint('ok')\n"
    done = subprocess.run(
        [sys.executable, "-c", code + check],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"
    assert (tmp_path / "data" / "log.sqlite3").exists()


# --- every README command that can run on the shipped sample, run on it -----------------

SAMPLE = ROOT / "roots"
SAMPLE_IAT = "1793797200"  # the sample's records were issued then (roots/README.md)
COMMAND = re.compile(r"(capability-anchor (monitor|audit)|verify-proof|openssl ts)\b")
# Not about a folder: they name the log's URL or files the sample has no copy of.
ELSEWHERE = ("https://", "token.jws", "--keys keys.json", "monitor compare", "forged.json")


def _commands(readme: Path) -> list[str]:
    """Each command line of the file's code blocks (continuations joined, `$ ` dropped,
    comments cut) that runs an auditing tool."""
    found = []
    for block in re.findall(r"```[^\n]*\n(.*?)```", readme.read_text(), flags=re.S):
        lines = iter(block.splitlines())
        for line in lines:
            command = line.removeprefix("$ ")
            while command.endswith("\\"):
                command = command[:-1] + next(lines).strip()
            if COMMAND.match(command):
                found.append(command.split("  #", 1)[0].split(" # ", 1)[0].strip())
    return found


def _on_the_sample(command: str, state: Path, empty: Path) -> list[str]:
    """The command with the README's placeholder files replaced by the sample's: the export
    folder (`public/`, `exported/`, `./roots`), its policy, CA, a stamp, and each of its
    records (checked at their issue time: they have expired since)."""
    for folder in ("public/", "exported/", "./roots/", "./roots"):
        command = command.replace(folder, "roots/")
    command = re.sub(r"(?<![\w/.])(policy\.txt|tsa-ca\.pem)", r"roots/\1", command)
    command = command.replace("roots/2026-11-30.", "roots/2026-11-01.")
    command = re.sub(r"--state (mon[^ ]*|<empty dir>)", f"--state {state}", command)
    command = command.replace("<iat>", SAMPLE_IAT).replace("<empty dir>", str(empty))
    if "record.json" not in command:
        return [command]
    if "--at" not in command:
        command += f" --at {SAMPLE_IAT}"
    records = sorted((SAMPLE / "records").glob("*.json"))
    return [command.replace("record.json", f"roots/records/{r.name}") for r in records]


def test_every_readme_command_on_the_shipped_sample_passes(tmp_path: Path) -> None:
    """README.md's, docs/'s and roots/README.md's monitor, verify-proof, audit and `openssl
    ts` commands, each on the shipped sample: exit 0. roots/README.md's commands that name
    the folder `.` are run from the checkout's root with `roots/` for it, as the rest are."""
    env = clean_env({"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"})
    empty = tmp_path / "empty"
    empty.mkdir()
    runs: list[tuple[str, Path]] = []
    pages: list[tuple[Path, Path | None]] = [(page, ROOT) for page in PAGES]
    for readme, cwd in (*pages, (SAMPLE / "README.md", None)):
        for command in _commands(readme):
            if any(marker in command for marker in ELSEWHERE):
                continue
            inside = cwd is None and not re.search(r"(^| )roots/", command)
            if inside:
                command = command.replace("--roots .", "--roots roots/").replace(
                    "records/", "roots/records/"
                )
                command = re.sub(r"(?<![\w-])(-data|-in|-CAfile) ", r"\1 roots/", command)
            runs += [(c, ROOT) for c in _on_the_sample(command, tmp_path / "mon", empty)]
    names = " ".join(c for c, _ in runs)
    for tool in ("monitor ", "verify-proof ", "audit ", "openssl ts "):
        assert tool in names, f"no README command runs {tool.strip()}: {names}"
    for command, cwd in runs:
        shutil.rmtree(tmp_path / "mon", ignore_errors=True)  # each monitor starts afresh
        done = subprocess.run(
            ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, f"$ {command}\n{done.stdout}\n{done.stderr}"
