"""Append-only is enforced by the database itself (SPEC §10): the file is opened with the
stdlib `sqlite3` module, as an attacker (or a buggy tool) with file access would, and every
trigger is shown aborting. After each refused statement the database is unchanged (its full
SQL dump compares equal) and the log still audits clean."""

from __future__ import annotations

import contextlib
import gc
import shutil
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from capability_anchor.audit import audit_store
from capability_anchor.errors import Conflict, StoreError
from capability_anchor.leaf import leaf_bytes
from capability_anchor.log import Log
from capability_anchor.merkle import hash_leaf
from capability_anchor.store import SCHEMA_VERSION
from capability_anchor.store import open as stores
from capability_anchor.store.sqlite import DB_NAME
from tests.kit.logkit import DAY1, DAY2, DAY3, DAY5, History, build_history, raw, record

DAY6 = "2026-03-06"
HASH_A = bytes(range(32))
HASH_B = bytes(range(32, 64))
TODAY_SIZE = 3  # entries appended on DAY5 (the unsealed "today") by the `today` fixture


def dump(data: Path) -> str:
    """The whole database as SQL: schema (triggers included), every row, user_version."""
    with raw(data) as conn:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        return f"-- user_version {version}\n" + "\n".join(conn.iterdump())


def audit_problems(data: Path) -> list[str]:
    with Log.open(data) as log:
        return audit_store(log).problems


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> History:
    """Days 1-4 sealed, and on DAY5 (today) 3 entries with an unsealed head of size 3."""
    history = build_history(tmp_path_factory.mktemp("triggers"))
    with history.open() as log:
        log.append([record(DAY5, n) for n in range(TODAY_SIZE)])
        history.clock.t += 60
        assert log.checkpoint() is not None
        assert audit_store(log).ok
    return history


@pytest.fixture
def today(base: History, tmp_path: Path) -> History:
    return base.copy(tmp_path / "data")


def head_row(data: Path, day: str, sealed: bool) -> tuple[object, ...]:
    with raw(data) as conn:
        row = conn.execute(
            "SELECT day, tree_size, sealed, root, iat, kid, doc FROM heads "
            "WHERE day = ? AND sealed = ? ORDER BY tree_size DESC LIMIT 1",
            (day, int(sealed)),
        ).fetchone()
    assert row is not None
    return tuple(row)


def leaf_hash_of(data: Path, day: str, index: int) -> bytes:
    with raw(data) as conn:
        (h,) = conn.execute(
            "SELECT leaf_hash FROM entries WHERE day = ? AND leaf_index = ?", (day, index)
        ).fetchone()
    return bytes(h)


def insert_stamp(data: Path) -> None:
    """Stamping is not implemented yet: a stamp row goes in through plain SQL (inserts of
    stamps are allowed; only UPDATE and DELETE are refused)."""
    with raw(data) as conn:
        conn.execute(
            "INSERT INTO stamps (day, tsa, token, gen_time, added) VALUES (?, ?, ?, ?, ?)",
            (DAY1, "https://tsa.example", b"\x30\x03\x02\x01\x00", "2026-03-02T00:00:05Z", 1),
        )


def assert_refused(
    data: Path, sql: str, params: Sequence[object], match: str, *, prepare: bool = False
) -> None:
    """`sql` run by a plain sqlite3 connection raises, and nothing changed."""
    if prepare:
        insert_stamp(data)
    before = dump(data)
    problems = audit_problems(data)
    with raw(data) as conn, pytest.raises(sqlite3.IntegrityError, match=match):
        conn.execute(sql, params)
    assert dump(data) == before
    assert audit_problems(data) == problems
    if not prepare:
        assert problems == []


# --- every trigger, through plain SQL --------------------------------------------------------

