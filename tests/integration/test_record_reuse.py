"""`/record` tokens signed once per state (issue #37): reused only for the same entry, head,
key and lifetime while nearly whole, in a bounded per-process cache (`log.issuance`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from capability_anchor.log import Log
from capability_anchor.log.issuance import IssuedTokens, issue_record
from tests.integration.test_record import ISS, T0, Clock, server


@pytest.mark.parametrize(("lifetime", "kept_for"), [(86400, 300), (1000, 100), (10, 1)])
def test_a_token_is_reused_while_its_remaining_lifetime_is_within_the_rule(
    tmp_path: Path, lifetime: int, kept_for: int
) -> None:
    """Remaining >= max(0.9 x lifetime, lifetime - 300 s): reused at `kept_for` seconds, a
    new token one second later."""
    clock = Clock()
    with Log.init(tmp_path / "d", iss=ISS, clock=clock) as log:
        log.append([server(1)])
        log.checkpoint()
        first = issue_record(log, sub="example:1", lifetime=lifetime)
        clock.t += kept_for
        assert issue_record(log, sub="example:1", lifetime=lifetime) == first
        clock.t += 1
        later = log.record(sub="example:1", lifetime=lifetime)
        assert later["iat"] == int(clock.t)
        # Another lifetime is another state: never the token of the first.
        other = log.record(sub="example:1", lifetime=lifetime + 1)
        assert other["exp"] - other["iat"] == lifetime + 1


def test_a_clock_that_went_back_gets_a_new_token(tmp_path: Path) -> None:
    clock = Clock()
    with Log.init(tmp_path / "d", iss=ISS, clock=clock) as log:
        log.append([server(1)])
        log.checkpoint()
        first = log.record(sub="example:1")
        clock.t -= 10  # the kept token's iat is now in the future
        assert log.record(sub="example:1")["iat"] == int(clock.t) != first["iat"]


def test_the_cache_holds_at_most_its_bound_of_servers(tmp_path: Path) -> None:
    """An LRU by count: the least recently served server's token is dropped first."""
    clock = Clock()
    with Log.init(tmp_path / "d", iss=ISS, clock=clock) as log:
        log.issued = IssuedTokens(size=2)
        log.append([server(n) for n in range(4)])
        log.checkpoint()
        first = {n: issue_record(log, sub=f"example:{n}") for n in range(4)}
        assert len(log.issued) == 2
        clock.t += 1
        assert issue_record(log, sub="example:3") == first[3]  # kept
        assert issue_record(log, sub="example:0") != first[0]  # dropped: signed again
        assert len(log.issued) == 2


def test_the_heads_kept_under_the_change_mark_follow_another_process(tmp_path: Path) -> None:
    """While the store's change mark holds, `/record` reads only the index and the entry and
    takes the newest head and the kid it kept (`issuance._sources`). A newer entry and head
    committed by another process move the mark: the very next record is of them."""
    clock = Clock()
    with Log.init(tmp_path / "d", iss=ISS, clock=clock) as log:
        log.append([server(1), server(2)])
        log.checkpoint()
        first = log.record(sub="example:1")
        assert log.issued.under is not None and log.issued.under[1] == log.key.kid
        kept = log.issued.under
        assert log.record(sub="example:2")["anchor"] == first["anchor"]  # kept heads
        assert log.issued.under is kept
        code = (
            "import json, sys\n"
            "from capability_anchor.log import Log\n"
            f"with Log.open(sys.argv[1], clock=lambda: {T0 + 60}) as log:\n"
            "    log.append([json.loads(sys.argv[2])])\n"
            "    log.checkpoint()\n"
        )
        newer = server(1, name="S1 again")
        other = [sys.executable, "-c", code, str(log.data_dir), json.dumps(newer)]
        subprocess.run(other, check=True, timeout=120)
        clock.t += 60
        again = log.record(sub="example:1")
        assert again["name"] == "S1 again" and again["proof"]["tree_size"] == 3
        assert again["anchor"]["url"].endswith("/3") and log.issued.under is not kept
