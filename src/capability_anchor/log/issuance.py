"""Resolver-2 record issuance (SPEC §6 `/record`): a CR §6.3 record token for the newest
entry of a server that a published head covers, made from stored rows and signed; it writes
nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from capability_anchor import jws, strictjson
from capability_anchor.errors import NotFound, StoreError, UsageError
from capability_anchor.read.recordnote import not_found_note
from capability_anchor.record.rule import token_problem
from capability_anchor.record.urls import canonical_url

from .days import day_end, prev_day
from .marks import check_not_behind
from .serverindex import SERVER_MEMBERS, index_watermark, server_keys
from .trust import current_key

if TYPE_CHECKING:
    from capability_anchor.store import HeadRow
    from capability_anchor.store.sql.heads import RecordSource

    from .lifecycle import Log

DEFAULT_LIFETIME = 24 * 3600
KEPT_TOKENS = 4096  # ~2 KB each: a few MB per process
KEPT_DAYS = 1024  # days' newest heads kept under one change mark (a few KB each)
REUSE_WITHIN = 300  # s of a token's lifetime that may be gone when it is served again

State = tuple[str, int, int, bool, str, int]  # day, index, head size, sealed, kid, lifetime


@dataclass(frozen=True, slots=True)
class Issued:
    state: State
    exp: int
    answer: bytes


class IssuedTokens:
    """The newest answer this process signed for each server (an LRU of `size` servers): served
    again only for the same state (entry, newest head, current key, lifetime) while its
    remaining lifetime is at least max(90% of it, it less `REUSE_WITHIN`) (issue #37)."""

    def __init__(self, size: int = KEPT_TOKENS) -> None:
        self.size = size
        self._kept: OrderedDict[str, Issued] = OrderedDict()
        self._lock = threading.Lock()  # read threads share it
        # (the store's change mark, the newest settings kid, day -> its newest head) as one
        # `record_sources` read them under that mark (`_sources`).
        self.under: tuple[object, str | None, dict[str, HeadRow | None]] | None = None

    def get(self, server: str, state: State, now: float) -> bytes | None:
        lifetime = state[-1]
        with self._lock:
            found = self._kept.get(server)
            if found is None or found.state != state:
                return None
            if not max(0.9 * lifetime, lifetime - REUSE_WITHIN) <= found.exp - now <= lifetime:
                return None
            self._kept.move_to_end(server)
            return found.answer

    def put(self, server: str, issued: Issued) -> None:
        with self._lock:
            self._kept[server] = issued
            self._kept.move_to_end(server)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)

    def __len__(self) -> int:
        return len(self._kept)


def _sources(log: Log, key: str) -> list[RecordSource]:
    """`store.record_sources(key)`. While the store's change mark is the one its heads and kid
    were read under (nothing committed since), only the index and the entries are read
    (`record_entries`) and the kept heads and kid added (decisions/37-record5.md)."""
    store, issued = log.store, log.issued
    mark = store.change_mark()  # before the rows: a commit after this read moves it
    under = issued.under
    if mark is None or under is None or under[0] != mark:
        under = None
    else:
        _, kid, heads = under
        rows = store.record_entries(key)
        if all(day in heads for day, _, _ in rows):
            return [(day, index, heads[day], found, kid) for day, index, found in rows]
    indexed = store.record_sources(key)
    if mark is not None and indexed:
        heads = {} if under is None or len(under[2]) >= KEPT_DAYS else dict(under[2])
        heads.update((day, head) for day, _, head, _, _ in indexed)
        issued.under = (mark, indexed[0][4], heads)
    return indexed


def issue_record(
    log: Log, *, sub: str | None = None, url: str | None = None, lifetime: int = DEFAULT_LIFETIME
) -> bytes:
    """`Log.record`'s answer, RFC 8785: the signed record of the server `sub` or `url`;
    NotFound (saying why) without a covered entry, or when the newest covered one is no CR
    0.2 token. The same state is answered from `log.issued` (`IssuedTokens`)."""
    if (sub is None) == (url is None):
        raise UsageError("give exactly one of id and url")
    if not 0 < lifetime <= jws.MAX_RECORD_LIFETIME:
        raise UsageError(f"record lifetime must be 1..{jws.MAX_RECORD_LIFETIME} seconds")
    # Behind what it published, its newest entry may not be the world's: no token (§13.3).
    check_not_behind(log.data_dir)
    key = f"sub:{sub}" if sub is not None else f"url:{canonical_url(url)}"
    read, store = log.read, log.store
    now = log.clock()  # the time first, then the key: no revocation is crossed
    indexed = _sources(log, key)
    for day, index, head, found, kid in indexed:
        # The day's newest head covers the entry exactly when any of its heads does.
        if head is None or index >= head.tree_size:
            continue  # not yet under a published head: an older entry may be
        signer = current_key(log, kid)
        state = (day, index, head.tree_size, head.sealed, signer.kid, lifetime)
        kept = log.issued.get(key, state, now)
        if kept is not None:
            return kept
        if found is None:
            raise StoreError(f"the server index names a missing entry {day}/{index}")
        stored, accepted_at = found
        written, claims = strictjson.members(stored)  # one pass: its members and its claims
        if key not in server_keys(claims):
            continue  # indexed under the same digest as another key (schema 5 stores digests)
        # Only CR 0.2 tokens (SPEC §13.1), never an older entry in place of the newest.
        problem = token_problem(
            claims, accepted_at=min(accepted_at, day_end(day)), namespace=log.id_namespace
        )
        if problem is not None:
            what = "id" if sub is not None else "url"
            raise NotFound(
                f"the newest entry with that {what} that a published head covers ({day} "
                f"#{index}) is no Capability Resolution 0.2 record (SPEC §13.1), so /record "
                f"signs no token for it: {problem}"
            )
        written["anchor"], written["proof"] = read.record_members(head, index)
        iat = int(now)
        signed = jws.record_answer(written, key=signer, iat=iat, lifetime=lifetime)
        log.issued.put(key, Issued(state, iat + lifetime, signed))
        return signed
    today = log.today()
    days = (today, prev_day(today))
    tails = []
    for day in days:
        size = 0 if (newest := store.newest_head(day)) is None else newest.tree_size
        tails.append((day, index_watermark(size, store.day_size(day), log.index_chunk)))
    raise NotFound(
        not_found_note(
            read, key, indexed=bool(indexed), days=days, needs=SERVER_MEMBERS, tails=tails
        )
    )
