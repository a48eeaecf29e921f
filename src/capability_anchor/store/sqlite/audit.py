"""SQLite's own structures, for the data-dir audit (`audit.datadir`): read-only, one snapshot, and
every finding worded here, so that nothing outside this package reads a pragma, a page
number or `sqlite_master`. Introspection goes through sqlite-utils where it has the call
(`Database.table_names`, `Table.pks`); what it has no call for (integrity_check, dbstat,
`INDEXED BY` plans) stays SQL."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from capability_anchor.errors import StoreCorrupt, StoreError
from capability_anchor.store.interface import EngineFindings

from .base import SqliteBase, read_error
from .schema import (
    database,
    schema_problems,
    schema_rows,
    structure_problems,
)

# The expression indexes of the schema, each term with `{}` for the table's alias: the audit
# re-derives them from their table like any other index (schema 5: the dedupe index).
INDEX_EXPRESSIONS: dict[str, tuple[str, ...]] = {"entries_by_hash": ("substr({}.leaf_hash, 1, 6)",)}
_TREE = re.compile(r"\b(?:Tree|tree|root) (\d+)\b")
_PAGE = re.compile(r"\bpage (\d+)\b")


def quoted(name: object) -> str:
    return '"' + str(name).replace('"', '""') + '"'


class SqliteAudit(SqliteBase):
    """Its statements run on the connection itself, not `_exec`: the audit reads damage as
    findings, so it wants SQLite's own errors (`read_error`)."""

    def changed_under_read(self) -> bool:
        """After reading a file opened as immutable (nothing had the log open): a process
        that opened it meanwhile may have checkpointed into it under our reads, and then
        nothing read can be trusted to be one moment of the log."""
        if self._immutable is None:
            return False
        st = self.path.stat()
        return (st.st_ino, st.st_size, st.st_mtime_ns) != self._immutable

    def engine_findings(self, after_reads: bool = False) -> EngineFindings:
        """Before the reads: integrity_check (item 0), `user_version` and the schema against
        the migrations of that version (item 5); after them: the TEXT values read that were
        not UTF-8 (only a read-only opening counts them)."""
        if after_reads:
            bad = sorted(set(self._invalid_text))
            if not bad:
                return EngineFindings([])
            return EngineFindings(
                [f"{len(bad)} text value(s) in the database are not UTF-8, e.g. {bad[0]!r}"]
            )
        problems = [f"integrity_check: {line}" for line in self._integrity_problems()]
        checked = {"integrity_check": 1}
        version = -1
        try:
            version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
            if version != 0:
                # The texts against the frozen migrations', and, when every text is accepted,
                # the structure SQLite reads from them (sqlite-utils' introspection).
                got = schema_rows(self._conn)
                problems += schema_problems(got, version) or structure_problems(self._conn, version)
                checked["schema_objects"] = len(got)
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            # What integrity_check found stays reported, beside what stopped the rest.
            return EngineFindings(problems, checked, version, read_error(self.path, exc))
        except StoreError as exc:
            return EngineFindings(problems, checked, version, exc)
        return EngineFindings(problems, checked, version)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction around everything inside (a WAL snapshot: concurrent commits
        are invisible to it), with every SQLite error raised inside as a StoreError
        (StoreCorrupt when SQLite says the file is damaged)."""
        try:
            self._conn.execute("BEGIN")
            # A deferred BEGIN takes its snapshot at the first read: take it now.
            self._conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            raise read_error(self.path, exc) from None
        # A `read()` inside (the log's key lookups during the audit) joins this snapshot.
        self._local.reading = True
        try:
            yield
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            # UnicodeDecodeError: Python cannot even decode SQLite's message (it quotes a
            # damaged name from the schema).
            raise read_error(self.path, exc) from None
        finally:
            self._local.reading = False
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")

    # --- 0: the file -----------------------------------------------------------------------

    def _integrity_problems(self) -> list[str]:
        """`PRAGMA integrity_check`: every b-tree, every index against its table, free pages,
        NOT NULL and CHECK constraints, one problem a line with the table or index it names
        by page added. Empty when SQLite finds nothing wrong."""
        problems = self._integrity_lines()
        if not problems:
            return []
        trees = self._tree_names()
        pages = self._page_owners(
            sorted({int(n) for line in problems for n in _PAGE.findall(line)})[:50]
        )
        return [_name_places(line, trees, pages) for line in problems]

    def _integrity_lines(self) -> list[str]:
        try:
            rows = [str(r[0]) for r in self._conn.execute("PRAGMA integrity_check(1000)")]
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            # Some damage (a zeroed page) stops the whole check at once: then each table is
            # checked with its indexes on its own, so the report still names where it is.
            if not isinstance(read_error(self.path, exc), StoreCorrupt):
                raise
            return self._integrity_by_table() or [
                f"stopped, and no table checked alone names the damage: {exc}"
            ]
        if rows == ["ok"]:
            return []
        # One problem a line; the first line of such a report names the database only.
        lines = [line for row in rows for line in row.splitlines()]
        return [line for line in lines if line != "*** in database main ***"]

    def _integrity_by_table(self) -> list[str]:
        rows: list[str] = []
        for name in database(self._conn).table_names():
            try:
                found = [
                    str(r[0]) for r in self._conn.execute(f"PRAGMA integrity_check({quoted(name)})")
                ]
            except (sqlite3.DatabaseError, UnicodeDecodeError) as inner:
                found = [str(inner)]
            if found != ["ok"]:
                rows += [f"table {name} or one of its indexes: {line}" for line in found]
        return rows

    def _tree_names(self) -> dict[int, str]:
        """Each b-tree's name by its root page (integrity_check names trees by root page)."""
        try:
            rows = self._conn.execute("SELECT rootpage, type, name FROM sqlite_master").fetchall()
        except (sqlite3.Error, ValueError):  # ValueError: a name that is not UTF-8
            return {}
        return {int(str(r)): str(n) for r, _, n in rows if str(r).isdigit()}

    def _page_owners(self, pages: Iterable[int]) -> dict[int, str]:
        """Which table or index each page belongs to (`dbstat`), for naming damage that
        integrity_check reports by page; empty where that cannot be read."""
        owners: dict[int, str] = {}
        for page in pages:
            try:
                row = self._conn.execute(
                    "SELECT name FROM dbstat WHERE pageno = ?", (page,)
                ).fetchone()
            except (sqlite3.Error, UnicodeDecodeError):
                return owners  # no dbstat, or the damage stops it too
            if row is not None:
                owners[page] = str(row[0])
        return owners

    # --- 6: the indexes --------------------------------------------------------------------

    def index_mismatches(self) -> list[str]:
        """Every index of a rowid table re-derived from its table: each row (read by a table
        scan, NOT INDEXED) must be found through the index (INDEXED BY) with the same
        columns and rowid, and the index must hold no more entries than the table has rows.
        A WITHOUT ROWID table is its primary key's b-tree: every row a scan finds must also
        be found by a seek on that key (what `/record` lookups do)."""
        problems: list[str] = []
        for name, table in self._conn.execute(
            "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' ORDER BY name"
        ).fetchall():
            problems += self._index_mismatches(str(name), str(table))
        for (table,) in self._conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%WITHOUT ROWID%'"
        ).fetchall():
            problems += self._key_mismatches(str(table))
        return problems

    def _index_mismatches(self, name: str, table: str) -> list[str]:
        columns = [str(r[2]) for r in self._conn.execute(f"PRAGMA index_info({quoted(name)})")]
        # Each term with `{}` for the alias of the table it is read from.
        terms = [f"{{}}.{quoted(c)}" for c in columns]
        if name in INDEX_EXPRESSIONS:
            terms = list(INDEX_EXPRESSIONS[name])
        elif not columns or any(c == "None" for c in columns):
            return []  # an expression index the schema has not: flagged there
        t, i = quoted(table), quoted(name)
        same = " AND ".join(f"{term.format('i')} IS {term.format('t')}" for term in terms)
        missing_sql = (
            f"SELECT count(*) FROM {t} AS t NOT INDEXED WHERE NOT EXISTS "
            f"(SELECT 1 FROM {t} AS i INDEXED BY {i} WHERE {same} AND i.rowid = t.rowid)"
        )
        # count(*) would be answered from whichever b-tree is smallest, whatever INDEXED
        # BY says; counting a column read from the index makes SQLite walk this one.
        entries_sql = f"SELECT count({terms[0].format('i')} IS NULL) FROM {t} AS i INDEXED BY {i}"
        for query in (missing_sql, entries_sql):
            plan = " ".join(str(r[-1]) for r in self._conn.execute(f"EXPLAIN QUERY PLAN {query}"))
            if f"INDEX {name}" not in plan:
                raise StoreError(f"SQLite will not read index {name} for the audit: {plan}")
        (missing,) = self._conn.execute(missing_sql).fetchone()
        (rows,) = self._conn.execute(f"SELECT count(*) FROM {t} NOT INDEXED").fetchone()
        (entries,) = self._conn.execute(entries_sql).fetchone()
        problems: list[str] = []
        if missing:
            problems.append(f"index {name}: {missing} row(s) of {table} are not found through it")
        if entries != rows:
            problems.append(f"index {name} holds {entries} entries, {table} has {rows} rows")
        return problems

    def _key_mismatches(self, table: str) -> list[str]:
        key = database(self._conn).table(table).pks
        t = quoted(table)
        same = " AND ".join(f"s.{quoted(c)} = t.{quoted(c)}" for c in key)
        (missing,) = self._conn.execute(
            f"SELECT count(*) FROM {t} AS t WHERE NOT EXISTS (SELECT 1 FROM {t} AS s WHERE {same})"
        ).fetchone()
        if missing:
            return [f"table {table}: {missing} row(s) found by a scan are not found by key"]
        return []


def _name_places(line: str, trees: dict[int, str], pages: dict[int, str]) -> str:
    """integrity_check names b-trees by root page ("Tree 4 page 9 ...") and damage by page
    ("Multiple uses for byte 3795 of page 34"): add whose they are."""
    found = [trees[int(m)] for m in _TREE.findall(line) if int(m) in trees]
    found += [pages[int(m)] for m in _PAGE.findall(line) if int(m) in pages]
    return f"{line} (in {', '.join(dict.fromkeys(found))})" if found else line
