"""Plans of the PostgreSQL statements whose cost must not grow with the day: what the planner
chooses depends on its statistics, which lag behind a day that is filling up, so the
statement itself must leave it no plan that reads the whole day.

The dedupe probe of every batch (`rows.EXISTING`) once read every entry of the day through a
bitmap scan and tested each against the batch's array (40 ms a batch at 100,000 entries,
growing with the day); it must be one `entries_by_hash` probe per hash."""

from __future__ import annotations

import hashlib
from pathlib import Path

from capability_anchor.leaf import leaf_hash
from capability_anchor.log import Log
from capability_anchor.store.postgres import EXISTING
from tests.kit.obskit import observation
from tests.kit.pgkit import PgServer

ISS = "https://r.example"


def test_the_dedupe_probe_is_one_index_probe_per_hash_whatever_the_statistics(
    postgres: PgServer, tmp_path: Path
) -> None:
    name = postgres.fresh_database("plans")
    records = [observation(n, "p") for n in range(3000)]
    with Log.init(tmp_path / "d", iss=ISS, store=postgres.url(name)) as log:
        day = ""
        for b in range(0, len(records), 1000):
            day = log.append(records[b : b + 1000])[0].day
        # Stored and new records in one batch: the stored ones are answered as duplicates,
        # at the index each was stored at.
        again = records[5:8] + [observation(n, "q") for n in range(2)] + records[2999:]
        answers = log.append(again)
        assert [(a.duplicate, a.leaf_index) for a in answers] == [
            (True, 5),
            (True, 6),
            (True, 7),
            (False, 3000),
            (False, 3001),
            (True, 2999),
        ]
    probe = [hashlib.sha256(b"%d" % n).digest() for n in range(1000)]
    probe.append(leaf_hash(records[10]))
    with postgres.connect(name) as conn:
        for analyzed in (False, True):
            if analyzed:
                conn.execute("ANALYZE entries")
            plan = "\n".join(
                str(row[0]) for row in conn.execute("EXPLAIN " + EXISTING, (probe, day))
            )
            assert "Index Scan using entries_by_hash on entries" in plan, plan
            assert "Nested Loop" in plan, plan
            for whole_day in ("Bitmap Heap Scan", "Seq Scan on entries", "Hash Join"):
                assert whole_day not in plan, plan
            found = conn.execute(EXISTING, (probe, day)).fetchall()
            assert [(bytes(h), i) for h, i in found] == [(leaf_hash(records[10]), 10)]