UPDATE_DELETE = [
    pytest.param(
        "UPDATE entries SET claims = x'7b7d' WHERE day = ? AND leaf_index = 0",
        (DAY1,),
        "append-only: entries cannot be updated",
        id="entries_update",
    ),
    pytest.param(
        "UPDATE entries SET accepted_at = accepted_at WHERE day = ?",
        (DAY5,),
        "append-only: entries cannot be updated",
        id="entries_update_noop_unsealed_day",
    ),
    pytest.param(
        "DELETE FROM entries WHERE day = ? AND leaf_index = 4",
        (DAY1,),
        "append-only: entries cannot be deleted",
        id="entries_delete_last",
    ),
    pytest.param(
        "DELETE FROM entries WHERE day = ?",
        (DAY5,),
        "append-only: entries cannot be deleted",
        id="entries_delete_unsealed_day",
    ),
    pytest.param(
        "UPDATE heads SET doc = x'7b7d' WHERE day = ? AND sealed = 1",
        (DAY3,),
        "append-only: heads cannot be updated",
        id="heads_update",
    ),
    pytest.param(
        "UPDATE heads SET sealed = 0 WHERE day = ?",
        (DAY2,),
        "append-only: heads cannot be updated",
        id="heads_unseal",
    ),
    pytest.param(
        "DELETE FROM heads WHERE day = ? AND sealed = 1",
        (DAY2,),
        "append-only: heads cannot be deleted",
        id="heads_delete",
    ),
    pytest.param(
        "UPDATE tiles SET root = zeroblob(32) WHERE day = ? AND width = 256",
        (DAY3,),
        "append-only: tiles cannot be updated",
        id="tiles_update",
    ),
    pytest.param(
        "DELETE FROM tiles WHERE day = ?",
        (DAY1,),
        "append-only: tiles cannot be deleted",
        id="tiles_delete",
    ),
    pytest.param(
        "UPDATE keys SET jwk = '{}'",
        (),
        "append-only: keys cannot be updated",
        id="keys_update",
    ),
    pytest.param(
        "DELETE FROM keys",
        (),
        "append-only: keys cannot be deleted",
        id="keys_delete",
    ),
]


@pytest.mark.parametrize(("sql", "params", "match"), UPDATE_DELETE)
def test_update_and_delete_are_refused(
    today: History, sql: str, params: Sequence[object], match: str
) -> None:
    assert_refused(today.data, sql, params, match)


@pytest.mark.parametrize(
    ("sql", "match"),
    [
        pytest.param(
            "UPDATE stamps SET token = x'00'",
            "append-only: stamps cannot be updated",
            id="stamps_update",
        ),
        pytest.param(
            "DELETE FROM stamps", "append-only: stamps cannot be deleted", id="stamps_delete"
        ),
    ],
)
def test_stamps_update_and_delete_are_refused(today: History, sql: str, match: str) -> None:
    assert_refused(today.data, sql, (), match, prepare=True)


def test_stamp_insert_is_allowed(today: History) -> None:
    """Stamps only ever get added (a TSA reply arrives after the seal)."""
    insert_stamp(today.data)
    with raw(today.data) as conn:
        assert conn.execute("SELECT count(*) FROM stamps").fetchone() == (1,)


def _entry(day: str, index: int, leaf_hash: bytes = HASH_A) -> tuple[object, ...]:
    return (day, index, leaf_hash, b"{}", 1)


