"""The `/record` server index: which stored entries `/record` finds by server id or url,
filled in sorted runs up to `index_watermark` (why: docs/explanation/store.md). Every entry,
appended, recovered or copied, and the operator's `reindex` derive it here alone (SPEC §14.1).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from capability_anchor.errors import StoreError, UsageError
from capability_anchor.record.urls import canonical_url
from capability_anchor.store import Store, server_key_digest

# Entries are indexed for /record in sorted runs of at most this many (`index_watermark`).
INDEX_CHUNK = 512
LEGACY_INDEX_CHUNK = 32768
INDEX_CHUNK_KEY = "index_chunk"
READ_RUN = 10_000  # entries read from the store at once to derive their keys


def chunk_of(meta: Mapping[str, str]) -> int:
    """The log's index chunk: its meta's, else the one every log made before #23 used."""
    value = meta.get(INDEX_CHUNK_KEY)
    return int(value) if value else LEGACY_INDEX_CHUNK


# The members a record needs to be served by /record (SPEC §6); others are not indexed.
SERVER_MEMBERS = ("v", "iss", "sub", "url", "status", "checked_at", "evidence")
_SERVER_MEMBERS = frozenset(SERVER_MEMBERS)


def index_watermark(newest_head_size: int, day_size: int, chunk: int) -> int:
    """How many of a day's first entries the /record index holds: all that its newest head
    covers, and every full run of the log's `chunk`."""
    return max(newest_head_size, day_size - day_size % chunk)


def stored_watermark(store: Store, day: str, chunk: int) -> int:
    """`index_watermark` of `day` as `store` holds it (its newest head and its size)."""
    newest = store.newest_head(day)
    size = store.day_size(day)
    return index_watermark(0 if newest is None else newest.tree_size, size, chunk)


def key_digests(keys: tuple[str, ...]) -> tuple[str, ...]:
    """`keys` as the index stores them (`server_key_digest`): made before the write lock."""
    return tuple(server_key_digest(k) for k in keys)


def leaf_keys(claims: bytes) -> tuple[str, ...]:
    """Index keys of a stored entry, from its bytes (none for bytes that are no JSON: the
    audit's leaf hash check names those)."""
    try:
        return server_keys(json.loads(claims))
    except ValueError:
        return ()


def server_keys(record: object) -> tuple[str, ...]:
    """Index keys of a server record (one with every member `/record` needs), else none."""
    if not isinstance(record, dict) or not record.keys() >= _SERVER_MEMBERS:
        return ()
    sub = record["sub"]
    try:
        url = f"url:{canonical_url(record['url'])}"
    except UsageError:
        # A url that is not an https server URL is left out: that server is found by id only.
        return (f"sub:{sub}",) if isinstance(sub, str) else ()
    return (f"sub:{sub}", url) if isinstance(sub, str) else (url,)


@dataclass(frozen=True, slots=True)
class Pending:
    """The server keys' digests (`key_digests`) of `day`'s entries `start`, `start + 1`, ...
    that the index does not hold yet (one tuple per entry, empty for one that is no server
    record)."""

    day: str
    start: int
    keys: tuple[tuple[str, ...], ...]

    @property
    def end(self) -> int:
        return self.start + len(self.keys)


