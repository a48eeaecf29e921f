"""The history tree's storage (SPEC §12.1): one RFC 9162 tree over every published head, in
`(day, sealed false before true, tree_size)` order, stored with each head in its transaction.

Checked against `naive_rfc9162` (no code shared with the product) over leaf hashes computed
here from the stored head documents with hashlib; the store's triggers shown refusing with
plain sqlite3; the migration of a schema 2 data dir made as 0.x wrote it; and the audit
naming each kind of tampering, through the real CLI.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from capability_anchor.errors import Conflict, StoreError
from capability_anchor.log import Log
from capability_anchor.merkle import verify_consistency, verify_inclusion
from capability_anchor.store import SCHEMA_VERSION
from tests.e2e.test_store_schema_compat import as_0x_wrote_it
from tests.kit.logkit import DAY1, DAY3, DAY5, History, build_history, raw, record, run_cli
from tests.kit.naive_rfc9162 import Naive

HistoryKey = tuple[str, bool, int]


def payload(doc: bytes) -> bytes:
    """A head document's JWS payload, decoded here without the product's code."""
    token = json.loads(doc)["jws"]
    middle = token.split(".")[1]
    return base64.urlsafe_b64decode(middle + "=" * (-len(middle) % 4))


def heads_in_order(data: Path) -> list[tuple[HistoryKey, bytes]]:
    """Every stored head as ((day, sealed, tree_size), leaf hash), in SPEC §12.1's order."""
    with raw(data) as conn:
        rows = conn.execute("SELECT day, sealed, tree_size, doc FROM heads").fetchall()
    keyed = [
        ((d, bool(s), n), hashlib.sha256(b"\x00" + payload(doc)).digest()) for d, s, n, doc in rows
    ]
    return sorted(keyed)


def stored_leaves(data: Path) -> list[tuple[int, HistoryKey, bytes]]:
    with raw(data) as conn:
        rows = conn.execute(
            "SELECT idx, day, sealed, tree_size, leaf_hash FROM history ORDER BY idx"
        ).fetchall()
    return [(i, (d, bool(s), n), bytes(h)) for i, d, s, n, h in rows]


def table(data: Path, name: str) -> list[tuple[object, ...]]:
    with raw(data) as conn:
        return sorted(conn.execute(f"SELECT * FROM {name}").fetchall())


def audit(data: Path) -> tuple[int, list[str]]:
    result = run_cli("audit", "--data", data)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout)["problems"]


def check_history(data: Path) -> None:
    """The stored history is the heads in §12.1's order, and the product's root, inclusion
    and consistency proofs at every size agree with the naive RFC 9162 tree."""
    expected = heads_in_order(data)
    leaves = stored_leaves(data)
    assert [(i, k, h) for i, (k, h) in enumerate(expected)] == leaves
    hashes = [h for _, h in expected]
    naive = Naive(hashes)
    with Log.open(data) as log:
        history = log.read.history
        assert log.store.history_size() == len(hashes)
        for n in range(1, len(hashes) + 1):
            assert history.root(n) == naive.root(n)
        for i, h in enumerate(hashes):
            for n in sorted({i + 1, len(hashes)}):
                path = history.inclusion(h, n)
                assert history.leaf(h).index == i
                assert path == naive.inclusion(i, n)[0]
                verify_inclusion(h, i, n, path, naive.root(n))
        for m in range(1, len(hashes) + 1):
            path = history.consistency(m)
            assert path == naive.consistency(m, len(hashes))[0]
            verify_consistency(m, len(hashes), naive.root(m), naive.root(len(hashes)), path)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> History:
    """Four sealed days (two empty) and five unsealed heads: 9 heads, then more on day 5."""
    history = build_history(tmp_path_factory.mktemp("history"))
    with history.open() as log:
        log.append([record(DAY5, n) for n in range(3)])
        history.clock.t += 60
        assert log.checkpoint() is not None
    return history