INSERT_ENTRY = "INSERT INTO entries (day, leaf_index, leaf_hash, claims, accepted_at) " + (
    "VALUES (?, ?, ?, ?, ?)"
)
INSERT_HEAD = "INSERT INTO heads (day, tree_size, sealed, root, iat, kid, doc) " + (
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def test_entry_into_sealed_day_is_refused(today: History) -> None:
    # 320 is the next index of DAY3, so only the sealed-day trigger can refuse it.
    assert_refused(today.data, INSERT_ENTRY, _entry(DAY3, 320), "append-only: the day is sealed")


def test_entry_into_sealed_empty_day_is_refused(today: History) -> None:
    assert_refused(today.data, INSERT_ENTRY, _entry(DAY2, 0), "append-only: the day is sealed")


def test_a_real_leaf_into_a_sealed_day_is_refused(today: History) -> None:
    data = leaf_bytes(record(DAY1, 99))
    row = (DAY1, 5, hash_leaf(data), data, 1)
    assert_refused(today.data, INSERT_ENTRY, row, "append-only: the day is sealed")


def test_head_into_sealed_day_is_refused(today: History) -> None:
    day, _, _, root, iat, kid, doc = head_row(today.data, DAY3, sealed=False)
    # An unsealed head of a new size, after the seal.
    row = (day, 321, 0, root, iat, kid, doc)
    assert_refused(today.data, INSERT_HEAD, row, "append-only: the day is sealed")


def test_second_sealed_head_of_a_day_is_refused(today: History) -> None:
    day, _, _, root, iat, kid, doc = head_row(today.data, DAY1, sealed=True)
    row = (day, 6, 1, root, iat, kid, doc)
    assert_refused(today.data, INSERT_HEAD, row, "append-only: the day is sealed")


@pytest.mark.parametrize(
    ("day", "index"),
    [
        pytest.param(DAY5, TODAY_SIZE + 1, id="skips_an_index"),
        pytest.param(DAY5, TODAY_SIZE - 1, id="reuses_an_index"),
        pytest.param(DAY5, 0, id="restarts_at_zero"),
        pytest.param(DAY6, 1, id="new_day_not_from_zero"),
    ],
)
def test_non_contiguous_leaf_index_is_refused(today: History, day: str, index: int) -> None:
    assert_refused(
        today.data,
        INSERT_ENTRY,
        _entry(day, index),
        "append-only: leaf_index is not the next index of its day",
    )


def test_head_with_same_size_and_another_root_is_refused(today: History) -> None:
    # DAY5 is not sealed; a sealed head of the same size as its checkpoint but another root.
    day, size, _, _, iat, kid, doc = head_row(today.data, DAY5, sealed=False)
    row = (day, size, 1, HASH_B, iat, kid, doc)
    assert_refused(
        today.data, INSERT_HEAD, row, "append-only: another head of this size has another root"
    )


def test_duplicate_head_is_refused_by_the_primary_key(today: History) -> None:
    day, size, sealed, root, iat, kid, doc = head_row(today.data, DAY5, sealed=False)
    row = (day, size, sealed, root, iat, kid, doc)
    assert_refused(
        today.data,
        INSERT_HEAD,
        row,
        r"UNIQUE constraint failed: heads\.day, heads\.tree_size, heads\.sealed",
    )


def test_duplicate_leaf_hash_in_a_day_is_refused(today: History) -> None:
    # The guard trigger fires before the unique index would (which stays as a second line).
    row = _entry(DAY5, TODAY_SIZE, leaf_hash_of(today.data, DAY5, 0))
    assert_refused(
        today.data,
        INSERT_ENTRY,
        row,
        r"append-only: this leaf is already stored in this day",
    )


def test_the_same_leaf_on_another_day_is_allowed(today: History) -> None:
    """The unique index is per day: a record may be logged again on a later day."""
    with today.open() as log:
        today.clock.set(DAY6, 60)
        (again,) = log.append([record(DAY5, 0)])
        assert (again.day, again.leaf_index, again.duplicate) == (DAY6, 0, False)
        assert again.leaf_hash == leaf_hash_of(today.data, DAY5, 0)


# --- INSERT OR REPLACE: an UPDATE/DELETE in disguise -------------------------------------------
# SQLite's REPLACE conflict resolution deletes the conflicting row without firing DELETE
# triggers (unless PRAGMA recursive_triggers is on, which a plain connection does not set),
# so each statement below rewrites or removes a stored row that the triggers should protect.


def _replace_cases() -> list[object]:
    return [
        pytest.param(
            "INSERT OR REPLACE INTO tiles (day, level, idx, width, hashes, root) "
            "SELECT day, level, idx, width, zeroblob(length(hashes)), root FROM tiles "
            "WHERE day = ? AND width = 256",
            (DAY3,),
            id="tiles_replaced_in_sealed_day",
        ),
        pytest.param(
            "INSERT OR REPLACE INTO keys (kid, jwk, added) SELECT kid, '{}', added FROM keys",
            (),
            id="keys_replaced",
        ),
        pytest.param(
            "INSERT OR REPLACE INTO entries (day, leaf_index, leaf_hash, claims, accepted_at) "
            "SELECT day, 3, leaf_hash, x'7b7d', accepted_at FROM entries "
            "WHERE day = ? AND leaf_index = 0",
            (DAY5,),
            id="entry_deleted_by_unique_index_replace",
        ),
        pytest.param(
            "INSERT OR REPLACE INTO heads (day, tree_size, sealed, root, iat, kid, doc) "
            "SELECT day, tree_size, sealed, root, iat + 1, kid, x'7b7d' FROM heads "
            "WHERE day = ? AND sealed = 0",
            (DAY5,),
            id="unsealed_head_replaced",
        ),
    ]


@pytest.mark.parametrize(("sql", "params"), _replace_cases())
def test_insert_or_replace_cannot_rewrite_a_row(
    today: History, sql: str, params: Sequence[object]
) -> None:
    data = today.data
    before = dump(data)
    with raw(data) as conn, contextlib.suppress(sqlite3.IntegrityError):
        conn.execute(sql, params)
    assert dump(data) == before


def test_insert_or_replace_cannot_rewrite_a_stamp(today: History) -> None:
    insert_stamp(today.data)
    before = dump(today.data)
    with raw(today.data) as conn, contextlib.suppress(sqlite3.IntegrityError):
        conn.execute(
            "INSERT OR REPLACE INTO stamps (day, tsa, token, gen_time, added) "
            "SELECT day, tsa, x'00', gen_time, added FROM stamps"
        )
    assert dump(today.data) == before


def test_the_store_maps_trigger_aborts_to_conflict(today: History) -> None:
    """Through our own code the same refusal is a Conflict naming the rule."""
    with today.open() as log:
        with pytest.raises(Conflict, match="append-only: heads cannot be deleted"):
            log.store.execute_raw("DELETE FROM heads WHERE day = ?", (DAY1,))
        with pytest.raises(Conflict, match="append-only: the day is sealed"):
            log.store.execute_raw(INSERT_ENTRY, _entry(DAY1, 5))
        assert audit_store(log).ok


# --- STRICT tables ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "params", "match"),
    [
        pytest.param(
            INSERT_ENTRY,
            (DAY5, "three", HASH_A, b"{}", 1),
            "cannot store TEXT value in INTEGER column entries.leaf_index",
            id="text_in_leaf_index",
        ),
        pytest.param(
            INSERT_ENTRY,
            (DAY5, TODAY_SIZE, HASH_A, b"{}", "noon"),
            "cannot store TEXT value in INTEGER column entries.accepted_at",
            id="text_in_accepted_at",
        ),
        pytest.param(
            INSERT_ENTRY,
            (DAY5, TODAY_SIZE, HASH_A.hex()[:32], b"{}", 1),
            "cannot store TEXT value in BLOB column entries.leaf_hash",
            id="text_in_leaf_hash",
        ),
        pytest.param(
            INSERT_ENTRY,
            (DAY5, TODAY_SIZE, HASH_A, "{}", 1),
            "cannot store TEXT value in BLOB column entries.claims",
            id="text_in_claims",
        ),
        pytest.param(
            INSERT_ENTRY,
            (DAY5, TODAY_SIZE, HASH_A[:31], b"{}", 1),
            "CHECK constraint failed",
            id="short_leaf_hash",
        ),
        pytest.param(
            INSERT_HEAD,
            (DAY6, "3", 0, HASH_A, 1, "kid", b"{}"),
            None,  # "3" is losslessly an integer: STRICT coerces it, the NOT NULL/CHECKs pass
            id="integer_text_in_tree_size_is_coerced",
        ),
        pytest.param(
            INSERT_HEAD,
            (DAY6, 1.5, 0, HASH_A, 1, "kid", b"{}"),
            "cannot store REAL value in INTEGER column heads.tree_size",
            id="real_in_tree_size",
        ),
        pytest.param(
            "INSERT INTO tiles (day, level, idx, width, hashes, root) VALUES (?, ?, ?, ?, ?, ?)",
            (DAY6, "zero", 0, 1, HASH_A, None),
            "cannot store TEXT value in INTEGER column tiles.level",
            id="text_in_tile_level",
        ),
        pytest.param(
            "INSERT INTO stamps (day, tsa, token, gen_time, added) VALUES (?, ?, ?, ?, ?)",
            (DAY1, "https://tsa.example", "not der", "2026-03-02T00:00:00Z", 1),
            "cannot store TEXT value in BLOB column stamps.token",
            id="text_in_stamp_token",
        ),
    ],
)
def test_strict_tables_refuse_wrong_types(
    today: History, sql: str, params: Sequence[object], match: str | None
) -> None:
    if match is None:
        # The control case: STRICT is not "refuse everything", it refuses lossy types.
        with raw(today.data) as conn:
            conn.execute(sql, params)
            assert conn.execute(
                "SELECT typeof(tree_size), tree_size FROM heads WHERE day = ?", (DAY6,)
            ).fetchone() == ("integer", 3)
        return
    assert_refused(today.data, sql, params, match)


