"""The contract suite's fixture: one run per engine the registry knows (`store.open.schemes`);
an engine without an entry in `backends.py` fails here rather than go untested."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from capability_anchor.store import CosignatureRow, HeadRow, HistoryLeaf, Store
from capability_anchor.store import open as stores
from capability_anchor.store.open import Where
from tests.kit.pglog import HEAD_KID, head_doc

from .backends import BACKENDS, Backend

DAY = "2026-11-01"
NEXT_DAY = "2026-11-02"
AT = 1_793_500_000  # a second of DAY


@dataclass
class Opened:
    """A fresh store of one engine, open for writing, with its test hooks."""

    backend: Backend
    where: Where
    store: Store

    def reopen(self) -> Store:
        self.store.close()
        self.store = stores.open(self.where)
        return self.store

    def readonly(self) -> Store:
        self.store.close()
        return stores.open_readonly(self.where)


def leaf(n: int, day: str = DAY) -> tuple[bytes, bytes]:
    """(leaf hash, claims) of a made-up entry: the store checks neither against the other."""
    claims = b'{"n":%d,"day":"%s"}' % (n, day.encode())
    return hashlib.sha256(claims).digest(), claims


def head(day: str, size: int, sealed: bool = False, root: bytes | None = None) -> HeadRow:
    root = root if root is not None else hashlib.sha256(b"%s/%d" % (day.encode(), size)).digest()
    # A signed head document of these columns: PostgreSQL's schema checks it (migration 2).
    doc = head_doc(day, size, root, sealed=sealed, iat=AT)
    return HeadRow(day, size, sealed, root, AT, HEAD_KID, doc)


def history_leaf(index: int, day: str, size: int, sealed: bool = False) -> HistoryLeaf:
    return HistoryLeaf(index, hashlib.sha256(b"history %d" % index).digest(), day, sealed, size)


def cosignature(size: int, line: str = "\u2014 witness.example AAAA") -> CosignatureRow:
    return CosignatureRow("witness.example", b"\x01\x02\x03\x04", size, AT, line)


def _fill(store: Store) -> None:
    store.set_meta("iss", "https://resolver.example")
    store.set_meta("first_day", DAY)


@pytest.fixture(params=stores.schemes())
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opened]:
    scheme: str = request.param
    assert scheme in BACKENDS, f"engine {scheme} has no test hooks in store_contract/backends"
    backend = BACKENDS[scheme]
    where = backend.where(tmp_path, request)
    assert not stores.exists(where)
    stores.create(where, _fill)
    result = Opened(backend, where, stores.open(where))
    try:
        yield result
    finally:
        result.store.close()
