"""`capability-anchor audit` catches tampering (SPEC §10): each case copies a clean history,
tampers with the copy the way an attacker with file access would (plain SQL with the
append-only triggers dropped, or edits to an exported folder), runs the real CLI in a
process and expects exit 1 with a message naming the day and what is wrong.

The cases are named after the attack; each is a function that tampers with a copy."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import pytest
import rfc8785

from capability_anchor import head as heads
from capability_anchor.keys import KeySet, SigningKey, load_key_file
from capability_anchor.leaf import leaf_bytes
from capability_anchor.log import KEY_FILE
from capability_anchor.merkle import hash_leaf
from capability_anchor.store.sqlite import DB_NAME
from tests.kit.logkit import (
    DAY1,
    DAY2,
    DAY3,
    DAY4,
    DAY5,
    DAYS,
    History,
    build_history,
    raw,
    record,
    run_cli,
)

FAKE = hashlib.sha256(b"forged").hexdigest()

# --- the clean history, built once -------------------------------------------------------------


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    return build_history(tmp_path_factory.mktemp("audit"))


@pytest.fixture(scope="module")
def exported(history: History, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "roots"
    result = run_cli("export", "--data", history.data, out)
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture
def empty(tmp_path: Path) -> Path:
    """A data dir with no log in it: `audit --data EMPTY --roots DIR` audits the folder alone."""
    path = tmp_path / "no-log"
    path.mkdir()
    return path


def audit(data: Path, roots: Path | None = None) -> subprocess.CompletedProcess[str]:
    extra = () if roots is None else ("--roots", roots)
    return run_cli("audit", "--data", data, *extra)


def assert_clean(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    assert report["ok"] is True
    assert report["problems"] == []
    return report


def assert_caught(result: subprocess.CompletedProcess[str], expected: Sequence[str]) -> None:
    """Exit 1, every expected phrase named on stderr, and the report says not ok."""
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    for phrase in expected:
        assert phrase in result.stderr, f"{phrase!r} not in:\n{result.stderr}"
    if result.stdout.strip():  # no report when the log refuses to open (start-up check)
        report = json.loads(result.stdout)
        assert report["ok"] is False
        assert report["problems"]


# --- tampering helpers ----------------------------------------------------------------------


def sql(data: Path, statement: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
    with raw(data) as conn:
        return [tuple(r) for r in conn.execute(statement, params)]


def drop(data: Path, *triggers: str) -> None:
    """What an attacker does first: the triggers only guard honest SQL."""
    for name in triggers:
        sql(data, f"DROP TRIGGER {name}")


def sealed_doc(data: Path, day: str) -> bytes:
    ((doc,),) = sql(data, "SELECT doc FROM heads WHERE day = ? AND sealed = 1", (day,))
    return bytes(doc)


def unsealed_doc(data: Path, day: str, size: int) -> bytes:
    query = "SELECT doc FROM heads WHERE day = ? AND tree_size = ? AND sealed = 0"
    ((doc,),) = sql(data, query, (day, size))
    return bytes(doc)


def set_doc(data: Path, day: str, size: int, sealed: bool, doc: bytes) -> None:
    """Replace a stored head document, keeping the row's other columns in step with it."""
    claims = heads.parse_document(doc).claims
    kid = json.loads(_b64(doc_jws(doc).split(".")[0]))["kid"]
    drop(data, "heads_no_update")
    sql(
        data,
        "UPDATE heads SET doc = ?, root = ?, iat = ?, kid = ? "
        "WHERE day = ? AND tree_size = ? AND sealed = ?",
        (doc, bytes.fromhex(claims["root"]), claims["iat"], kid, day, size, int(sealed)),
    )


def _b64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def doc_jws(doc: bytes) -> str:
    return heads.parse_document(doc).jws


def resign(doc: bytes, key: SigningKey, **changes: object) -> bytes:
    claims = {**heads.parse_document(doc).claims, **changes}
    return heads.sign(claims, key).document()


def log_key(data: Path) -> SigningKey:
    return load_key_file(data / KEY_FILE)


def flip_char(text: str, at: int) -> str:
    """Change one base64url/hex character (to another character of the same alphabet)."""
    new = "0" if text[at] != "0" else "1"
    return text[:at] + new + text[at + 1 :]


def flip_signature(doc: bytes) -> bytes:
    claims = heads.parse_document(doc).claims
    token = doc_jws(doc)
    signature_at = token.rindex(".") + 10
    return heads.document(claims, flip_char(token, signature_at))


