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
from .trust import signer

if TYPE_CHECKING:
    from .lifecycle import Log

DEFAULT_LIFETIME = 24 * 3600


def issue_record(
    log: Log, *, sub: str | None = None, url: str | None = None, lifetime: int = DEFAULT_LIFETIME
) -> dict[str, Any]:
    """`Log.record`: the record of the server given by `sub`, or by canonical `url`, with its
    `expires` time and compact `jws`. NotFound, with a note saying why, when no published
    head covers an entry of it, or when the newest covered one breaks a rule of CR 0.2 tokens
    (`record.rule.token_problem`, with the time of acceptance stored with the entry, never
    later than the end of its day)."""
    if (sub is None) == (url is None):
        raise UsageError("give exactly one of id and url")
    if not 0 < lifetime <= jws.MAX_RECORD_LIFETIME:
        raise UsageError(f"record lifetime must be 1..{jws.MAX_RECORD_LIFETIME} seconds")
    # Behind what it published, the log's newest entry of a server may be older than the
    # newest one the world saw: no token (SPEC §13.3, the log signs nothing).
    check_not_behind(log.data_dir)
    key = f"sub:{sub}" if sub is not None else f"url:{canonical_url(url)}"
    read = log.read
    indexed = read.server_entries(key)
    for day, index in indexed:
        if read.newest_covering(day, index) is None:
            continue  # not yet under a published head: an older entry may be
        entry = read.entry(day, index)
        accepted_at = read.accepted_at(day, index)
        if entry is None or accepted_at is None:
            raise StoreError(f"the server index names a missing entry {day}/{index}")
        claims = json.loads(entry.claims)
        if key not in server_keys(claims):
            continue  # indexed under the same digest as another key (schema 5 stores digests)
        # Never a token that is not a CR 0.2 token (SPEC §13.1), whatever rule stored the
        # entry, and never an older observation in place of the newest: 404 naming the rule.
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
        signing_key, iat = signer(log)
        return jws.sign_record(
            claims,
            anchor=answer["anchor"],
            proof=answer["proof"],
            key=signing_key,
            iat=iat,
            lifetime=lifetime,
        )
    today = log.today()
    days = (today, prev_day(today))
    tails = []
    for day in days:
        newest = read.newest_head(day)
        tails.append(
            (
                day,
                index_watermark(
                    0 if newest is None else newest.tree_size, read.day_size(day), log.index_chunk
                ),
            )
        )
    raise NotFound(
        not_found_note(
            read, key, indexed=bool(indexed), days=days, needs=SERVER_MEMBERS, tails=tails
        )
    )
