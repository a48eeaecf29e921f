"""`capability-anchor audit` over a PostgreSQL log (SPEC §13.5), as real processes on the
session's server: a log as made passes, with pg_amcheck run; each tamper an owner can make
(a leaf updated, a head deleted, a trigger dropped, UPDATE granted) is reported, exit 1; a
damaged page on disk is reported; without the amcheck extension the check is skipped, not a
finding."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.kit.obskit import observation
from tests.kit.pgkit import PgServer
from tests.kit.serverkit import CLI


def cli(*args: object, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def a_log(postgres: PgServer, data: Path, *, amcheck: bool = True) -> str:
    """A PostgreSQL log of 6 entries and 2 heads; its database's name."""
    name = postgres.fresh_database("auditcli")
    if amcheck:
        with postgres.connect(name) as owner:
            owner.execute("CREATE EXTENSION amcheck")
    made = cli("init", "--data", data, "--store", postgres.url(name), "--iss", "https://r.example")
    assert made.returncode == 0, made.stderr
    for tag in ("a", "b"):
        lines = "".join(json.dumps(observation(i, tag)) + "\n" for i in range(3))
        assert cli("append", "--data", data, "-", stdin=lines).returncode == 0
        assert cli("checkpoint", "--data", data).returncode == 0
    return name


def audit(data: Path) -> tuple[int, dict[str, object], str]:
    done = cli("audit", "--data", data)
    return done.returncode, json.loads(done.stdout), done.stderr


def test_a_log_as_made_passes_the_audit_with_pg_amcheck(postgres: PgServer, tmp_path: Path) -> None:
    a_log(postgres, tmp_path / "data")
    code, report, err = audit(tmp_path / "data")
    assert code == 0, (report, err)
    checked = report["checked"]
    assert isinstance(checked, dict)
    assert checked["pg_amcheck"] == 1 and checked["entries"] == 6


TAMPERS = {
    "update_a_leaf": (
        "ALTER TABLE entries DISABLE TRIGGER entries_no_update;"
        " UPDATE entries SET claims = convert_to('{}', 'UTF8') WHERE leaf_index = 1;"
        " ALTER TABLE entries ENABLE TRIGGER entries_no_update",
        "",
    ),
    "delete_a_head": (
        "ALTER TABLE heads DISABLE TRIGGER heads_no_delete;"
        " DELETE FROM heads WHERE tree_size = 3;"
        " ALTER TABLE heads ENABLE TRIGGER heads_no_delete",
        "",
    ),
    "drop_a_trigger": ("DROP TRIGGER entries_no_update ON entries", "entries_no_update"),
    "grant_update": ("CREATE ROLE intruder; GRANT UPDATE ON entries TO intruder", "intruder"),
}


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_attack_a_tamper_by_the_owner_is_reported(
    postgres: PgServer, tmp_path: Path, tamper: str
) -> None:
    statement, named = TAMPERS[tamper]
    name = a_log(postgres, tmp_path / "data")
    if tamper == "grant_update":
        statement = statement.replace("intruder", f"intruder_{name}")
        named = f"intruder_{name}"
    with postgres.connect(name) as owner:
        for part in statement.split(";"):
            owner.execute(part.encode())
    code, report, err = audit(tmp_path / "data")
    assert code == 1, (report, err)
    problems = report["problems"]
    assert isinstance(problems, list) and problems
    assert named in " ".join(problems), problems


def test_attack_a_stale_index_is_reported_once(postgres: PgServer, tmp_path: Path) -> None:
    """Rows changed under an index left stale (`indisready` off meanwhile): the audit names the
    index once (the engine's catalog findings and the audit's re-derivation both ran it)."""
    name = a_log(postgres, tmp_path / "data")
    with postgres.connect(name) as owner:
        for statement in (
            "UPDATE pg_index SET indisready = false WHERE indexrelid = 'entries_by_hash'::regclass",
            "ALTER TABLE entries DISABLE TRIGGER entries_no_update",
            "UPDATE entries SET leaf_hash = sha256(leaf_hash) WHERE leaf_index < 3",
            "ALTER TABLE entries ENABLE TRIGGER entries_no_update",
            "UPDATE pg_index SET indisready = true WHERE indexrelid = 'entries_by_hash'::regclass",
        ):
            owner.execute(statement.encode())
    code, report, err = audit(tmp_path / "data")
    assert code == 1, (report, err)
    problems = report["problems"]
    assert isinstance(problems, list)
    stale = [p for p in problems if p.startswith("index entries_by_hash does not match")]
    assert len(stale) == 1, problems


def test_attack_a_damaged_page_on_disk_is_reported(postgres: PgServer, tmp_path: Path) -> None:
    """Bytes of the entries table's first page overwritten while the server is stopped:
    what a bad disk does. The audit says so (pg_amcheck, or the read it breaks)."""
    name = a_log(postgres, tmp_path / "data")
    with postgres.connect(name) as owner:
        row = owner.execute("SELECT pg_relation_filepath('entries')").fetchone()
        owner.execute("CHECKPOINT")
    assert row is not None
    path = postgres.datadir / str(row[0])
    postgres.pg_ctl("-m", "fast", "stop")
    try:
        page = bytearray(path.read_bytes())
        page[8192 - 600 : 8192] = b"\xa5" * 600  # the tuples at the first page's end
        path.write_bytes(bytes(page))
    finally:
        postgres.start()
    done = cli("audit", "--data", tmp_path / "data")
    assert done.returncode != 0, done.stdout
    said = done.stdout + done.stderr
    assert done.returncode == 1 and "damaged data" in said, said
    assert "Traceback" not in said


def test_without_the_amcheck_extension_the_check_is_skipped_not_a_finding(
    postgres: PgServer, tmp_path: Path
) -> None:
    a_log(postgres, tmp_path / "data", amcheck=False)
    code, report, err = audit(tmp_path / "data")
    assert code == 0, (report, err)
    checked = report["checked"]
    assert isinstance(checked, dict) and checked["pg_amcheck"] == 0
