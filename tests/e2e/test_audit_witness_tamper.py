"""`audit` sees every stored witness fact (issue #21, item 6): each case tampers with a copy
of a witnessed log the way an attacker with file access would (plain SQL, the append-only
triggers dropped where they stand in the way), runs the real CLI in a process and expects
exit 1 naming what is wrong.

The log: three heads, two real witnesses on loopback (`witnesskit.TestWitness`), the policy
stored with `policy FILE`, and three `cosign` rounds with growth between them, so the
`cosignatures` table holds six rows (two per size) and each witness's state says "ok" at
the newest size. Also here: `cosign --policy FILE` stores nothing the audit cannot verify.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from capability_anchor.log import Log
from tests.kit.logkit import raw, run_cli
from tests.kit.obskit import observation
from tests.kit.witnesskit import TestWitness

ISS = "https://resolver.example"


class Witnessed:
    def __init__(self, data: Path, w1: TestWitness, w2: TestWitness) -> None:
        self.data, self.w1, self.w2 = data, w1, w2

    def copy(self, dest: Path) -> Path:
        shutil.copytree(self.data, dest)
        return dest


def _grow(data: Path, tag: str) -> None:
    with Log.open(data) as log:
        log.append([observation(i, tag) for i in range(3)])
        log.checkpoint()


def _policy(*witnesses: TestWitness) -> str:
    lines = [f"witness w{i} {w.vkey} {w.url}" for i, w in enumerate(witnesses, 1)]
    return "\n".join(lines) + "\nquorum w1\n"


@pytest.fixture(scope="module")
def witnessed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Witnessed]:
    tmp = tmp_path_factory.mktemp("witnessed")
    data = tmp / "data"
    Log.init(data, iss=ISS).close()
    _grow(data, "a")
    with Log.open(data) as log:
        vkey = log.read.history.vkey()
    with TestWitness("witness.test/w1", vkey) as w1, TestWitness("witness.test/w2", vkey) as w2:
        (tmp / "policy.txt").write_text(_policy(w1, w2))
        assert run_cli("policy", "--data", data, tmp / "policy.txt").returncode == 0
        for tag in ("b", "c", "d"):
            _grow(data, tag)
            done = run_cli("cosign", "--data", data)
            assert done.returncode == 0, done.stdout + done.stderr
        yield Witnessed(data, w1, w2)


def audit(data: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("audit", "--data", data)


def assert_caught(done: subprocess.CompletedProcess[str], phrase: str) -> None:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert phrase in done.stderr, f"{phrase!r} not in:\n{done.stderr}"


def sql(data: Path, *statements: str) -> None:
    with raw(data) as conn:
        for statement in statements:
            conn.execute(statement)


def _row(data: Path, query: str) -> tuple[object, ...]:
    with raw(data) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return tuple(row)


def test_the_witnessed_log_audits_clean(witnessed: Witnessed, tmp_path: Path) -> None:
    done = audit(witnessed.copy(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    checked = json.loads(done.stdout)["checked"]
    assert checked["cosignatures"] == 6
    assert checked["witness_states"] == 2


# --- the attacks ---------------------------------------------------------------------------


def cosignature_row_under_a_name_outside_the_policy(data: Path) -> None:
    """A genuine row moved under a witness name no policy lists."""
    sql(
        data,
        "DROP TRIGGER cosignatures_no_update",
        "UPDATE cosignatures SET witness = 'w9' WHERE id = 1",
    )


def cosignature_row_deleted_from_the_middle(data: Path) -> None:
    sql(data, "DROP TRIGGER cosignatures_no_delete", "DELETE FROM cosignatures WHERE id = 3")


def newest_cosignature_rows_deleted(data: Path) -> None:
    """No gap is left: the newest rows are the ones deleted."""
    sql(
        data,
        "DROP TRIGGER cosignatures_no_delete",
        "DELETE FROM cosignatures WHERE size = (SELECT max(size) FROM cosignatures)",
    )


def policy_text_replaced(data: Path) -> None:
    """The stored policy's text swapped for one naming another witness (same id, same time)."""
    text = b"witness w1 witness.test/evil+00000000+" + b"A" * 43 + b"=\nquorum w1\n"
    with raw(data) as conn:
        conn.execute("DROP TRIGGER policies_no_update")
        conn.execute("UPDATE policies SET policy = ? WHERE id = 1", (text,))


def policy_text_replaced_and_triggers_restored(data: Path) -> None:
    """As above, then the schema put back exactly as it was (so the schema check is clean)."""
    (trigger,) = _row(data, "SELECT sql FROM sqlite_master WHERE name = 'policies_no_update'")
    policy_text_replaced(data)
    sql(data, str(trigger))


def policy_row_deleted(data: Path) -> None:
    sql(data, "DROP TRIGGER policies_no_delete", "DELETE FROM policies")


def witness_stored_size_set_to_a_billion(data: Path) -> None:
    sql(data, "UPDATE witness_state SET size = 1000000000 WHERE witness = 'w1'")


