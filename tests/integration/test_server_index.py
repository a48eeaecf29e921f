"""The /record index is filled in sorted runs (Log._watermark): when a head is published and
every INDEX_CHUNK entries. What it holds must follow from stored state alone, whichever
process appended, and the audit must hold it to exactly that."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from capability_anchor.audit import audit_store
from capability_anchor.errors import NotFound
from capability_anchor.log import Log
from capability_anchor.log import serverindex as log_module
from capability_anchor.store import server_key_digest
from tests.integration.test_record import ISS, Clock, server

CHUNK = 4


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_module, "INDEX_CHUNK", CHUNK)


def indexed(data: Path) -> list[tuple[str, int]]:
    conn = sqlite3.connect(data / "log.sqlite3")
    try:
        rows = conn.execute("SELECT key, leaf_index FROM servers ORDER BY leaf_index, key")
        return [(str(k), int(i)) for k, i in rows]
    finally:
        conn.close()


def keys_of(*ns: int) -> list[tuple[str, int]]:
    """Index rows of server(n) stored at leaf index n - 1 (schema 5 stores key digests)."""
    return sorted(
        (server_key_digest(key), n - 1)
        for n in ns
        for key in (f"sub:example:{n}", f"url:https://s{n}.example/mcp")
    )


def test_nothing_is_indexed_until_a_head_or_a_full_chunk(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Log.init(data, iss=ISS, clock=Clock()) as log:
        log.append([server(1), server(2), server(3)])
        assert indexed(data) == []
        with pytest.raises(NotFound):
            log.record(sub="example:1")  # not covered by a head anyway
        assert audit_store(log).ok
        log.append([server(4), server(5)])  # crosses the chunk boundary at 4
        assert sorted(indexed(data)) == keys_of(1, 2, 3, 4)
        assert audit_store(log).ok
        log.checkpoint()  # a head at 5 indexes everything it covers
        assert sorted(indexed(data)) == keys_of(1, 2, 3, 4, 5)
        assert log.record(sub="example:5")["sub"] == "example:5"
        assert audit_store(log).ok


def test_batches_crossing_several_chunks_and_duplicates(tmp_path: Path) -> None:
    data = tmp_path / "d"
    # records="any": the index must leave out an entry that is not a server record.
    with Log.init(data, iss=ISS, records="any", clock=Clock()) as log:
        results = log.append([server(n) for n in range(1, 11)] + [server(3)])
        assert results[-1].duplicate
        assert sorted(indexed(data)) == keys_of(*range(1, 9))
        log.append([{"v": "0.2", "iss": ISS, "note": "not a server record"}])
        log.append([server(12)])  # index 11: 12 entries, a chunk boundary again
        assert sorted(indexed(data)) == sorted(
            [
                *keys_of(*range(1, 11)),
                (server_key_digest("sub:example:12"), 11),
                (server_key_digest("url:https://s12.example/mcp"), 11),
            ]
        )
        assert audit_store(log).ok


def test_another_process_appending_in_between(tmp_path: Path) -> None:
    """The writer's in-memory keys go stale when another Log appends; the index must then
    be rebuilt from the stored records, not from that stale copy."""
    data = tmp_path / "d"
    clock = Clock()
    with Log.init(data, iss=ISS, clock=clock) as a, Log.open(data, clock=clock) as b:
        a.append([server(1)])
        b.append([server(2), server(3)])
        a.append([server(4), server(5)])
        b.checkpoint()
        a.append([server(6)])
        a.checkpoint()
        assert sorted(indexed(data)) == keys_of(1, 2, 3, 4, 5, 6)
        assert audit_store(a).ok
        for n in range(1, 7):
            assert a.record(sub=f"example:{n}")["sub"] == f"example:{n}"


def test_sealing_indexes_the_whole_day(tmp_path: Path) -> None:
    data = tmp_path / "d"
    clock = Clock()
    with Log.init(data, iss=ISS, clock=clock) as log:
        log.append([server(1), server(2), server(3)])
        clock.t += 86400
        log.seal()
        assert sorted(indexed(data)) == keys_of(1, 2, 3)
        assert audit_store(log).ok


def test_a_failed_batch_leaves_nothing_pending(tmp_path: Path) -> None:
    """A batch that rolls back must not leave its keys in the writer's copy."""
    data = tmp_path / "d"
    clock = Clock()
    with Log.init(data, iss=ISS, clock=clock) as log:
        log.append([server(1)])
        conn = sqlite3.connect(data / "log.sqlite3", isolation_level=None)
        conn.execute(
            "CREATE TRIGGER fail_tiles BEFORE INSERT ON servers "
            "BEGIN SELECT RAISE(ABORT, 'injected'); END"
        )
        with pytest.raises(Exception, match="injected"):
            log.append([server(2), server(3), server(4)])  # would index a chunk: fails
        conn.execute("DROP TRIGGER fail_tiles")
        conn.close()
        log.append([server(5), server(6), server(7)])
        assert sorted(indexed(data)) == sorted(
            [
                *keys_of(1),
                (server_key_digest("sub:example:5"), 1),
                (server_key_digest("url:https://s5.example/mcp"), 1),
                (server_key_digest("sub:example:6"), 2),
                (server_key_digest("url:https://s6.example/mcp"), 2),
                (server_key_digest("sub:example:7"), 3),
                (server_key_digest("url:https://s7.example/mcp"), 3),
            ]
        )
        assert audit_store(log).ok


