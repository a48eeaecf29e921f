"""`GET /proof`'s head on PostgreSQL (read/reader.py, `Store.head_reuse_s`): a reader keeps a
day's newest head for a fraction of a second instead of a round trip per proof. What must
hold whatever it keeps: every proof verifies against the anchor it is answered with, an
entry the kept head does not cover is proved against a head read afresh (never refused for
the reader's cache), and a kept head is at most `head_reuse_s` old."""

from __future__ import annotations

import time
from pathlib import Path

from capability_anchor import merkle
from capability_anchor.log import Log
from capability_anchor.store.postgres.base import HEAD_REUSE_S
from tests.kit.obskit import observation
from tests.kit.pgkit import PgServer

ISS = "https://r.example"


def verified(log: Log, day: str, index: int) -> int:
    """The size of the head `log.proof` answered with; its proof checked against it."""
    found = log.proof(day, index)
    proof = found["proof"]
    leaf = bytes.fromhex(log.entries(day, index, 1)[0]["leaf_hash"])
    merkle.verify_inclusion(
        leaf,
        index,
        proof["tree_size"],
        [bytes.fromhex(p) for p in proof["path"]],
        bytes.fromhex(found["anchor"]["root"]),
    )
    return int(proof["tree_size"])


def test_a_kept_head_never_hides_an_entry_and_is_replaced_within_its_time(
    postgres: PgServer, tmp_path: Path
) -> None:
    url = postgres.url(postgres.fresh_database("reads"))
    with Log.init(tmp_path / "d", iss=ISS, store=url) as log:
        day = log.append([observation(n, "a") for n in range(5)])[0].day
        log.checkpoint()
        assert verified(log, day, 2) == 5  # the head of 5 is kept now
        log.append([observation(n, "b") for n in range(5)])
        log.checkpoint()
        # Entry 7 is not covered by the kept head: proved at once against the new one.
        assert verified(log, day, 7) == 10
        log.append([observation(n, "c") for n in range(5)])
        log.checkpoint()
        assert verified(log, day, 3) in (10, 15)  # the kept head, or the newest
        time.sleep(HEAD_REUSE_S + 0.05)
        assert verified(log, day, 3) == 15
