"""The PostgreSQL rules hold against the service's own role (issue #35 items 4 and 8, SPEC
§14.3), on the session's real server, each attack made as that role:
- a TEMP table named as a log table, in the service's session, is not what the rules read:
  no gap in a day's indexes, no second root at a size, no out-of-order checkpoint, no head
  of a term the service made up (migration 1 let all four through, shown here, and a
  database migrated from 1 to 2 refuses them as a fresh one does);
- the service's role cannot call `sequencer_next_term()` to fence the leader, and takes a
  term through `sequencer_take_term()` only while its session holds the lease;
- a head row whose document is not that head's signed JCS is refused."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import psycopg
import pytest
from psycopg import sql

from capability_anchor.keys import SigningKey
from capability_anchor.store.postgres import lease, schema
from capability_anchor.store.postgres.schema import APPEND_ONLY_TABLES, MUTABLE_TABLES
from tests.kit.pgkit import PgServer
from tests.kit.pglog import HEAD_KID, head_doc, service_role

DAY = "2026-12-02"
OTHER_DAY = "2026-12-03"
ROOT = b"\x01" * 32
OTHER_ROOT = b"\x02" * 32
SEALED_IAT = 1_796_256_000  # the end of DAY


def leaf(n: int) -> bytes:
    return hashlib.sha256(b"leaf %d" % n).digest()


def seed(owner: psycopg.Connection) -> None:
    """A signed log as the owner stores it: DAY's entries 0..2, its head at size 3, that
    head's history leaf, and the checkpoint of size 1."""
    term = owner.execute("SELECT sequencer_next_term()").fetchone()
    assert term is not None
    for n in range(3):
        owner.execute("INSERT INTO entries VALUES (%s, %s, %s, '{}', 1)", (DAY, n, leaf(n)))
    owner.execute(
        "INSERT INTO heads VALUES (%s, 3, 0, %s, 1, %s, %s, %s)",
        (DAY, ROOT, HEAD_KID, head_doc(DAY, 3, ROOT), term[0]),
    )
    owner.execute("INSERT INTO history VALUES (0, %s, %s, 0, 3)", (leaf(100), DAY))
    owner.execute("INSERT INTO checkpoints VALUES (1, 'checkpoint 1', %s)", (term[0],))


def v1_grants(owner: psycopg.Connection, role: str) -> None:
    """What grant_service_role gave the service's role before migration 2."""
    name = sql.Identifier(role)
    for statement in (
        sql.SQL("GRANT SELECT, INSERT ON {} TO {}").format(
            sql.SQL(", ").join(map(sql.Identifier, APPEND_ONLY_TABLES)), name
        ),
        sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO {}").format(
            sql.SQL(", ").join(map(sql.Identifier, MUTABLE_TABLES)), name
        ),
        sql.SQL("GRANT SELECT ON schema_migrations, sequencer_term TO {}").format(name),
        sql.SQL("GRANT EXECUTE ON FUNCTION sequencer_next_term() TO {}").format(name),
        sql.SQL("GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {}").format(name),
    ):
        owner.execute(statement)


def log_database(server: PgServer, *, upto: int, then: int | None = None) -> tuple[str, str]:
    """A seeded log at migration `upto`, its service role granted as that release did, and
    migrated on to `then` if given; (database, role)."""
    name = server.fresh_database("shadow")
    role = f"svc_{name}"
    with server.connect(name) as owner:
        assert schema.migrate(owner, upto) == upto
        if upto == 1:
            owner.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
            v1_grants(owner, role)
        seed(owner)
        if then is not None:
            assert schema.migrate(owner, then) == then
    if upto != 1:
        assert service_role(server, name) == role
    return name, role


def service_term(svc: psycopg.Connection) -> int:
    """A term as the service takes one: the lease and its term (sequencer_next_term() on a
    database still at migration 1, where the role may call it)."""
    if schema.version(svc) == 1:
        row = svc.execute("SELECT sequencer_next_term()").fetchone()
        assert row is not None
        return int(row[0])
    term = lease.try_take(svc)
    assert term is not None
    svc.execute("COMMIT")  # the lease's transaction ends; the term stays
    return term


