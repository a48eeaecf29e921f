"""One flipped bit anywhere in a small log's database file: whenever SQLite's integrity_check
fails or what the tables hold changed, the audit says so (and never crashes).

The log: 40 entries over two days, checkpoints, both days sealed and stamped by the test
TSA. Flip positions are stratified: the same number in every page of the file (so every
table's and index's pages, and the header, are hit), drawn in each page from a seeded
generator, so a failure names a bit that reproduces; 600 uniform draws took six minutes on a
loaded machine and could miss a small table's page. The audit runs in this process (the
same `audit_data_dir` the CLI calls); every 40th flip also goes through the real CLI, whose
exit code must match."""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from capability_anchor.audit.datadir import audit_data_dir
from capability_anchor.errors import StoreError
from capability_anchor.log import KEY_FILE, Log, utc_day
from capability_anchor.log.stamping import stamp_missing
from capability_anchor.store.sqlite import DB_NAME
from tests.e2e.test_stamping import config_for
from tests.kit.logkit import DAY1, DAY2, DAY3, ISS, Clock, at, record, run_cli
from tests.kit.tsakit import TestTsa

SEED = 20261201
PER_PAGE = 8  # flips in each page of the file (about 30 pages: about 240 flips)
CLI_EVERY = 40
TABLES = (
    "meta",
    "keys",
    "entries",
    "heads",
    "tiles",
    "servers",
    "stamps",
    "key_records",
    "settings",
)
USER_VERSION = range(60, 64)  # header bytes: a flip there asks for another schema version


def build(data: Path, tsa: TestTsa) -> None:
    clock = Clock(at(DAY1, 60))
    config = config_for(tsa)
    with Log.init(data, iss=ISS, clock=clock, config=config.to_config()) as log:
        clock.set(DAY1, 3600)
        log.append([record(DAY1, n) for n in range(20)])
        clock.t += 60
        log.checkpoint()
        clock.t += 60
        log.append([record(DAY1, n) for n in range(20, 25)])
        clock.set(DAY2, 7200)
        log.append([record(DAY2, n) for n in range(15)])
        clock.t += 60
        log.checkpoint()
        clock.set(DAY3, 60)
        log.seal()
        assert len(log.store.sealed_heads()) == 2
        assert all(r.ok for r in stamp_missing(log, config))
    assert not (data / (DB_NAME + "-wal")).exists()


def _ro(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    # The stored bytes, UTF-8 or not, and marked as TEXT: a flipped serial type turns TEXT
    # into a BLOB of the same bytes, which is a change too.
    conn.text_factory = lambda raw: ("TEXT", raw)
    return conn


def integrity_ok(db: Path) -> bool:
    conn = _ro(db)
    try:
        return [r[0] for r in conn.execute("PRAGMA integrity_check")] == [("TEXT", b"ok")]
    except (sqlite3.Error, UnicodeDecodeError):  # a message quoting a damaged name
        return False
    finally:
        conn.close()


def content(db: Path) -> dict[str, Any] | None:
    """Every row of every table by a table scan (rowid tables in rowid order: the order of
    stamps is meaning, "the earliest stored"), the schema and the schema version; None when
    SQLite cannot read it."""
    conn = _ro(db)
    try:
        dump: dict[str, Any] = {
            "user_version": conn.execute("PRAGMA user_version").fetchone()[0],
            "schema": conn.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"
            ).fetchall(),
        }
        for table in TABLES:
            cursor = conn.execute(
                f"SELECT * FROM {table} NOT INDEXED"
                + (" ORDER BY rowid" if table != "servers" else "")
            )
            columns = [d[0] for d in cursor.description]
            dump[table] = [dict(zip(columns, row, strict=True)) for row in cursor]
        return dump
    except (sqlite3.Error, UnicodeDecodeError):
        return None
    finally:
        conn.close()


