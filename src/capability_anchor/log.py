"""The log: append -> checkpoint -> seal -> (stamp) -> publish.

Stages, as in Sunlight and Tessera:
- *append* (sequence + integrate): a batch of records is validated, given contiguous leaf
  indices in the current UTC day, and stored with the tiles it completed, in one durable
  transaction. An acknowledged append is never lost and its index never reused.
- *checkpoint*: an unsealed head of today, signed, when the tree has grown. Past days are
  sealed first, so no head of day D exists before every earlier day is sealed.
- *seal*: every day before today that has no sealed head gets one (empty days included),
  chained by `prev`. Sealed heads are dated the end of their day, so sealing is
  deterministic and a rerun after a crash produces the same bytes.
- *publish*: heads are served as stored; `export` writes them as files.

`Log` is the object a Python resolver embeds; the CLI and the HTTP service are thin edges
over it. The clock is injectable (tests), never from the CLI.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from . import head as heads
from . import jws, leaf, logtrust, observation, trust
from .canonical import canonical_url
from .encoding import format_day, parse_day
from .errors import (
    CapabilityAnchorError,
    Conflict,
    InvalidRecord,
    NotFound,
    StartupCheckFailed,
    StoreError,
    UsageError,
)
from .files import tighten_modes
from .keys import KeySet, SigningKey, create_key_file, load_key_file
from .merkle import (
    TILE_HEIGHT,
    TILE_WIDTH,
    TileCache,
    TileNodes,
    TreeEdge,
    consistency_nodes,
    hash_leaf,
    inclusion_nodes,
)
from .merkle.nodes import resolve
from .reading import LogReader
from .recordnote import not_found_note
from .store import HeadRow, StampRow, Store
from .writer_token import TOKEN_ENV, TOKEN_FILE, create_token_file, read_token_file, writer_token

# Published heads, as they commit (the service's event log; the CLI prints them instead).
_events = logging.getLogger("capability_anchor.heads")

Clock = Callable[[], float]
Prepared = tuple[bytes, bytes, tuple[str, ...]]

KEY_FILE = "signing-key.jwk"
MAX_BATCH = 1000


MAX_INT = 2**63 - 1  # SQLite's integers


def _bounded(value: int, what: str) -> int:
    """Indices and sizes as SQLite can hold them: beyond that it is a bad request."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INT:
        raise UsageError(f"{what} must be an integer 0..{MAX_INT}, got {value!r}")
    return value


def utc_day(t: float) -> str:
    # Whole seconds first, as every stored time is: fromtimestamp would round 23:59:59.9999997
    # up into the next day while int(t) keeps it in this one.
    return dt.datetime.fromtimestamp(math.floor(t), dt.UTC).date().isoformat()


def _next_day(day: str) -> str:
    return format_day(parse_day(day) + dt.timedelta(days=1))


def _prev_day(day: str) -> str:
    return format_day(parse_day(day) - dt.timedelta(days=1))


@dataclass(frozen=True, slots=True)
class AppendResult:
    day: str
    leaf_index: int
    leaf_hash: bytes
    duplicate: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "day": self.day,
            "leaf_index": self.leaf_index,
            "leaf_hash": self.leaf_hash.hex(),
            "duplicate": self.duplicate,
        }


# Entries are indexed for /record in sorted runs of at most this many (`index_watermark`).
INDEX_CHUNK = 32768


def index_watermark(newest_head_size: int, day_size: int) -> int:
    """How many of a day's first entries the /record index holds: all that its newest head
    covers, and every full run of INDEX_CHUNK (Log's "the /record index" section)."""
    return max(newest_head_size, day_size - day_size % INDEX_CHUNK)


