"""The writes of a log: *append* (the committer's commit), *checkpoint* and *seal*.

Every write is one `Store.write()` transaction; this process's caches are updated only after
its commit, never before (a cache of rolled-back rows would make the next head false).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from capability_anchor import head as heads
from capability_anchor.errors import (
    Conflict,
    LeaseLost,
    OutcomeUnknown,
    StoreError,
    StoreIOError,
    Unproven,
)
from capability_anchor.merkle import TILE_WIDTH, TreeEdge
from capability_anchor.metrics.service import observe
from capability_anchor.store import Store

from .batch import AppendResult, Prepared
from .committer import Committer, Submission, answers
from .days import next_day, utc_day
from .handoff import Handoffs
from .marks import check_not_behind
from .serverindex import Pending, ServerIndex, key_digests
from .signing import HeadSigner

if TYPE_CHECKING:
    from .lifecycle import Log

CATCH_UP_MAX = 4096  # entries this process's edge may be behind and be extended, not rebuilt
OUTCOME_WAIT_S = 10.0
"""How long a write whose COMMIT lost its connection looks for its entries before it is
answered `OutcomeUnknown` (the database is typically back from a restart in a second)."""
_OUTCOME_POLL_S = 0.2
STANDBY_WAIT_S = 10.0
"""How long a standby's proved batch waits for a covering head."""

# Heads, as they commit (the service's event log; the CLI prints them instead).
_events = logging.getLogger("capability_anchor.heads")


@dataclass(frozen=True, slots=True)
class _Batch:
    """A batch sequenced inside a write transaction: what the writer caches once it commits."""

    day: str
    results: list[AppendResult]
    edge: TreeEdge
    pending: Pending


@dataclass(frozen=True, slots=True)
class _Ahead:
    """What a commit read before the write lock (`LogWriter._look_ahead`); stored entries
    never change, so under the lock only those after `size` are read."""

    day: str
    size: int
    seen: dict[bytes, int]
    edge: TreeEdge