def test_every_table_is_strict(today: History) -> None:
    with raw(today.data) as conn:
        rows = conn.execute("SELECT name, strict FROM pragma_table_list WHERE schema = 'main'")
        strict = {name: flag for name, flag in rows if not name.startswith("sqlite_")}
    assert strict == {
        n: 1
        for n in (
            *("meta", "keys", "entries", "heads", "tiles", "stamps", "servers"),
            *("key_records", "settings"),
            *("history", "history_tiles"),
            *("checkpoints", "cosignatures", "policies", "witness_state"),
        )
    }


def test_every_trigger_is_installed(today: History) -> None:
    with raw(today.data) as conn:
        names = {
            n
            for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = ?", ("trigger",))
        }
    expected = {
        f"{t}_no_{op}"
        for t in ("entries", "heads", "tiles", "stamps", "keys", "servers")
        for op in ("update", "delete")
    }
    expected |= {"entries_next_index", "entries_not_sealed", "heads_not_sealed", "heads_same_root"}
    trust_tables = ("key_records", "settings")
    expected |= {f"{t}_no_{op}" for t in trust_tables for op in ("update", "delete", "replace")}
    expected |= {
        f"{t}_no_{op}" for t in ("history", "history_tiles") for op in ("update", "delete")
    }
    expected |= {
        "history_next_index",
        "history_in_order",
        "history_of_a_head",
        "history_tiles_no_replace",
    }
    expected |= {
        f"{t}_no_{op}"
        for t in ("checkpoints", "cosignatures", "policies")
        for op in ("update", "delete")
    }
    expected |= {
        "checkpoints_next_size",
        "checkpoints_of_the_history",
        "cosignatures_of_a_checkpoint",
        "cosignatures_no_replace",
        "policies_no_replace",
    }
    assert expected <= names


