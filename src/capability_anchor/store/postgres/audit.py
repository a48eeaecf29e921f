"""PostgreSQL's own structures for the data-dir audit, read-only in one REPEATABLE READ
snapshot: the migration ledger, the catalog against `migrations/catalog_v<N>.txt`, the
grants, the functions' search_path, `pg_amcheck`, every index re-derived from its table
(docs/explanation/store.md, "Module notes")."""

from __future__ import annotations

import glob
import hashlib
import logging
import shutil
import subprocess
from importlib import resources

import psycopg

from capability_anchor.errors import StoreError
from capability_anchor.store.interface import EngineFindings

from . import schema
from .base import PostgresBase
from .schema import APPEND_ONLY_TABLES, MUTABLE_TABLES

_log = logging.getLogger("capability_anchor.audit")

_TABLES = (*APPEND_ONLY_TABLES, *MUTABLE_TABLES, "sequencer_term", "schema_migrations")

# One line per schema object, in a stable order; names, never OIDs.
_CATALOG = """
SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
       || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
       || CASE WHEN a.attidentity <> '' THEN ' identity ' || a.attidentity::text ELSE '' END
       || COALESCE(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'constraint ' || c.relname || '.' || k.conname || ' ' || pg_get_constraintdef(k.oid)
  FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
UNION ALL
SELECT 'index ' || pg_get_indexdef(i.indexrelid)
  FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
UNION ALL
SELECT 'trigger ' || pg_get_triggerdef(t.oid) || ' enabled ' || t.tgenabled::text
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
 WHERE NOT t.tgisinternal
UNION ALL
SELECT 'function ' || p.proname || ' ' || md5(pg_get_functiondef(p.oid))
       || CASE WHEN p.prosecdef THEN ' security definer' ELSE '' END
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace AND n.nspname = 'public'
 WHERE NOT EXISTS (  -- amcheck's own functions (pg_amcheck's extension) are not the log's
       SELECT 1 FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
        WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
          AND e.extname = 'amcheck')
UNION ALL
SELECT 'table ' || c.relname
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
 WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
ORDER BY 1
"""

# Roles other than the owner that may change a log table: PUBLIC is grantee 0.
_CHANGERS = """
SELECT c.relname, COALESCE(r.rolname, 'PUBLIC'), a.privilege_type
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
  CROSS JOIN LATERAL aclexplode(c.relacl) a
  LEFT JOIN pg_roles r ON r.oid = a.grantee
 WHERE c.relname = ANY(%s) AND a.privilege_type IN ('UPDATE', 'DELETE', 'TRUNCATE')
   AND a.grantee <> c.relowner
 ORDER BY 1, 2, 3
"""

# Who may take a term at will: NULL proacl is the default, EXECUTE for PUBLIC.
_TERM_TAKERS = """
SELECT COALESCE(r.rolname, 'PUBLIC')
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace AND n.nspname = 'public'
  CROSS JOIN LATERAL aclexplode(COALESCE(p.proacl, acldefault('f', p.proowner))) a
  LEFT JOIN pg_roles r ON r.oid = a.grantee
 WHERE p.proname = 'sequencer_next_term' AND a.privilege_type = 'EXECUTE'
   AND a.grantee <> p.proowner
 ORDER BY 1
"""

# Each function of the log (no extension's) and whether it fixes the path migration 2 set.
_SEARCH_PATHS = """
SELECT p.proname, array_to_string(p.proconfig, '; '),
       COALESCE('search_path=pg_catalog, ' || quote_ident(n.nspname) || ', pg_temp'
                = ANY(p.proconfig), false)
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace AND n.nspname = 'public'
 WHERE NOT EXISTS (SELECT 1 FROM pg_depend d
                    WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
 ORDER BY 1
"""

_INDEXES = """
SELECT ic.relname, c.relname,
       array_agg(quote_ident(a.attname) ORDER BY k.n)
  FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
  JOIN pg_class ic ON ic.oid = i.indexrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
  CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
 WHERE c.relname = ANY(%s)
 GROUP BY ic.relname, c.relname
 ORDER BY 1
"""

_BY_INDEX = (
    "SET LOCAL enable_seqscan = off",
    "SET LOCAL enable_bitmapscan = off",
    "SET LOCAL enable_indexscan = on",
    "SET LOCAL enable_indexonlyscan = on",
)
_BY_TABLE = (
    "SET LOCAL enable_seqscan = on",
    "SET LOCAL enable_bitmapscan = off",
    "SET LOCAL enable_indexscan = off",
    "SET LOCAL enable_indexonlyscan = off",
)


def expected_catalog(version: int) -> list[str]:
    """The catalog lines a fresh migration to `version` gives (tools/pg_catalog.py)."""
    text = resources.files(__package__).joinpath(f"migrations/catalog_v{version}.txt")
    return text.read_text(encoding="utf-8").splitlines()


AMCHECK_TIMEOUT_S = 600.0
_AMCHECK_LINES = 20


def _amcheck_binary() -> str | None:
    """pg_amcheck on PATH, else the newest of Debian's /usr/lib/postgresql/*/bin."""
    found = shutil.which("pg_amcheck")
    if found:
        return found
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_amcheck"),
        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0,
    )
    return candidates[-1] if candidates else None


def _amcheck_skipped_because(tool: str | None, conn: psycopg.Connection) -> str | None:
    """Why pg_amcheck cannot run on this database as this role, with the fix; None if it can
    (configuration, not damage)."""
    if tool is None:
        return "pg_amcheck is not installed (Debian: postgresql-client-15)"
    row = conn.execute(
        "SELECT has_function_privilege(p.oid, 'EXECUTE') FROM pg_proc p"
        " JOIN pg_extension e ON p.pronamespace = e.extnamespace"
        " WHERE e.extname = 'amcheck' AND p.proname = 'bt_index_check' LIMIT 1"
    ).fetchone()
    if row is None:
        return (
            "the amcheck extension is not in the log's database (as a superuser: "
            "CREATE EXTENSION amcheck)"
        )
    if not row[0]:
        return "this role may not run amcheck's functions (audit with the owner's URL: --store)"
    return None