class LogWriter(HeadSigner):
    """The writer of one log in this process (`Log.writer`). Its caches, the right edge of
    the current day's tree and the /record keys not indexed yet, only ever hold committed
    state; the stored rows are the truth and every cache is checked against them."""

    def __init__(self, log: Log, handoff: bool = False) -> None:
        self._log = log
        self.handoff = Handoffs(log.data_dir if handoff else None)
        self._store = log.store
        self.lock = threading.RLock()
        self.edge: TreeEdge | None = None
        self.edge_day: str | None = None
        self._index = ServerIndex(log.store, log.index_chunk)
        self.group = Committer(self.commit_group)

    # --- append ----------------------------------------------------------------------------

    def append(self, prepared: Sequence[Prepared], prove: bool) -> Any:
        """`Log.append_prepared` (`prove`: `append_and_prove`), returning once the commit
        holding the batch returned: by the log's sequencer when one is live (`log.handoff`),
        else by the committer in this process (`log.committer`), sharing commits."""
        if not prepared:
            return []
        handed = self.handoff.call(lambda h: h.append(list(prepared), prove, self._log.clock()))
        if handed is not None:
            return handed
        return self.group.run(Submission(prepared, prove))

    def commit_group(self, subs: Sequence[Submission]) -> None:
        """The committer's commit: every submission of `subs` in ONE write transaction, as of
        one reading of the clock (so one day), each one's `result` set, or every one's
        `error` and nothing stored. A `prove` submission among them has a head signed over
        the whole group (on a standby: `_prove_on_standby`)."""
        try:
            try:
                out = self._commit_group(subs)
            except LeaseLost:
                if not any(sub.prove for sub in subs):
                    raise
                out = _prove_on_standby(self, subs)
        except Exception as exc:
            for sub in subs:
                sub.error = exc
            return
        for sub, answer in zip(subs, out, strict=True):
            sub.result = answer

    def _commit_group(self, subs: Sequence[Submission]) -> list[Any]:
        prepared = [(h, b, key_digests(k)) for sub in subs for h, b, k in sub.prepared]
        if not prepared:
            return [[] for _ in subs]
        prove = any(sub.prove for sub in subs)
        with self.lock:
            # A log behind what it published takes no entries: they would be sequenced after
            # a size the world saw with other entries (SPEC §13.3).
            check_not_behind(self._log.data_dir)
            if prove:
                self.seal()
            self._store.wait_for_writers()  # another replica's batch read before the lock
            ahead = self._look_ahead(prepared, utc_day(self._log.clock()))
            signed = False
            try:
                with self._store.write():  # the store's write lock, from here to the commit
                    # The time is read under the lock, as the key a head takes is
                    # (`signing_key`): a revocation committed before dates itself after it.
                    now = self._log.clock()
                    batch = self._sequence(prepared, now, ahead)
                    row = None
                    if prove:  # the head covering the group, unless one of its size is signed
                        row = self._store.newest_unsealed(batch.day)
                        if row is None or row.tree_size != batch.edge.size:
                            size = batch.edge.size
                            row = self.sign_head(batch.day, size, False, int(now), batch.pending)
                            signed = True
                            batch = _Batch(
                                batch.day, batch.results, batch.edge, Pending(batch.day, size, ())
                            )
                    # Proofs read inside the transaction: they cover the rows it wrote.
                    out = answers(subs, batch.results, self._log.read, row)
            except OutcomeUnknown:
                # The connection broke during the COMMIT: find out before answering.
                read_back(self._store, batch, signed=signed)
            # Durable from here on; only now are the edge and the unindexed keys kept.
            if signed:
                _events.info(
                    "prove: published a head of %s at tree size %d", batch.day, batch.edge.size
                )
            self.edge, self.edge_day = batch.edge, batch.day
            self._index.keep(batch.pending)
            # The group in the metrics: each batch's size, the batches, new and duplicates.
            m = observe()
            duplicates = sum(1 for r in batch.results if r.duplicate)
            for sub in subs:
                m.batch_size.observe(len(sub.prepared))
            m.commit_batches.observe(len(subs))
            m.appended.inc(len(batch.results) - duplicates)
            m.duplicates.inc(duplicates)
        return out

    def _look_ahead(self, prepared: Sequence[Prepared], day: str) -> _Ahead:
        """`day`'s size, the batch's leaves stored below it, the tree's edge and the index's
        pending keys at it, in one snapshot: another replica's entries read before the lock."""
        kept = self.edge if self.edge_day == day else None
        with self._store.read():
            size = self._store.day_size(day)
            seen = self._store.existing(day, [p[0] for p in prepared])
            edge = edge_at(self._store, kept, day, size)
            self._index.advance(day, size)
        return _Ahead(day, size, seen, edge)

    def _sequence(self, prepared: Sequence[Prepared], now: float, ahead: _Ahead) -> _Batch:
        """Sequence and integrate a batch inside the caller's write transaction: contiguous
        indices after the day's stored size (read under the write lock), the tiles it
        completed, and the /record index runs it filled. Of what was read `ahead` of the
        lock, only the entries appended since are read again."""
        day = utc_day(now)
        first_day = self._log.first_day
        if day < first_day:
            raise Conflict(f"the clock is on {day}, before the log's first day {first_day}")
        if self._store.sealed_head(day) is not None:
            raise Conflict(f"day {day} is sealed; it takes no more entries")
        size = self._store.day_size(day)
        if ahead.day != day or not ahead.size <= size <= ahead.size + CATCH_UP_MAX:
            ahead = self._look_ahead(prepared, day)  # the day turned, or far behind
        pending = self._index.take(day, size)
        since = self._store.leaf_hashes(day, ahead.size, size) if size > ahead.size else []
        if len(since) != size - ahead.size:
            raise StoreError(f"day {day} has {len(since)} of entries {ahead.size}..{size}")
        edge = ahead.edge.copy()
        edge.extend(b"".join(since))
        wanted = {p[0] for p in prepared}
        seen = ahead.seen | {h: n for n, h in enumerate(since, ahead.size) if h in wanted}
        results: list[AppendResult] = []
        new: list[Prepared] = []
        for entry in prepared:
            h = entry[0]
            if h in seen:
                results.append(AppendResult(day, seen[h], h, True))
                continue
            seen[h] = size + len(new)
            new.append(entry)
            results.append(AppendResult(day, seen[h], h, False))
        pending = self.integrate(day, edge, new, int(now), pending)
        return _Batch(day, results, edge, pending)

    def integrate(
        self,
        day: str,
        edge: TreeEdge,
        new: Sequence[Prepared],
        accepted_at: int,
        pending: Pending | None = None,
    ) -> Pending:
        """Store `new` (leaf hash, leaf bytes, /record key digests) after `edge.size` entries of
        `day`, the tiles they complete and the /record index runs they fill, inside the
        caller's write transaction; `edge` is extended. Every entry arrives here, appended
        or recovered, so what is derived from entries is derived the same way for both
        (SPEC §14.1). `pending` is the index's pending keys at `edge.size` (`take`: read
        from the store when not given); what stays pending is returned."""
        if pending is None:
            pending = self._index.take(day, edge.size)
        self._store.insert_entries(day, edge.size, [(h, b) for h, b, _ in new], accepted_at)
        full = edge.extend(b"".join(h for h, _, _ in new))
        self._store.insert_tiles(
            day, ((t.tile.level, t.tile.index, TILE_WIDTH, t.hashes, t.root) for t in full)
        )
        pending = Pending(pending.day, pending.start, pending.keys + tuple(k for _, _, k in new))
        return self._index.index(pending, pending.end - pending.end % self._index.chunk)

    def reindex(self) -> list[dict[str, Any]]:
        """The operator's repair (`reindex`, SPEC §14.1): `ServerIndex.repair`."""
        return self._index.repair(self.lock)

    # --- heads -----------------------------------------------------------------------------

    def checkpoint(self) -> bytes | None:
        """Sign and store an unsealed head of today if the tree grew; return today's newest
        head document, or None when today has no entries. Seals past days first. Refused
        while the log is behind what it published, even when it would sign nothing. Signed by
        the log's sequencer when one is live (it signs the heads of what it sequences)."""
        handed = self.handoff.call(lambda h: [h.checkpoint(self._log.clock())])
        if handed is not None:
            return handed[0]
        with self.lock:
            check_not_behind(self._log.data_dir)
            self.seal()
            # One transaction: the size read, the head signed over it and its index runs; its
            # time read under the lock, as the key is (see `_commit_group`).
            with self._store.write():
                now = self._log.clock()
                day = utc_day(now)
                if day < self._log.first_day:
                    return None
                sealed = self._store.sealed_head(day)
                if sealed is not None:
                    return sealed.doc
                size = self._store.day_size(day)
                if size == 0:
                    return None
                newest = self._store.newest_unsealed(day)
                if newest is not None and newest.tree_size == size:
                    return newest.doc
                doc = self.sign_head(day, size, False, int(now)).doc
            # Durable from here on, and served by every reader from its next read.
            _events.info("checkpoint: published a head of %s at tree size %d", day, size)
            return doc

    def seal(self, on_sealed: Callable[[bytes], None] | None = None) -> list[bytes]:
        """Seal every day before today that is not sealed, oldest first, one transaction
        each (resumable). Returns the newly sealed head documents; `on_sealed` gets each one
        as soon as its transaction committed. By the log's sequencer when one is live."""
        handed = self.handoff.call(lambda h: h.seal(self._log.clock()))
        if handed is not None:
            for doc in handed:
                if on_sealed is not None:
                    on_sealed(doc)
            return handed
        out: list[bytes] = []
        with self.lock:
            check_not_behind(self._log.data_dir)
            today = self._log.today()
            last = self._store.last_sealed_day()
            day = self._log.first_day if last is None else next_day(last)
            while day < today:
                # One transaction per day: a crash leaves every earlier day sealed, and the
                # rerun signs the same bytes (sealed heads are dated the end of their day).
                try:
                    with self._store.write():
                        # Another process may have sealed it since we looked.
                        sealed = None
                        if self._store.sealed_head(day) is None:
                            size = self._store.day_size(day)
                            sealed = self.sign_head(day, size, True, heads.sealed_iat(day)).doc
                except Exception:
                    observe().seals.labels("failed").inc()
                    raise
                if sealed is not None:
                    _events.info("sealed %s at tree size %d", day, size)
                    observe().seals.labels("sealed").inc()
                    out.append(sealed)
                    if on_sealed is not None:
                        on_sealed(sealed)
                day = next_day(day)
        return out


