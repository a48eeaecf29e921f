"""`capability-anchor migrate --from DATA --to URL` with real processes on the session's real
PostgreSQL: a rich SQLite log (past sealed days stamped by OpenSSL's TSA, checkpoints, a
witness policy and a cosignature, a key rotation, entries past the newest head) is moved
exactly (its export byte for byte, every row with its stored times) and `--data` opens the
moved log afterwards; a log moved in the middle of a day goes on with that day's tree; the
retired SQLite log never opens again; and each refusal leaves the source as it was."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from capability_anchor import merkle
from capability_anchor.log import Log
from capability_anchor.log.stamping import TsaConfig
from capability_anchor.store.sqlite import DB_NAME
from tests.kit.logkit import CLI, Clock
from tests.kit.obskit import observation
from tests.kit.pgkit import PgServer
from tests.kit.serverkit import clean_env, serving
from tests.kit.tsakit import TestTsa
from tests.kit.witnesskit import TestWitness

ISS = "https://resolver.example"
TIMEOUT_S = 300
# Rows compared one for one between the two stores (columns both engines have).
SAME_ROWS = {
    "entries": "day, leaf_index, leaf_hash, claims, accepted_at",
    "heads": "day, tree_size, sealed, doc",
    "stamps": "day, tsa, token, added",
    "cosignatures": "witness, size, line, added",
    "checkpoints": "size, note",
}
SAME_COUNTS = ("history", "history_tiles", "keys", "key_records", "settings", "policies")
SAME_COUNTS += ("witness_state", "servers", "tiles")


def run(*args: str | Path | int, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The operator CLI as a real process (without the caller's CAPABILITY_ANCHOR_*)."""
    return subprocess.run(
        [str(CLI), *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=TIMEOUT_S,
        check=False,
    )


def ok(*args: str | Path | int, stdin: str | None = None) -> str:
    done = run(*args, stdin=stdin)
    assert done.returncode == 0, f"{args}: {done.returncode}\n{done.stdout}{done.stderr}"
    return done.stdout


def append(data: Path, tag: str, count: int) -> list[dict[str, Any]]:
    lines = "".join(json.dumps(observation(n, tag, iss=ISS)) + "\n" for n in range(count))
    return [json.loads(line) for line in ok("append", "--data", data, "-", stdin=lines).split()]


def checkpoint(data: Path) -> dict[str, Any]:
    head: dict[str, Any] = json.loads(ok("checkpoint", "--data", data))
    return head


def audit_ok(data: Path) -> None:
    report = json.loads(ok("audit", "--data", data))
    assert report["ok"] is True, report


def migrate(data: Path, url: str) -> subprocess.CompletedProcess[str]:
    return run("migrate", "--from", data, "--to", url)


def exported(data: Path, out: Path) -> dict[str, bytes]:
    """`export --tiles` into OUT: every file's bytes by its relative path."""
    ok("export", "--data", data, "--tiles", out)
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def digest(files: dict[str, bytes]) -> str:
    """SHA-256 over each file's relative path and bytes, length-prefixed, in path order."""
    h = hashlib.sha256()
    for rel in sorted(files, key=lambda name: name.split("/")):
        name, data = rel.encode(), files[rel]
        h.update(len(name).to_bytes(8, "big") + name + len(data).to_bytes(8, "big") + data)
    return h.hexdigest()


def sqlite_rows(data: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"{(data / DB_NAME).resolve().as_uri()}?mode=ro", uri=True)
    try:
        return [
            tuple(bytes(v) if isinstance(v, bytes) else v for v in r) for r in conn.execute(sql)
        ]
    finally:
        conn.close()


def pg_rows(pg: PgServer, db: str, sql: str) -> list[tuple[Any, ...]]:
    with pg.connect(db) as conn:
        found = conn.execute(sql.encode()).fetchall()
    return [tuple(bytes(v) if isinstance(v, memoryview | bytes) else v for v in r) for r in found]


def moved_to(data: Path) -> str | None:
    found = sqlite_rows(data, "SELECT value FROM meta WHERE key = 'moved_to'")
    return str(found[0][0]) if found else None


def has_log(pg: PgServer, db: str) -> bool:
    if not pg_rows(pg, db, "SELECT to_regclass('meta') IS NOT NULL")[0][0]:
        return False
    return bool(pg_rows(pg, db, "SELECT EXISTS (SELECT 1 FROM meta)")[0][0])


def small_log(tmp: Path, name: str = "data", count: int = 5) -> Path:
    data = tmp / name
    ok("init", "--data", data, "--iss", ISS)
    append(data, name, count)
    checkpoint(data)
    return data


def still_sqlite(data: Path, entries: int) -> None:
    """The source after a refusal: not bound, not marked, its rows, and it opens and audits."""
    assert not (data / "store-url").exists()
    assert moved_to(data) is None
    assert sqlite_rows(data, "SELECT count(*) FROM entries") == [(entries,)]
    assert not (data / ".migrate").exists()
    audit_ok(data)
    checkpoint(data)


def rich_log(tmp: Path, tsa: TestTsa) -> Path:
    """Two past days (3 + 2 and 2 entries, checkpoints) sealed and stamped (OpenSSL's TSA), then
    today: entries, a checkpoint cosigned under a witness policy, a key rotation, more
    checkpointed entries and two entries past the newest head."""
    data = tmp / "data"
    noon = dt.datetime.now(dt.UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    clock = Clock((noon - dt.timedelta(days=2)).timestamp())
    config = TsaConfig.from_files([tsa.url], [tsa.pki.ca_cert], 10.0).to_config()
    with Log.init(data, iss=ISS, clock=clock, config=config) as log:
        log.append([observation(n, "day1", iss=ISS) for n in range(3)])
        clock.t += 60
        assert log.checkpoint() is not None
        clock.t += 600
        log.append([observation(n, "day1b", iss=ISS) for n in range(2)])
        clock.t += 60
        assert log.checkpoint() is not None
        clock.t += 86_400
        log.append([observation(n, "day2", iss=ISS) for n in range(2)])
        clock.t += 60
        assert log.checkpoint() is not None
        vkey = log.read.history.vkey()
    # The checkpoint of day 2 sealed day 1 (unstamped); `seal` seals day 2 and stamps it,
    # `timestamp` stamps day 1.
    sealed = run("seal", "--data", data)
    assert sealed.returncode == 0 and sealed.stderr.count("stamped by") == 1, sealed.stderr
    stamped = run("timestamp", "--data", data)
    assert stamped.returncode == 0, stamped.stderr
    assert [json.loads(line)["tsa"] for line in stamped.stdout.splitlines()] == [tsa.url]
    append(data, "today", 4)
    checkpoint(data)
    with TestWitness("witness.test/w1", vkey) as witness:
        policy = tmp / "policy.txt"
        policy.write_text(f"witness w1 {witness.vkey} {witness.url}\nquorum w1\n")
        ok("policy", "--data", data, policy)
        assert json.loads(ok("cosign", "--data", data))["result"] == "cosigned"
    ok("rotate-key", "--data", data)
    ok("rotate-key", "--data", data, "--activate", "--force")
    append(data, "rotated", 3)
    checkpoint(data)
    append(data, "tail", 2)  # no head over these yet
    return data


def test_a_rich_log_moves_exactly_and_its_data_dir_opens_the_copy(
    postgres: PgServer, tsa_ec: TestTsa, tmp_path: Path
) -> None:
    data = rich_log(tmp_path, tsa_ec)
    before = exported(data, tmp_path / "before")
    assert any("/tile/" in name for name in before), sorted(before)
    source = {
        t: sqlite_rows(data, f"SELECT {c} FROM {t} ORDER BY {c}") for t, c in SAME_ROWS.items()
    }
    counts = {t: sqlite_rows(data, f"SELECT count(*) FROM {t}") for t in SAME_COUNTS}
    assert len(source["entries"]) == 16 and len(source["stamps"]) == 2
    assert len(source["cosignatures"]) == 1 and counts["keys"] == [(2,)]
    db = postgres.fresh_database("mig")
    url = postgres.url(db)

    done = migrate(data, url)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["exports_identical"] is True
    assert report["audit_from_ok"] is True and report["audit_to_ok"] is True
    assert report["export_files"] == len(before)
    assert report["export_sha256"] == digest(before)
    assert report["entries"] == 16 and report["stamps"] == 2 and report["cosignatures"] == 1
    assert report["days"] == 3 and report["checkpoints"] == len(source["checkpoints"])
    assert report["heads"] == len(source["heads"])
    assert "moved the log" in done.stderr
    assert (data / "store-url").read_text().strip() == url
    assert moved_to(data) == url
    assert not (data / ".migrate").exists()

    # The same --data now opens the PostgreSQL log: its export is the same, file for file.
    after = exported(data, tmp_path / "after")
    assert sorted(after) == sorted(before)
    for name, content in before.items():
        assert after[name] == content, name
    audit_ok(data)
    # Every row, with its stored times, is in the database (read as its owner).
    for table, columns in SAME_ROWS.items():
        copied = pg_rows(postgres, db, f"SELECT {columns} FROM {table} ORDER BY {columns}")
        if table == "heads":
            copied = [(d, s, int(b), doc) for d, s, b, doc in copied]
        assert copied == source[table], table
    for table in SAME_COUNTS:
        assert pg_rows(postgres, db, f"SELECT count(*) FROM {table}") == counts[table], table
    meta = dict(pg_rows(postgres, db, "SELECT key, value FROM meta"))
    assert "moved_to" not in meta and meta["iss"] == ISS


def test_a_log_moved_in_the_middle_of_a_day_goes_on_with_that_days_tree(
    postgres: PgServer, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    ok("init", "--data", data, "--iss", ISS)
    append(data, "first", 5)
    old = checkpoint(data)
    old_size = old["tree_size"]
    assert old_size == 5
    tail = append(data, "tail", 2)  # accepted before the move, under no head yet
    db = postgres.fresh_database("mid")
    url = postgres.url(db)
    done = migrate(data, url)
    assert done.returncode == 0, done.stdout + done.stderr

    later = append(data, "later", 3)
    assert [e["leaf_index"] for e in later] == [7, 8, 9]
    new = checkpoint(data)
    assert new["day"] == old["day"] and new["tree_size"] == 10
    proof = json.loads(
        ok("consistency", "--data", data, "--day", new["day"], "--first", old_size, "--second", 10)
    )
    path = [bytes.fromhex(h) for h in proof["path"]]
    merkle.verify_consistency(
        old_size, 10, bytes.fromhex(old["root"]), bytes.fromhex(new["root"]), path
    )
    for entry in (*tail, later[-1]):
        got = json.loads(
            ok("proof", "--data", data, "--day", new["day"], "--index", entry["leaf_index"])
        )
        assert got["anchor"]["root"] == new["root"] and got["proof"]["tree_size"] == 10
        merkle.verify_inclusion(
            bytes.fromhex(entry["leaf_hash"]),
            entry["leaf_index"],
            10,
            [bytes.fromhex(h) for h in got["proof"]["path"]],
            bytes.fromhex(new["root"]),
        )
    assert pg_rows(postgres, db, "SELECT count(*) FROM entries") == [(10,)]
    assert sqlite_rows(data, "SELECT count(*) FROM entries") == [(7,)]  # retired, untouched
    audit_ok(data)


def test_the_retired_sqlite_log_refuses_to_open_and_migrate_again_finishes_the_move(
    postgres: PgServer, tmp_path: Path
) -> None:
    data = small_log(tmp_path, count=3)
    db = postgres.fresh_database("ret")
    url = postgres.url(db)
    assert migrate(data, url).returncode == 0
    bound = (data / "store-url").read_bytes()
    (data / "store-url").rename(tmp_path / "store-url.aside")

    day = dt.datetime.now(dt.UTC).date().isoformat()
    proof = ("proof", "--day", day, "--index", "0")
    for args in (("checkpoint",), ("export", tmp_path / "out"), proof, ("rotate-key",)):
        refused = run(*args, "--data", data)
        assert refused.returncode != 0, (args, refused.stdout)
        assert "migrate" in refused.stderr and url in refused.stderr, (args, refused.stderr)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    # Finishing the move to another database is refused: the log moved to URL.
    other = postgres.url(postgres.fresh_database("ret"))
    wrong = migrate(data, other)
    assert wrong.returncode == 2 and url in wrong.stderr, wrong.stderr
    assert not (data / "store-url").exists()

    again = migrate(data, url)
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["finished"] is True
    assert (data / "store-url").read_bytes() == bound
    append(data, "after", 1)
    assert checkpoint(data)["tree_size"] == 4
    assert pg_rows(postgres, db, "SELECT count(*) FROM entries") == [(4,)]
    audit_ok(data)


def test_migrate_into_a_database_holding_a_log_is_refused_and_a_moved_dir_is_not_moved_again(
    postgres: PgServer, tmp_path: Path
) -> None:
    first = small_log(tmp_path, "first", 3)
    second = small_log(tmp_path, "second", 4)
    db = postgres.fresh_database("held")
    url = postgres.url(db)
    assert migrate(first, url).returncode == 0

    refused = migrate(second, url)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "already exists" in refused.stderr and refused.stdout == ""
    still_sqlite(second, 4)
    assert pg_rows(postgres, db, "SELECT count(*) FROM entries") == [(3,)]

    # The moved dir: again to the same URL or to an empty database, a usage error.
    empty = postgres.fresh_database("held")
    for target in (url, postgres.url(empty)):
        again = migrate(first, target)
        assert again.returncode == 2, again.stdout + again.stderr
        assert "already the data dir" in again.stderr
    assert not has_log(postgres, empty)
    assert (first / "store-url").read_text().strip() == url
    audit_ok(first)


def test_migrate_while_a_service_runs_on_the_data_dir_is_refused(
    postgres: PgServer, tmp_path: Path
) -> None:
    data = small_log(tmp_path)
    db = postgres.fresh_database("busy")
    with serving(data, "--rate-limit", "0"):
        refused = migrate(data, postgres.url(db))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "service is running" in refused.stderr
    assert not has_log(postgres, db)
    still_sqlite(data, 5)


def test_migrate_refuses_a_url_with_a_password_and_a_sqlite_url(
    postgres: PgServer, tmp_path: Path
) -> None:
    data = small_log(tmp_path)
    db = postgres.fresh_database("bad")
    sock = f"host={postgres.socket_dir}&port=5432"
    for target, says in (
        (f"postgresql://{postgres.superuser}:secret@/{db}?{sock}", "password"),
        (f"{postgres.url(db)}&password=secret", "password"),
        ("sqlite:///x", "postgresql://"),
    ):
        refused = migrate(data, target)
        assert refused.returncode == 2, (target, refused.stdout, refused.stderr)
        assert says in refused.stderr and "secret" not in refused.stdout, refused.stderr
    assert not has_log(postgres, db)
    assert not Path("/x").exists()
    still_sqlite(data, 5)


def test_migrate_reports_progress_as_it_copies_not_only_copy_0_of_5(
    postgres: PgServer, tmp_path: Path
) -> None:
    """Issue #35: `migrate` printed `migrate: copy: 0/5` and nothing after it (its later
    stages came within the 2 s a non-terminal progress line waits). Now each stage starts
    and ends with a line: the entries copied, each export's files, each audit's entries."""
    data = small_log(tmp_path, count=7)
    done = migrate(data, postgres.url(postgres.fresh_database("progress")))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("migrate: ")]
    stages = list(dict.fromkeys(line.rsplit(": ", 1)[0] for line in lines))
    assert stages == [
        "migrate: copy the entries",
        "migrate: export the source",
        "migrate: export the copy",
        "migrate: audit the source",
        "migrate: audit the copy",
        "migrate: switched",
    ], done.stderr
    assert "migrate: copy the entries: 0/7" in lines and "migrate: copy the entries: 7/7" in lines
    assert "migrate: audit the copy: 7/7" in lines and lines[-1] == "migrate: switched: 1/1"
    files = json.loads(done.stdout)["export_files"]
    assert any(line.startswith("migrate: export the copy: ") for line in lines), lines
    assert files > 0
