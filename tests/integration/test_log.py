"""The Log object end to end on real SQLite files: appends, dedupe, atomic batches, heads,
proofs from stored tiles checked with the kernel's verifiers, sealing, the self-check."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from capability_anchor import head as heads
from capability_anchor import keys, leaf, merkle
from capability_anchor.errors import (
    Conflict,
    InvalidRecord,
    NotFound,
    StartupCheckFailed,
    UsageError,
)
from capability_anchor.log import Log

ISS = "https://resolver.example"
DAY0 = dt.datetime(2026, 11, 2, 12, 0, tzinfo=dt.UTC).timestamp()


class Clock:
    def __init__(self, t: float = DAY0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def days(self, n: float) -> None:
        self.t += n * 86400


def rec(i: int, **extra: Any) -> dict[str, Any]:
    return {
        "v": "0.2",
        "iss": ISS,
        "sub": f"example:{i}",
        "url": f"https://s{i}.example/mcp",
        "status": "ok",
        "checked_at": "2026-10-28T10:05:00Z",
        "evidence": {},
        **extra,
    }


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def log(tmp_path: Path, clock: Clock) -> Any:
    with Log.init(tmp_path / "data", iss=ISS, clock=clock) as opened:
        yield opened


def verify_proof(answer: dict[str, Any], record: dict[str, Any]) -> None:
    p = answer["proof"]
    merkle.verify_inclusion(
        leaf.leaf_hash(record),
        p["leaf_index"],
        p["tree_size"],
        [bytes.fromhex(h) for h in p["path"]],
        bytes.fromhex(answer["anchor"]["root"]),
    )


def test_init_creates_secret_files_and_refuses_to_overwrite(tmp_path: Path, clock: Clock) -> None:
    data = tmp_path / "data"
    with Log.init(data, iss=ISS, clock=clock) as log:
        assert log.first_day == "2026-11-02"
    for name in ("signing-key.jwk", "writer-token"):
        assert stat.S_IMODE((data / name).stat().st_mode) == 0o600
    with pytest.raises(Conflict, match="already exists"):
        Log.init(data, iss=ISS, clock=clock)


@pytest.mark.parametrize(
    "iss",
    [
        "https://r.example/",
        "https://r.example/path",
        "ftp://r.example",
        "https://u:p@r.example",
        "r.example",
        "https://r.example?q=1",
    ],
)
def test_init_requires_an_origin(tmp_path: Path, iss: str) -> None:
    with pytest.raises(UsageError, match="origin"):
        Log.init(tmp_path / "d", iss=iss)


def test_appends_are_contiguous_and_deduplicated(log: Log) -> None:
    first = log.append([rec(0), rec(1), rec(0)])
    assert [(r.leaf_index, r.duplicate) for r in first] == [(0, False), (1, False), (0, True)]
    again = log.append([rec(1), rec(2)])
    assert [(r.leaf_index, r.duplicate) for r in again] == [(1, True), (2, False)]
    assert log.store.day_size("2026-11-02") == 3
    # Reserved members do not change the leaf: the same record issued later is a duplicate.
    issued = log.append([rec(2, iat=1, exp=2, jws="x")])
    assert issued[0].duplicate and issued[0].leaf_index == 2


def test_a_bad_record_rejects_the_whole_batch(log: Log) -> None:
    log.append([rec(0)])
    bad: list[object] = [rec(1), rec(2), {"a": float("nan")}, rec(3)]
    with pytest.raises(InvalidRecord) as info:
        log.append(bad)
    assert info.value.position == 2
    other_iss = [rec(4), {**rec(5), "iss": "https://other.example"}]
    with pytest.raises(InvalidRecord, match="issuer") as info:
        log.append(other_iss)
    assert info.value.position == 1
    assert log.store.day_size("2026-11-02") == 1


def test_checkpoint_publishes_only_when_grown(log: Log, clock: Clock) -> None:
    assert log.checkpoint() is None
    log.append([rec(i) for i in range(5)])
    doc = log.checkpoint()
    assert doc is not None
    assert log.checkpoint() == doc  # no growth, no new head
    clock.t += 30
    log.append([rec(9)])
    newer = log.checkpoint()
    assert newer is not None and newer != doc
    assert [h.tree_size for h in log.store.heads("2026-11-02")] == [5, 6]
    parsed = heads.parse_document(newer)
    verified = heads.verify_head(parsed.jws, log.keyset())
    assert verified.claims == parsed.claims
    assert verified.claims["prev"] is None and not verified.claims["sealed"]
    assert newer == parsed.document()  # JCS bytes, no trailing newline


@pytest.mark.parametrize("count", [1, 2, 255, 256, 257, 1000, 1100])
def test_every_proof_verifies_against_its_head(tmp_path: Path, count: int) -> None:
    clock = Clock()
    records = [rec(i) for i in range(count)]
    with Log.init(tmp_path / "d", iss=ISS, clock=clock) as log:
        cut = count // 2 or 1
        log.append(records[:cut])
        log.checkpoint()
        log.append(records[cut:])
        log.checkpoint()
        day = "2026-11-02"
        for size in sorted({cut, count}):
            for i in range(size):
                answer = log.proof(day, i, size)
                assert answer["anchor"]["url"] == f"{ISS}/roots/{day}/{size}"
                verify_proof(answer, records[i])
        # The same proofs from a second process's view of the store (no in-memory edge).
        with Log.open(tmp_path / "d", clock=clock) as other:
            for i in {0, count - 1, count // 3}:
                verify_proof(other.proof(day, i), records[i])


def test_proofs_across_tile_levels(tmp_path: Path) -> None:
    # More than 65,536 entries: level-2 tiles exist and proofs read all three levels.
    clock = Clock()
    n = 66_000
    hashes: list[bytes] = []
    with Log.init(tmp_path / "d", iss=ISS, records="any", clock=clock) as log:
        for start in range(0, n, 1000):
            batch = [{"n": i} for i in range(start, min(n, start + 1000))]
            hashes += [r.leaf_hash for r in log.append(batch)]
            if start == 40_000:
                log.checkpoint()
        log.checkpoint()
        tree = merkle.TiledTree(hashes)
        for size in (41_000, n):
            head = log.head_for("2026-11-02", size)
            assert head.root == tree.root(size)
            for i in (0, 255, 256, 65_535, 40_999, size - 1):
                if i < size:
                    got = log.proof("2026-11-02", i, size)["proof"]["path"]
                    assert got == [h.hex() for h in tree.inclusion_proof(i, size)]
        c = log.consistency("2026-11-02", 41_000, n)
        merkle.verify_consistency(
            41_000, n, tree.root(41_000), tree.root(n), [bytes.fromhex(h) for h in c["path"]]
        )


def test_proof_selection_and_errors(log: Log, clock: Clock) -> None:
    records = [rec(i) for i in range(10)]
    with pytest.raises(NotFound):
        log.proof("2026-11-02", 0)
    log.append(records[:4])
    log.checkpoint()
    log.append(records[4:])  # not covered by any head yet
    with pytest.raises(NotFound, match="not covered"):
        log.proof("2026-11-02", 5)
    h5 = leaf.leaf_hash(records[5])
    with pytest.raises(NotFound):
        log.proof_by_leaf_hash(h5)
    verify_proof(log.proof_by_leaf_hash(leaf.leaf_hash(records[2])), records[2])
    clock.days(1)
    log.seal()
    sealed = log.proof("2026-11-02", 5)
    assert sealed["anchor"]["url"] == f"{ISS}/roots/2026-11-02"
    verify_proof(sealed, records[5])
    # An explicit size picks the unsealed head of that size.
    assert log.proof("2026-11-02", 1, 4)["anchor"]["url"].endswith("/2026-11-02/4")
    with pytest.raises(NotFound):
        log.proof("2026-11-02", 1, 7)
    with pytest.raises(UsageError):
        log.proof("2026-13-02", 1)
    with pytest.raises(UsageError):
        log.consistency("2026-11-02", 0, 4)
    # Well-formed sizes that name no proof the log has: past the newest head, or out of order.
    with pytest.raises(NotFound, match="no consistency proof from 4 to 11"):
        log.consistency("2026-11-02", 4, 11)
    with pytest.raises(NotFound, match="first <= second"):
        log.consistency("2026-11-02", 4, 3)


def test_a_head_another_process_publishes_is_read_at_once(log: Log) -> None:
    """The reader keeps a day's newest head while the store's change mark holds (read/reader.py):
    an append and a checkpoint by another process are seen by the very next read."""
    log.append([rec(i) for i in range(3)])
    log.checkpoint()
    assert log.head_for("2026-11-02").tree_size == 3
    assert log.head_for("2026-11-02").tree_size == 3  # kept, the mark unchanged
    code = (
        "import json, sys\n"
        "from capability_anchor.log import Log\n"
        f"with Log.open(sys.argv[1], clock=lambda: {DAY0}) as log:\n"
        "    log.append([json.loads(sys.argv[2])])\n"
        "    log.checkpoint()\n"
    )
    other = [sys.executable, "-c", code, str(log.data_dir), json.dumps(rec(3))]
    subprocess.run(other, check=True, timeout=120)
    assert log.head_for("2026-11-02").tree_size == 4
    verify_proof(log.proof("2026-11-02", 3), rec(3))


def test_seal_chains_days_and_is_deterministic(tmp_path: Path) -> None:
    clock = Clock()
    data = tmp_path / "d"
    with Log.init(data, iss=ISS, clock=clock) as log:
        log.append([rec(0), rec(1)])
        clock.days(2)
        log.append([rec(2)])
        log.checkpoint()  # seals days 1 and 2 first
        assert [h.day for h in log.store.sealed_heads()] == ["2026-11-03", "2026-11-02"]
    twin = tmp_path / "twin"
    shutil.copytree(data, twin)
    clock.days(3)
    docs = []
    for d in (data, twin):
        with Log.open(d, clock=clock) as log:
            docs.append(log.seal())
            assert log.seal() == []  # idempotent
    assert docs[0] == docs[1] and len(docs[0]) == 3
    with Log.open(data, clock=clock) as log:
        chain = [heads.parse_document(h.doc).claims for h in reversed(log.store.sealed_heads())]
    assert [c["day"] for c in chain] == [
        "2026-11-02",
        "2026-11-03",
        "2026-11-04",
        "2026-11-05",
        "2026-11-06",
        "2026-11-07",
    ][: len(chain)]
    assert chain[0]["prev"] is None
    for before, after in itertools.pairwise(chain):
        assert after["prev"] == heads.claims_digest(before)
    empty = [c for c in chain if c["tree_size"] == 0]
    assert empty and all(c["root"] == merkle.EMPTY_ROOT.hex() for c in empty)
    # Sealed heads are dated the end of their day.
    assert chain[0]["iat"] == int(dt.datetime(2026, 11, 3, tzinfo=dt.UTC).timestamp())


def test_appends_refused_on_sealed_day_and_before_first_day(log: Log, clock: Clock) -> None:
    log.append([rec(0)])
    clock.days(1)
    log.seal()
    clock.days(-1)  # the clock went back onto the sealed day
    with pytest.raises(Conflict, match="sealed"):
        log.append([rec(1)])
    clock.days(-5)
    with pytest.raises(Conflict, match="first day"):
        log.append([rec(1)])
    assert log.store.day_size("2026-11-02") == 1


def test_self_check_refuses_a_foreign_key(tmp_path: Path, clock: Clock) -> None:
    data = tmp_path / "d"
    with Log.init(data, iss=ISS, clock=clock) as log:
        log.append([rec(0)])
        log.checkpoint()
    key_file = data / "signing-key.jwk"
    key_file.unlink()
    keys.create_key_file(key_file)
    with pytest.raises(StartupCheckFailed, match="does not verify the newest published head"):
        Log.open(data, clock=clock)


def test_roots_listing_and_entries(log: Log, clock: Clock) -> None:
    log.append([rec(i) for i in range(3)])
    clock.days(3)
    log.seal()
    listing = log.roots()
    assert [d["day"] for d in listing["days"]] == ["2026-11-04", "2026-11-03", "2026-11-02"]
    assert log.roots(before="2026-11-04", limit=1)["days"][0]["day"] == "2026-11-03"
    entries = log.entries("2026-11-02", 1, 5)
    assert [e["leaf_index"] for e in entries] == [1, 2]
    assert entries[0]["claims"] == leaf.leaf_claims(rec(1))
    assert json.loads(json.dumps(entries))  # plain JSON types


def test_init_resumes_after_a_crash_before_the_database_existed(tmp_path: Path) -> None:
    """init's commit point is the database appearing under its name: a key file or a
    half-built temporary database left by a killed init does not block the next init."""
    data = tmp_path / "d"
    data.mkdir()
    key = keys.create_key_file(data / "signing-key.jwk")
    (data / ".log.sqlite3.init").write_bytes(b"half a database")
    with Log.init(data, iss=ISS) as log:
        assert log.key.kid == key.kid  # the key nobody ever saw is taken over
    assert (data / "log.sqlite3").exists()
    assert not (data / ".log.sqlite3.init").exists()


def test_a_database_without_meta_is_refused_cleanly(tmp_path: Path) -> None:
    from capability_anchor.errors import StoreError
    from capability_anchor.store import open as stores

    data = tmp_path / "d"
    stores.create(data, lambda store: None)
    keys.create_key_file(data / "signing-key.jwk")
    with pytest.raises(StoreError, match="not a complete log"):
        Log.open(data)
