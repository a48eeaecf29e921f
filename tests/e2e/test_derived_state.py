"""What is derived from entries (the `/record` index, leaf hashes) is rebuilt wherever entries
arrive other than by `append` (SPEC §14.1, issue #35 item 2), with real processes only: the
operator CLI, `serve` on loopback, SQLite files and the session's PostgreSQL (pgkit).

The story of the finding: `init`; append 500, checkpoint; append 100, checkpoint; `backup`;
append 400 and 500 with one checkpoint after them, or a checkpoint after each; `export
--tiles`; the backup copied to a new data dir and `recover --from` the export folder or the
serving log's URL. The recovered data dir lacked the `/record` rows of the entries past the
backup's newest head up to the last full index run (600..1023 with one checkpoint after the
backup, 1000..1023 with several): `recover` stored entries without the index runs an append
fills, and the next head indexed only from the watermark those runs imply. Now each ends with
`audit` passing and `/record?id=` answering 200 for every server the original served, on
SQLite and on PostgreSQL; `migrate` derives the copy's index from its entries, and `reindex`
repairs a data dir recovered before the fix.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from capability_anchor.store.sqlite import DB_NAME
from tests.kit.logkit import run_cli
from tests.kit.obskit import observation
from tests.kit.pgkit import PgServer
from tests.kit.serverkit import Server, free_port, serve_argv, serving

ISS = "https://resolver.example"
TIMEOUT_S = 300
# The story's appends: (tag, records) before the backup, then after it.
BEFORE = (("a", 500), ("b", 100))
AFTER = (("c", 400), ("d", 500))


def ok(*args: str | Path) -> str:
    done = run_cli(*args, timeout=TIMEOUT_S)
    assert done.returncode == 0, f"{args}: {done.returncode}\n{done.stdout}{done.stderr}"
    return done.stdout


def append(tmp: Path, data: Path, tag: str, count: int) -> list[str]:
    """Append `count` server records tagged `tag`; their server ids."""
    records = [observation(n, tag, iss=ISS) for n in range(count)]
    path = tmp / f"{data.name}-{tag}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    ok("append", "--data", data, path)
    return [str(r["sub"]) for r in records]


def audit(data: Path) -> dict[str, Any]:
    done = run_cli("audit", "--data", data, timeout=TIMEOUT_S)
    report: dict[str, Any] = json.loads(done.stdout)
    assert (done.returncode == 0) == report["ok"], done.stderr
    return report


def serve(data: Path) -> AbstractContextManager[Server]:
    port = free_port()
    argv = serve_argv(data, port, ["--rate-limit", "0"], init=False)
    return serving(data, port=port, argv=argv, logs=data.parent / f"logs-{data.name}")


def not_served(data: Path, ids: list[str]) -> list[str]:
    """The ids `/record?id=` does not answer 200 for, on a `serve` of `data`."""
    missing = []
    with serve(data) as server, server.client() as client:
        for sub in ids:
            got = client.get("/record", params={"id": sub})
            if got.status_code != 200 or sub not in got.text:
                missing.append(f"{sub}: {got.status_code}")
    return missing


@dataclass
class Original:
    """The story's log after it grew past its backup, exported."""

    tmp: Path
    data: Path
    backup: Path
    export: Path
    ids: list[str]


def build(tmp: Path, store: str | None, several: bool) -> Original:
    data = tmp / "data"
    ok("init", "--data", data, "--iss", ISS, *(["--store", store] if store else []))
    ids: list[str] = []
    for tag, count in BEFORE:
        ids += append(tmp, data, tag, count)
        ok("checkpoint", "--data", data)
    ok("backup", tmp / "backup", "--data", data)
    for tag, count in AFTER:
        ids += append(tmp, data, tag, count)
        if several:
            ok("checkpoint", "--data", data)
    if not several:
        ok("checkpoint", "--data", data)
    ok("export", tmp / "export", "--tiles", "--data", data)
    assert audit(data)["ok"]
    return Original(tmp, data, tmp / "backup", tmp / "export", ids)


Originals = Callable[[str, str], Original]