def edge_at(store: Store, kept: TreeEdge | None, day: str, size: int) -> TreeEdge:
    """The right edge of `day`'s tree at `size`: `kept` (an edge of that day) when it is of
    that size, since entries are append-only and an edge of a size never changes; `kept`
    extended by the entries after it when another writer (a replica) appended since, which
    reads only those where a rebuild read up to 255 hashes of every level; else rebuilt
    from the store."""
    if kept is not None and kept.size == size:
        return kept
    if kept is not None and kept.size < size <= kept.size + CATCH_UP_MAX:
        hashes = store.leaf_hashes(day, kept.size, size)
        if len(hashes) != size - kept.size:
            raise StoreError(f"day {day} has {len(hashes)} of entries {kept.size}..{size}")
        edge = kept.copy()
        edge.extend(b"".join(hashes))
        return edge
    return TreeEdge(size, store.edge_partials(day, size))


def read_back(store: Store, batch: _Batch, *, signed: bool) -> None:
    """After a COMMIT whose outcome is unknown (SPEC §14.3): return when the batch's new
    entries are stored at the indexes it gave them (the commit landed: the answer stands,
    and a head it `signed` too, in the same transaction); StoreIOError when none of them
    is stored (nothing of it was); else, or while the database cannot be read for
    OUTCOME_WAIT_S, OutcomeUnknown."""
    new = {r.leaf_hash: r.leaf_index for r in batch.results if not r.duplicate}
    if not new:
        if signed:  # only a head was new: its bytes are not worth a lookup of their own
            raise OutcomeUnknown("the COMMIT of a head lost its connection")
        return  # every record was stored before: the answer is true either way
    give_up = time.monotonic() + OUTCOME_WAIT_S
    while True:
        try:
            found = store.existing(batch.day, list(new))
            break
        except StoreIOError:
            if time.monotonic() >= give_up:
                raise OutcomeUnknown(
                    f"the database could not be read for {OUTCOME_WAIT_S:.0f} s after a "
                    "COMMIT lost its connection"
                ) from None
            time.sleep(_OUTCOME_POLL_S)
    if found == new:
        _events.info("a COMMIT lost its connection and had landed: %d new entries", len(new))
        return
    if not found:
        raise StoreIOError("a COMMIT lost its connection and had not landed: nothing stored")
    raise OutcomeUnknown("a COMMIT lost its connection; some of its records are stored")