def flip_byte(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


# --- the store: a stored byte changed, with the triggers dropped ---------------------------------


def entry_claims_byte_flipped(data: Path) -> None:
    drop(data, "entries_no_update")
    ((claims,),) = sql(data, "SELECT claims FROM entries WHERE day = ? AND leaf_index = 7", (DAY3,))
    sql(
        data,
        "UPDATE entries SET claims = ? WHERE day = ? AND leaf_index = 7",
        (flip_byte(bytes(claims), 20), DAY3),
    )


def _replace_entry(data: Path, day: str, index: int) -> None:
    claims = leaf_bytes(record(day, 9999))
    drop(data, "entries_no_update")
    sql(
        data,
        "UPDATE entries SET claims = ?, leaf_hash = ? WHERE day = ? AND leaf_index = ?",
        (claims, hash_leaf(claims), day, index),
    )


def _delete_entry(day: str, index: int) -> Callable[[Path], None]:
    def tamper(data: Path) -> None:
        drop(data, "entries_no_delete")
        sql(data, "DELETE FROM entries WHERE day = ? AND leaf_index = ?", (day, index))

    return tamper


def _insert_entry(day: str, index: int) -> Callable[[Path], None]:
    def tamper(data: Path) -> None:
        drop(data, "entries_not_sealed")
        claims = leaf_bytes(record(day, 5000 + index))
        sql(
            data,
            "INSERT INTO entries (day, leaf_index, leaf_hash, claims, accepted_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (day, index, hash_leaf(claims), claims, 1),
        )

    return tamper


def head_swapped_with_other_day(data: Path) -> None:
    """Day 2 and day 4 are both empty (same root): only the day tells them apart."""
    drop(data, "heads_no_update")
    sql(
        data,
        "UPDATE heads SET doc = ? WHERE day = ? AND sealed = 1",
        (sealed_doc(data, DAY4), DAY2),
    )


def heads_of_two_days_swapped(data: Path) -> None:
    one, three = sealed_doc(data, DAY1), sealed_doc(data, DAY3)
    drop(data, "heads_no_update")
    sql(data, "UPDATE heads SET doc = ? WHERE day = ? AND sealed = 1", (three, DAY1))
    sql(data, "UPDATE heads SET doc = ? WHERE day = ? AND sealed = 1", (one, DAY3))


def head_signature_byte_changed(data: Path) -> None:
    drop(data, "heads_no_update")
    doc = flip_signature(sealed_doc(data, DAY3))
    sql(data, "UPDATE heads SET doc = ? WHERE day = ? AND sealed = 1", (doc, DAY3))


def newest_head_signature_byte_changed(data: Path) -> None:
    drop(data, "heads_no_update")
    doc = flip_signature(sealed_doc(data, DAY4))
    sql(data, "UPDATE heads SET doc = ? WHERE day = ? AND sealed = 1", (doc, DAY4))


def head_resigned_with_foreign_key(data: Path) -> None:
    forged = resign(sealed_doc(data, DAY3), SigningKey.generate(), root=FAKE)
    set_doc(data, DAY3, 320, True, forged)


def checkpoint_resigned_with_a_key_added_to_the_keys_table(data: Path) -> None:
    """Inserting a key is not refused by any trigger, and audit trusts the keys table."""
    key = SigningKey.generate()
    sql(
        data,
        "INSERT INTO keys (kid, jwk, added) VALUES (?, ?, ?)",
        (key.kid, json.dumps(key.public.jwk(), sort_keys=True), 1),
    )
    doc = unsealed_doc(data, DAY3, 257)
    forged = resign(doc, key, iat=heads.parse_document(doc).claims["iat"] + 1)
    set_doc(data, DAY3, 257, False, forged)


def _delete_sealed_head(day: str) -> Callable[[Path], None]:
    def tamper(data: Path) -> None:
        drop(data, "heads_no_delete")
        sql(data, "DELETE FROM heads WHERE day = ? AND sealed = 1", (day,))

    return tamper


def prev_link_broken(data: Path) -> None:
    """Re-signed with the log's own key: the signature passes, prev is checked on its own."""
    forged = resign(sealed_doc(data, DAY3), log_key(data), prev=FAKE)
    set_doc(data, DAY3, 320, True, forged)


def first_day_prev_not_null(data: Path) -> None:
    forged = resign(sealed_doc(data, DAY1), log_key(data), prev=FAKE)
    set_doc(data, DAY1, 5, True, forged)


def checkpoint_prev_broken(data: Path) -> None:
    forged = resign(unsealed_doc(data, DAY3, 257), log_key(data), prev=FAKE)
    set_doc(data, DAY3, 257, False, forged)


def sealed_head_doc_not_json(data: Path) -> None:
    drop(data, "heads_no_update")
    sql(data, "UPDATE heads SET doc = ? WHERE day = ? AND sealed = 1", (b"not json", DAY2))


def keys_row_garbage(data: Path) -> None:
    drop(data, "keys_no_update")
    sql(data, "UPDATE keys SET jwk = '{}'")


def _tile_where(day: str, level: int, width: int) -> str:
    return f"day = '{day}' AND level = {level} AND idx = 0 AND width = {width}"


def _flip_tile(day: str, level: int, width: int) -> Callable[[Path], None]:
    def tamper(data: Path) -> None:
        where = _tile_where(day, level, width)
        ((hashes,),) = sql(data, f"SELECT hashes FROM tiles WHERE {where}")
        drop(data, "tiles_no_update")
        sql(data, f"UPDATE tiles SET hashes = ? WHERE {where}", (flip_byte(bytes(hashes), 40),))

    return tamper


def _delete_tile(day: str, level: int, width: int) -> Callable[[Path], None]:
    def tamper(data: Path) -> None:
        drop(data, "tiles_no_delete")
        sql(data, f"DELETE FROM tiles WHERE {_tile_where(day, level, width)}")

    return tamper


def tile_root_changed(data: Path) -> None:
    drop(data, "tiles_no_update")
    sql(data, f"UPDATE tiles SET root = ? WHERE {_tile_where(DAY3, 0, 256)}", (bytes(32),))


def tile_stray_inserted(data: Path) -> None:
    sql(
        data,
        "INSERT INTO tiles (day, level, idx, width, hashes, root) VALUES (?, 0, 0, 4, ?, NULL)",
        (DAY1, bytes(128)),
    )


# --- the database file and its schema: SQLite's own structures -----------------------------------


def _db(data: Path) -> Path:
    db = data / DB_NAME
    assert not db.with_name(DB_NAME + "-wal").exists()  # the history was closed: one file
    return db


def _page_size(db: Path) -> int:
    return int.from_bytes(db.read_bytes()[16:18], "big")


def _page_holding(db: Path, needle: bytes, page_type: int) -> tuple[int, int]:
    """(offset of `needle`, its page number from 0) on a b-tree page of `page_type`
    (0x0a index leaf, 0x0d table leaf)."""
    content, size = db.read_bytes(), _page_size(db)
    at = content.find(needle)
    while at >= 0:
        page = at // size
        if content[page * size + (100 if page == 0 else 0)] == page_type:
            return at, page
        at = content.find(needle, at + 1)
    raise AssertionError(f"{needle.hex()} is on no page of type {page_type:#x}")


def _leaf_hash(data: Path, day: str, index: int) -> bytes:
    query = "SELECT leaf_hash FROM entries WHERE day = ? AND leaf_index = ?"
    ((h,),) = sql(data, query, (day, index))
    return bytes(h)


def dedupe_index_bit_flipped(data: Path) -> None:
    """The issue's case: one bit of a leaf hash inside the entries_by_hash index (schema 5:
    its 6-byte prefix). The table row is intact, so the re-derivation of the tree passes;
    dedupe and --leaf-hash do not."""
    db = _db(data)
    at, _ = _page_holding(db, _leaf_hash(data, DAY3, 100)[:6], 0x0A)
    # A bit of the prefix's last byte: the key keeps its place among its neighbours, so only
    # its own row is lost (a flip in the first byte could also misroute a neighbour's search,
    # depending on which hashes the fixture's records happen to have).
    at += 5
    content = db.read_bytes()
    db.write_bytes(content[:at] + bytes([content[at] ^ 0x04]) + content[at + 1 :])


def entries_page_zeroed(data: Path) -> None:
    db = _db(data)
    _, page = _page_holding(db, _leaf_hash(data, DAY3, 100), 0x0D)
    size, content = _page_size(db), db.read_bytes()
    db.write_bytes(content[: page * size] + bytes(size) + content[(page + 1) * size :])


def file_truncated(data: Path) -> None:
    db = _db(data)
    db.write_bytes(db.read_bytes()[: 3 * _page_size(db) + 100])


def file_not_a_database(data: Path) -> None:
    _db(data).write_bytes(b"not a database\n" * 512)


def schema_version_zeroed(data: Path) -> None:
    sql(data, "PRAGMA user_version = 0")


def trigger_changed(data: Path) -> None:
    """Same name, a guard that never fires: only the trigger's SQL tells."""
    drop(data, "heads_same_root")
    sql(
        data,
        "CREATE TRIGGER heads_same_root BEFORE INSERT ON heads WHEN 0 "
        "BEGIN SELECT RAISE(ABORT, 'append-only: another head of this size has another root'); END",
    )


def objects_added(data: Path) -> None:
    sql(data, "CREATE INDEX entries_by_time ON entries (accepted_at)")
    sql(data, "CREATE TABLE notes (x TEXT)")


def head_kid_changed(data: Path) -> None:
    drop(data, "heads_no_update")
    sql(data, "UPDATE heads SET kid = 'another-kid' WHERE day = ? AND sealed = 1", (DAY3,))


def settings_kid_changed(data: Path) -> None:
    # Found by the audit sweep's stratified bit flips (#36): a flip in this column passed.
    drop(data, "settings_no_update")
    sql(data, "UPDATE settings SET kid = 'another-kid' WHERE id = (SELECT min(id) FROM settings)")


def entry_accepted_on_another_day(data: Path) -> None:
    drop(data, "entries_no_update")
    sql(
        data,
        "UPDATE entries SET accepted_at = accepted_at + 86400 WHERE day = ? AND leaf_index = 3",
        (DAY1,),
    )


def head_kid_not_utf8(data: Path) -> None:
    drop(data, "heads_no_update")
    sql(data, "UPDATE heads SET kid = CAST(X'6b69ff' AS TEXT) WHERE day = ?", (DAY2,))


STORE_CASES = [
    pytest.param(
        entry_claims_byte_flipped,
        [f"day {DAY3}: entry 7: leaf hash does not match its stored bytes"],
        id="entry_claims_byte_flipped",
    ),
    pytest.param(
        lambda data: _replace_entry(data, DAY3, 7),
        [
            f"head {DAY3} size 257 unsealed: root recomputed from the entries is",
            f"head {DAY3} size 320 sealed: root recomputed from the entries is",
            f"day {DAY3}: full tile tile/0/000 differs",
        ],
        id="entry_replaced_with_matching_leaf_hash",
    ),
    pytest.param(
        lambda data: _replace_entry(data, DAY1, 1),
        [
            f"head {DAY1} size 3 unsealed: root recomputed from the entries is",
            f"head {DAY1} size 5 sealed: root recomputed from the entries is",
            f"day {DAY1}: tile tile/0/000.p/3 at size 3 differs",
        ],
        id="entry_replaced_with_matching_leaf_hash_small_day",
    ),
    pytest.param(
        _delete_entry(DAY3, 100),
        [f"day {DAY3}: entry index 101 found where 100 was expected"],
        id="entry_deleted_middle",
    ),
    pytest.param(
        _delete_entry(DAY1, 0),
        [f"day {DAY1}: entry index 1 found where 0 was expected"],
        id="entry_deleted_first",
    ),
    pytest.param(
        _delete_entry(DAY3, 319),
        [
            f"day {DAY3}: sealed at size 320 but holds 319 entries",
            f"day {DAY3}: a head claims size 320, the day has 319",
        ],
        id="entry_deleted_at_end_of_sealed_day",
    ),
    pytest.param(
        _insert_entry(DAY1, 5),
        [f"day {DAY1}: sealed at size 5 but holds 6 entries"],
        id="entry_inserted_into_sealed_day",
    ),
    pytest.param(
        _insert_entry(DAY2, 0),
        [f"day {DAY2}: sealed at size 0 but holds 1 entries"],
        id="entry_inserted_into_sealed_empty_day",
    ),
    pytest.param(
        head_swapped_with_other_day,
        [
            f"head {DAY2} size 0 sealed: signed claims differ from the stored head row",
            f"head {DAY3} size 320: prev is",
        ],
        id="head_swapped_with_other_day",
    ),
    pytest.param(
        heads_of_two_days_swapped,
        [
            f"head {DAY1} size 5 sealed: signed claims differ from the stored head row",
            f"head {DAY3} size 320 sealed: signed claims differ from the stored head row",
            f"head {DAY1} size 5 sealed: root recomputed from the entries is",
        ],
        id="heads_of_two_days_swapped",
    ),
    pytest.param(
        head_signature_byte_changed,
        [f"head {DAY3} size 320 sealed: Ed25519 signature does not verify"],
        id="head_signature_byte_changed",
    ),
    pytest.param(
        newest_head_signature_byte_changed,
        # The start-up self-check refuses the log before the audit runs; it names the head.
        [f"does not verify the newest published head ({DAY4}, size 0"],
        id="newest_head_signature_byte_changed",
    ),
    pytest.param(
        head_resigned_with_foreign_key,
        [f"head {DAY3} size 320 sealed: kid", "is not in the trusted key set"],
        id="head_resigned_with_foreign_key",
    ),
    pytest.param(
        checkpoint_resigned_with_a_key_added_to_the_keys_table,
        [f"head {DAY3} size 257"],
        id="checkpoint_resigned_with_a_key_added_to_the_keys_table",
    ),
    pytest.param(
        _delete_sealed_head(DAY2),
        [
            f"day {DAY2} is not sealed, but later day {DAY4} is",
            f"head {DAY3} size 2: prev is",
        ],
        id="sealed_head_of_middle_day_deleted",
    ),
    pytest.param(
        prev_link_broken,
        [f"head {DAY3} size 320: prev is {FAKE}", f"head {DAY4} size 0: prev is"],
        id="prev_link_broken_resigned_with_log_key",
    ),
    pytest.param(
        first_day_prev_not_null,
        [f"head {DAY1} size 5: prev is {FAKE}, the previous day's sealed head digests to None"],
        id="first_day_prev_not_null_resigned_with_log_key",
    ),
    pytest.param(
        checkpoint_prev_broken,
        [f"head {DAY3} size 257: prev is {FAKE}"],
        id="checkpoint_prev_broken_resigned_with_log_key",
    ),
    pytest.param(
        sealed_head_doc_not_json,
        [f"head {DAY2} size 0 sealed"],
        id="sealed_head_doc_not_json",
    ),
    pytest.param(
        keys_row_garbage,
        ["keys"],
        id="keys_row_garbage",
    ),
    pytest.param(
        _flip_tile(DAY3, 0, 256),
        [f"day {DAY3}: full tile tile/0/000 differs"],
        id="tile_byte_changed",
    ),
    pytest.param(
        _flip_tile(DAY1, 0, 3),
        [f"day {DAY1}: tile tile/0/000.p/3 at size 3 differs"],
        id="partial_tile_byte_changed",
    ),
    pytest.param(
        _delete_tile(DAY3, 0, 256),
        [f"day {DAY3}: full tile tile/0/000 is missing"],
        id="tile_deleted",
    ),
    pytest.param(
        _delete_tile(DAY3, 1, 1),
        [f"day {DAY3}: tile tile/1/000.p/1 at size 257 is missing"],
        id="partial_tile_deleted",
    ),
    pytest.param(
        tile_root_changed,
        [f"day {DAY3}: full tile tile/0/000 differs"],
        id="tile_root_changed",
    ),
    pytest.param(
        tile_stray_inserted,
        [f"day {DAY1}: stored tile 0/0 width 4 belongs to no published tree"],
        id="tile_stray_inserted",
    ),
    pytest.param(
        dedupe_index_bit_flipped,
        [
            "integrity_check: row",
            "missing from index entries_by_hash",
            "index entries_by_hash: 1 row(s) of entries are not found through it",
        ],
        id="dedupe_index_bit_flipped",
    ),
    pytest.param(
        entries_page_zeroed,
        ["integrity_check: table entries or one of its indexes: database disk image is malformed"],
        id="entries_page_zeroed",
    ),
    pytest.param(
        file_truncated,
        ["the database cannot be read", "database disk image is malformed"],
        id="file_truncated",
    ),
    pytest.param(
        file_not_a_database,
        ["the database cannot be read", "file is not a database"],
        id="file_not_a_database",
    ),
    pytest.param(
        schema_version_zeroed,
        ["schema version 0: not a capability-anchor log"],
        id="schema_version_zeroed",
    ),
    pytest.param(
        lambda data: drop(data, "entries_no_update", "stamps_no_delete"),
        [
            "schema: trigger entries_no_update is missing (schema version 5)",
            "schema: trigger stamps_no_delete is missing (schema version 5)",
        ],
        id="append_only_triggers_dropped",
    ),
    pytest.param(
        trigger_changed,
        ["schema: trigger heads_same_root differs from its definition in schema version 5"],
        id="append_only_trigger_defused",
    ),
    pytest.param(
        lambda data: sql(data, "DROP INDEX entries_by_hash"),
        ["schema: index entries_by_hash is missing (schema version 5)"],
        id="dedupe_index_dropped",
    ),
    pytest.param(
        objects_added,
        [
            "schema: index entries_by_time on entries is not part of schema version 5",
            "schema: table notes on notes is not part of schema version 5",
        ],
        id="schema_objects_added",
    ),
    pytest.param(
        head_kid_changed,
        [f"head {DAY3} size 320 sealed: the kid column says 'another-kid', its JWS header"],
        id="head_kid_column_changed",
    ),
    pytest.param(
        settings_kid_changed,
        ["settings statement #1: the kid column says 'another-kid', its JWS header"],
        id="settings_kid_column_changed",
    ),
    pytest.param(
        entry_accepted_on_another_day,
        [f"day {DAY1}: entry 3: accepted_at", f"is not a time on {DAY1}"],
        id="entry_accepted_at_on_another_day",
    ),
    pytest.param(
        head_kid_not_utf8,
        [
            f"head {DAY2} size 0 sealed: the kid column says 'ki\\\\xff'",
            "1 text value(s) in the database are not UTF-8, e.g. b'ki\\xff'",
        ],
        id="head_kid_column_not_utf8",
    ),
]


@pytest.mark.parametrize(("tamper", "expected"), STORE_CASES)
def test_store_tampering_is_caught(
    results: Results, tamper: Callable[[Path], None], expected: list[str]
) -> None:
    assert_caught(results[tamper, None], expected)


# --- an exported folder ----------------------------------------------------------------------


def _edit_json(path: Path, change: Callable[[Any], None]) -> None:
    obj = json.loads(path.read_bytes())
    change(obj)
    path.write_bytes(rfc8785.dumps(obj))


def day_json_claims_byte_flipped(folder: Path) -> None:
    path = folder / f"{DAY2}.json"
    text = path.read_text()
    path.write_text(flip_char(text, text.index('"root":"') + 8))


def day_json_signature_byte_flipped(folder: Path) -> None:
    path = folder / f"{DAY3}.json"
    path.write_bytes(flip_signature(path.read_bytes()))


def _unlink(*names: str) -> Callable[[Path], None]:
    def tamper(folder: Path) -> None:
        for name in names:
            (folder / name).unlink()

    return tamper


def day_jws_byte_flipped(folder: Path) -> None:
    path = folder / f"{DAY3}.jws"
    path.write_text(flip_char(path.read_text(), 30))


def day_jws_newline_added(folder: Path) -> None:
    path = folder / f"{DAY3}.jws"
    path.write_bytes(path.read_bytes() + b"\n")


def _index_day(day: str) -> Callable[[Any], dict[str, Any]]:
    def find(index: Any) -> dict[str, Any]:
        entry: dict[str, Any] = next(d for d in index["days"] if d["day"] == day)
        return entry

    return find


def index_root_changed(folder: Path) -> None:
    _edit_json(folder / "index.json", lambda i: _index_day(DAY3)(i).update(root=FAKE))


def index_day_removed(folder: Path) -> None:
    _edit_json(folder / "index.json", lambda i: i["days"].remove(_index_day(DAY2)(i)))


def index_day_added(folder: Path) -> None:
    fake = {"day": "2026-03-09", "tree_size": 0, "root": FAKE, "url": "x"}
    _edit_json(folder / "index.json", lambda i: i["days"].insert(0, fake))


def index_iss_changed(folder: Path) -> None:
    _edit_json(folder / "index.json", lambda i: i.update(iss="https://evil.example"))


def index_url_changed(folder: Path) -> None:
    _edit_json(
        folder / "index.json",
        lambda i: _index_day(DAY3)(i).update(url=f"https://evil.example/roots/{DAY3}"),
    )


def index_not_json(folder: Path) -> None:
    (folder / "index.json").write_bytes(b'{"v":"0.2","days":[')


def keys_replaced(folder: Path) -> None:
    (folder / "keys.json").write_bytes(KeySet.of(SigningKey.generate().public).to_json())


def middle_day_files_deleted(folder: Path) -> None:
    """A careful attacker: all of day 2's files gone and index.json edited to match."""
    _unlink(f"{DAY2}.json", f"{DAY2}.jws", f"{DAY2}.timestamps.json")(folder)
    index_day_removed(folder)


def other_day_head_renamed_into_place(folder: Path) -> None:
    """Day 4's head (valid JSON, valid signature, same empty root) as day 2's."""
    for suffix in (".json", ".jws"):
        (folder / f"{DAY2}{suffix}").unlink()
        shutil.copy(folder / f"{DAY4}{suffix}", folder / f"{DAY2}{suffix}")


def unsealed_head_renamed_into_place(folder: Path) -> None:
    shutil.copy(folder / DAY3 / "300.json", folder / f"{DAY3}.json")


def day_forged_with_foreign_key(folder: Path) -> None:
    day4 = heads.parse_document((folder / f"{DAY4}.json").read_bytes())
    claims = {**day4.claims, "day": DAY5, "prev": heads.claims_digest(day4.claims)}
    forged = heads.sign(claims, SigningKey.generate())
    (folder / f"{DAY5}.json").write_bytes(forged.document())
    (folder / f"{DAY5}.jws").write_bytes(forged.jws.encode())
    (folder / f"{DAY5}.timestamps.json").write_bytes(
        (folder / f"{DAY4}.timestamps.json").read_bytes()
    )


def saved_checkpoint_forged_with_foreign_key(folder: Path) -> None:
    path = folder / DAY3 / "257.json"
    path.write_bytes(resign(path.read_bytes(), SigningKey.generate()))


def saved_checkpoint_copied_to_another_size(folder: Path) -> None:
    shutil.copy(folder / DAY3 / "257.json", folder / DAY3 / "258.json")


def saved_checkpoint_claims_byte_flipped(folder: Path) -> None:
    path = folder / DAY3 / "257.json"
    text = path.read_text()
    path.write_text(flip_char(text, text.index('"root":"') + 8))


def timestamps_forged(folder: Path) -> None:
    stamp = {"tsa": "https://tsa.example", "token": "AAAA", "gen_time": "2026-03-02T00:00:01Z"}
    doc = {"v": "0.2", "day": DAY1, "timestamps": [stamp]}
    (folder / f"{DAY1}.timestamps.json").write_bytes(rfc8785.dumps(doc))


def timestamps_not_json(folder: Path) -> None:
    (folder / f"{DAY1}.timestamps.json").write_bytes(b"garbage")


def tsr_planted(folder: Path) -> None:
    (folder / f"{DAY1}.tsr").write_bytes(b"\x30\x03\x02\x01\x00")


FOLDER_CASES = [
    pytest.param(
        day_json_claims_byte_flipped,
        [f"{DAY2}.json: document claims differ from its signed claims"],
        id="day_json_claims_byte_flipped",
    ),
    pytest.param(
        day_json_signature_byte_flipped,
        [f"{DAY3}.json: Ed25519 signature does not verify"],
        id="day_json_signature_byte_flipped",
    ),
    pytest.param(
        _unlink(f"{DAY2}.json"),
        [
            f"days {DAY2}..{DAY3} are missing before {DAY3}.json",
            f"listed but missing: ['{DAY2}']",
        ],
        id="day_json_deleted_middle",
    ),
    pytest.param(
        _unlink(f"{DAY1}.json"),
        [f"{DAY2}.json: the earliest day has prev", f"listed but missing: ['{DAY1}']"],
        id="day_json_deleted_first",
    ),
    pytest.param(
        _unlink(f"{DAY4}.json"),
        [f"listed but missing: ['{DAY4}']"],
        id="day_json_deleted_newest",
    ),
    pytest.param(
        day_jws_byte_flipped,
        [f"{DAY3}.jws differs from the JWS in {DAY3}.json"],
        id="day_jws_byte_flipped",
    ),
    pytest.param(
        day_jws_newline_added,
        [f"{DAY3}.jws differs from the JWS in {DAY3}.json"],
        id="day_jws_newline_added",
    ),
    pytest.param(_unlink(f"{DAY3}.jws"), [f"{DAY3}.jws is missing"], id="day_jws_deleted"),
    pytest.param(
        _unlink(f"{DAY1}.timestamps.json"),
        [f"{DAY1}.timestamps.json is missing"],
        id="timestamps_json_deleted",
    ),
    pytest.param(
        index_root_changed,
        [f"index.json entry for {DAY3} disagrees with {DAY3}.json"],
        id="index_json_root_changed",
    ),
    pytest.param(
        index_day_removed,
        [f"present but not listed: ['{DAY2}']"],
        id="index_json_day_removed",
    ),
    pytest.param(
        index_day_added,
        ["listed but missing: ['2026-03-09']"],
        id="index_json_day_added",
    ),
    pytest.param(_unlink("index.json"), ["index.json is missing"], id="index_json_deleted"),
    pytest.param(index_not_json, ["index.json is not valid JSON"], id="index_json_not_json"),
    pytest.param(
        keys_replaced,
        [f"{day}.json: kid" for day in DAYS] + ["is not in the trusted key set"],
        id="keys_json_replaced_with_other_key_set",
    ),
    pytest.param(_unlink("keys.json"), ["keys.json is missing"], id="keys_json_deleted"),
    pytest.param(
        middle_day_files_deleted,
        [f"days {DAY2}..{DAY3} are missing before {DAY3}.json"],
        id="middle_day_files_deleted_and_unlisted",
    ),
    pytest.param(
        other_day_head_renamed_into_place,
        [f"{DAY2}.json: holds the head of {DAY4} (sealed=True)"],
        id="head_of_other_day_renamed_into_place",
    ),
    pytest.param(
        unsealed_head_renamed_into_place,
        [
            f"{DAY3}.json: holds the head of {DAY3} (sealed=False)",
            f"{DAY3}.jws differs from the JWS in {DAY3}.json",
        ],
        id="checkpoint_renamed_into_sealed_place",
    ),
    pytest.param(
        day_forged_with_foreign_key,
        [f"{DAY5}.json: kid", "is not in the trusted key set"],
        id="day_forged_with_foreign_key",
    ),
    pytest.param(
        saved_checkpoint_forged_with_foreign_key,
        [f"{DAY3}/257.json: kid", "is not in the trusted key set"],
        id="saved_checkpoint_forged_with_foreign_key",
    ),
    pytest.param(
        saved_checkpoint_copied_to_another_size,
        [f"{DAY3}/258.json: holds head {DAY3}/257"],
        id="saved_checkpoint_copied_to_another_size",
    ),
    pytest.param(
        saved_checkpoint_claims_byte_flipped,
        [f"{DAY3}/257.json"],
        id="saved_checkpoint_claims_byte_flipped",
    ),
    pytest.param(
        timestamps_forged,
        [f"{DAY1}.timestamps.json"],
        id="timestamps_json_forged_stamp",
    ),
    pytest.param(
        timestamps_not_json,
        [f"{DAY1}.timestamps.json"],
        id="timestamps_json_not_json",
    ),
    pytest.param(
        tsr_planted,
        [f"{DAY1}.tsr"],
        id="tsr_planted_without_stamps",
    ),
    pytest.param(
        index_iss_changed,
        ["index.json"],
        id="index_json_iss_changed",
    ),
    pytest.param(
        index_url_changed,
        ["index.json"],
        id="index_json_url_changed",
    ),
]


# The folder cases also run against the data dir where the cross-check adds to the verdict.
WITH_DATA = {
    "day_json_claims_byte_flipped",
    "day_json_deleted_middle",
    "keys_json_replaced_with_other_key_set",
    "head_of_other_day_renamed_into_place",
    "saved_checkpoint_claims_byte_flipped",
    "timestamps_json_forged_stamp",
}
WITH_DATA_CASES = [p for p in FOLDER_CASES if p.id in WITH_DATA]

Results = dict[Hashable, subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def results(history: History, exported: Path, tmp_path_factory: pytest.TempPathFactory) -> Results:
    """Every tampered copy is prepared here, then audited by the real CLI, several processes
    at a time (each process spends ~0.1 s starting; one after the other they would be slow).
    Keyed by (tamper, mode): mode None audits a data dir, False a folder alone, True a folder
    with the clean data dir; ("clean", ...) are the untampered runs."""
    root = tmp_path_factory.mktemp("tampered")
    empty = root / "no-log"
    empty.mkdir()
    jobs: dict[Hashable, tuple[Path, Path | None]] = {
        ("clean", "data"): (history.data, None),
        ("clean", "folder"): (empty, exported),
        ("clean", "both"): (history.data, exported),
    }
    for param in STORE_CASES:
        tamper = cast(Callable[[Path], None], param.values[0])
        data = history.copy(root / str(param.id)).data
        tamper(data)
        jobs[tamper, None] = (data, None)
    for param in FOLDER_CASES:
        tamper = cast(Callable[[Path], None], param.values[0])
        folder = root / str(param.id)
        shutil.copytree(exported, folder)
        tamper(folder)
        jobs[tamper, False] = (empty, folder)
        if param.id in WITH_DATA:
            jobs[tamper, True] = (history.data, folder)
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {key: pool.submit(audit, *args) for key, args in jobs.items()}
        return {key: future.result() for key, future in futures.items()}


@pytest.mark.parametrize(("tamper", "expected"), FOLDER_CASES)
def test_folder_tampering_is_caught(
    results: Results, tamper: Callable[[Path], None], expected: list[str]
) -> None:
    assert_caught(results[tamper, False], expected)


@pytest.mark.parametrize(("tamper", "expected"), WITH_DATA_CASES)
def test_folder_tampering_is_caught_with_data_dir(
    results: Results, tamper: Callable[[Path], None], expected: list[str]
) -> None:
    assert_caught(results[tamper, True], expected)


# --- the folder cross-checked against a data dir ------------------------------------------------


def test_folder_from_an_equivocating_fork_is_caught_by_its_history_and_the_cross_check(
    history: History, empty: Path, tmp_path: Path
) -> None:
    """A fork of the log signs a second, valid sealed head for day 4 with the log's own key,
    keeping the history it had signed. Its folder's heads are each valid, but the history
    (SPEC §12.6) binds the original head: the folder alone is caught by its checkpoint and
    tiles, and the data dir also names the equivocation."""
    fork = history.copy(tmp_path / "fork").data
    doc = sealed_doc(fork, DAY4)
    iat = heads.parse_document(doc).claims["iat"]
    set_doc(fork, DAY4, 0, True, resign(doc, log_key(fork), iat=iat + 1))
    folder = tmp_path / "fork-roots"
    assert run_cli("export", "--data", fork, folder).returncode == 0
    history_problems = [
        "history/checkpoint: the checkpoint's root is not the root of the folder's heads",
        "history/tile/0/000.p/9: differs from the history the folder's heads make",
    ]
    assert_caught(audit(empty, folder), history_problems)
    assert_caught(
        audit(history.data, folder),
        [f"{DAY4}.json differs from the log's sealed head of {DAY4}", *history_problems],
    )


def test_folder_of_another_log_is_caught_by_the_cross_check(
    history: History, empty: Path, tmp_path: Path
) -> None:
    other = build_history(tmp_path / "other")  # same iss, same days, its own key
    folder = tmp_path / "other-roots"
    assert run_cli("export", "--data", other.data, folder).returncode == 0
    assert_clean(audit(empty, folder))
    expected = [f"{day}.json differs from the log's sealed head of {day}" for day in DAYS]
    assert_caught(audit(history.data, folder), [*expected, "keys.json lacks the log's key(s)"])


def test_newest_sealed_head_deleted_from_the_store_is_caught_by_the_folder(
    history: History, exported: Path, tmp_path: Path
) -> None:
    data = history.copy(tmp_path / "data").data
    _delete_sealed_head(DAY4)(data)
    assert_caught(audit(data, exported), [f"{DAY4}.json: the log has no sealed head of {DAY4}"])


# --- clean ----------------------------------------------------------------------------------


def test_clean_data_dir(results: Results) -> None:
    report = assert_clean(results["clean", "data"])
    assert report["checked"] == {
        "entries": 325,
        "heads": 9,
        "days": 4,
        "tiles": 1,
        "integrity_check": 1,
        "schema_objects": 75,
        "indexes_rederived": 1,
        "history_leaves": 9,
        "history_checkpoints": 9,
    }


def test_clean_folder_alone(results: Results) -> None:
    report = assert_clean(results["clean", "folder"])
    assert report["checked"] == {
        "roots_days": 4,
        "roots_saved_unsealed_heads": 5,
        "roots_history_leaves": 9,
        "roots_history_tiles": 18,
        "roots_history_checkpoint": 1,
        "roots_tlog_proofs": 9,
    }


def test_clean_data_dir_and_folder(results: Results) -> None:
    report = assert_clean(results["clean", "both"])
    assert report["checked"]["days"] == report["checked"]["roots_days"] == 4


def test_clean_stale_folder_against_a_log_that_sealed_more_days(
    history: History, exported: Path, tmp_path: Path
) -> None:
    """A folder exported earlier is not tampered: it only lacks the newer days."""
    later = history.copy(tmp_path / "data")
    with later.open() as log:
        later.clock.set("2026-03-07", 60)
        assert len(log.seal()) == 2  # days 5 and 6
    assert_clean(audit(later.data, exported))


def test_clean_folder_with_trusted_keys_file(history: History, exported: Path, empty: Path) -> None:
    assert_clean(
        run_cli("audit", "--data", empty, "--roots", exported, "--keys", exported / "keys.json")
    )


def test_audit_of_a_missing_folder_is_an_io_error(empty: Path, tmp_path: Path) -> None:
    result = audit(empty, tmp_path / "no-such-folder")
    assert result.returncode == 2, result.stderr
