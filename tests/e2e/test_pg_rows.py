"""The rows as PostgreSQL stores them (`store/sql/` on `store/postgres/`) against SQLite's,
differentially: one log's writes (several days, full and partial tiles, sealed and unsealed
heads, the `/record` index, stamps, keys, rotation records, settings, meta set and cleared,
and writes the store refuses) made on a real SQLite store and on the session's PostgreSQL as
the service's role; then every read, over a spread of arguments, must answer the same on
both: the same rows in the same order, or the same error. The PostgreSQL side runs on two
databases: one in C.UTF-8 (the byte order SQLite's is) and one whose collation is ICU's
en-US, where only what the SQL orders by bytes itself comes out in SQLite's order."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

from capability_anchor.errors import Conflict, StoreError
from capability_anchor.merkle import TreeEdge
from capability_anchor.store import HeadRow, StampRow, Store, server_key_digest
from capability_anchor.store import open as stores
from capability_anchor.store.postgres import PostgresStore, schema
from tests.kit.pgkit import PgServer
from tests.kit.pglog import HEAD_KID, head_doc, service_role

D0, D1, D2, D3 = "2026-10-31", "2026-11-01", "2026-11-02", "2026-11-03"
NO_DAY = "2026-12-31"
DAYS = (D0, D1, D2, D3, NO_DAY, "")
AT = 1_793_500_000
SIZES = {D1: 300, D2: 20, D3: 4}
JWK = '{"kty":"OKP","crv":"Ed25519","x":"%s"}'
# Kids whose byte order differs from en-US's (`-`, `_`, and case).
KIDS = ("kid-b", "A-kid", "a-kid", "_kid", "-kid", "B-kid")
# Keys of the /record index: several per leaf, so their digests' order is tested too.
SERVER_KEYS = ("sub:a", "sub:b", "url:https://a.example/", "url:https://B.example/x", "sub:Z")
# Claims the needles of entries_containing meet: ASCII upper case, non-ASCII letters (which
# SQLite's lower() leaves alone), bytes that are not UTF-8, and NUL bytes.
SPECIAL = {
    (D1, 3): '{"name":"ÉCOLE Café","url":"HTTPS://Example.COM/A"}'.encode(),
    (D1, 7): b'{"x":"\xff\xfe stray BYTES \x80abc"}',
    (D1, 11): b'{"nul":"a\x00B","n":11}',
    (D1, 12): "STRASSE straße ÀÉÎ àéî 😀".encode(),
    (D1, 13): b"\xc3",  # a truncated UTF-8 sequence
    (D2, 18): b'{"nul":"\x00\x00"}',
    (D2, 19): b'{"nul":"x\x00Y"}',
}
NEEDLES = (
    "example.com",
    "EXAMPLE",
    "https://example",
    "école",
    "École",
    "café",
    "CAFÉ",
    "straße",
    "àéî",
    "ÀÉÎ",
    "😀",
    "ÿ",
    "stray bytes",
    "abc",
    "a\x00b",
    "\x00",
    "x\x00y",
    "",
    '"n":1',
    '"n":2',
    "nul",
    "zzz-none",
)


def claims_of(day: str, n: int) -> bytes:
    return SPECIAL.get((day, n), b'{"n":%d,"day":"%s","sub":"srv-%d"}' % (n, day.encode(), n % 7))


def leaf_of(day: str, n: int) -> tuple[bytes, bytes]:
    claims = claims_of(day, n)
    # D3's first leaf is D1's fifth: one leaf hash in two days (find_leaf).
    if (day, n) == (D3, 0):
        claims = claims_of(D1, 5)
    return hashlib.sha256(claims).digest(), claims


Rows = PostgresStore  # the store's other parts (lease, audit) are not read here


@dataclass
class Pair:
    sqlite: Store
    pg: Rows

    @property
    def both(self) -> tuple[Any, Any]:
        return self.sqlite, self.pg

    def write(self, step: Callable[[Any], None]) -> None:
        for store in self.both:
            with store.write():
                step(store)

    def refused(self, step: Callable[[Any], None]) -> list[type[BaseException]]:
        """The error each engine raised for a write that must fail, SQLite's first."""
        raised: list[type[BaseException]] = []
        for store in self.both:
            with pytest.raises((StoreError, Conflict)) as caught, store.write():
                step(store)
            raised.append(type(caught.value))
        return raised


def answer(store: Any, name: str, args: tuple[Any, ...]) -> object:
    """What a read gives: its value (an iterator's rows, read in one snapshot), or its
    error's type, and its text when the error is not the engine's (edge_partials' own)."""
    try:
        with store.read():
            result = getattr(store, name)(*args)
            return list(result) if isinstance(result, Iterator) else result
    except StoreError as exc:
        return (type(exc), str(exc) if "needs" in str(exc) else "")