# Each attack: the TEMP tables it makes in the service's session, then the insert into the
# log's table that the shadowed rule would have refused; and the rule's refusal.
def gap(svc: psycopg.Connection, term: int) -> None:
    svc.execute("CREATE TEMP TABLE entries (LIKE public.entries)")
    svc.execute("INSERT INTO pg_temp.entries VALUES (%s, 9, %s, '{}', 1)", (DAY, leaf(9)))
    svc.execute("INSERT INTO public.entries VALUES (%s, 10, %s, '{}', 1)", (DAY, leaf(10)))


def second_root(svc: psycopg.Connection, term: int) -> None:
    svc.execute("CREATE TEMP TABLE heads (LIKE public.heads)")
    doc = head_doc(DAY, 3, OTHER_ROOT, sealed=True, iat=SEALED_IAT)
    svc.execute(
        "INSERT INTO public.heads VALUES (%s, 3, 1, %s, %s, %s, %s, %s)",
        (DAY, OTHER_ROOT, SEALED_IAT, HEAD_KID, doc, term),
    )


def out_of_order_checkpoint(svc: psycopg.Connection, term: int) -> None:
    svc.execute("CREATE TEMP TABLE checkpoints (size bigint)")
    svc.execute("INSERT INTO pg_temp.checkpoints VALUES (4)")
    svc.execute("CREATE TEMP TABLE history (idx bigint)")
    svc.execute("INSERT INTO pg_temp.history VALUES (9)")
    svc.execute("INSERT INTO public.checkpoints VALUES (5, 'junk', %s)", (term,))


def made_up_term(svc: psycopg.Connection, term: int) -> None:
    svc.execute("CREATE TEMP TABLE sequencer_term (id smallint, term bigint, signed bigint)")
    svc.execute("INSERT INTO pg_temp.sequencer_term VALUES (1, 99, 0)")
    svc.execute(
        "INSERT INTO public.heads VALUES (%s, 0, 0, %s, 1, %s, %s, 99)",
        (OTHER_DAY, ROOT, HEAD_KID, head_doc(OTHER_DAY, 0, ROOT)),
    )


Attack = Callable[[psycopg.Connection, int], None]
ATTACKS: dict[str, tuple[Attack, str]] = {
    "gap": (gap, "append-only: leaf_index is not the next index of its day"),
    "second_root": (second_root, "append-only: another head of this size has another root"),
    "checkpoint": (
        out_of_order_checkpoint,
        "append-only: a checkpoint is only ever of the next size",
    ),
    "term": (made_up_term, "fenced: term 99 is not the sequencer's term"),
}

_COUNTS = "SELECT (SELECT count(*) FROM entries), (SELECT count(*) FROM heads), " + (
    "(SELECT count(*) FROM checkpoints)"
)


def counts(server: PgServer, name: str) -> tuple[int, ...]:
    with server.connect(name) as owner:
        row = owner.execute(_COUNTS).fetchone()
    assert row is not None
    return tuple(int(n) for n in row)


def refused_as_service(server: PgServer, name: str, role: str, attack: Attack) -> str:
    before = counts(server, name)
    with server.connect(name, user=role) as svc:
        term = service_term(svc)
        with pytest.raises(psycopg.Error) as caught:
            attack(svc, term)
    assert counts(server, name) == before
    return str(caught.value).splitlines()[0]


@pytest.mark.parametrize("kind", ATTACKS)
def test_attack_a_temp_table_named_as_a_log_table_does_not_get_round_the_rules(
    postgres: PgServer, kind: str
) -> None:
    attack, message = ATTACKS[kind]
    name, role = log_database(postgres, upto=schema.SCHEMA_VERSION)
    assert refused_as_service(postgres, name, role, attack) == message