@pytest.fixture(scope="module")
def originals(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Originals:
    """The story's log of (engine, checkpoints after the backup), built when first asked."""
    built: dict[tuple[str, str], Original] = {}

    def original(engine: str, checkpoints: str) -> Original:
        if (engine, checkpoints) not in built:
            tmp = tmp_path_factory.mktemp(f"{engine}-{checkpoints}")
            store = None
            if engine == "postgresql":
                pg: PgServer = request.getfixturevalue("postgres")
                store = pg.url(pg.fresh_database("orig"))
            built[engine, checkpoints] = build(tmp, store, checkpoints == "several")
        return built[engine, checkpoints]

    return original


def restored(original: Original, name: str, pg: PgServer | None) -> Path:
    """The backup copied to a new data dir; on PostgreSQL, moved into a new database (a
    backup is a SQLite data dir)."""
    data = original.tmp / name
    shutil.copytree(original.backup, data)
    if pg is not None:
        ok("migrate", "--from", data, "--to", pg.url(pg.fresh_database("rest")))
    return data


@pytest.mark.parametrize(
    ("engine", "checkpoints", "source"),
    [
        ("sqlite", "one", "dir"),
        ("sqlite", "several", "dir"),
        ("postgresql", "several", "dir"),
        ("sqlite", "several", "url"),
    ],
)
def test_recover_past_the_backups_last_checkpoint_loses_no_record_index_rows(
    originals: Originals,
    request: pytest.FixtureRequest,
    engine: str,
    checkpoints: str,
    source: str,
) -> None:
    """One case per boundary where the code differs, not the full 2x2x2 grid: the engine
    (each store writes the entries and index rows its own way), one or several checkpoints
    after the backup (the two shapes of the finding, 600..1023 and 1000..1023 missing: the
    same code, different data, on SQLite), and the source (the folder reader or the HTTP
    reader, which hand `recover` the same entries whatever the engine behind it, so once)."""
    original = originals(engine, checkpoints)
    pg = request.getfixturevalue("postgres") if engine == "postgresql" else None
    data = restored(original, f"recovered-{source}", pg)
    if source == "dir":
        done = json.loads(ok("recover", "--from", original.export, "--data", data))
    else:
        with serve(original.data) as server:
            done = json.loads(ok("recover", "--from", server.url, "--data", data))
    assert done["entries"] == sum(count for _, count in AFTER)
    report = audit(data)
    assert report["ok"], report["problems"][:5]
    assert not_served(data, original.ids) == []


def test_the_original_log_serves_every_server_it_holds(
    originals: Originals,
) -> None:
    """The reference the recovered copies are held to: the original serves every id."""
    original = originals("sqlite", "one")
    assert not_served(original.data, original.ids) == []


def recovered_before_the_fix(original: Original, name: str) -> Path:
    """A SQLite data dir as `recover` left it before #35 with one checkpoint after the
    backup: recovered, then the /record rows of entries 600..1023 (past the backup's newest
    head, up to the last full index run) removed again, as the database's owner (the table
    is append-only), so the audit names them."""
    data = original.tmp / name
    shutil.copytree(original.backup, data)
    ok("recover", "--from", original.export, "--data", data)
    backup_size = sum(count for _, count in BEFORE)
    conn = sqlite3.connect(data / DB_NAME)
    try:
        trigger = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'servers_no_delete'"
        ).fetchone()[0]
        conn.execute("DROP TRIGGER servers_no_delete")
        lost = conn.execute(
            "DELETE FROM servers WHERE leaf_index >= ? AND leaf_index < 1024", (backup_size,)
        ).rowcount
        conn.execute(trigger)
        conn.commit()
    finally:
        conn.close()
    assert lost == 2 * (1024 - backup_size)
    report = audit(data)
    assert not report["ok"]
    assert f"entry {backup_size}: server index has []" in " ".join(report["problems"])
    return data


def test_reindex_repairs_a_data_dir_recovered_before_the_fix(
    originals: Originals,
) -> None:
    original = originals("sqlite", "one")
    data = recovered_before_the_fix(original, "reindexed")
    done = run_cli("reindex", "--data", data, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["added"] == 2 * (1024 - 600)
    assert out["days"][0]["indexed"] == 1500
    assert "index rows added" in done.stderr
    assert audit(data)["ok"]
    assert not_served(data, original.ids) == []
    # A whole index: the repair adds nothing more.
    assert json.loads(ok("reindex", "--data", data))["added"] == 0


def test_reindex_repairs_a_postgresql_index_that_lacks_rows(
    originals: Originals, postgres: PgServer
) -> None:
    original = originals("postgresql", "several")
    data = restored(original, "pg-reindexed", postgres)
    ok("recover", "--from", original.export, "--data", data)
    db = (data / "store-url").read_text().split("@/", 1)[1].split("?", 1)[0]
    with postgres.connect(db) as conn:
        # The owner's way past the append-only triggers: the damage a repair must undo.
        conn.execute("SET session_replication_role = replica")
        lost = conn.execute("DELETE FROM servers WHERE leaf_index >= 1000").rowcount
    assert lost == 2 * 500
    assert not audit(data)["ok"]
    out = json.loads(ok("reindex", "--data", data))
    assert out["added"] == lost
    assert audit(data)["ok"]
    assert not_served(data, original.ids) == []


@pytest.mark.parametrize("damaged", [False, True], ids=["recovered", "recovered-before-the-fix"])
def test_migrate_of_a_recovered_log_serves_every_server_the_original_served(
    originals: Originals, postgres: PgServer, damaged: bool
) -> None:
    """`migrate` derives the copy's index from its entries; a source whose index lacks rows
    (recovered before the fix) is completed first, since its audit is part of the proof."""
    original = originals("sqlite", "several")
    if damaged:
        data = recovered_before_the_fix(original, "migrated-damaged")
    else:
        data = original.tmp / "migrated"
        shutil.copytree(original.backup, data)
        ok("recover", "--from", original.export, "--data", data)
    done = run_cli(
        "migrate",
        "--from",
        data,
        "--to",
        postgres.url(postgres.fresh_database("mig")),
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["audit_from_ok"] and report["audit_to_ok"]
    assert report["source_index_rows_added"] == (2 * (1024 - 600) if damaged else 0)
    assert (data / "store-url").exists()
    assert audit(data)["ok"]
    assert not_served(data, original.ids) == []