def same(pair: Pair, name: str, *args: Any) -> object:
    want, got = (answer(store, name, args) for store in pair.both)
    assert got == want, f"{name}{args}"
    return want


# --- the log, written to both -----------------------------------------------------------


def fill(store: Any) -> None:
    store.set_meta("iss", "https://resolver.example")
    store.set_meta("first_day", D1)


def head_of(day: str, edge: TreeEdge, sealed: bool) -> HeadRow:
    # A signed document of these columns: PostgreSQL stores no other (migration 2).
    iat = AT + edge.size
    doc = head_doc(day, edge.size, edge.root(), sealed=sealed, iat=iat)
    return HeadRow(day, edge.size, sealed, edge.root(), iat, HEAD_KID, doc)


def append(pair: Pair, edge: TreeEdge, day: str, count: int, heads: tuple[bool, ...]) -> None:
    """`count` leaves of `day`, their tiles, and a head at the new size per `heads` entry
    (sealed or not), in one write."""
    first = edge.size
    rows = [leaf_of(day, first + n) for n in range(count)]
    tiles = edge.extend_published(b"".join(h for h, _ in rows))
    servers = [
        (server_key_digest(k), first + n)
        for n in range(count)
        for k in SERVER_KEYS
        if (first + n + len(k)) % 3
    ]

    def step(store: Any) -> None:
        store.insert_entries(day, first, rows, AT + first)
        store.insert_servers(day, [*servers, *servers[:3]])  # again: left alone
        store.insert_tiles(day, tiles)
        store.insert_tiles(day, tiles[-1:])  # an identical tile again: left alone
        for sealed in heads:
            store.insert_head(head_of(day, edge, sealed))

    pair.write(step)


def write_the_log(pair: Pair) -> None:
    def keys(store: Any) -> None:
        for n, kid in enumerate(KIDS):
            store.add_key(kid, JWK % kid, AT + n)
        store.add_key("kid-b", JWK % "kid-b", AT + 99)  # the same key again: a no-op
        store.set_meta("mode", "one")
        store.set_meta("mode", "two")
        store.set_meta("gone", "soon")
        store.add_key_record("kid-b", "A-kid", "jws.record.1", AT + 1)
        store.add_settings("kid-b", "jws.settings.1", AT + 2)

    pair.write(keys)
    pair.write(lambda s: s.insert_head(head_of(D0, TreeEdge(), True)))
    d1, d2, d3 = TreeEdge(), TreeEdge(), TreeEdge()
    append(pair, d1, D1, 100, (False,))
    append(pair, d1, D1, 156, (False,))  # 256: the first full tile, a level-1 partial
    append(pair, d2, D2, 5, (False,))
    append(pair, d2, D2, 15, (False,))
    append(pair, d1, D1, 44, (False, True))  # 300, unsealed then sealed
    append(pair, d3, D3, 4, ())
    # A head of D2 between its others, stored after them.
    pair.write(lambda s: s.insert_head(head_of(D2, TreeEdge(), False)))

    def stamps_and_trust(store: Any) -> None:
        store.insert_stamp(StampRow(D1, "tsa-z", b"token z", "20261102000001Z"), AT + 10)
        store.insert_stamp(StampRow(D1, "tsa-a", b"token a", "20261102000000Z"), AT + 11)
        store.insert_stamp(StampRow(D0, "tsa-a", b"token 0", "20261101000000Z"), AT + 12)
        store.add_key_record("A-kid", "a-kid", "jws.record.2", AT + 3)
        store.clear_meta("gone")
        store.clear_meta("never-set")

    pair.write(stamps_and_trust)
    # A rolled-back insert leaves no gap in the ids that follow (SQLite's rowid).
    assert pair.refused(lambda s: s.add_key_record("x", "y", "jws.record.1", AT)) == [
        StoreError,
        StoreError,
    ]
    pair.write(lambda s: (s.add_key_record("a-kid", "_kid", "jws.record.3", AT + 4),))
    pair.write(lambda s: (s.add_settings("A-kid", "jws.settings.2", AT + 5),))


def open_pg(server: PgServer, locale: str) -> Rows:
    name = server.fresh_database(f"rows_{locale}")
    with server.connect() as conn:
        # Remade from template0 in the collation asked for (fresh_database's is C.UTF-8).
        conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(name)))
        icu = sql.SQL(" LOCALE_PROVIDER icu ICU_LOCALE 'en-US'" if locale == "icu" else "")
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE template0 LOCALE 'C.UTF-8'{}").format(
                sql.Identifier(name), icu
            )
        )
    with server.connect(name) as conn:
        schema.migrate(conn)
    return Rows(server.conninfo(name, service_role(server, name)), f"db {name}")


