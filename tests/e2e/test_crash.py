"""Crash safety: SIGKILL the real `capability-anchor` CLI during append, checkpoint, seal and
export, then check that nothing acknowledged or published was lost or changed, that the
audit passes and that the next run carries on (the harness is `crashkit.py`; the same
scenarios run thousands of times in `tools/crash_soak.py`). Plus the day boundary and
multi-day histories with empty days, through the library with an injected clock.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from capability_anchor import head as heads
from capability_anchor.audit import audit_store
from capability_anchor.errors import Conflict
from capability_anchor.leaf import leaf_hash
from capability_anchor.log import AppendResult, Log, utc_day
from tests.kit.crashkit import (
    EMPTY_ROOT,
    ISS,
    SCENARIOS,
    Clock,
    CrashCheckFailed,
    CrossedMidnight,
    Run,
    Workbench,
    check_append,
    check_export,
    check_printed_heads,
    check_seal,
    check_sealed_chain,
    day_start,
    last_microsecond,
    record,
    shift_day,
    snapshot,
)

# (seeds, kills per seed): 16 + 12 + 12 + 12 = 52 kills in all.
PLAN = {"append": (4, 4), "checkpoint": (4, 3), "seal": (4, 3), "export": (4, 3)}
CASES = [(command, seed) for command, (seeds, _) in PLAN.items() for seed in range(seeds)]


def test_the_plan_kills_at_least_fifty_times() -> None:
    assert sum(seeds * kills for seeds, kills in PLAN.values()) >= 50


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workbench]:
    try:
        built = Workbench.build(tmp_path_factory.mktemp("crash-bench"))
    except CrossedMidnight as exc:  # pragma: no cover - only within seconds of 00:00 UTC
        pytest.skip(str(exc))
    yield built
    print("\n".join(["crash kills (see with -s):", *built.stats.lines()]))


@pytest.mark.parametrize(("command", "seed"), CASES)
def test_sigkill_loses_nothing_and_the_next_run_carries_on(
    bench: Workbench, tmp_path: Path, command: str, seed: int
) -> None:
    _, kills = PLAN[command]
    before = bench.stats.iterations[command]
    try:
        SCENARIOS[command](bench, random.Random(f"{command}/{seed}"), tmp_path, kills)
    except CrossedMidnight as exc:  # pragma: no cover - only within seconds of 00:00 UTC
        pytest.skip(str(exc))
    assert bench.stats.iterations[command] == before + kills


def _killed(lines: list[bytes]) -> Run:
    return Run(["capability-anchor", "test"], 0.2, -signal.SIGKILL, 0.2, lines, b"", b"")


def test_the_checks_catch_lost_or_changed_data(bench: Workbench, tmp_path: Path) -> None:
    """The harness is only as good as its checks: feed them what a broken log would do."""
    inp, day = bench.append_inputs[0], bench.today
    acks = [
        json.dumps({"day": day, "leaf_index": i, "leaf_hash": h, "duplicate": False}).encode()
        for i, h in enumerate(inp.hashes[:1000])
    ]
    assert check_append(_killed(acks), inp, [], inp.hashes[:1000], {}, day)
    with pytest.raises(CrashCheckFailed, match="acknowledged"):
        check_append(_killed(acks), inp, [], [], {}, day)  # printed, never stored
    with pytest.raises(CrashCheckFailed, match="whole batches"):
        check_append(_killed([]), inp, [], inp.hashes[:999], {}, day)  # half a batch
    with pytest.raises(CrashCheckFailed, match="acknowledgement 0"):
        check_append(_killed(acks[1:2]), inp, [], inp.hashes[:1000], {}, day)
    with pytest.raises(CrashCheckFailed, match="acknowledged entry 5"):
        check_append(_killed([]), inp, [], [], {inp.hashes[0]: 5}, day)  # an ack vanished

    base, ref = snapshot(bench.seal_base), bench.seal_reference
    first_unsealed = min(set(ref.sealed) - set(base.sealed))
    doc = ref.sealed[first_unsealed]
    with pytest.raises(CrashCheckFailed, match="printed"):
        check_seal(_killed([doc]), base, base, ref)  # printed, not stored
    with pytest.raises(CrashCheckFailed, match="not the stored one"):
        check_printed_heads(_killed([doc]), base)
    other = {**ref.sealed, first_unsealed: ref.sealed[shift_day(first_unsealed, 1)]}
    with pytest.raises(CrashCheckFailed, match="differs from the uninterrupted reference"):
        check_sealed_chain(ref, other)

    out = tmp_path / "out"
    out.mkdir()
    (out / f"{first_unsealed}.json").write_bytes(doc + b" ")
    with pytest.raises(CrashCheckFailed, match="differs from the log's bytes"):
        check_export(out, ref, complete=False)
    (out / f"{first_unsealed}.json").write_bytes(doc)
    check_export(out, ref, complete=False)
    (out / "index.json").write_bytes(b'{"v":"0.2","days":[')
    with pytest.raises(CrashCheckFailed, match="not whole JSON"):
        check_export(out, ref, complete=False)
    (out / "index.json").unlink()
    with pytest.raises(CrashCheckFailed, match="lacks"):
        check_export(out, ref, complete=True)


# --- the day boundary, with an injected clock ---------------------------------------------------

D0 = "2026-03-14"
D1 = shift_day(D0, 1)


def _day_of(results: list[AppendResult]) -> list[tuple[str, int, bool]]:
    return [(r.day, r.leaf_index, r.duplicate) for r in results]


def test_the_last_microsecond_belongs_to_the_day_and_midnight_to_the_next(tmp_path: Path) -> None:
    assert utc_day(last_microsecond(D0)) == D0
    assert utc_day(day_start(D1)) == D1
    clock = Clock(day_start(D0) + 3600)
    with Log.init(tmp_path / "data", iss=ISS, clock=clock) as log:
        assert log.first_day == D0
        assert _day_of(log.append([record("x", 0)])) == [(D0, 0, False)]

        clock.t = last_microsecond(D0)
        results = log.append([record("x", 1), record("x", 2), record("x", 0)])
        assert _day_of(results) == [(D0, 1, False), (D0, 2, False), (D0, 0, True)]
        doc = log.checkpoint()
        assert doc is not None
        claims = heads.parse_document(doc).claims
        assert (claims["day"], claims["tree_size"], claims["sealed"]) == (D0, 3, False)
        assert log.seal() == []  # the day has not ended yet
        assert log.store.sealed_head(D0) is None

        clock.t = day_start(D1)
        # A new day: index 0 again, and a leaf stored yesterday is not a duplicate today.
        results = log.append([record("x", 3), record("x", 0)])
        assert _day_of(results) == [(D1, 0, False), (D1, 1, False)]
        assert log.store.sealed_head(D0) is None  # appends never seal
        doc = log.checkpoint()  # seals D0 first
        assert doc is not None
        sealed = log.store.sealed_head(D0)
        assert sealed is not None
        d0 = heads.parse_document(sealed.doc).claims
        assert (d0["tree_size"], d0["sealed"], d0["prev"]) == (3, True, None)
        assert d0["iat"] == int(day_start(D1)) == heads.sealed_iat(D0)
        d1 = heads.parse_document(doc).claims
        assert (d1["day"], d1["tree_size"], d1["sealed"]) == (D1, 2, False)
        assert d1["prev"] == heads.claims_digest(d0)
        assert log.seal() == []  # nothing left to seal: D1 is today

        # Back on the sealed day (a clock step backwards): refused, nothing stored.
        clock.t = last_microsecond(D0)
        late = record("x", 99)
        with pytest.raises(Conflict):
            log.append([late])
        with pytest.raises(Conflict):
            log.append([record("x", 0)])  # even a duplicate of a stored leaf
        # Before the log's first day: refused, nothing stored.
        clock.t = last_microsecond(shift_day(D0, -1))
        with pytest.raises(Conflict):
            log.append([late])
        assert log.checkpoint() is None
        assert log.store.find_leaf(leaf_hash(late)) == []
        assert log.store.entry_days() == [D0, D1]
        assert (log.store.day_size(D0), log.store.day_size(D1)) == (3, 2)
        assert audit_store(log).ok


def test_seal_waits_for_midnight(tmp_path: Path) -> None:
    clock = Clock(day_start(D0))
    with Log.init(tmp_path / "data", iss=ISS, clock=clock) as log:
        clock.t = last_microsecond(D1)
        assert [heads.parse_document(d).claims["day"] for d in log.seal()] == [D0]
        clock.t = day_start(shift_day(D1, 1))
        assert [heads.parse_document(d).claims["day"] for d in log.seal()] == [D1]


def test_multi_day_history_with_empty_days_seals_every_day(tmp_path: Path) -> None:
    days = [shift_day(D0, n) for n in range(10)]
    entries = {days[0]: 3, days[3]: 258, days[5]: 1, days[6]: 1}  # days 1, 2, 4, 7, 8 empty
    data, copy = tmp_path / "data", tmp_path / "copy"
    clock = Clock(day_start(days[0]))
    with Log.init(data, iss=ISS, clock=clock) as log:
        for day, count in entries.items():
            # Day 5's entry in its last microsecond, day 6's at its first.
            clock.t = last_microsecond(day) if day == days[5] else day_start(day)
            assert {r.day for r in log.append([record(day, n) for n in range(count)])} == {day}
        clock.t = day_start(days[9])
    shutil.copytree(data, copy)

    with Log.open(data, clock=clock) as log:
        docs = log.seal()
        assert [heads.parse_document(d).claims["day"] for d in docs] == days[:9]
        keys = log.keyset()
        prev = None
        for day, doc in zip(days, docs, strict=False):
            claims = heads.verify_head(heads.parse_document(doc).jws, keys).claims
            assert claims["tree_size"] == entries.get(day, 0)
            if day not in entries:
                assert claims["root"] == EMPTY_ROOT
            assert claims["prev"] == prev
            assert claims["iat"] == heads.sealed_iat(day)
            prev = heads.claims_digest(claims)
        assert log.seal() == []
        assert audit_store(log).ok
    snap = snapshot(data)
    assert check_sealed_chain(snap, snap.sealed) == days[:9]

    # Sealed later (a week after day 9), the same inputs give the same bytes for every day.
    with Log.open(copy, clock=Clock(day_start(shift_day(days[9], 7)))) as log:
        later = log.seal()
        assert later[:9] == docs
        assert len(later) == 16
        assert audit_store(log).ok