def test_the_history_is_every_head_in_order_and_agrees_with_the_naive_tree(made: History) -> None:
    check_history(made.data)
    keys = [k for _, k, _ in stored_leaves(made.data)]
    # An unsealed head and the sealed head of the same size are two leaves, unsealed first.
    assert keys[:3] == [(DAY1, False, 3), (DAY1, False, 5), (DAY1, True, 5)]
    assert keys[-1] == (DAY5, False, 3)
    assert len(keys) == 10


def test_a_long_history_crosses_a_full_tile(tmp_path: Path) -> None:
    """More than 256 heads: full history tiles with roots, rebuilt edges, proofs across them."""
    history = build_history(tmp_path)
    with history.open() as log:
        history.clock.set(DAY5, 3600)
        for n in range(260):
            log.append([record(DAY5, 1000 + n)])
            assert log.checkpoint() is not None
    assert any(row[0] == 0 and row[2] == 256 for row in table(history.data, "history_tiles"))
    check_history(history.data)
    assert audit(history.data) == (0, [])


def test_a_head_out_of_order_is_refused_and_nothing_is_stored(
    made: History, tmp_path: Path
) -> None:
    copy = made.copy(tmp_path / "data")
    with copy.open() as log:
        before = log.store.history_size()
        writer = log.writer
        for day, size, sealed in [
            (DAY5, 2, False),
            (DAY5, 3, False),
            (DAY3, 320, True),
            (DAY3, 400, False),
        ]:
            with pytest.raises(Conflict), writer.lock, log.store.write():
                writer.sign_head(day, size, sealed, 0)
        assert log.store.history_size() == before
    check_history(copy.data)


def _refused(data: Path, sql: str, params: tuple[object, ...], match: str) -> None:
    with raw(data) as conn, pytest.raises(sqlite3.IntegrityError, match=match):
        conn.execute(sql, params)


@pytest.mark.parametrize(
    ("sql", "params", "match"),
    [
        pytest.param(
            "INSERT INTO history VALUES (?, ?, ?, ?, ?)",
            (12, bytes(32), DAY5, 1, 3),
            "not the next index|must be a stored head",  # whichever trigger SQLite runs first
            id="index_gap",
        ),
        pytest.param(
            "INSERT INTO history VALUES (?, ?, ?, ?, ?)",
            (10, bytes(32), DAY3, 1, 320),
            "out of publication order",
            id="out_of_order",
        ),
        pytest.param(
            "INSERT INTO history VALUES (?, ?, ?, ?, ?)",
            (10, bytes(32), DAY5, 0, 7),
            "must be a stored head",
            id="no_such_head",
        ),
        pytest.param(
            "UPDATE history SET leaf_hash = ?", (bytes(32),), "cannot be updated", id="update"
        ),
        pytest.param("DELETE FROM history WHERE idx = 9", (), "cannot be deleted", id="delete"),
        pytest.param("DELETE FROM history_tiles", (), "cannot be deleted", id="tiles_delete"),
        pytest.param(
            "INSERT INTO history_tiles VALUES (0, 0, 10, ?, NULL)",
            (bytes(320),),
            "a different tile",
            id="tile_replaced",
        ),
    ],
)
def test_the_store_refuses_history_changes(
    made: History, tmp_path: Path, sql: str, params: tuple[object, ...], match: str
) -> None:
    copy = made.copy(tmp_path / "data")
    _refused(copy.data, sql, params, match)
    assert audit(copy.data) == (0, [])


def test_a_schema_2_data_dir_gets_its_history_in_one_migration(
    made: History, tmp_path: Path
) -> None:
    old = as_0x_wrote_it(made.data, tmp_path / "v2", version=2)
    with raw(old) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (2,)
        assert conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE name = 'history'"
        ).fetchone() == (0,)
    assert SCHEMA_VERSION == 5
    Log.open(old).close()
    with raw(old) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (5,)
    # Byte for byte the history the write path stored while the heads were published, and
    # the checkpoints it signed (Ed25519 signatures are deterministic).
    assert table(old, "history") == table(made.data, "history")
    assert table(old, "history_tiles") == table(made.data, "history_tiles")
    assert table(old, "checkpoints") == table(made.data, "checkpoints")
    check_history(old)
    assert audit(old) == (0, [])
    with Log.open(old, clock=made.clock) as log:  # and it carries on
        log.append([record(DAY5, 100)])
        made.clock.t += 60
        assert log.checkpoint() is not None
    check_history(old)