@pytest.fixture(params=["c", "icu"])
def pair(request: pytest.FixtureRequest, postgres: PgServer, tmp_path: Path) -> Iterator[Pair]:
    stores.create(tmp_path / "data", fill)
    result = Pair(stores.open(tmp_path / "data"), open_pg(postgres, request.param))
    with result.pg.write():
        fill(result.pg)
    try:
        write_the_log(result)
        yield result
    finally:
        for store in result.both:
            store.close()


# --- the reads ---------------------------------------------------------------------------


def everything(pair: Pair) -> object:
    """Every row of the log, read through the contract, the same on both engines."""
    rows: list[object] = [
        same(pair, name)
        for name in (
            "meta",
            "signing_keys",
            "entry_days",
            "all_heads",
            "key_records",
            "settings_statements",
            "added_times",
        )
    ]
    for day in DAYS:
        for name in ("day_size", "heads", "stamps", "iter_servers", "iter_tiles", "iter_entries"):
            rows.append(same(pair, name, day))
    return rows


def test_the_written_log_reads_back_the_same(pair: Pair) -> None:
    rows = everything(pair)
    assert len(same(pair, "iter_entries", D1)) == 300  # type: ignore[arg-type]
    assert [k for k, _ in same(pair, "signing_keys")] == sorted(KIDS)  # type: ignore[attr-defined]
    assert same(pair, "meta") == {
        "iss": "https://resolver.example",
        "first_day": D1,
        "mode": "two",
    }
    assert [i for i, *_ in same(pair, "key_records")] == [1, 2, 3]  # type: ignore[attr-defined]
    assert [s.tsa for s in same(pair, "stamps", D1)] == ["tsa-z", "tsa-a"]  # type: ignore[attr-defined]
    assert rows


def test_entry_reads_answer_as_sqlite(pair: Pair) -> None:
    indexes = (-1, 0, 1, 5, 99, 100, 255, 256, 299, 300, 10**6)
    for day in DAYS:
        for start, limit in ((0, 0), (0, 1), (0, 50), (5, 10), (290, 50), (299, 1), (300, 5)):
            same(pair, "entries", day, start, limit)
        same(pair, "entries", day, -3, 2)
        same(pair, "entries", day, 0, -1)
        for index in indexes:
            same(pair, "entry", day, index)
            same(pair, "accepted_at", day, index)
        for start, end in ((0, 0), (0, 10), (250, 260), (295, 400), (-5, 3), (10, 5)):
            same(pair, "leaf_hashes", day, start, end)
        for chunk in (7, 300, 10_000):
            same(pair, "iter_entries", day, chunk)
    stored = [leaf_of(D1, n)[0] for n in (0, 5, 299)]
    twin = stored[0][:6] + bytes(26)  # SQLite's index prefix, another hash
    probes = [*stored, stored[0], twin, bytes(32), b"short"]
    for day in DAYS:
        same(pair, "existing", day, probes)
        same(pair, "existing", day, [])
    assert same(pair, "existing", D1, probes) == {
        h: i for h, i in zip(stored, (0, 5, 299), strict=True)
    }
    for probe in probes:
        same(pair, "find_leaf", probe)
    assert same(pair, "find_leaf", stored[1]) == [(D3, 0), (D1, 5)]


def test_entries_containing_folds_ascii_only_as_sqlite(pair: Pair) -> None:
    for day in (D1, D2, NO_DAY):
        for needle in NEEDLES:
            for start, limit in ((0, 5), (0, 1000), (12, 3), (0, 0), (0, -1), (400, 5)):
                same(pair, "entries_containing", day, start, needle, limit)
    # Fixed points, so that "the same on both" is not "empty on both".
    found = [
        same(pair, "entries_containing", D1, 0, n, 10)
        for n in ("École", "EXAMPLE", "example.com", "a\x00b", "ÀÉÎ", "abc")
    ]
    assert [[r.leaf_index for r in rows] for rows in found] == [[3], [], [3], [11], [12], [7]]  # type: ignore[attr-defined]
    # D2's last two leaves hold NUL bytes and not the needle: PostgreSQL's SQL hands them
    # to Python, which drops them, and reads on to the one that holds it.
    assert [r.leaf_index for r in same(pair, "entries_containing", D2, 0, '"n":1', 1)] == [17]  # type: ignore[attr-defined]