class Log:
    """A capability-anchor log in a data dir.

    >>> log = Log.init(Path("data"), iss="https://resolver.example")   # once
    >>> log = Log.open(Path("data"))                                    # afterwards
    >>> [r.leaf_index for r in log.append([record1, record2])]
    >>> log.checkpoint()           # head document bytes, or None when today is empty
    >>> log.proof(day, 0)          # {"v", "anchor", "proof"} for resolver-2 records
    """

    def __init__(self, data_dir: Path, store: Store, key: SigningKey, clock: Clock) -> None:
        self.data_dir = data_dir
        self.store = store
        # What api/, export and audit read; the store itself stays the write path's.
        self.read = LogReader(store)
        self.key = key
        self.clock = clock
        meta = store.meta()
        if "iss" not in meta or "first_day" not in meta:
            raise StoreError(f"{store.path} has no iss or first_day: not a complete log")
        self.iss = meta["iss"]
        self.first_day = meta["first_day"]
        self.public_url = meta.get("public_url") or self.iss
        self.config: dict[str, Any] = json.loads(meta.get("config", "{}"))
        # What an append accepts beyond SPEC §2 (`observation`): signed with the config.
        self.records = observation.rule_of(self.config)
        self._lock = threading.RLock()
        # Stored tiles never change, so their rows are shared by every proof (bounded LRU).
        self._tile_cache = TileCache()
        self._edge: TreeEdge | None = None
        self._edge_day: str | None = None
        # Server keys of the entries appended since the index's watermark, while this
        # process is the writer: (day, first leaf index, keys of each entry from there on).
        self._unindexed: tuple[str, int, list[tuple[str, ...]]] | None = None
        # (marker, trusted set) of `keyset()`, recomputed when the rotation records change.
        self._trust_cache: tuple[object, KeySet] | None = None

    # --- opening ---------------------------------------------------------------------------

    @classmethod
    def init(
        cls,
        data_dir: Path,
        *,
        iss: str,
        public_url: str | None = None,
        config: Mapping[str, Any] | None = None,
        records: str = observation.OBSERVATION,
        clock: Clock = time.time,
    ) -> Log:
        """Create a new log: store, Ed25519 key, writer token. Refuses an existing log.
        `records` is the record rule its appends follow (`observation`), kept in its config."""
        _check_origin(iss)
        config = {**(config or {}), observation.CONFIG_KEY: observation.check_rule(records)}
        if public_url is not None:
            _check_base_url(public_url)
        data_dir = Path(data_dir)
        key_path = data_dir / KEY_FILE
        token_path = data_dir / TOKEN_FILE
        if Store.exists(data_dir):
            raise Conflict(f"a log already exists in {data_dir}; refusing to overwrite it")
        # Only the owner may list, read or replace anything in the data dir.
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        tighten_modes(data_dir)
        # The database is the commit point of init. A key or token file without a database
        # is left by an init that crashed before it: nothing was ever signed with that key
        # or accepted with that token, so they are taken over rather than refused (but
        # checked: a token the service would refuse must not become the log's).
        key = load_key_file(key_path) if key_path.exists() else create_key_file(key_path)
        if token_path.exists():
            read_token_file(token_path)
        else:
            create_token_file(token_path)
        if TOKEN_ENV in os.environ:
            writer_token(data_dir)  # the token the service would use instead: refuse it now
        now = clock()

        def fill(store: Store) -> None:
            store.set_meta("iss", iss)
            store.set_meta("first_day", utc_day(now))
            store.set_meta("created", str(int(now)))
            if public_url:
                store.set_meta("public_url", public_url.rstrip("/"))
            store.set_meta("config", json.dumps(dict(config or {}), sort_keys=True))
            store.add_key(key.kid, json.dumps(key.public.jwk(), sort_keys=True), int(now))
            # The settings are vouched for by the key from the log's first transaction on.
            settings = trust.sign_settings(store.meta(), key, reason="init", iat=int(now))
            store.add_settings(key.kid, settings, int(now))

        Store.create(data_dir, fill)
        return cls.open(data_dir, clock=clock)

    @classmethod
    def open(
        cls, data_dir: Path, *, clock: Clock = time.time, background_checkpoints: bool = True
    ) -> Log:
        """Open an existing log and run the start-up self-check (refuse to guess).

        `background_checkpoints` copies the SQLite WAL back into the database from a thread
        of its own (see `Store.start_checkpointer`); it is stopped by `close`.
        """
        data_dir = Path(data_dir)
        store = Store.open(data_dir)
        try:
            key = load_key_file(data_dir / KEY_FILE)
            log = cls(data_dir, store, key, clock)
            log.self_check()
            if background_checkpoints:
                store.start_checkpointer()
        except BaseException:
            store.close()
            raise
        return log

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def self_check(self) -> None:
        """The configured key, or a key it trusts through rotation records, must verify the
        newest published head, whose `iss` must be the log's; and the newest settings
        statement must be the key file's and say what meta says (`logtrust.check_settings`).
        Otherwise the log refuses to run (a wrong key or a copied database would otherwise
        publish heads nobody can chain, a changed meta would redirect anchors)."""
        self._check_newest_head()
        logtrust.check_settings(self)

    def _check_newest_head(self) -> None:
        newest = self.store.newest_published()
        if newest is None:
            return
        try:
            # The plain claims beside the JWS are not compared here: the audit reports them.
            verified = heads.verify_document(newest.doc, self.keyset()).head
        except CapabilityAnchorError as exc:
            raise StartupCheckFailed(
                f"the configured key (kid {self.key.kid}) does not verify the newest published "
                f"head ({newest.day}, size {newest.tree_size}, kid {newest.kid}): {exc}"
            ) from None
        if verified.claims["iss"] != self.iss:
            raise StartupCheckFailed(
                f"the newest head's iss {verified.claims['iss']!r} is not the log's {self.iss!r}"
            )

    # --- small accessors -------------------------------------------------------------------

    def today(self) -> str:
        return utc_day(self.clock())

    def keyset(self) -> KeySet:
        """The trusted keys: the key file's, and every key a chain of rotation records leads
        to from it (`logtrust`). A `keys` row without such a chain is not in it."""
        return logtrust.trusted_keys(self)

    def writer_token(self) -> str:
        """The checked writer token (see `writer_token`: TokenError when unusable)."""
        return writer_token(self.data_dir)

    # --- append ----------------------------------------------------------------------------

    def prepare(self, records: Sequence[object]) -> list[Prepared]:
        """Validate a batch and compute (leaf_hash, leaf_bytes, server keys) for each record.
        Raises InvalidRecord with `.position` set to the first bad record's 0-based position."""
        return prepare_records(records, self.iss, self.records)

    def append(self, records: Sequence[object]) -> list[AppendResult]:
        """Append a batch atomically: all records are stored, or none (and it raises)."""
        return self.append_prepared(self.prepare(records))

    def append_prepared(self, prepared: Sequence[Prepared]) -> list[AppendResult]:
        if not prepared:
            return []
        with self._lock:
            now = self.clock()
            with self.store.write():
                batch = self._append_in_transaction(prepared, now)
            # Durable from here on: the commit returned. Only now are the edge and the
            # unindexed keys kept (a rolled-back batch leaves them to be re-read).
            self._keep(batch)
            return batch.results

    def append_and_prove(self, prepared: Sequence[Prepared]) -> list[dict[str, Any]]:
        """Append a batch and publish a head covering it, in ONE write transaction, and return
        each entry with the anchor and inclusion proof of that head (`POST /records?prove=1`).

        The head's root and every proof are computed inside the transaction from what it read
        and wrote, and the answer is complete before the commit: if the commit fails, nothing
        was stored and no head exists; once it returns, all of it is durable. Past days are
        sealed first (each in its own transaction), as for a checkpoint."""
        if not prepared:
            return []
        with self._lock:
            self.seal()
            now = self.clock()
            with self.store.write():
                batch = self._append_in_transaction(prepared, now)
                size = batch.edge.size
                newest = self.store.newest_unsealed(batch.day)
                if newest is not None and newest.tree_size == size:
                    row = newest  # the whole batch was duplicates of a published size
                else:
                    row = self._publish(batch.day, size, False, int(now), batch.pending)
                    batch = _Batch(batch.day, batch.results, batch.edge, (size, []))
                # No shared tile cache here: rows read inside an uncommitted transaction must
                # not outlive a rollback.
                source = TileNodes(self._tile_getter(batch.day, size))
                anchor = self.anchor(row)
                out = []
                for r in batch.results:
                    path = resolve(inclusion_nodes(r.leaf_index, size), source.node)
                    out.append(
                        {
                            **r.to_json(),
                            "anchor": anchor,
                            "proof": _proof_json(r.leaf_index, size, path),
                        }
                    )
            if row is not newest:
                _events.info("prove: published a head of %s at tree size %d", batch.day, size)
            self._keep(batch)
            return out

    def _append_in_transaction(self, prepared: Sequence[Prepared], now: float) -> _Batch:
        """Sequence and integrate a batch inside the caller's write transaction: contiguous
        indices after the day's stored size (read under the write lock), the tiles it
        completed, and the /record index runs it filled."""
        day = utc_day(now)
        if day < self.first_day:
            raise Conflict(f"the clock is on {day}, before the log's first day {self.first_day}")
        if self.store.sealed_head(day) is not None:
            raise Conflict(f"day {day} is sealed; it takes no more entries")
        unindexed, self._unindexed = self._unindexed, None
        size = self.store.day_size(day)
        edge = self._edge_at(day, size).copy()
        seen = self.store.existing(day, [p[0] for p in prepared])
        results: list[AppendResult] = []
        new: list[tuple[bytes, bytes]] = []
        new_keys: list[tuple[str, ...]] = []
        for h, data, keys in prepared:
            if h in seen:
                results.append(AppendResult(day, seen[h], h, True))
                continue
            seen[h] = size + len(new)
            new.append((h, data))
            new_keys.append(keys)
            results.append(AppendResult(day, seen[h], h, False))
        pending = self._unindexed_keys(day, size, unindexed)
        self.store.insert_entries(day, size, new, int(now))
        pending = (pending[0], pending[1] + new_keys)
        new_size = size + len(new)
        pending = self._index_servers(day, pending, new_size - new_size % INDEX_CHUNK)
        full = edge.extend(b"".join(h for h, _ in new))
        self.store.insert_tiles(
            day, ((t.tile.level, t.tile.index, TILE_WIDTH, t.hashes, t.root) for t in full)
        )
        return _Batch(day, results, edge, pending)

    def _keep(self, batch: _Batch) -> None:
        """After a commit: this process's caches of what is now durable."""
        self._edge, self._edge_day = batch.edge, batch.day
        self._unindexed = (batch.day, *batch.pending)

    # --- the /record index -----------------------------------------------------------------
    #
    # Indexing every server record as it is appended costs two B-tree inserts at keys all
    # over the index, i.e. a dirty page each per batch. The index is therefore filled in
    # sorted runs: when a head is published (all `/record` serves is covered entries), and
    # whenever INDEX_CHUNK more entries accumulated, so that publishing never has much to
    # do. Which entries are indexed follows from stored state alone, in every process:
    # those below max(newest head's size, day size rounded down to INDEX_CHUNK).

    def _watermark(self, day: str, size: int) -> int:
        newest = self.store.newest_head(day)
        return index_watermark(0 if newest is None else newest.tree_size, size)

    def _unindexed_keys(
        self, day: str, size: int, cached: tuple[str, int, list[tuple[str, ...]]] | None
    ) -> tuple[int, list[tuple[str, ...]]]:
        """(watermark, server keys of entries watermark..size-1) of `day` at `size`: the
        writer's own copy when it is current, else re-read from the stored records."""
        start = self._watermark(day, size)
        if cached is not None and cached[:2] == (day, start) and start + len(cached[2]) == size:
            return start, cached[2]
        keys: list[tuple[str, ...]] = []
        while start + len(keys) < size:
            rows = self.store.entries(day, start + len(keys), 10_000)
            if not rows:
                raise StoreError(f"day {day} has no entry {start + len(keys)}")
            keys += [server_keys(json.loads(r.claims)) for r in rows]
        return start, keys[: size - start]

    def _index_servers(
        self, day: str, pending: tuple[int, list[tuple[str, ...]]], upto: int
    ) -> tuple[int, list[tuple[str, ...]]]:
        """Index the pending entries below `upto` (in key order); return what stays pending."""
        start, keys = pending
        if upto <= start:
            return pending
        done = upto - start
        rows = sorted((k, start + n) for n, ks in enumerate(keys[:done]) for k in ks)
        self.store.insert_servers(day, rows)
        return upto, keys[done:]

    def _edge_at(self, day: str, size: int) -> TreeEdge:
        """The right edge of `day`'s tree at `size`: this process's copy when it is of that
        size (entries are append-only, so an edge of a size never changes), else rebuilt from
        the store. It is cached only by `_keep`, after a commit."""
        if self._edge is not None and self._edge_day == day and self._edge.size == size:
            return self._edge
        return TreeEdge(size, self.store.edge_partials(day, size))

    # --- heads -----------------------------------------------------------------------------

    def _prev(self, day: str) -> str | None:
        if day == self.first_day:
            return None
        before = self.store.sealed_head(_prev_day(day))
        if before is None:
            raise StoreError(f"day {_prev_day(day)} is not sealed; cannot chain {day}")
        return heads.claims_digest(heads.parse_document(before.doc).claims)

    def _publish(
        self,
        day: str,
        size: int,
        sealed: bool,
        iat: int,
        pending: tuple[int, list[tuple[str, ...]]] | None = None,
    ) -> HeadRow:
        """Sign and store a head of `day` at `size`, inside the caller's write transaction.

        The root signed is computed here from what this transaction reads (the stored leaf
        hashes of the right edge and the roots of the full tiles below it), never from a
        cache: a head is a statement about the stored entries, made under the same write lock
        that keeps them from changing. A cached edge of the same size must agree; if it does
        not, something is badly wrong and nothing is signed."""
        edge = TreeEdge(size, self.store.edge_partials(day, size))
        root = edge.root()
        cached = self._edge
        if (
            cached is not None
            and self._edge_day == day
            and cached.size == size
            and cached.root() != root
        ):
            raise StoreError(
                f"day {day} at size {size}: the stored entries give root {root.hex()}, "
                f"this process computed {cached.root().hex()}; refusing to sign"
            )
        claims = heads.make_claims(
            iss=self.iss,
            day=day,
            tree_size=size,
            root=root,
            sealed=sealed,
            prev=self._prev(day),
            iat=iat,
        )
        signed = heads.sign(claims, self.key)
        row = HeadRow(day, size, sealed, root, iat, self.key.kid, signed.document())
        # Everything this head covers is findable through /record once it is published.
        if pending is None:
            unindexed, self._unindexed = self._unindexed, None
            pending = self._unindexed_keys(day, size, unindexed)
        self._index_servers(day, pending, size)
        # The partial tiles at this size make every proof up to it servable from tiles.
        self.store.insert_tiles(
            day, ((t.level, t.index, t.width, data, None) for t, data in edge.partial_tiles())
        )
        self.store.insert_head(row)
        return row

    def checkpoint(self) -> bytes | None:
        """Publish an unsealed head of today if the tree grew; return today's newest head
        document, or None when today has no entries. Seals past days first."""
        with self._lock:
            self.seal()
            now = self.clock()
            day = utc_day(now)
            if day < self.first_day:
                return None
            with self.store.write():
                sealed = self.store.sealed_head(day)
                if sealed is not None:
                    return sealed.doc
                size = self.store.day_size(day)
                if size == 0:
                    return None
                newest = self.store.newest_unsealed(day)
                if newest is not None and newest.tree_size == size:
                    return newest.doc
                doc = self._publish(day, size, False, int(now)).doc
            _events.info("checkpoint: published a head of %s at tree size %d", day, size)
            return doc

    def seal(self, on_sealed: Callable[[bytes], None] | None = None) -> list[bytes]:
        """Seal every day before today that is not sealed, oldest first, one transaction
        each (resumable). Returns the newly sealed head documents; `on_sealed` gets each one
        as soon as its transaction committed."""
        out: list[bytes] = []
        with self._lock:
            today = self.today()
            last = self.store.last_sealed_day()
            day = self.first_day if last is None else _next_day(last)
            while day < today:
                with self.store.write():
                    # Another process may have sealed it since we looked.
                    sealed = None
                    if self.store.sealed_head(day) is None:
                        size = self.store.day_size(day)
                        sealed = self._publish(day, size, True, heads.sealed_iat(day)).doc
                if sealed is not None:
                    _events.info("sealed %s at tree size %d", day, size)
                    out.append(sealed)
                    if on_sealed is not None:
                        on_sealed(sealed)
                day = _next_day(day)
        return out

    def stamp_targets(self) -> list[tuple[str, bytes, set[str]]]:
        """(day, compact JWS, TSAs that stamped it) of every sealed head, oldest first."""
        with self._lock:
            return [
                (
                    row.day,
                    heads.parse_document(row.doc).jws.encode("ascii"),
                    {s.tsa for s in self.store.stamps(row.day)},
                )
                for row in reversed(self.store.sealed_heads())
            ]

    def add_stamp(self, day: str, tsa: str, token: bytes, gen_time: str) -> bool:
        """Store a verified RFC 3161 reply for `day`'s sealed head, unless this TSA already
        stamped it (another process may have been quicker): stored stamps never change.
        Returns whether it was stored."""
        with self._lock, self.store.write():
            if self.store.sealed_head(day) is None:
                raise Conflict(f"day {day} is not sealed; only sealed heads are stamped")
            if any(s.tsa == tsa for s in self.store.stamps(day)):
                return False
            self.store.insert_stamp(StampRow(day, tsa, token, gen_time), int(self.clock()))
            return True

    # --- reading heads ---------------------------------------------------------------------

    def head_for(self, day: str, tree_size: int | None = None) -> HeadRow:
        """SPEC §6 head selection: without a size the newest head of the day (the sealed one
        once sealed); with a size the unsealed head of that size, else the sealed one."""
        parse_day(day)
        if tree_size is not None:
            _bounded(tree_size, "tree size")
        if tree_size is None:
            found = self.store.newest_head(day)
        else:
            found = self.store.head(day, tree_size, False) or self.store.head(day, tree_size, True)
        if found is None:
            what = f"day {day}" if tree_size is None else f"day {day} at size {tree_size}"
            raise NotFound(f"no published head for {what}")
        return found

    def anchor(self, row: HeadRow) -> dict[str, Any]:
        return {
            "day": row.day,
            "root": row.root.hex(),
            "url": heads.anchor_url(self.public_url, row.day, row.tree_size, row.sealed),
        }

    # --- proofs ----------------------------------------------------------------------------

    def _tile_getter(self, day: str, size: int) -> Callable[[int, int], bytes]:
        def get(level: int, index: int) -> bytes:
            at_level = size >> (TILE_HEIGHT * level)
            width = min(TILE_WIDTH, at_level - index * TILE_WIDTH)
            data = self.store.tile(day, level, index, width)
            if data is None:
                raise StoreError(f"day {day}: tile {level}/{index} (width {width}) is missing")
            return data

        return get

    def _tiles(self, day: str, size: int) -> TileNodes:
        return TileNodes(self._tile_getter(day, size), cache=self._tile_cache, namespace=day)

    def proof(self, day: str, leaf_index: int, tree_size: int | None = None) -> dict[str, Any]:
        """`{v, anchor, proof}` for entry `leaf_index` of `day` in the selected head."""
        _bounded(leaf_index, "leaf index")
        row = self.head_for(day, tree_size)
        if leaf_index >= row.tree_size:
            raise NotFound(
                f"entry {leaf_index} of {day} is not covered by the head of size {row.tree_size}"
            )
        source = self._tiles(day, row.tree_size)
        path = resolve(inclusion_nodes(leaf_index, row.tree_size), source.node)
        return {
            "v": heads.VERSION,
            "anchor": self.anchor(row),
            "proof": _proof_json(leaf_index, row.tree_size, path),
        }

    def proof_by_leaf_hash(
        self, leaf_hash: bytes, day: str | None = None, tree_size: int | None = None
    ) -> dict[str, Any]:
        """Proof for a leaf hash: in `day`, else the newest day in which a published head
        covers it."""
        for found_day, index in self.store.find_leaf(leaf_hash):
            if day is not None and found_day != day:
                continue
            covering = self.store.newest_covering(found_day, index)
            if covering is not None:
                return self.proof(found_day, index, tree_size)
        raise NotFound(f"no published head covers leaf {leaf_hash.hex()}")

    def consistency(self, day: str, first: int, second: int) -> dict[str, Any]:
        _bounded(first, "first")
        _bounded(second, "second")
        newest = self.head_for(day)
        if not 0 < first <= second <= newest.tree_size:
            raise UsageError(
                f"consistency needs 0 < first <= second <= {newest.tree_size} (the size of "
                f"{day}'s newest head), got {first} and {second}"
            )
        source = self._tiles(day, newest.tree_size)
        path = resolve(consistency_nodes(first, second), source.node)
        return {
            "v": heads.VERSION,
            "day": day,
            "first": first,
            "second": second,
            "path": [p.hex() for p in path],
        }

    # --- resolver-2 records ---------------------------------------------------------------

    def record(
        self, *, sub: str | None = None, url: str | None = None, lifetime: int = 24 * 3600
    ) -> dict[str, Any]:
        """A Capability Resolution §6.3 record (SPEC §6 `/record`): the newest entry of the
        server (by `sub`, or by canonical `url`) that a published head covers, its leaf
        claims plus `iat`, `exp`, `anchor`, `proof`, signed as a record token."""
        if (sub is None) == (url is None):
            raise UsageError("give exactly one of id and url")
        if not 0 < lifetime <= jws.MAX_RECORD_LIFETIME:
            raise UsageError(f"record lifetime must be 1..{jws.MAX_RECORD_LIFETIME} seconds")
        key = f"sub:{sub}" if sub is not None else f"url:{canonical_url(url)}"
        indexed = self.store.server_entries(key)
        for day, index in indexed:
            if self.store.newest_covering(day, index) is None:
                continue  # not yet under a published head: an older entry may be
            entry = self.store.entry(day, index)
            if entry is None:
                raise StoreError(f"the server index names a missing entry {day}/{index}")
            answer = self.proof(day, index)
            iat = int(self.clock())
            signed = {
                **json.loads(entry.claims),
                "iat": iat,
                "exp": iat + lifetime,
                "anchor": answer["anchor"],
                "proof": answer["proof"],
            }
            token = jws.sign_claims(signed, self.key, jws.RECORD_TYP)
            expires = dt.datetime.fromtimestamp(iat + lifetime, dt.UTC)
            return {**signed, "expires": expires.strftime("%Y-%m-%dT%H:%M:%SZ"), "jws": token}
        today = self.today()
        days = (today, _prev_day(today))
        raise NotFound(
            not_found_note(self.store, key, indexed=bool(indexed), days=days, needs=SERVER_MEMBERS)
        )

    # --- listing ---------------------------------------------------------------------------

    def entries(self, day: str, start: int = 0, limit: int = 100) -> list[dict[str, Any]]:
        parse_day(day)
        _bounded(start, "start")
        _bounded(limit, "limit")
        return [
            {
                "leaf_index": e.leaf_index,
                "leaf_hash": e.leaf_hash.hex(),
                "claims": json.loads(e.claims),
            }
            for e in self.store.entries(day, start, limit)
        ]

    def roots(self, before: str | None = None, limit: int = 100) -> dict[str, Any]:
        if before is not None:
            parse_day(before)
        rows = self.store.sealed_heads(before, limit)
        return {
            "v": heads.VERSION,
            "iss": self.iss,
            "days": [
                {
                    "day": r.day,
                    "tree_size": r.tree_size,
                    "root": r.root.hex(),
                    "url": heads.anchor_url(self.public_url, r.day, r.tree_size, True),
                }
                for r in rows
            ],
        }