ATTACKS: dict[str, tuple[Callable[[Path], None], str]] = {
    "cosignature_row_under_a_name_outside_the_policy": (
        cosignature_row_under_a_name_outside_the_policy,
        "no policy in force when it was stored lists a witness w9",
    ),
    "cosignature_row_deleted_from_the_middle": (
        cosignature_row_deleted_from_the_middle,
        "cosignatures row(s) #3 are missing (deleted)",
    ),
    "newest_cosignature_rows_deleted": (
        newest_cosignature_rows_deleted,
        "but no cosignature of that size by it is stored",
    ),
    "policy_text_replaced": (policy_text_replaced, "not the ones the log signed"),
    "policy_text_replaced_and_triggers_restored": (
        policy_text_replaced_and_triggers_restored,
        "not the ones the log signed",
    ),
    "policy_row_deleted": (policy_row_deleted, "not the ones the log signed"),
    "witness_stored_size_set_to_a_billion": (
        witness_stored_size_set_to_a_billion,
        "says size 1000000000, beyond the newest checkpoint",
    ),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_witness_fact_tampering_is_caught(
    witnessed: Witnessed, tmp_path: Path, attack: str
) -> None:
    tamper, phrase = ATTACKS[attack]
    data = witnessed.copy(tmp_path / "data")
    tamper(data)
    assert_caught(audit(data), phrase)


def test_a_witness_stored_size_of_a_billion_is_named_by_cosign_too(
    witnessed: Witnessed, tmp_path: Path
) -> None:
    """Not taken for "already cosigned", which would end the submissions to it silently."""
    data = witnessed.copy(tmp_path / "data")
    witness_stored_size_set_to_a_billion(data)
    done = run_cli("cosign", "--data", data)
    assert done.returncode == 1
    assert "says it cosigned size 1000000000, beyond the newest checkpoint" in done.stderr
    outcomes = {o["witness"]: o["result"] for o in map(json.loads, done.stdout.splitlines())}
    assert outcomes == {"w1": "failed", "w2": "current"}


def test_the_policy_statement_removed_from_meta_is_caught(
    witnessed: Witnessed, tmp_path: Path
) -> None:
    data = witnessed.copy(tmp_path / "data")
    sql(data, "DELETE FROM meta WHERE key = 'policies_signed'")
    assert_caught(audit(data), "stored policies are not signed by the log")


# --- cosign --policy FILE -------------------------------------------------------------------


def test_cosign_with_a_policy_file_stores_nothing_the_audit_cannot_verify(
    witnessed: Witnessed, tmp_path: Path
) -> None:
    data = witnessed.copy(tmp_path / "data")
    _grow(data, "e")
    with Log.open(data) as log:
        vkey = log.read.history.vkey()
    with raw(data) as conn:
        before = conn.execute("SELECT count(*) FROM cosignatures").fetchone()[0]
    with TestWitness("witness.test/other", vkey) as other:
        (tmp_path / "other.txt").write_text(_policy(other))  # "w1" here is another key
        done = run_cli("cosign", "--data", data, "--policy", tmp_path / "other.txt")
    assert done.returncode == 1
    assert "nothing is stored: the stored policy does not list witness w1 with this key" in (
        done.stderr
    )
    with raw(data) as conn:
        assert conn.execute("SELECT count(*) FROM cosignatures").fetchone()[0] == before
        state = conn.execute("SELECT size FROM witness_state WHERE witness = 'w1'").fetchone()
    assert state[0] < 5  # the stored w1's state untouched by the other key's answer
    clean = audit(data)
    assert clean.returncode == 0, clean.stderr


def test_cosign_with_a_policy_file_of_stored_witnesses_stores_and_audits(
    witnessed: Witnessed, tmp_path: Path
) -> None:
    data = witnessed.copy(tmp_path / "data")
    _grow(data, "f")
    # The stored policy's witnesses (still running: the module fixture holds them), asked
    # through a file: the same names and keys.
    (tmp_path / "same.txt").write_text((witnessed.data.parent / "policy.txt").read_text())
    done = run_cli("cosign", "--data", data, "--policy", tmp_path / "same.txt")
    assert done.returncode == 0, done.stdout + done.stderr
    report = audit(data)
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["checked"]["cosignatures"] == 8


def test_a_cosignature_stored_under_an_earlier_policy_is_checked_against_it(
    witnessed: Witnessed, tmp_path: Path
) -> None:
    data = witnessed.copy(tmp_path / "data")
    (tmp_path / "none.txt").write_text("quorum none\n")
    assert run_cli("policy", "--data", data, tmp_path / "none.txt").returncode == 0
    done = audit(data)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["checked"]["cosignatures"] == 6


def test_a_log_whose_policy_was_stored_unsigned_is_vouched_for_at_open(
    witnessed: Witnessed, tmp_path: Path
) -> None:
    """Policies stored before the statement existed: the next writer's open signs them."""
    data = witnessed.copy(tmp_path / "data")
    sql(data, "DELETE FROM meta WHERE key = 'policies_signed'")
    Log.open(data).close()
    assert audit(data).returncode == 0