def test_audit_accepts_fully_indexed_tails_and_refuses_partial_ones(tmp_path: Path) -> None:
    """Above the watermark an entry may be indexed (data dirs written before the index was
    deferred were indexed per append) but only with exactly its keys."""
    data = tmp_path / "d"
    with Log.init(data, iss=ISS, clock=Clock()) as log:
        log.append([server(1), server(2)])
        with log.store.write():  # as the old code did
            log.store.insert_servers(
                "2026-11-02",
                [
                    (server_key_digest("sub:example:2"), 1),
                    (server_key_digest("url:https://s2.example/mcp"), 1),
                ],
            )
        assert audit_store(log).ok
        with log.store.write():
            log.store.insert_servers("2026-11-02", [(server_key_digest("sub:example:1"), 0)])
        report = audit_store(log)
    assert not report.ok
    assert any("entry 0: server index has" in p for p in report.problems), report.problems


def test_a_log_keeps_the_chunk_it_was_made_with(tmp_path: Path) -> None:
    """A new log records its chunk (#23: runs small enough to bound the WAL); a log made
    before has none in its meta and keeps the 32,768 its stored index follows."""
    with Log.init(tmp_path / "new", iss=ISS) as log:
        assert log.store.meta()[log_module.INDEX_CHUNK_KEY] == str(CHUNK)
        assert log.index_chunk == CHUNK
    assert log_module.chunk_of({}) == log_module.LEGACY_INDEX_CHUNK == 32768
    assert log_module.chunk_of({"index_chunk": "2048"}) == 2048


@pytest.mark.parametrize("seed", range(12))
def test_two_writers_taking_turns_keep_the_index_and_tree_exact(tmp_path: Path, seed: int) -> None:
    """Replicas take turns at the write lock: each writer's kept keys and tree edge are then
    behind the store, and are caught up from the other's entries alone (ServerIndex.take,
    log.writer.edge_at). After every step the index holds exactly the entries below the
    watermark, and every head's root is its entries' (the audit recomputes them)."""
    rng = random.Random(seed)
    data = tmp_path / "d"
    clock = Clock()
    with Log.init(data, iss=ISS, clock=clock) as a, Log.open(data, clock=clock) as b:
        n = 0
        size = head = 0
        for _ in range(40):
            writer = rng.choice((a, b))
            if rng.random() < 0.25:
                writer.checkpoint()
                head = size
            else:
                count = rng.randint(1, 6)
                writer.append([server(n + i) for i in range(1, count + 1)])
                n += count
                size = n
            below = max(head, size - size % CHUNK)
            assert sorted(indexed(data)) == keys_of(*range(1, below + 1)), (seed, size, head)
        a.checkpoint()
        report = audit_store(a)
        assert report.ok, report