class ServerIndex:
    """The writer's side of the index. While this process is the writer it keeps the pending
    keys of what it appended, so an append need not re-read its own records; that copy is
    taken at the start of each write transaction and given back only after its commit."""

    def __init__(self, store: Store, chunk: int) -> None:
        self._store = store
        self.chunk = chunk
        self._kept: Pending | None = None

    def take(self, day: str, size: int) -> Pending:
        """The pending keys of `day` at `size`, inside the write transaction: this process's
        copy as far as it reaches, and the stored records after it (another writer's, such
        as another replica's) read. The copy is given up here (a rolled-back transaction
        must leave none behind)."""
        kept, self._kept = self._kept, None
        newest = self._store.newest_head(day)
        start = index_watermark(0 if newest is None else newest.tree_size, size, self.chunk)
        keys: list[tuple[str, ...]] = []
        if kept is not None and kept.day == day and kept.start <= start <= kept.end <= size:
            # Entries never change, so what was pending of them still is, from the
            # watermark on. Replicas take turns at the write lock: without this, each of
            # their commits re-read and parsed up to a chunk of records under the lock.
            if kept.end == size and kept.start == start:
                return kept
            keys = list(kept.keys[start - kept.start :])
        while start + len(keys) < size:
            rows = self._store.entries(day, start + len(keys), READ_RUN)
            if not rows:
                raise StoreError(f"day {day} has no entry {start + len(keys)}")
            keys += [key_digests(leaf_keys(r.claims)) for r in rows]
        return Pending(day, start, tuple(keys[: size - start]))

    def advance(self, day: str, size: int) -> None:
        """This process's copy extended by `day`'s stored entries up to `size` (another
        writer's), read before the write lock so that `take` reads only those after it.
        The entries below `size`'s last full run are indexed (`index_watermark`): skipped."""
        kept = self._kept
        if kept is None or kept.day != day or kept.end >= size:
            return
        start = max(kept.start, size - size % self.chunk)
        keys = list(kept.keys[start - kept.start :])
        while start + len(keys) < size:
            at = start + len(keys)
            rows = self._store.entries(day, at, min(READ_RUN, size - at))
            if not rows:
                raise StoreError(f"day {day} has no entry {at}")
            keys += [key_digests(leaf_keys(r.claims)) for r in rows]
        self._kept = Pending(day, start, tuple(keys[: size - start]))

    def index(self, pending: Pending, upto: int) -> Pending:
        """Index the pending entries below `upto` (in key order); return what stays pending."""
        if upto <= pending.start:
            return pending
        done = upto - pending.start
        rows = [(k, n) for n, ks in enumerate(pending.keys[:done], pending.start) for k in ks]
        self._store.insert_servers(pending.day, rows)
        return Pending(pending.day, upto, pending.keys[done:])

    def rebuild(self, day: str, start: int, end: int) -> None:
        """Index `day`'s stored entries `start`..`end - 1` from their bytes, inside the
        caller's write transaction (`migrate`'s copy, `reindex`); a row the index holds
        already is kept as it is (the stores ignore an insert of a held row)."""
        while start < end:
            rows = self._store.entries(day, start, min(end - start, READ_RUN))
            if not rows or rows[0].leaf_index != start:
                raise StoreError(f"day {day} has no entry {start}")
            keys = tuple(key_digests(leaf_keys(r.claims)) for r in rows)
            self.index(Pending(day, start, keys), start + len(keys))
            start += len(keys)

    def keep(self, pending: Pending) -> None:
        """After a commit: `pending` is this process's copy until the next write takes it."""
        self._kept = pending

    def repair(self, lock: AbstractContextManager[object]) -> list[dict[str, Any]]:
        """The operator's repair (`reindex`, SPEC §14.1): every day's `/record` index rebuilt
        from its stored entries up to its watermark, the rows it lacks added (the table is
        append-only: a row no entry implies stays, and the audit names it). One write
        transaction per run of the log's chunk, under the writer's `lock`, as an append
        indexes, so a large repair neither holds the write lock long nor grows the WAL.
        Returns, per day, how many of its first entries the index covers and how many rows
        were added."""
        store, done = self._store, []
        with store.read():
            days = store.entry_days()
        for day in days:
            with store.read():
                before = sum(1 for _ in store.iter_servers(day))
                upto = stored_watermark(store, day, self.chunk)
            for start in range(0, upto, self.chunk):
                with lock, store.write():
                    self.rebuild(day, start, min(start + self.chunk, upto))
            with store.read():
                after = sum(1 for _ in store.iter_servers(day))
            done.append({"day": day, "indexed": upto, "added": after - before})
        return done