def test_a_migration_that_cannot_read_a_head_leaves_the_schema_2_dir_as_it_was(
    made: History, tmp_path: Path
) -> None:
    old = as_0x_wrote_it(made.data, tmp_path / "v2", version=2)
    with raw(old) as conn:
        conn.execute("DROP TRIGGER heads_no_update")
        conn.execute("UPDATE heads SET doc = ? WHERE day = ? AND sealed = 1", (b"{}", DAY3))
        before = "\n".join(conn.iterdump())
    with pytest.raises(StoreError, match=f"head {DAY3} size 320"):
        Log.open(old)
    with raw(old) as conn:
        assert "\n".join(conn.iterdump()) == before
        assert conn.execute("PRAGMA user_version").fetchone() == (2,)


# --- the audit names each kind of tampering ---------------------------------------------------


def _tampered(made: History, tmp_path: Path, *statements: tuple[str, tuple[object, ...]]) -> Path:
    data = made.copy(tmp_path / "data").data
    with raw(data) as conn:
        for name in ("history_no_update", "history_no_delete", "history_tiles_no_update"):
            conn.execute(f"DROP TRIGGER {name}")
        for sql, params in statements:
            conn.execute(sql, params)
    return data


def test_the_audit_names_a_changed_leaf(made: History, tmp_path: Path) -> None:
    data = _tampered(
        made, tmp_path, ("UPDATE history SET leaf_hash = ? WHERE idx = 4", (bytes(32),))
    )
    code, problems = audit(data)
    assert code == 1
    assert (
        "history: leaf 4 (head 2026-03-03 size 2 unsealed): its leaf hash is not the hash "
        "of the head's JWS payload"
    ) in problems


def test_the_audit_names_a_missing_leaf(made: History, tmp_path: Path) -> None:
    data = _tampered(made, tmp_path, ("DELETE FROM history WHERE idx = 9", ()))
    code, problems = audit(data)
    assert code == 1
    assert f"history: head {DAY5} size 3 unsealed is missing from the history" in problems
    assert [p for p in problems if p.startswith("history")] == [
        f"history: head {DAY5} size 3 unsealed is missing from the history"
    ]


def test_the_audit_names_leaves_out_of_order(made: History, tmp_path: Path) -> None:
    leaves = stored_leaves(made.data)
    (_, k1, h1), (_, k2, h2) = leaves[1], leaves[2]
    swap = "UPDATE history SET day = ?, sealed = ?, tree_size = ?, leaf_hash = ? WHERE idx = ?"
    data = _tampered(
        made,
        tmp_path,
        ("DROP INDEX history_by_head", ()),
        ("DROP INDEX history_by_hash", ()),
        (swap, (*k2, h2, 1)),
        (swap, (*k1, h1, 2)),
    )
    code, problems = audit(data)
    assert code == 1
    assert (
        f"history: leaf 2 (head {DAY1} size 5 unsealed) is out of publication order "
        f"after head {DAY1} size 5 sealed"
    ) in problems


def test_the_audit_names_a_changed_tile(made: History, tmp_path: Path) -> None:
    data = _tampered(
        made, tmp_path, ("UPDATE history_tiles SET hashes = ? WHERE width = 10", (bytes(320),))
    )
    code, problems = audit(data)
    assert code == 1
    assert "history: tile tile/0/000.p/10 at size 10 differs" in problems


def test_a_copy_of_the_history_with_a_leaf_hash_of_another_head_is_named(
    made: History, tmp_path: Path
) -> None:
    """The leaf hash must be the hash of that head's own payload, not of any head's."""
    leaves = stored_leaves(made.data)
    data = _tampered(
        made,
        tmp_path,
        ("DROP INDEX history_by_hash", ()),
        ("UPDATE history SET leaf_hash = ? WHERE idx = 0", (leaves[1][2],)),
    )
    code, problems = audit(data)
    assert code == 1
    assert any(p.startswith("history: leaf 0 (head 2026-03-01 size 3 unsealed)") for p in problems)
