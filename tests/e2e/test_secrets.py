"""The writer token and the data dir's modes (issue 10, point 4): an unusable token (empty,
whitespace-only, short, in a file others can read) stops `serve`, the ASGI form, `init` and
the library before anything listens or is created; a fresh data dir is private to its owner,
and an older, looser one is tightened when the service starts."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from capability_anchor.errors import TokenError
from capability_anchor.log import Log
from capability_anchor.log.writer_token import TOKEN_ENV, writer_token
from tests.kit.logkit import CLI, run_cli
from tests.kit.obskit import observation
from tests.kit.serverkit import (
    HOST,
    clean_env,
    free_port,
    refused_start,
    serving,
)

ISS = "https://resolver.example"
GOOD = "g" * 32
BAD_TOKENS = {
    "empty": "",
    "newline only": "\n",
    "whitespace only": " \t \n",
    "31 bytes": "s" * 31 + "\n",
    "inner space": "a" * 20 + " " + "b" * 20,
}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@contextlib.contextmanager
def umask(value: int) -> Iterator[None]:
    """The children started inside inherit it: modes must not depend on the caller's umask."""
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    result = run_cli("init", "--data", d, "--iss", ISS)
    assert result.returncode == 0, result.stderr
    return d


def set_token(data: Path, text: str, file_mode: int = 0o600) -> None:
    path = data / "writer-token"
    path.write_text(text)
    path.chmod(file_mode)


def refused(data: Path, argv: list[str] | None = None, env: dict[str, str] | None = None) -> str:
    """Run the service (`serve`, else `argv` plus a port) and return its stderr, asserting
    that it exited 2 without ever accepting a connection."""
    port = free_port()
    argv = None if argv is None else [*argv, "--port", str(port)]
    return refused_start(data, port, argv, env)


# --- the one owner of the token rules ----------------------------------------------------------


@pytest.mark.parametrize("name", sorted(BAD_TOKENS))
def test_every_source_is_held_to_the_same_rules(tmp_path: Path, name: str) -> None:
    bad = BAD_TOKENS[name]
    tmp_path.joinpath("writer-token").write_text(GOOD)
    tmp_path.joinpath("writer-token").chmod(0o600)
    assert writer_token(tmp_path, env={}) == GOOD
    with pytest.raises(TokenError, match="writer token in env CAPABILITY_ANCHOR_TOKEN"):
        writer_token(tmp_path, env={TOKEN_ENV: bad})
    with pytest.raises(TokenError, match="service settings"):
        writer_token(tmp_path, bad, env={})
    set_token(tmp_path, bad)
    with pytest.raises(TokenError, match=str(tmp_path / "writer-token")):
        writer_token(tmp_path, env={})


def test_a_token_file_others_can_read_or_write_is_refused(tmp_path: Path) -> None:
    for loose in (0o644, 0o640, 0o620, 0o602, 0o660):
        set_token(tmp_path, GOOD + "\n", loose)
        with pytest.raises(TokenError, match=f"mode {loose:04o}.*chmod 600"):
            writer_token(tmp_path, env={})
    set_token(tmp_path, GOOD + "\n", 0o400)
    assert writer_token(tmp_path, env={}) == GOOD  # read-only for its owner is fine


def test_the_message_never_echoes_the_token(tmp_path: Path) -> None:
    secret = "Z" * 31
    with pytest.raises(TokenError) as caught:
        writer_token(tmp_path, env={TOKEN_ENV: secret})
    assert secret not in str(caught.value)
    assert "31 bytes" in str(caught.value)


def test_the_log_and_the_settings_read_it_through_the_same_rules(data: Path) -> None:
    from capability_anchor.api.settings import Settings

    set_token(data, "\n")
    with (
        Log.open(data, background_checkpoints=False) as log,
        pytest.raises(TokenError, match="is empty"),
    ):
        log.writer_token()
    with pytest.raises(TokenError, match="is empty"):
        Settings(data_dir=data).token()


# --- serve, the ASGI form and init refuse it -----------------------------------------------------


@pytest.mark.parametrize("name", sorted(BAD_TOKENS))
def test_serve_refuses_a_bad_token_file(data: Path, name: str) -> None:
    set_token(data, BAD_TOKENS[name])
    stderr = refused(data)
    assert f"the writer token in {data / 'writer-token'}" in stderr


def test_serve_refuses_a_token_file_readable_by_others(data: Path) -> None:
    set_token(data, GOOD + "\n", 0o644)
    stderr = refused(data)
    assert "has mode 0644" in stderr and "chmod 600" in stderr


@pytest.mark.parametrize("bad", ["", "   ", "short-token"])
def test_serve_refuses_a_bad_token_in_the_environment(data: Path, bad: str) -> None:
    # The file is fine: a set environment variable is the token, even when empty.
    stderr = refused(data, env={TOKEN_ENV: bad})
    assert f"env {TOKEN_ENV}" in stderr


def test_serve_refuses_before_initialising_a_new_log(tmp_path: Path) -> None:
    data = tmp_path / "new"
    stderr = refused(data, env={TOKEN_ENV: "x" * 10})
    assert "10 bytes" in stderr
    assert not (data / "log.sqlite3").exists()


def asgi_argv() -> list[str]:
    return [sys.executable, "-m", "uvicorn", "capability_anchor.api.asgi:app", "--host", HOST]


def test_the_asgi_form_refuses_a_bad_token(data: Path) -> None:
    set_token(data, " \n")
    stderr = refused(data, asgi_argv(), env={"CAPABILITY_ANCHOR_DATA": str(data)})
    assert "refusing to start" in stderr and "is empty" in stderr
    set_token(data, GOOD)
    stderr = refused(data, asgi_argv(), {"CAPABILITY_ANCHOR_DATA": str(data), TOKEN_ENV: "a" * 31})
    assert "31 bytes" in stderr