def changed_columns(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    """`table.column` names whose values differ (`table.*` when rows were added or lost)."""
    found: set[str] = set()
    for part, rows in before.items():
        if part in TABLES:
            if len(rows) != len(after[part]):
                found.add(f"{part}.*")
                continue
            for old, new in zip(rows, after[part], strict=True):
                if old.keys() != new.keys():  # the schema's text changed a column's name
                    found.add(f"{part}.(columns)")
                    continue
                found |= {f"{part}.{c}" for c in old if old[c] != new[c]}
        elif rows != after[part]:
            found.add(part)
    return found


def _day_of(t: object) -> tuple[str, bytes]:
    """The UTC day of a stored time, as `content` spells TEXT; an impossible day otherwise."""
    if not isinstance(t, int):
        return ("TEXT", b"")
    try:
        return ("TEXT", utc_day(t).encode())
    except (ValueError, OverflowError, OSError):
        return ("TEXT", b"")


def unseeable(before: dict[str, Any], after: dict[str, Any], columns: set[str]) -> bool:
    """A change no audit can see without another copy to compare with: an entry's
    accepted_at that is still a time on its day, a stamp's `added` that is still after its day
    (neither is signed nor published: docs/explanation/decisions/README.md)."""
    if columns == {"entries.accepted_at"}:
        return all(_day_of(row["accepted_at"]) == row["day"] for row in after["entries"])
    if columns == {"stamps.added"}:
        return all(_day_of(row["added"]) > row["day"] for row in after["stamps"])
    return False


def _kind(problem: str) -> str:
    for prefix in ("integrity_check", "schema", "index", "the database cannot be read"):
        if problem.startswith(prefix):
            return prefix
    if problem.startswith("the audit stopped"):
        return "the audit stopped on the damage"
    if problem.startswith("head ") or "prev" in problem:
        return "heads"
    if "stamp" in problem:
        return "stamps"
    if "tile" in problem:
        return "tiles"
    if "server index" in problem:
        return "/record index"
    if problem.startswith("day "):
        return "entries and days"
    return "other: " + problem[:50]


def test_every_meaningful_single_bit_flip_is_flagged(tmp_path: Path, tsa_ec: TestTsa) -> None:
    clean = tmp_path / "clean"
    build(clean, tsa_ec)
    pristine = (clean / DB_NAME).read_bytes()
    before = content(clean / DB_NAME)
    assert before is not None and integrity_ok(clean / DB_NAME)
    assert audit_data_dir(clean).ok
    work = tmp_path / "work"
    work.mkdir()
    (work / KEY_FILE).write_bytes((clean / KEY_FILE).read_bytes())
    (work / KEY_FILE).chmod(0o600)
    db = work / DB_NAME
    rng = random.Random(SEED)
    page = int.from_bytes(pristine[16:18], "big")
    page = 65536 if page == 1 else page
    pages = len(pristine) // page
    bits = [p * page * 8 + b for p in range(pages) for b in rng.sample(range(page * 8), PER_PAGE)]
    bits.append(USER_VERSION[-1] * 8)  # another schema version: the exit-2 path, always
    tally: Counter[str] = Counter()
    flagged_by: Counter[str] = Counter()
    missed: list[str] = []
    false_alarms: list[str] = []  # reported, not asserted: a flag where nothing changed
    for n, bit in enumerate(bits):
        at_byte = bit // 8
        flipped = bytearray(pristine)
        flipped[at_byte] ^= 1 << (bit % 8)
        db.write_bytes(flipped)
        ok = integrity_ok(db)
        after = content(db)
        columns = set() if after is None else changed_columns(before, after)
        if after is None:
            columns = {"(unreadable)"}
        try:
            report = audit_data_dir(work)
            refused = None
        except StoreError as exc:  # exit 2: a schema version this program does not know
            report, refused = None, str(exc)
        if n % CLI_EVERY == 0:
            result = run_cli("audit", "--data", work)
            assert "Traceback" not in result.stderr, (bit, result.stderr)
            want = 2 if report is None else (0 if report.ok else 1)
            assert result.returncode == want, (bit, result.returncode, result.stderr)
        if refused is not None:
            assert at_byte in USER_VERSION and "schema version" in refused, (bit, refused)
            tally["refused: another schema version (exit 2)"] += 1
            continue
        assert report is not None
        meaningful = not ok or bool(columns)
        if not meaningful:
            tally["no change, integrity ok"] += 1
            tally[f"  of which the audit flagged {not report.ok}"] += 1
            if not report.ok:
                false_alarms.append(f"bit {bit} (byte {at_byte}): {report.problems[0]}")
            continue
        tally["integrity_check failed" if not ok else "changed content, integrity ok"] += 1
        if ok and after is not None and unseeable(before, after, columns):
            tally[f"unseeable change of {sorted(columns)} (flagged: {not report.ok})"] += 1
            continue
        if report.ok:
            missed.append(f"bit {bit} (byte {at_byte}): integrity ok={ok}, changed {columns}")
            continue
        tally["flagged"] += 1
        flagged_by[_kind(report.problems[0])] += 1
    summary = "\n".join(
        [f"seed {SEED}, {len(bits)} flips of a {len(pristine)}-byte database ({pages} pages)"]
        + [f"{k}: {v}" for k, v in sorted(tally.items())]
        + [f"first problem named: {k}: {v}" for k, v in flagged_by.most_common()]
        + [f"flagged although nothing changed: {a}" for a in false_alarms]
    )
    print(summary)
    assert not missed, summary + "\nmissed:\n" + "\n".join(missed)
