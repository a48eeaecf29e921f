"""Resolver-2 record issuance (SPEC §6 `/record`): a CR §6.3 record token for the newest
entry of a server that a published head covers, made from stored rows and signed; it writes
nothing.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from capability_anchor import jws
from capability_anchor.errors import NotFound, StoreError, UsageError
from capability_anchor.read.recordnote import not_found_note
from capability_anchor.record.rule import token_problem
from capability_anchor.record.urls import canonical_url

from .days import day_end, prev_day
from .marks import check_not_behind
from .serverindex import SERVER_MEMBERS, index_watermark, server_keys
from .trust import current_key

if TYPE_CHECKING:
    from .lifecycle import Log

DEFAULT_LIFETIME = 24 * 3600


def issue_record(
    log: Log, *, sub: str | None = None, url: str | None = None, lifetime: int = DEFAULT_LIFETIME
) -> dict[str, Any]:
    """`Log.record`: the signed record of the server `sub` or `url`; NotFound (saying why)
    without a covered entry, or when the newest covered one is no CR 0.2 token."""
    if (sub is None) == (url is None):
        raise UsageError("give exactly one of id and url")
    if not 0 < lifetime <= jws.MAX_RECORD_LIFETIME:
        raise UsageError(f"record lifetime must be 1..{jws.MAX_RECORD_LIFETIME} seconds")
    # Behind what it published, its newest entry may not be the world's: no token (§13.3).
    check_not_behind(log.data_dir)
    key = f"sub:{sub}" if sub is not None else f"url:{canonical_url(url)}"
    read, store = log.read, log.store
    indexed = store.server_entries(key)
    for day, index in indexed:
        if store.newest_covering(day, index) is None:
            continue  # not yet under a published head: an older entry may be
        entry = store.entry(day, index)
        accepted_at = store.accepted_at(day, index)
        if entry is None or accepted_at is None:
            raise StoreError(f"the server index names a missing entry {day}/{index}")
        claims = json.loads(entry.claims)
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
        answer = read.proof(day, index)
        iat = int(log.clock())  # the time first, then the key: no revocation is crossed
        signer = current_key(log)
        return jws.sign_record(
            claims,
            anchor=answer["anchor"],
            proof=answer["proof"],
            key=signer,
            iat=iat,
            lifetime=lifetime,
        )
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
