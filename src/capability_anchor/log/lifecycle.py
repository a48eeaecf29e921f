"""`Log`: the object a Python resolver embeds. Its lifecycle lives here (init, open, the
start-up self-check, close); every stage is delegated to its owner (`log/__init__.py`)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from capability_anchor import head as heads
from capability_anchor.envvars import TOKEN
from capability_anchor.errors import CapabilityAnchorError, Conflict, StartupCheckFailed, StoreError
from capability_anchor.files import tighten_modes
from capability_anchor.keys import KeySet, SigningKey, create_key_file, load_key_file, trust
from capability_anchor.log import policies as policytrust
from capability_anchor.log import trust as logtrust
from capability_anchor.note import origin_from_url, parse_policy
from capability_anchor.read.reader import LogReader
from capability_anchor.record import rule as observation
from capability_anchor.record.urls import check_base_url, check_origin
from capability_anchor.store import HISTORY_ORIGIN, HeadRow, StampRow, Store
from capability_anchor.store import open as stores

from . import serverindex
from .batch import AppendResult, Prepared, prepare_records
from .datafiles import KEY_FILE, MOVED_TO, check_restored, moved_message
from .days import Clock, utc_day
from .issuance import DEFAULT_LIFETIME, IssuedTokens, issue_record
from .signing import sign_missing
from .writer import LogWriter
from .writer_token import TOKEN_FILE, create_token_file, read_token_file, writer_token


class Log:
    """A capability-anchor log in a data dir.

    >>> log = Log.init(Path("data"), iss="https://resolver.example")   # once
    >>> log = Log.open(Path("data"))                                    # afterwards
    >>> [r.leaf_index for r in log.append([record1, record2])]
    >>> log.checkpoint()           # head document bytes, or None when today is empty
    >>> log.proof(day, 0)          # {"v", "anchor", "proof"} for resolver-2 records
    """

    def __init__(
        self, data_dir: Path, store: Store, key: SigningKey, clock: Clock, handoff: bool = False
    ) -> None:
        self.data_dir = data_dir
        self.store = store
        self.key = key
        self.clock = clock
        meta = store.meta()
        if "iss" not in meta or "first_day" not in meta:
            raise StoreError(f"{store.describe()} has no iss or first_day: not a complete log")
        self.iss = meta["iss"]
        self.first_day = meta["first_day"]
        self.index_chunk = serverindex.chunk_of(meta)
        self.public_url = meta.get("public_url") or self.iss
        self.config: dict[str, Any] = json.loads(meta.get("config", "{}"))
        self.records, self.id_namespace = observation.rules_of(self.config)
        self.read = LogReader(store, self)
        self.writer = LogWriter(self, handoff)
        self._trust_cache: tuple[object, trust.TrustChain] | None = None
        self._key_lock = threading.Lock()  # held while `trust.current_key` adopts a key
        self.issued = IssuedTokens()  # `/record` answers, per state (`log.issuance`)

    # --- lifecycle -------------------------------------------------------------------------

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
        policy: bytes | None = None,
        id_namespace: str | None = None,
        store: str | None = None,
    ) -> Log:
        """Create a new log (store, key, writer token), never over an existing one; `store`:
        the URL of another store to bind the data dir to (None: its own SQLite database)."""
        check_origin(iss)
        config = {**(config or {}), **observation.config_of(records, id_namespace)}
        if public_url is not None:
            check_base_url(public_url)
        data_dir = Path(data_dir)
        if stores.exists(data_dir):
            raise Conflict(f"a log already exists in {data_dir}; refusing to overwrite it")
        if store is not None and stores.exists(store):
            raise Conflict(
                f"a log already exists at {stores.describe(store)}; refusing to overwrite it"
            )
        if policy is not None:
            parse_policy(policy)  # a malformed policy is refused before anything is made
        # The key and token files; ones a crashed init left (no database) are taken over.
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        tighten_modes(data_dir, stores.own_files(data_dir))
        key_path, token_path = data_dir / KEY_FILE, data_dir / TOKEN_FILE
        key = load_key_file(key_path) if key_path.exists() else create_key_file(key_path)
        if token_path.exists():
            read_token_file(token_path)
        else:
            create_token_file(token_path)
        if TOKEN.is_set():
            writer_token(data_dir)  # the token the service would use instead: refuse it now
        if store is not None:
            stores.bind(data_dir, store)
        now = clock()
        if policy is not None:
            policytrust.check_policy(policy, policytrust.log_vkey(public_url or iss, key))

        stores.create(
            data_dir, lambda store: _fill(store, iss, public_url, config, key, policy, int(now))
        )
        return cls.open(data_dir, clock=clock)

    @classmethod
    def open(
        cls,
        data_dir: Path,
        *,
        clock: Clock = time.time,
        background_checkpoints: bool = True,
        handoff: bool = True,
    ) -> Log:
        """Open an existing log and run the start-up self-check (refuse to guess).
        `background_checkpoints`: run the store's background upkeep until `close`;
        `handoff`: writes go to a live sequencer (`log.handoff`), False only in it."""
        data_dir = Path(data_dir)
        store = stores.open(data_dir, upkeep=background_checkpoints)
        try:
            if (moved := store.meta().get(MOVED_TO)) is not None:  # `migrate` moved it away
                raise StoreError(moved_message(data_dir, moved))
            check_restored(data_dir)  # a log's database, without its key file beside it
            key = load_key_file(data_dir / KEY_FILE)
            log = cls(data_dir, store, key, clock, handoff)
            log.self_check()
            policytrust.vouch_unsigned(log)
            sign_missing(store, log.writer.lock, key, log.public_url)
        except BaseException:
            store.close()
            raise
        return log

    def close(self) -> None:
        self.writer.handoff.close()
        self.read.close()
        self.store.close()

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def self_check(self) -> None:
        """Refuse to run unless a trusted key verifies the newest head (of this `iss`) and
        the newest settings statement is the key file's and says what meta says."""
        newest = self.store.newest_published()
        if newest is not None:
            try:  # the plain claims beside the JWS are not compared here: the audit does
                verified = heads.verify_document(newest.doc, self.keyset()).head
            except CapabilityAnchorError as exc:
                raise StartupCheckFailed(
                    f"the configured key (kid {self.key.kid}) does not verify the newest "
                    f"published head ({newest.day}, size {newest.tree_size}, kid "
                    f"{newest.kid}): {exc}"
                ) from None
            if verified.claims["iss"] != self.iss:
                raise StartupCheckFailed(
                    f"the newest head's iss {verified.claims['iss']!r} is not the log's "
                    f"{self.iss!r}"
                )
        logtrust.check_settings(self)

    # --- small accessors -------------------------------------------------------------------

    def today(self) -> str:
        return utc_day(self.clock())

    def keyset(self) -> KeySet:
        """The key file's key and every key rotation records chain to from it."""
        return logtrust.trusted_chain(self).keys

    def set_policy(self, text: bytes) -> None:
        """Store a new (checked) witness policy, signed with the others (`log.policies`)."""
        with self.writer.lock, self.store.write():
            key = self.signing_key()  # a rotation another process activated is followed
            policytrust.store_policy(self.store, key, self.iss, text, int(self.clock()))

    def published_keys(self) -> KeySet:
        """What `/keys` and keys.json list: `keyset()` without the revoked keys."""
        return trust.published_keys(logtrust.trusted_chain(self))

    def signing_key(self) -> SigningKey:
        """The key to sign with now (adopting a rotation another process activated)."""
        return logtrust.current_key(self)

    def writer_token(self) -> str:
        """The checked writer token (see `log.writer_token`: TokenError when unusable)."""
        return writer_token(self.data_dir)

    # --- append, checkpoint, seal, stamp (the writer) -----------------------------------------

    def prepare(self, records: Sequence[object]) -> list[Prepared]:
        """Each record's (leaf_hash, leaf_bytes, server keys), or InvalidRecord (`.position`)."""
        return prepare_records(records, self.iss, self.records, self.id_namespace, now=self.clock())

    def append(self, records: Sequence[object]) -> list[AppendResult]:
        """Append a batch atomically: all records are stored, or none (and it raises)."""
        return self.append_prepared(self.prepare(records))

    def append_prepared(self, prepared: Sequence[Prepared]) -> list[AppendResult]:
        return cast(list[AppendResult], self.writer.append(prepared, False))

    def append_and_prove(self, prepared: Sequence[Prepared]) -> list[dict[str, Any]]:
        """Store a batch and sign a head covering it in ONE transaction (past days sealed
        first), and return each entry with that head's anchor and inclusion proof: if the
        commit fails nothing was stored and no head exists (`POST /records?prove=1`)."""
        return cast(list[dict[str, Any]], self.writer.append(prepared, True))

    def checkpoint(self) -> bytes | None:
        return self.writer.checkpoint()

    def seal(self, on_sealed: Callable[[bytes], None] | None = None) -> list[bytes]:
        return self.writer.seal(on_sealed)

    def stamp_targets(self) -> list[tuple[str, bytes, set[str]]]:
        """(day, compact JWS, TSAs that stamped it) of every sealed head, oldest first."""
        with self.writer.lock:
            return [
                (
                    row.day,
                    heads.parse_document(row.doc).jws.encode("ascii"),
                    {s.tsa for s in self.store.stamps(row.day)},
                )
                for row in reversed(self.store.sealed_heads())
            ]

    def add_stamp(self, day: str, tsa: str, token: bytes, gen_time: str) -> bool:
        """Store a verified RFC 3161 reply for `day`'s sealed head unless this TSA already
        stamped it; returns whether it was stored (durably)."""
        with self.writer.lock, self.store.write():
            if self.store.sealed_head(day) is None:
                raise Conflict(f"day {day} is not sealed; only sealed heads are stamped")
            if any(s.tsa == tsa for s in self.store.stamps(day)):
                return False
            self.store.insert_stamp(StampRow(day, tsa, token, gen_time), int(self.clock()))
            return True

    # --- heads, proofs, listings, records (the read side) ------------------------------------

    def head_for(self, day: str, tree_size: int | None = None) -> HeadRow:
        return self.read.head_for(day, tree_size)

    def proof(self, day: str, leaf_index: int, tree_size: int | None = None) -> dict[str, Any]:
        return self.read.proof(day, leaf_index, tree_size)

    def proof_by_leaf_hash(
        self, leaf_hash: bytes, day: str | None = None, tree_size: int | None = None
    ) -> dict[str, Any]:
        return self.read.proof_by_leaf_hash(leaf_hash, day, tree_size)

    def consistency(self, day: str, first: int, second: int) -> dict[str, Any]:
        return self.read.consistency(day, first, second)

    def entries(self, day: str, start: int = 0, limit: int = 100) -> list[dict[str, Any]]:
        return self.read.entries(day, start, limit)

    def roots(self, before: str | None = None, limit: int = 100) -> dict[str, Any]:
        return self.read.roots(before, limit)

    def record(
        self, *, sub: str | None = None, url: str | None = None, lifetime: int = DEFAULT_LIFETIME
    ) -> dict[str, Any]:
        """A Capability Resolution §6.3 record (SPEC §6 `/record`): `log.issuance`."""
        found: dict[str, Any] = json.loads(issue_record(self, sub=sub, url=url, lifetime=lifetime))
        return found


def _fill(
    store: Store,
    iss: str,
    public_url: str | None,
    config: Mapping[str, Any],
    key: SigningKey,
    policy: bytes | None,
    now: int,
) -> None:
    """A new log's first transaction: its meta, its key, the settings it signs, its policy."""
    store.set_meta("iss", iss)
    store.set_meta("first_day", utc_day(now))
    store.set_meta(serverindex.INDEX_CHUNK_KEY, str(serverindex.INDEX_CHUNK))
    store.set_meta("created", str(now))
    if public_url:
        store.set_meta("public_url", public_url.rstrip("/"))
    # Fixed now for the log's life, whatever the public URL becomes (SPEC §12.2).
    store.set_meta(HISTORY_ORIGIN, origin_from_url(public_url or iss))
    store.set_meta("config", json.dumps(dict(config), sort_keys=True))
    store.add_key(key.kid, json.dumps(key.public.jwk(), sort_keys=True), now)
    # The settings are vouched for by the key from the log's first transaction on.
    settings = trust.sign_settings(store.meta(), key, reason="init", iat=now)
    store.add_settings(key.kid, settings, now)
    if policy is not None:
        policytrust.store_policy(store, key, iss, policy, now)