@dataclass(frozen=True, slots=True)
class _Batch:
    """A batch sequenced inside a write transaction: what `_keep` caches once it commits."""

    day: str
    results: list[AppendResult]
    edge: TreeEdge
    pending: tuple[int, list[tuple[str, ...]]]


def _proof_json(leaf_index: int, tree_size: int, path: Sequence[bytes]) -> dict[str, Any]:
    return {
        "type": "rfc9162-sha256",
        "leaf_index": leaf_index,
        "tree_size": tree_size,
        "path": [p.hex() for p in path],
    }


def prepare_records(
    records: Sequence[object], iss: str, rule: str = observation.OBSERVATION
) -> list[Prepared]:
    """`Log.prepare` given only the log's issuer and record rule (`observation`): pure, so a
    worker process can run it. SPEC §2 first, then the issuer, then the record rule."""
    prepared: list[Prepared] = []
    for position, record in enumerate(records):
        try:
            data = leaf.leaf_bytes(record)
            if isinstance(record, dict) and "iss" in record and record["iss"] != iss:
                raise InvalidRecord(f"iss {record['iss']!r} is not this log's issuer {iss!r}")
            observation.check_record(record, rule)
        except InvalidRecord as exc:
            raise InvalidRecord(str(exc), position=position) from None
        prepared.append((hash_leaf(data), data, server_keys(record)))
    return prepared


SERVER_MEMBERS = ("v", "iss", "sub", "url", "status", "checked_at", "evidence")


def server_keys(record: object) -> tuple[str, ...]:
    """Index keys of a server record (one with every member `/record` needs), else none."""
    if not isinstance(record, dict) or any(m not in record for m in SERVER_MEMBERS):
        return ()
    keys = []
    if isinstance(record["sub"], str):
        keys.append(f"sub:{record['sub']}")
    # A url that is not an https server URL is left out: that server is found by id only.
    with contextlib.suppress(UsageError):
        keys.append(f"url:{canonical_url(record['url'])}")
    return tuple(keys)


def _check_origin(iss: str) -> None:
    """`iss` is `scheme://host[:port]` with no path (SPEC §1)."""
    parts = urlsplit(iss)
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.path
        or parts.query
        or parts.fragment
        or parts.username
        or parts.password
        or iss != f"{parts.scheme}://{parts.netloc}"
    ):
        raise UsageError(f"iss must be an origin scheme://host[:port] with no path, got {iss!r}")


def _check_base_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise UsageError(f"public URL must be an http(s) URL without query, got {url!r}")


__all__ = ["MAX_BATCH", "AppendResult", "Log", "utc_day"]
