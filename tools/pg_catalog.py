"""Write store/postgres/migrations/catalog_v<N>.txt: the catalog lines (`PostgresAudit.catalog`)
of a database freshly migrated to the current schema, on a PostgreSQL started here for the
purpose (tests/kit/pgkit.py), which the audit compares a log's database with.
tests/e2e/test_pg_audit.py fails while the file differs from a fresh migration.

    .venv/bin/python tools/pg_catalog.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.kit.pgkit import start_server, stop_server  # noqa: E402

from capability_anchor.store.postgres import schema  # noqa: E402
from capability_anchor.store.postgres.audit import PostgresAudit  # noqa: E402

OUT = ROOT / "src" / "capability_anchor" / "store" / "postgres" / "migrations"


def main() -> int:
    server = start_server()
    try:
        name = server.fresh_database("catalog")
        with server.connect(name) as conn:
            schema.migrate(conn)
        store = PostgresAudit(server.conninfo(name), name)
        try:
            lines = store.catalog()
        finally:
            store.close()
    finally:
        stop_server(server)
    path = OUT / f"catalog_v{schema.SCHEMA_VERSION}.txt"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    print(f"{path.relative_to(ROOT)}: {len(lines)} lines")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