@pytest.mark.parametrize("kind", ATTACKS)
def test_attack_a_database_at_migration_1_was_shadowable_and_migrating_protects_it(
    postgres: PgServer, kind: str
) -> None:
    attack, message = ATTACKS[kind]
    # The finding, as migration 1 left it: the same attack is stored.
    name, role = log_database(postgres, upto=1)
    before = counts(postgres, name)
    with postgres.connect(name, user=role) as svc:
        attack(svc, service_term(svc))
    assert counts(postgres, name) != before
    # A database migrated from 1, with the grants that release gave its service role.
    name, role = log_database(postgres, upto=1, then=schema.SCHEMA_VERSION)
    assert refused_as_service(postgres, name, role, attack) == message
    with (
        postgres.connect(name, user=role) as svc,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        svc.execute("SELECT sequencer_next_term()")


def test_attack_the_service_role_cannot_fence_the_leader_at_will(postgres: PgServer) -> None:
    name, role = log_database(postgres, upto=schema.SCHEMA_VERSION)
    with postgres.connect(name, user=role) as leader, postgres.connect(name, user=role) as rogue:
        term = lease.try_take(leader)
        assert term is not None
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            rogue.execute("SELECT sequencer_next_term()")
        with pytest.raises(psycopg.Error) as caught:
            rogue.execute("SELECT sequencer_take_term()")  # without the lease
        assert str(caught.value).splitlines()[0] == (
            "fenced: this session does not hold the sequencer lease"
        )
        assert lease.try_take(rogue) is None
        assert lease.current_term(rogue) == term
        # The leader was not fenced: its next head is stored under its term.
        leader.execute(
            "INSERT INTO heads VALUES (%s, 4, 0, %s, 1, %s, %s, %s)",
            (DAY, OTHER_ROOT, HEAD_KID, head_doc(DAY, 4, OTHER_ROOT), term),
        )


def _claims(doc: bytes) -> dict[str, object]:
    claims: dict[str, object] = json.loads(doc)
    return claims


def _pretty(doc: bytes) -> bytes:
    return json.dumps(_claims(doc), indent=1, sort_keys=True).encode()


def _other_payload(doc: bytes) -> bytes:
    """This head's plain claims with the JWS of another head (another root)."""
    other = _claims(head_doc(DAY, 5, OTHER_ROOT))
    return json.dumps(
        {**_claims(doc), "jws": other["jws"]}, separators=(",", ":"), sort_keys=True
    ).encode()


def _extra_member(doc: bytes) -> bytes:
    return doc[:-1] + b',"x":1}'


# A head at DAY's unused size 5 with root ROOT: each document below is not its signed JCS.
JUNK: dict[str, Callable[[bytes], bytes]] = {
    "junk": lambda doc: b"junk",
    "not_utf8": lambda doc: b"\xff\xfe",
    "another_root": lambda doc: head_doc(DAY, 5, OTHER_ROOT),
    "another_size": lambda doc: head_doc(DAY, 6, ROOT),
    "sealed": lambda doc: head_doc(DAY, 5, ROOT, sealed=True),
    "another_kid": lambda doc: head_doc(DAY, 5, ROOT, key=SigningKey.generate()),
    "not_jcs": _pretty,
    "trailing_newline": lambda doc: doc + b"\n",
    "another_payload": _other_payload,
    "extra_member": _extra_member,
}


@pytest.mark.parametrize("kind", JUNK)
def test_attack_the_service_role_stores_a_head_with_a_junk_document(
    postgres: PgServer, kind: str
) -> None:
    name, role = log_database(postgres, upto=schema.SCHEMA_VERSION)
    good = head_doc(DAY, 5, ROOT)
    insert = "INSERT INTO heads VALUES (%s, 5, 0, %s, 1, %s, %s, %s)"
    with postgres.connect(name, user=role) as svc:
        term = service_term(svc)
        with pytest.raises(psycopg.Error) as caught:
            svc.execute(insert, (DAY, ROOT, HEAD_KID, JUNK[kind](good), term))
        assert str(caught.value).splitlines()[0] == (
            "head document: not the JCS of this head's claims and its JWS"
        )
        svc.execute(insert, (DAY, ROOT, HEAD_KID, good, term))  # its own document is taken
        row = svc.execute("SELECT doc FROM heads WHERE day = %s AND tree_size = 5", (DAY,))
        assert row.fetchall() == [(good,)]
