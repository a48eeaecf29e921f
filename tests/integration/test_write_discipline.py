"""The write discipline in one process: what the integrity issue's false head and partial
batches came from, each as a test.

- A batch whose transaction fails leaves no trace in the process either: no cached tree
  edge or /record keys of rows that were rolled back (another process may then store other
  rows at those indices, and a head over the stale cache would be false).
- A head is signed over the root its own transaction reads; a cached edge that disagrees
  stops the signing.
- Many threads appending, proving, checkpointing and reading one `Log` at once: every batch
  is whole, every proof verifies, the audit is clean (one shared connection used to fail
  here with "another row available" and "cannot commit - no transaction is active").
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from capability_anchor.audit import audit_store
from capability_anchor.errors import StoreError
from capability_anchor.log import Log
from capability_anchor.merkle import TreeEdge, hash_leaf, root_hash
from capability_anchor.store.sqlite import SqliteStore as Store
from tests.kit.logkit import ISS, Clock, at
from tests.kit.obskit import observation, verify_answered_proof

DAY = "2026-03-01"


def _records(tag: str, n: int) -> list[dict[str, Any]]:
    return [observation(i, tag, sub=f"example:{tag}-{i}") for i in range(n)]


def _stored_root(log: Log, day: str, size: int) -> bytes:
    return root_hash(log.store.leaf_hashes(day, 0, size))


def test_a_rolled_back_prove_batch_poisons_no_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack-named: stale edge after rollback. The batch and its head fail at the last
    storage seam (the head insert); another writer then stores as many other entries; the
    first writer's next head must still be the root of what is stored."""
    clock = Clock(at(DAY, 10))
    data = tmp_path / "data"
    first = Log.init(data, iss=ISS, clock=clock)
    second = Log.open(data, clock=clock)
    try:
        first.append(_records("a", 7))
        calls = {"n": 0}
        real = Store.insert_head

        def failing(self: Store, head: Any) -> None:
            calls["n"] += 1
            raise StoreError("injected: the head insert failed")

        monkeypatch.setattr(Store, "insert_head", failing)
        with pytest.raises(StoreError, match="injected"):
            first.append_and_prove(first.prepare(_records("lost", 5)))
        monkeypatch.setattr(Store, "insert_head", real)
        assert calls["n"] == 1
        assert first.store.day_size(DAY) == 7  # nothing of the batch stored
        second.append(_records("other", 5))  # the same indices, other rows
        doc = first.checkpoint()
        assert doc is not None
        row = first.store.newest_unsealed(DAY)
        assert row is not None and row.tree_size == 12
        assert row.root == _stored_root(first, DAY, 12)
        assert audit_store(first).ok, audit_store(first).problems
    finally:
        first.close()
        second.close()


def test_a_cached_edge_that_disagrees_with_the_store_signs_nothing(tmp_path: Path) -> None:
    """Mutation probe: if this process's edge ever differed from the stored entries, the
    checkpoint must refuse rather than sign the cached root."""
    clock = Clock(at(DAY, 10))
    with Log.init(tmp_path / "data", iss=ISS, clock=clock) as log:
        log.append(_records("a", 3))
        bogus = TreeEdge(0, [])
        bogus.extend(b"".join(hash_leaf(bytes([n])) for n in range(3)))
        # The writer's cache of the day's tree edge (`LogWriter.edge`), made to lie.
        log.writer.edge, log.writer.edge_day = bogus, DAY
        with pytest.raises(StoreError, match="refusing to sign"):
            log.checkpoint()
        assert log.store.newest_unsealed(DAY) is None
        log.writer.edge = None
        assert log.checkpoint() is not None
        assert audit_store(log).ok


def test_threads_share_one_log_without_sharing_a_connection(tmp_path: Path) -> None:
    clock = Clock(at(DAY, 10))
    errors: list[BaseException] = []
    answers: dict[str, list[dict[str, Any]]] = {}
    lock = threading.Lock()
    with Log.init(tmp_path / "data", iss=ISS, clock=clock) as log:

        def prover(w: int) -> None:
            try:
                for b in range(15):
                    tag = f"p{w}-{b}"
                    out = log.append_and_prove(log.prepare(_records(tag, 20)))
                    with lock:
                        answers[tag] = out
            except BaseException as exc:
                errors.append(exc)

        def appender(w: int) -> None:
            try:
                for b in range(15):
                    log.append(_records(f"a{w}-{b}", 20))
            except BaseException as exc:
                errors.append(exc)

        def reader() -> None:
            try:
                for _ in range(200):
                    head = log.store.newest_head(DAY)
                    if head is not None and head.tree_size > 0:
                        log.proof(DAY, head.tree_size - 1)
                        log.entries(DAY, 0, 50)
            except BaseException as exc:
                errors.append(exc)

        def checkpointer() -> None:
            try:
                for _ in range(30):
                    log.checkpoint()
            except BaseException as exc:
                errors.append(exc)

        threads = (
            [threading.Thread(target=prover, args=(w,)) for w in range(3)]
            + [threading.Thread(target=appender, args=(w,)) for w in range(2)]
            + [threading.Thread(target=reader) for _ in range(3)]
            + [threading.Thread(target=checkpointer)]
        )
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[:3]
        assert log.store.day_size(DAY) == 5 * 15 * 20
        for tag, out in answers.items():
            indices = [e["leaf_index"] for e in out]
            assert indices == list(range(indices[0], indices[0] + 20)), tag
            for e in out:
                verify_answered_proof(e)
                p = e["proof"]
                assert bytes.fromhex(e["anchor"]["root"]) == _stored_root(log, DAY, p["tree_size"])
        report = audit_store(log)
        assert report.ok, report.problems
