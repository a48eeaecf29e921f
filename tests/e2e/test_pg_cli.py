"""A data dir bound to a PostgreSQL log (`init --store URL`, store/binding.py), as an operator
runs it: real `capability-anchor` processes against the session's real PostgreSQL. After
init, `--data` alone opens the bound store; a `--store` that disagrees with the binding, a
password in a URL, an init over a SQLite log or over a database that holds a log are
refused with nothing written."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from capability_anchor import leaf, merkle
from capability_anchor.store.sqlite import DB_NAME
from tests.kit.obskit import observation, verify_answered_proof
from tests.kit.pgkit import PgServer
from tests.kit.serverkit import free_port, launch, serve_argv, serving, uvicorn_argv

BIN = Path(sys.executable).parent
CLI = str(BIN / "capability-anchor")
ISS = "https://r.example"


def run(
    *args: str | Path, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("CAPABILITY_ANCHOR_")}
    full_env.update(env or {})
    return subprocess.run(
        [CLI, *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, (result.args, result.stdout, result.stderr)
    return result


def jsonl(rows: list[dict[str, object]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def rows(n: int, tag: str = "pg", iss: str = ISS) -> list[dict[str, object]]:
    return [observation(i, tag, iss=iss) for i in range(n)]


def count_entries(pg: PgServer, db: str) -> int:
    with pg.connect(db) as conn:
        row = conn.execute("SELECT count(*) FROM entries").fetchone()
    assert row is not None
    return int(row[0])


def has_log(pg: PgServer, db: str) -> bool:
    """Whether `db` holds a log: its table `meta` exists and has a row."""
    with pg.connect(db) as conn:
        row = conn.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()
        if not (row and row[0]):
            return False
        found = conn.execute("SELECT EXISTS (SELECT 1 FROM meta)").fetchone()
    return bool(found and found[0])


def bound_log(pg: PgServer, tmp_path: Path, name: str = "data") -> tuple[Path, str, str]:
    """A data dir bound to a new PostgreSQL log: (data dir, its database, its URL)."""
    db = pg.fresh_database("cli")
    url = pg.url(db)
    data = tmp_path / name
    ok(run("init", "--data", data, "--store", url, "--iss", ISS))
    return data, db, url


def with_password(pg: PgServer, db: str, form: str) -> str:
    """The URL of `db` with the password `s3cret`, in the user info or in the query."""
    url = pg.url(db)
    if form == "userinfo":
        return url.replace(f"{pg.superuser}@", f"{pg.superuser}:s3cret@", 1)
    return url + "&password=s3cret"


def audit_ok(data: Path, *extra: str | Path, env: dict[str, str] | None = None) -> None:
    result = ok(run("audit", "--data", data, *extra, env=env))
    assert json.loads(result.stdout)["ok"] is True, result.stdout


@pytest.mark.parametrize("how", ["flag", "env"])
def test_init_binds_and_every_later_command_opens_the_postgresql_log(
    postgres: PgServer, tmp_path: Path, how: str
) -> None:
    db = postgres.fresh_database("cli")
    url = postgres.url(db)
    data = tmp_path / "data"
    if how == "flag":
        init = run("init", "--data", data, "--store", url, "--iss", ISS)
    else:
        init = run("init", "--data", data, "--iss", ISS, env={"CAPABILITY_ANCHOR_STORE": url})
    assert json.loads(ok(init).stdout)["iss"] == ISS
    assert (data / "store-url").read_text() == url + "\n"
    records = rows(3, how)
    appended = ok(run("append", "--data", data, "-", stdin=jsonl(records)))
    out = [json.loads(line) for line in appended.stdout.splitlines()]
    assert [(o["leaf_index"], o["duplicate"]) for o in out] == [(0, False), (1, False), (2, False)]
    head = json.loads(ok(run("checkpoint", "--data", data)).stdout)
    assert head["tree_size"] == 3
    audit_ok(data)
    export = ok(run("export", "--data", data, tmp_path / "out"))
    assert json.loads(export.stdout)["written"]
    assert (tmp_path / "out" / "keys.json").exists()
    audit_ok(data, "--roots", tmp_path / "out")
    proof = json.loads(
        ok(run("proof", "--data", data, "--day", head["day"], "--index", "1")).stdout
    )
    assert proof["anchor"]["root"] == head["root"]
    merkle.verify_inclusion(
        leaf.leaf_hash(records[1]),
        1,
        3,
        [bytes.fromhex(h) for h in proof["proof"]["path"]],
        bytes.fromhex(head["root"]),
    )
    # The rows are PostgreSQL's: the data dir holds no SQLite database.
    assert count_entries(postgres, db) == 3
    assert not (data / DB_NAME).exists()
    if how == "env":  # the variable, still set, is the check it names: equal, so accepted
        audit_ok(data, env={"CAPABILITY_ANCHOR_STORE": url})


def test_store_url_is_one_line_mode_0600_and_the_database_holds_the_entries(
    postgres: PgServer, tmp_path: Path
) -> None:
    data, db, url = bound_log(postgres, tmp_path)
    path = data / "store-url"
    assert path.read_bytes() == url.encode() + b"\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    ok(run("append", "--data", data, "-", stdin=jsonl(rows(5))))
    assert count_entries(postgres, db) == 5
    assert not (data / DB_NAME).exists()
    assert not any(p.name.startswith(DB_NAME) for p in data.iterdir()), sorted(data.iterdir())


def test_attack_a_mismatched_store_is_refused_naming_the_bound_url(
    postgres: PgServer, tmp_path: Path
) -> None:
    data, db, url = bound_log(postgres, tmp_path)
    ok(run("append", "--data", data, "-", stdin=jsonl(rows(2))))
    other = postgres.fresh_database("other")
    other_url = postgres.url(other)
    before = (data / "store-url").read_bytes()
    for args, env in (
        (["--store", other_url], None),
        ([], {"CAPABILITY_ANCHOR_STORE": other_url}),
    ):
        result = run("append", "--data", data, *args, "-", stdin=jsonl(rows(2, "x")), env=env)
        assert result.returncode == 2, (result.stdout, result.stderr)
        assert url in result.stderr, result.stderr
        assert result.stdout == ""
        for cmd in (["checkpoint"], ["audit"], ["seal"]):
            refused = run(*cmd, "--data", data, *args, env=env)
            assert refused.returncode == 2 and url in refused.stderr, (cmd, refused.stderr)
    assert (data / "store-url").read_bytes() == before
    assert count_entries(postgres, db) == 2
    assert not has_log(postgres, other)
    audit_ok(data)


def test_a_url_naming_the_same_database_as_another_user_is_accepted(
    postgres: PgServer, tmp_path: Path
) -> None:
    data, db, url = bound_log(postgres, tmp_path)
    role = f"owner2_{db}"
    with postgres.connect(db) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN SUPERUSER')
    as_other = postgres.url(db, user=role)
    assert as_other != url
    audit_ok(data, "--store", as_other)
    assert (data / "store-url").read_text() == url + "\n"
    # It is the URL the command connects with: a role that does not exist cannot log in.
    nobody = run("audit", "--data", data, "--store", postgres.url(db, user="nobody"))
    assert nobody.returncode == 2 and "nobody" in nobody.stderr, nobody.stderr


@pytest.mark.parametrize("form", ["userinfo", "query"])
def test_attack_a_password_in_the_url_is_refused_and_nothing_is_written(
    postgres: PgServer, tmp_path: Path, form: str
) -> None:
    db = postgres.fresh_database("pw")
    secret_url = with_password(postgres, db, form)
    assert secret_url != postgres.url(db)
    data = tmp_path / "data"
    for args, env in (
        (["--store", secret_url], None),
        ([], {"CAPABILITY_ANCHOR_STORE": secret_url}),
    ):
        result = run("init", "--data", data, *args, "--iss", ISS, env=env)
        assert result.returncode == 2, (result.stdout, result.stderr)
        assert "password" in result.stderr
        assert "s3cret" not in result.stderr + result.stdout
        assert not (data / "store-url").exists()
        assert not (data / DB_NAME).exists()
    assert not has_log(postgres, db)
    # Given to a command on a bound data dir, it is refused as well.
    bound, bound_db, _ = bound_log(postgres, tmp_path, "bound")
    secret = with_password(postgres, bound_db, form)
    result = run("append", "--data", bound, "--store", secret, "-", stdin=jsonl(rows(1)))
    assert result.returncode == 2 and "password" in result.stderr, result.stderr
    assert count_entries(postgres, bound_db) == 0


def test_attack_a_password_written_into_store_url_is_refused(
    postgres: PgServer, tmp_path: Path
) -> None:
    data, db, _ = bound_log(postgres, tmp_path)
    (data / "store-url").write_text(with_password(postgres, db, "query") + "\n")
    result = run("append", "--data", data, "-", stdin=jsonl(rows(1)))
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "store-url" in result.stderr and "s3cret" not in result.stderr
    assert count_entries(postgres, db) == 0


def test_attack_a_store_url_edited_to_name_another_log_is_refused_by_its_key(
    postgres: PgServer, tmp_path: Path
) -> None:
    mine, mine_db, _ = bound_log(postgres, tmp_path, "mine")
    theirs, theirs_db, theirs_url = bound_log(postgres, tmp_path, "theirs")
    ok(run("append", "--data", theirs, "-", stdin=jsonl(rows(2))))
    (mine / "store-url").write_text(theirs_url + "\n")
    result = run("append", "--data", mine, "-", stdin=jsonl(rows(2, "forged")))
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "not signed by the key file's key" in result.stderr
    assert run("checkpoint", "--data", mine).returncode == 1
    assert count_entries(postgres, theirs_db) == 2 and count_entries(postgres, mine_db) == 0
    audit_ok(theirs)


def test_attack_init_store_over_a_sqlite_log_is_refused_naming_migrate(
    postgres: PgServer, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    ok(run("init", "--data", data, "--iss", ISS))
    ok(run("append", "--data", data, "-", stdin=jsonl(rows(2))))
    db = postgres.fresh_database("mig")
    url = postgres.url(db)
    result = run("init", "--data", data, "--store", url, "--iss", ISS)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "migrate" in result.stderr
    assert not (data / "store-url").exists()
    assert not has_log(postgres, db)
    audit_ok(data)
    # Any other command with --store on a data dir that has no store-url: exit 2.
    for cmd in (["audit"], ["checkpoint"]):
        refused = run(*cmd, "--data", data, "--store", url)
        assert refused.returncode == 2, (cmd, refused.stdout, refused.stderr)
        assert "store-url" in refused.stderr
    missing = run("audit", "--data", tmp_path / "none", "--store", url)
    assert missing.returncode == 2, missing.stderr
    assert not (tmp_path / "none" / "store-url").exists()
    assert not has_log(postgres, db)


def test_attack_a_second_init_of_the_same_database_is_a_conflict(
    postgres: PgServer, tmp_path: Path
) -> None:
    first, db, url = bound_log(postgres, tmp_path, "first")
    ok(run("append", "--data", first, "-", stdin=jsonl(rows(3))))
    head = json.loads(ok(run("checkpoint", "--data", first)).stdout)
    token = (first / "writer-token").read_bytes()
    second = tmp_path / "second"
    result = run("init", "--data", second, "--store", url, "--iss", "https://evil.example")
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "a log already exists at" in result.stderr
    assert count_entries(postgres, db) == 3
    assert (first / "writer-token").read_bytes() == token
    audit_ok(first)
    again = json.loads(ok(run("checkpoint", "--data", first)).stdout)
    assert (again["root"], again["tree_size"], again["iss"]) == (head["root"], 3, ISS)
    # The refused data dir is not left bound to the other log's database.
    assert not (second / "store-url").exists(), sorted(p.name for p in second.iterdir())


@pytest.mark.parametrize("form", ["serve", "asgi", "asgi-store"])
def test_serving_a_bound_data_dir_serves_the_postgresql_log(
    postgres: PgServer, tmp_path: Path, form: str
) -> None:
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    db = postgres.fresh_database("srv")
    url = postgres.url(db)
    data = tmp_path / "data"
    ok(run("init", "--data", data, "--store", url, "--iss", origin))
    if form == "serve":
        argv, env = serve_argv(data, port, init=False), None
    else:
        argv, env = uvicorn_argv(port, 1), {"CAPABILITY_ANCHOR_DATA": str(data)}
        if form == "asgi-store":  # the variable equal to the binding is accepted
            env["CAPABILITY_ANCHOR_STORE"] = url
    records = rows(3, form, origin)
    with serving(data, port=port, argv=argv, env=env) as server, server.client() as client:
        assert client.get("/healthz").status_code == 200
        answer = client.post(
            "/records?prove=1", json={"records": records}, headers=server.writer_headers()
        )
        assert answer.status_code == 200, answer.text
        entries = answer.json()["entries"]
        assert [e["proof"]["leaf_index"] for e in entries] == [0, 1, 2]
        for entry in entries:
            verify_answered_proof(entry)
        assert count_entries(postgres, db) == 3
        record = client.get("/record", params={"id": records[1]["sub"]})
        assert record.status_code == 200, record.text
        saved = tmp_path / "record.json"
        saved.write_text(record.text)
        checked = subprocess.run(
            [str(BIN / "verify-proof"), "--keys", f"{origin}/keys", "--json", str(saved)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert checked.returncode == 0, (checked.stdout, checked.stderr)
        verdict = json.loads(checked.stdout)
        assert verdict["ok"] is True
        results = {c["name"]: c["result"] for c in verdict["checks"]}
        assert {results[n] for n in ("leaf", "inclusion", "head_signature")} == {"PASS"}, results
    assert not (data / DB_NAME).exists()
    audit_ok(data)


def test_attack_the_asgi_form_refuses_a_store_the_data_dir_is_not_bound_to(
    postgres: PgServer, tmp_path: Path
) -> None:
    data, db, url = bound_log(postgres, tmp_path)
    other = postgres.url(postgres.fresh_database("other"))
    port = free_port()
    env = {"CAPABILITY_ANCHOR_DATA": str(data), "CAPABILITY_ANCHOR_STORE": other}
    server = launch(data, port=port, argv=uvicorn_argv(port, 1), env=env)
    try:
        code = server.wait(30)
        if code is None:  # still up: it must not be serving anything
            with pytest.raises(httpx.TransportError):
                httpx.get(f"{server.url}/healthz", timeout=2)
    finally:
        server.kill()
    assert code not in (None, 0), server.stderr()
    assert url in server.stderr(), server.stderr()
    assert count_entries(postgres, db) == 0


def test_a_sqlite_url_naming_the_data_dir_itself_is_accepted(
    postgres: PgServer, tmp_path: Path
) -> None:
    data = (tmp_path / "data").resolve()
    here = f"sqlite://{data}"
    ok(run("init", "--data", data, "--store", here, "--iss", ISS))
    assert (data / DB_NAME).exists() and not (data / "store-url").exists()
    ok(run("append", "--data", data, "--store", here, "-", stdin=jsonl(rows(2))))
    audit_ok(data, "--store", here)
    audit_ok(data, env={"CAPABILITY_ANCHOR_STORE": here})
    other = (tmp_path / "other").resolve()
    other.mkdir()
    for cmd in (["audit"], ["append", "-"]):
        refused = run(*cmd, "--data", data, "--store", f"sqlite://{other}", stdin="")
        assert refused.returncode == 2, (cmd, refused.stdout, refused.stderr)
        assert "another folder" in refused.stderr
    # A sqlite: URL of the data dir itself is not its store once the dir is bound elsewhere.
    bound, bound_db, _ = bound_log(postgres, tmp_path, "bound")
    refused = run("audit", "--data", bound, "--store", f"sqlite://{bound.resolve()}")
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    assert not (bound / DB_NAME).exists() and count_entries(postgres, bound_db) == 0
