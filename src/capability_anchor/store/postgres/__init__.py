"""The PostgreSQL engine (issue #24, SPEC §13.5): one log per database, reached by a
`postgresql://` URL through `store.open` (`engine.PostgresEngine`); the only package that
imports psycopg. Its parts over `base.PostgresBase` (the pool, transactions; the write lock
in `writelock`): `lease` (the sequencer lease and fencing term), `audit`; `schema` and
`migrations/`, `errors`. The store itself spells three reads its own way, with no skip scan
in PostgreSQL 15: `find_leaf` steps day to day on the primary key (`sql.rows.DAYS`), the
dedupe probe is one index probe per hash (`EXISTING`), and a search lower-cases claims as
SQLite does."""

from __future__ import annotations

from collections.abc import Sequence

from capability_anchor.store.interface import Store
from capability_anchor.store.rows import EntryRow
from capability_anchor.store.sql.rows import DAYS

from .audit import PostgresAudit
from .lease import PostgresLeader

# ASCII-only lower-casing of claims, as SQLite's lower() (and bytes.lower) does: read as
# LATIN1 every byte is one character, so any bytes convert (valid UTF-8 or not) and a
# substring of characters is a substring of bytes; lower() under "C" folds A-Z only. LATIN1
# text cannot hold a NUL byte, so claims with one are left to Python (entries_containing).
_HAS_NUL = "position('\\x00'::bytea IN claims) > 0"
_CONTAINS = (
    f"CASE WHEN {_HAS_NUL} THEN TRUE "
    "ELSE position(%s IN lower(convert_from(claims, 'LATIN1') COLLATE \"C\")) > 0 END"
)


# The dedupe probe of a batch: one index probe per hash, whatever the planner's statistics
# say. As `WHERE day = %s AND leaf_hash = ANY(%s)` the planner (its estimate of the day's
# rows taken while the day was small) read the whole day through a bitmap scan and tested
# each row against the array: 40 ms a batch at 100,000 entries, growing with the day. The
# LIMIT keeps the lateral subquery from being pulled up into a hash join over the day.
EXISTING = (
    "SELECT e.leaf_hash, e.leaf_index FROM unnest(%s::bytea[]) AS h (x) "
    "CROSS JOIN LATERAL (SELECT leaf_hash, leaf_index FROM entries "
    "WHERE day = %s AND leaf_hash = h.x LIMIT 1) AS e"
)


class PostgresStore(PostgresLeader, PostgresAudit, Store):
    """One log's database on a PostgreSQL server (`base.PostgresBase` holds the pool)."""

    def existing(self, day: str, leaf_hashes: Sequence[bytes]) -> dict[bytes, int]:
        return {bytes(h): int(i) for h, i in self._exec(EXISTING, (list(leaf_hashes), day))}

    def entries_containing(self, day: str, start: int, needle: str, limit: int) -> list[EntryRow]:
        """Up to `limit` entries of `day` from `start` on, newest first, whose claims contain
        `needle` once ASCII letters are lower-cased. The SQL (`_CONTAINS`) selects them, and
        every claims with a NUL byte besides; Python's test, the same one, drops the rest,
        and pages on until `limit` are found or the day is read."""
        want = needle.encode()
        # A needle with a NUL is only ever in claims with one; PostgreSQL text holds none.
        test, args = (_HAS_NUL, ()) if b"\x00" in want else (_CONTAINS, (want.decode("latin-1"),))
        wanted = self._limit(limit)
        found: list[EntryRow] = []
        below: int | None = None
        while wanted is None or len(found) < wanted:
            page = None if wanted is None else wanted - len(found)
            upto, bound = ("", ()) if below is None else ("AND leaf_index < %s ", (below,))
            rows = self._exec(
                "SELECT day, leaf_index, leaf_hash, claims FROM entries WHERE day = %s AND "
                f"leaf_index >= %s {upto}AND {test} ORDER BY leaf_index DESC LIMIT %s",
                (day, start, *bound, *args, page),
            )
            found += [
                EntryRow(str(d), int(i), bytes(h), bytes(c))
                for d, i, h, c in rows
                if want in bytes(c).lower()
            ]
            if page is None or len(rows) < page:
                break
            below = int(rows[-1][1])
        return found

    def find_leaf(self, leaf_hash: bytes) -> list[tuple[str, int]]:
        """Every (day, leaf_index) holding this leaf hash, newest day first."""
        return [
            (str(d), int(i))
            for d, i in self._exec(
                f"{DAYS} SELECT e.day, e.leaf_index FROM days "
                "JOIN entries e ON e.day = days.day AND e.leaf_hash = %s ORDER BY e.day DESC",
                (leaf_hash,),
            )
        ]


__all__ = ["EXISTING", "PostgresStore"]

# Checked by mypy: only a class with no abstract method left may be assigned here.
_IMPLEMENTS: type[Store] = PostgresStore