# --- connection settings, schema version, foreign files ----------------------------------------


def _pragmas(log: Log) -> tuple[object, ...]:
    (mode,) = log.store.execute_raw("PRAGMA journal_mode")[0]
    (sync,) = log.store.execute_raw("PRAGMA synchronous")[0]
    (fks,) = log.store.execute_raw("PRAGMA foreign_keys")[0]
    (busy,) = log.store.execute_raw("PRAGMA busy_timeout")[0]
    return mode, sync, fks, busy


def test_wal_and_synchronous_full_on_every_connection(tmp_path: Path) -> None:
    with Log.init(tmp_path / "data", iss="https://resolver.example") as created:
        assert _pragmas(created) == ("wal", 2, 1, 30_000)  # synchronous 2 = FULL
        with Log.open(tmp_path / "data") as second:  # a second connection, same settings
            assert _pragmas(second) == ("wal", 2, 1, 30_000)
    # WAL is recorded in the file itself (header bytes 18-19 = 2), so every reader uses it.
    assert (tmp_path / "data" / DB_NAME).read_bytes()[18:20] == b"\x02\x02"


def test_schema_version_is_recorded(today: History) -> None:
    assert SCHEMA_VERSION == 5
    with today.open() as log:
        assert log.store.execute_raw("PRAGMA user_version") == [(SCHEMA_VERSION,)]


