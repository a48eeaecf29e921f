"""Resolver-2 record issuance (SPEC §6 `/record`): a Capability Resolution §6.3 record token
for the newest entry of a server that a published head covers.

The token's claims are the entry's leaf claims plus `iat`, `exp`, `anchor` and `proof`,
signed with the log's key (`jws.RECORD_TYP`). It is made from stored rows only, through the
read side, and writes nothing: issuing a record is not a stage of the log, it is a read
answered with a fresh signature.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .. import jws
from ..canonical import canonical_url
from ..errors import NotFound, StoreError, UsageError
from ..recordnote import not_found_note
from .days import prev_day
from .serverindex import SERVER_MEMBERS

if TYPE_CHECKING:
    from .lifecycle import Log

DEFAULT_LIFETIME = 24 * 3600


def issue_record(
    log: Log, *, sub: str | None = None, url: str | None = None, lifetime: int = DEFAULT_LIFETIME
) -> dict[str, Any]:
    """`Log.record`: the record of the server given by `sub`, or by canonical `url`, with its
    `expires` time and compact `jws`. NotFound, with a note saying why, when no published
    head covers an entry of it."""
    if (sub is None) == (url is None):
        raise UsageError("give exactly one of id and url")
    if not 0 < lifetime <= jws.MAX_RECORD_LIFETIME:
        raise UsageError(f"record lifetime must be 1..{jws.MAX_RECORD_LIFETIME} seconds")
    key = f"sub:{sub}" if sub is not None else f"url:{canonical_url(url)}"
    read = log.read
    indexed = read.server_entries(key)
    for day, index in indexed:
        if read.newest_covering(day, index) is None:
            continue  # not yet under a published head: an older entry may be
        entry = read.entry(day, index)
        if entry is None:
            raise StoreError(f"the server index names a missing entry {day}/{index}")
        answer = read.proof(day, index)
        return jws.sign_record(
            json.loads(entry.claims),
            anchor=answer["anchor"],
            proof=answer["proof"],
            key=log.key,
            iat=int(log.clock()),
            lifetime=lifetime,
        )
    today = log.today()
    days = (today, prev_day(today))
    raise NotFound(
        not_found_note(read, key, indexed=bool(indexed), days=days, needs=SERVER_MEMBERS)
    )