def _prove_on_standby(writer: LogWriter, subs: Sequence[Submission]) -> list[Any]:
    """`?prove=1` on a replica without the sequencer lease (SPEC §13.4): the group committed
    unsigned, the leader asked to sign, and each `prove` submission's entries proved in the
    first head that covers them all (`Unproven` after STANDBY_WAIT_S). Why:
    docs/explanation/write-path.md#prove1-on-a-standby."""
    plain_answers = writer._commit_group([Submission(s.prepared) for s in subs])
    results = [r for answer in plain_answers for r in answer]
    if not results:
        return plain_answers
    day = results[0].day
    last = max(r.leaf_index for r in results)
    store = writer._store
    store.wake_signer()
    deadline = time.monotonic() + STANDBY_WAIT_S
    retry = time.monotonic() + 1.0
    while True:
        with store.read():
            head = store.newest_covering(day, last)
        if head is not None:
            return answers(subs, results, writer._log.read, head)
        now = time.monotonic()
        if now >= deadline:
            raise Unproven(
                f"no head of {day} covers index {last} after {STANDBY_WAIT_S:.0f} s (is a "
                "leader signing?)"
            )
        if now >= retry:
            retry = now + 1.0
            try:
                writer.checkpoint()  # the leader gone: its lease is free, and ours to take
            except LeaseLost:
                store.wake_signer()
        time.sleep(0.02)