def _set_user_version(data: Path, version: int) -> None:
    with raw(data) as conn:
        conn.execute(f"PRAGMA user_version = {int(version)}")


def test_a_newer_schema_is_refused(today: History) -> None:
    _set_user_version(today.data, SCHEMA_VERSION + 1)
    before = dump(today.data)
    with pytest.raises(StoreError) as refused:
        Log.open(today.data)
    message = str(refused.value)
    assert f"schema version {SCHEMA_VERSION + 1}" in message
    assert f"knows up to {SCHEMA_VERSION}" in message
    assert "upgrade capability-anchor" in message
    del refused
    gc.collect()
    assert dump(today.data) == before  # nothing migrated "down", nothing written


def test_a_store_without_schema_version_is_refused(today: History) -> None:
    _set_user_version(today.data, 0)
    with pytest.raises(StoreError, match="is not a capability-anchor log"):
        stores.open(today.data)
    gc.collect()


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    junk = b"capability-anchor? no: this is a text file, not SQLite.\n" * 100
    (data / DB_NAME).write_bytes(junk)
    with pytest.raises(StoreError, match=r"cannot open the log .*file is not a database"):
        Log.open(data)
    gc.collect()
    assert (data / DB_NAME).read_bytes() == junk


def _foreign_sqlite(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('not a log')")
        conn.commit()


@pytest.mark.parametrize("kind", ["foreign_sqlite_db", "empty_file"])
def test_a_database_of_another_program_is_refused(tmp_path: Path, kind: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    if kind == "empty_file":
        (data / DB_NAME).write_bytes(b"")
    else:
        _foreign_sqlite(data / DB_NAME)
    with pytest.raises(StoreError, match=r"is not a capability-anchor log \(schema version 0\)"):
        Log.open(data)
    gc.collect()


@pytest.mark.parametrize("kind", ["foreign_sqlite_db", "empty_file"])
def test_a_refused_database_is_left_untouched(tmp_path: Path, kind: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    if kind == "empty_file":
        (data / DB_NAME).write_bytes(b"")
    else:
        _foreign_sqlite(data / DB_NAME)
    before = (data / DB_NAME).read_bytes()
    with pytest.raises(StoreError):
        stores.open(data)
    gc.collect()  # the refused connection is not closed by _connect; let GC close it
    assert (data / DB_NAME).read_bytes() == before
    assert sorted(p.name for p in data.iterdir()) == [DB_NAME]


def test_no_store_is_refused_and_init_never_overwrites(today: History, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no log at"):
        stores.open(tmp_path / "nothing")
    before = dump(today.data)
    with pytest.raises(Conflict, match="refusing to overwrite"):
        Log.init(today.data, iss="https://other.example")
    assert dump(today.data) == before


def test_a_copy_with_triggers_dropped_still_audits_until_changed(
    today: History, tmp_path: Path
) -> None:
    """Dropping triggers alone changes no published data; the tamper tests (test_audit_tamper)
    show that any change made after dropping them is caught by audit."""
    copy = tmp_path / "copy"
    shutil.copytree(today.data, copy)
    with raw(copy) as conn:
        conn.execute("DROP TRIGGER entries_no_update")
    assert audit_problems(copy) == []
    with raw(copy) as conn:
        conn.execute(
            "UPDATE entries SET claims = x'7b7d' WHERE day = ? AND leaf_index = 0", (DAY3,)
        )
    problems = audit_problems(copy)
    assert any(f"day {DAY3}: entry 0: leaf hash does not match" in p for p in problems)