@pytest.mark.parametrize("where", ["missing", "mistyped"])
def test_the_asgi_form_says_no_log_at_dir_as_the_cli_does(tmp_path: Path, where: str) -> None:
    # Mistyped: a folder that exists but holds no log (the parent of the real one, say).
    data = tmp_path / "datta"
    if where == "mistyped":
        data.mkdir()
    stderr = refused(data, asgi_argv(), env={"CAPABILITY_ANCHOR_DATA": str(data)})
    lines = stderr.splitlines()
    assert lines == [
        f"capability-anchor: refusing to start: no log at {data / 'log.sqlite3'} "
        "(run `capability-anchor init` first)"
    ], stderr
    cli = run_cli("export", "--data", data, tmp_path / "out")
    assert cli.returncode == 2 and f"no log at {data}" in cli.stderr
    assert data.exists() == (where == "mistyped")  # nothing created
    assert not data.exists() or list(data.iterdir()) == []


@pytest.mark.parametrize("form", ["serve", "asgi"])
def test_a_log_without_its_token_file_gets_one_clear_line(data: Path, form: str) -> None:
    (data / "writer-token").unlink()
    env = {"CAPABILITY_ANCHOR_DATA": str(data)}
    stderr = refused(data, asgi_argv() if form == "asgi" else None, env=env)
    (line,) = stderr.splitlines()  # not "writer token in X", then "cannot open X"
    assert f"no writer token: {data / 'writer-token'} does not exist" in line
    assert f"set env {TOKEN_ENV}" in line
    assert not (data / "writer-token").exists()


def test_init_refuses_a_bad_token_and_creates_no_log(tmp_path: Path) -> None:
    # A leftover token file (from an init that crashed) others can read is not taken over.
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    set_token(data, GOOD + "\n", 0o644)
    result = run_cli("init", "--data", data, "--iss", ISS)
    assert result.returncode == 2, result.stderr
    assert "has mode 0644" in result.stderr
    assert not (data / "log.sqlite3").exists()
    other = tmp_path / "other"
    result = subprocess.run(
        [str(CLI), "init", "--data", str(other), "--iss", ISS],
        capture_output=True,
        text=True,
        env=clean_env({TOKEN_ENV: "   "}),
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "is empty" in result.stderr
    assert not (other / "log.sqlite3").exists()


def test_a_good_token_in_the_environment_is_the_one_that_works(data: Path) -> None:
    token = "e" * 40
    with serving(data, "--rate-limit", "0", env={TOKEN_ENV: token}) as server:
        body = {"records": [observation(1)]}
        with server.client() as client:
            file_token = {"Authorization": f"Bearer {server.token()}"}
            assert client.post("/records", json=body, headers=file_token).status_code == 401
            for path in ("/records", "/checkpoint"):
                for empty in ("Bearer ", "Bearer", "Bearer  \t", ""):
                    assert raw_post(server.port, path, empty) == 401, (path, empty)
            ok = client.post("/records", json=body, headers={"Authorization": f"Bearer {token}"})
            assert ok.status_code == 200, ok.text


def raw_post(port: int, path: str, authorization: str) -> int:
    """http.client sends a header with trailing whitespace as given (httpx refuses to)."""
    conn = http.client.HTTPConnection(HOST, port, timeout=10)
    try:
        body = json.dumps({"records": [observation(2)]}).encode()
        headers = {"Authorization": authorization, "Content-Type": "application/json"}
        conn.request("POST", path, body=body, headers=headers)
        return conn.getresponse().status
    finally:
        conn.close()


# --- modes -------------------------------------------------------------------------------------


def test_a_fresh_data_dir_is_private_whatever_the_umask(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with umask(0):
        result = run_cli("init", "--data", data, "--iss", ISS)
    assert result.returncode == 0, result.stderr
    assert mode(data) == 0o700
    for name in ("log.sqlite3", "signing-key.jwk", "writer-token"):
        assert mode(data / name) == 0o600, name
    with umask(0), serving(data, "--rate-limit", "0", "--checkpoint-interval", "1") as server:
        with server.client() as client:
            for n in range(3):
                body = {"records": [observation(i, f"n{n}") for i in range(100)]}
                answer = client.post("/records", json=body, headers=server.writer_headers())
                assert answer.status_code == 200, answer.text
        # While it runs (the WAL is there): SQLite gives -wal and -shm the database's mode.
        for name in ("log.sqlite3-wal", "log.sqlite3-shm", "background.lock"):
            assert mode(data / name) == 0o600, name
    assert mode(data) == 0o700


def test_a_looser_existing_data_dir_is_tightened_when_the_service_starts(data: Path) -> None:
    data.chmod(0o755)
    (data / "log.sqlite3").chmod(0o644)
    with serving(data, "--rate-limit", "0") as server:
        assert mode(data) == 0o700
        assert mode(data / "log.sqlite3") == 0o600
        stderr = server.stderr()
        assert f"{data} had mode 0755" in stderr and "changed to 0700" in stderr
        assert "log.sqlite3 had mode 0644" in stderr
        with httpx.Client(base_url=server.url) as client:
            assert client.get("/healthz").status_code == 200


def test_init_tightens_an_existing_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    result = run_cli("init", "--data", data, "--iss", ISS)
    assert result.returncode == 0, result.stderr
    assert mode(data) == 0o700
    assert "had mode 0755" in result.stderr
