"""The PostgreSQL engine's own checks for the audit (store/postgres/audit.py) on the session's
real server: a fresh migration is exactly the catalog file the audit compares with; each
change an owner (or anyone with the owner's password) can make to the schema or the grants
is a finding; an index that no longer matches its table is a finding; and a log as made has
none."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from capability_anchor.store.postgres import schema
from capability_anchor.store.postgres.audit import PostgresAudit, expected_catalog
from tests.kit.pgkit import PgServer
from tests.kit.pglog import migrated_database, service_role


@pytest.fixture
def db(postgres: PgServer) -> Iterator[tuple[PgServer, str, PostgresAudit]]:
    name = migrated_database(postgres, "audit")
    service_role(postgres, name)
    with postgres.connect(name) as owner:
        owner.execute("INSERT INTO meta (key, value) VALUES ('iss', 'https://r.example')")
        owner.execute(
            "INSERT INTO entries (day, leaf_index, leaf_hash, claims, accepted_at)"
            " SELECT '2026-11-01', n, sha256(n::text::bytea), n::text::bytea, 1793500000"
            " FROM generate_series(0, 999) AS n"
        )
    store = PostgresAudit(postgres.conninfo(name), name, readonly=True)
    try:
        yield postgres, name, store
    finally:
        store.close()


def findings(store: PostgresAudit) -> list[str]:
    found = store.engine_findings()
    assert found.stopped is None, found.stopped
    return found.problems


def test_the_catalog_file_is_what_a_fresh_migration_gives(
    db: tuple[PgServer, str, PostgresAudit],
) -> None:
    _, _, store = db
    with store.snapshot():
        assert store.catalog() == expected_catalog(schema.SCHEMA_VERSION), (
            "run tools/pg_catalog.py after changing a migration"
        )


def test_a_log_as_made_has_no_findings_and_says_what_it_checked(
    db: tuple[PgServer, str, PostgresAudit],
) -> None:
    _, _, store = db
    found = store.engine_findings()
    assert found.problems == [] and found.stopped is None
    assert found.version == 5  # the log schema PostgreSQL migration 1 implements
    assert found.checked["schema_objects"] > 200 and found.checked["indexes"] >= 15
    assert found.checked["functions"] >= 16
    assert store.index_mismatches() == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("DROP TRIGGER entries_no_update ON entries", "entries_no_update"),
        ("ALTER TABLE heads DISABLE TRIGGER heads_no_delete", "heads_no_delete"),
        ("ALTER TABLE entries DISABLE TRIGGER ALL", "entries_insert_rules"),
        (
            "CREATE OR REPLACE FUNCTION append_only_refuse() RETURNS trigger LANGUAGE plpgsql"
            " AS $$ BEGIN RETURN OLD; END $$",
            "append_only_refuse",
        ),
        ("DROP INDEX entries_by_hash", "entries_by_hash"),
        ("ALTER TABLE entries ADD COLUMN note text", "entries.note"),
        ("GRANT UPDATE ON entries TO PUBLIC", "PUBLIC may UPDATE entries"),
        ("GRANT DELETE ON heads TO svc_{db}", "may DELETE heads"),
        ("GRANT TRUNCATE ON stamps TO svc_{db}", "may TRUNCATE stamps"),
        ("GRANT EXECUTE ON FUNCTION sequencer_next_term() TO svc_{db}", "sequencer_next_term"),
    ],
)
def test_each_change_to_the_schema_or_the_grants_is_a_finding(
    db: tuple[PgServer, str, PostgresAudit], change: str, expected: str
) -> None:
    server, name, store = db
    with server.connect(name) as owner:
        owner.execute(change.replace("{db}", name).encode())
    problems = findings(store)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(
    "change",
    [
        "ALTER FUNCTION checkpoints_insert_rules() RESET search_path",
        "ALTER FUNCTION checkpoints_insert_rules() SET search_path = pg_catalog, public",
        "ALTER FUNCTION checkpoints_insert_rules() SET search_path = pg_temp, pg_catalog, public",
    ],
)
def test_attack_a_rule_function_left_to_read_temp_tables_is_a_finding(
    db: tuple[PgServer, str, PostgresAudit], change: str
) -> None:
    """An owner (or anyone with its password) undoes migration 2's fixed search_path on one
    rule: the service's TEMP tables could stand in for the log's again (SPEC §14.3)."""
    server, name, store = db
    with server.connect(name) as owner:
        owner.execute(change.encode())
    problems = findings(store)
    assert any(
        p.startswith("functions: checkpoints_insert_rules does not fix its search_path")
        for p in problems
    ), problems


def test_an_index_that_no_longer_matches_its_table_is_a_finding(
    db: tuple[PgServer, str, PostgresAudit],
) -> None:
    """The primary key's entries rewritten under it (what a damaged page of the index does):
    an owner with the system catalogs writable points the index at other rows' values by
    changing rows with the index left stale (`indisready` off while the rows change)."""
    server, name, store = db
    with server.connect(name) as owner:
        owner.execute(
            "UPDATE pg_index SET indisready = false WHERE indexrelid = 'entries_by_hash'::regclass"
        )
        owner.execute("ALTER TABLE entries DISABLE TRIGGER entries_no_update")
        owner.execute("UPDATE entries SET leaf_hash = sha256(leaf_hash) WHERE leaf_index < 10")
        owner.execute("ALTER TABLE entries ENABLE TRIGGER entries_no_update")
        owner.execute(
            "UPDATE pg_index SET indisready = true WHERE indexrelid = 'entries_by_hash'::regclass"
        )
    with store.snapshot():
        mismatches = store.index_mismatches()
    assert any("entries_by_hash" in m for m in mismatches), mismatches
    assert any("entries_by_hash" in p for p in findings(store))