def test_tile_reads_answer_as_sqlite(pair: Pair) -> None:
    for day in DAYS:
        for width in (0, 1, 44, 100, 101, 256, 257):
            same(pair, "tile", day, 0, 0, width)
        for level, index, width in ((0, 1, 1), (0, 1, 44), (0, 1, 45), (1, 0, 1), (1, 0, 2)):
            same(pair, "tile", day, level, index, width)
        for level, first, count in ((0, 0, 1), (0, 0, 2), (0, 1, 1), (1, 0, 1), (0, -1, 3)):
            same(pair, "full_tile_roots", day, level, first, count)
        for size in (0, 1, 5, 20, 100, 256, 257, 300, 301, 70_000):
            same(pair, "edge_partials", day, size)
    assert len(same(pair, "edge_partials", D1, 300)[0]) == 44 * 32  # type: ignore[index]


def test_head_reads_answer_as_sqlite(pair: Pair) -> None:
    for day in DAYS:
        for name in ("sealed_head", "newest_head", "newest_unsealed"):
            same(pair, name, day)
        for size in (0, 5, 20, 100, 300, 301):
            for sealed in (False, True):
                same(pair, "head", day, size, sealed)
        for index in (-1, 0, 4, 5, 99, 100, 299, 300):
            same(pair, "newest_covering", day, index)
        for low, high in ((0, 1), (1, 5), (1, 6), (100, 100), (101, 300), (300, 301), (5, 1)):
            same(pair, "has_head_between", day, low, high)
    for before in (None, D0, D1, D2, D3, "", "2026-11", "9999"):
        for limit in (None, 0, 1, 2, -1):
            same(pair, "sealed_heads", before, limit)
    assert [h.day for h in same(pair, "sealed_heads")] == [D1, D0]  # type: ignore[attr-defined]
    same(pair, "last_sealed_day")
    newest = same(pair, "newest_published")
    assert isinstance(newest, HeadRow) and (newest.day, newest.tree_size) == (D2, 20)


def test_record_index_reads_answer_as_sqlite(pair: Pair) -> None:
    for key in (*SERVER_KEYS, "sub:none"):
        for limit in (0, 1, 2, 50, 1000, -1):
            same(pair, "server_entries", key, limit)
        same(pair, "server_entries", key)
    assert same(pair, "server_entries", "sub:a", 2) == [(D3, 3), (D3, 2)]


# --- what the store refuses ------------------------------------------------------------


def _entry(day: str, index: int, n: int | None = None) -> Callable[[Any], None]:
    return lambda s: s.insert_entries(day, index, [leaf_of(day, index if n is None else n)], AT)


def _head(day: str, size: int, sealed: bool, root: bytes, tag: bytes) -> Callable[[Any], None]:
    doc = b'{"jws":"e30.x.c2ln","tag":"%s"}' % tag
    return lambda s: s.insert_head(HeadRow(day, size, sealed, root, AT, "kid-b", doc))


def test_each_refusal_is_a_conflict_on_both_and_stores_nothing(pair: Pair) -> None:
    before = everything(pair)
    d2 = same(pair, "head", D2, 20, False)
    assert isinstance(d2, HeadRow)
    other = bytes(32)
    refusals: dict[str, Callable[[Any], None]] = {
        "same size, other root (sealed)": _head(D2, 20, True, other, b"s"),
        "same size, other root": _head(D2, 20, False, other, b"u"),
        "same size and kind, other document": _head(D2, 20, False, d2.root, b"d"),
        "a head on a sealed day": _head(D1, 301, False, other, b"x"),
        "an entry on a sealed day": _entry(D1, 300),
        "an entry not at the next index": _entry(D2, 21),
        "an entry at a negative index": _entry(D3, -1),
        "a leaf already in its day": _entry(D2, 20, 0),
        "another tile under a tile's name": lambda s: s.insert_tiles(
            D1, [(0, 0, 256, bytes(256 * 32), other)]
        ),
        "another key under a kid": lambda s: s.add_key("kid-b", JWK % "other", AT),
        "a second stamp of a TSA for a day": lambda s: s.insert_stamp(
            StampRow(D1, "tsa-z", b"t", "20261102000002Z"), AT
        ),
    }
    for what, refused in refusals.items():

        def step(store: Any, refused: Callable[[Any], None] = refused, what: str = what) -> None:
            # Writes that succeed, in the same transaction: rolled back with it.
            store.set_meta("refused", what)
            store.add_settings("kid-b", "jws.refused", AT)
            store.insert_entries(D3, 4, [leaf_of(D3, 4)], AT)
            refused(store)

        assert pair.refused(step) == [Conflict, Conflict], what
    # The same head again is refused by the primary key: not a Conflict, on either engine.
    assert pair.refused(lambda s: s.insert_head(d2)) == [StoreError, StoreError]
    assert everything(pair) == before