class PostgresAudit(PostgresBase):
    # One REPEATABLE READ snapshot: commits made meanwhile are invisible to the audit's reads.
    snapshot = PostgresBase.read

    def changed_under_read(self) -> bool:
        return False  # one snapshot (above): the server keeps it whole

    def catalog(self) -> list[str]:
        return [str(line) for (line,) in self._exec(_CATALOG)]

    def engine_findings(self, after_reads: bool = False) -> EngineFindings:
        """Before the reads: the ledger's version, the schema against the migrations, the
        grants, the indexes against their tables; after them nothing (PostgreSQL refuses
        text that is not valid UTF-8 when it is written, so no read meets any)."""
        if after_reads:
            return EngineFindings([])
        try:
            with self.read():
                with self._statement() as conn:
                    version = schema.version(conn)
                problems: list[str] = []
                checked: dict[str, int] = {}
                if version != schema.SCHEMA_VERSION:
                    problems.append(
                        f"the database's schema is migration {version}; this code's is "
                        f"{schema.SCHEMA_VERSION}"
                    )
                if version >= 1:
                    problems += self._schema_problems(version, checked)
                problems += self._grant_problems(checked)
                problems += self._search_path_problems(checked)
                # pg_amcheck before any read of the rows: damage it finds is named even when
                # a read that follows cannot go on.
                problems += self._amcheck(checked)
                mismatches = self.index_mismatches()
                checked["indexes"] = len(self._exec(_INDEXES, (list(_TABLES),)))
                problems += mismatches
        except StoreError as exc:
            return EngineFindings([], {}, -1, exc)
        return EngineFindings(problems, checked, schema.log_schema_version(version))

    def _amcheck(self, checked: dict[str, int]) -> list[str]:
        """pg_amcheck's findings (its lines, at most a few), none when it found nothing."""
        tool = _amcheck_binary()
        with self._statement() as conn:
            why = _amcheck_skipped_because(tool, conn)
        checked["pg_amcheck"] = int(why is None)
        if why is not None:
            _log.warning("audit: pg_amcheck skipped: %s", why)
            return []
        assert tool is not None
        # The program found above, the log's own conninfo as its one argument: no shell.
        done = subprocess.run(  # noqa: S603
            [tool, "--heapallindexed", "--no-password", self._conninfo],
            capture_output=True,
            text=True,
            timeout=AMCHECK_TIMEOUT_S,
            check=False,
        )
        if done.returncode == 0 and not done.stdout.strip():
            return []
        lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        shown = [f"pg_amcheck: {line}" for line in lines[:_AMCHECK_LINES]]
        if len(lines) > _AMCHECK_LINES:
            shown.append(f"pg_amcheck: ... and {len(lines) - _AMCHECK_LINES} more lines")
        return shown or [f"pg_amcheck: exit {done.returncode}"]

    def _schema_problems(self, version: int, checked: dict[str, int]) -> list[str]:
        found = self.catalog()
        expected = expected_catalog(version)
        checked["schema_objects"] = len(found)
        missing = sorted(set(expected) - set(found))
        extra = sorted(set(found) - set(expected))
        return [f"schema: missing or changed: {line}" for line in missing] + [
            f"schema: not made by the migrations: {line}" for line in extra
        ]

    def _grant_problems(self, checked: dict[str, int]) -> list[str]:
        rows = self._exec(_CHANGERS, (list(APPEND_ONLY_TABLES),))
        checked["grants"] = len(APPEND_ONLY_TABLES)
        return [
            f"grants: {role} may {privilege} {table} (a log table: SELECT and INSERT only)"
            for table, role, privilege in rows
        ] + [
            f"grants: {role} may EXECUTE sequencer_next_term() (the owner's alone: it fences "
            "the leader; the lease holder takes a term through sequencer_take_term())"
            for (role,) in self._exec(_TERM_TAKERS)
        ]

    def _search_path_problems(self, checked: dict[str, int]) -> list[str]:
        rows = self._exec(_SEARCH_PATHS)
        checked["functions"] = len(rows)
        return [
            f"functions: {name} does not fix its search_path to pg_catalog, <schema>, pg_temp "
            f"(it has {config or 'none'}): a TEMP table of a session could stand in for a log "
            "table in its rules"
            for name, config, fixed in rows
            if not fixed
        ]

    def index_mismatches(self) -> list[str]:
        """Every index re-derived from its table: its columns' values read once through the
        index (index scans forced) and once by a table scan, compared by count and digest."""
        problems: list[str] = []
        for index, table, columns in self._exec(_INDEXES, (list(_TABLES),)):
            cols = ", ".join(columns)
            query = f"SELECT row({cols})::text FROM {table} ORDER BY {cols}"
            by_index = self._digest(query, _BY_INDEX)
            by_table = self._digest(query, _BY_TABLE)
            if by_index != by_table:
                problems.append(
                    f"index {index} does not match its table {table}: {by_index[0]} row(s) "
                    f"through the index, {by_table[0]} by a table scan"
                )
        return problems

    def _digest(self, query: str, settings: tuple[str, ...]) -> tuple[int, str]:
        for setting in settings:
            self._exec(setting)
        digest = hashlib.sha256()
        count = 0
        for (row,) in self._iter(query):
            digest.update(str(row).encode() + b"\n")
            count += 1
        return count, digest.hexdigest()


__all__ = ["PostgresAudit", "expected_catalog"]
