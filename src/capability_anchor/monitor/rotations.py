"""Before step 1 of a monitor run (`follow.py`): the log's key records (SPEC §13.2), so a
monitor that trusts the log's keys follows an endorsed rotation without an alarm.

The records come from `keys/records` (an export folder's `key-records.json`). A key is
trusted when a chain of records leads to it from `--keys` (`trust.closure`), and each key
the monitor newly follows is noted once (`{"note": "key_rotation", ...}`, remembered in its
state's `rotations`). Revocations among the records are handed to the head rules: a head
signed by a revoked key after its revocation time is `key_revoked_signature`. A log without
the resource (older versions) has no records: the keys are `--keys` as before.
"""

from __future__ import annotations

from typing import Any

from .. import trust
from ..errors import ClaimsError, InputError
from ..keys import KeySet
from .source import LogSource
from .state import MonitorState

KEY_RECORDS_PATH = "keys/records"


def follow_keys(
    source: LogSource, keys: KeySet, state: MonitorState, findings: list[dict[str, Any]]
) -> trust.TrustChain:
    """The closure of `keys` over the log's published records; a note in `findings` for
    each key followed for the first time (added to `state.rotations`, committed with the
    state)."""
    data = source.read(KEY_RECORDS_PATH)
    if data is None:
        return trust.TrustChain(keys)
    try:
        iss, tokens = trust.read_key_records(data)
    except ClaimsError as exc:
        raise InputError(f"{source.where}/{KEY_RECORDS_PATH}: {exc}") from None
    chain = trust.closure(keys, tokens, iss=iss)
    notes = findings
    for _, record in sorted(chain.records.items()):
        kid = record.key.kid
        if kid in keys or kid in state.rotations:
            continue
        state.rotations.append(kid)
        notes.append(
            {
                "note": "key_rotation",
                "kid": kid,
                "endorsed_by": record.signer,
                "detail": f"the log's key records endorse key {kid} (signed by "
                f"{record.signer}): followed as one of the log's keys",
            }
        )
    for kid, revocation in chain.revocations.items():
        mark = f"revoked:{kid}"
        if mark not in state.rotations:
            state.rotations.append(mark)
            notes.append(
                {
                    "note": "key_revoked",
                    "kid": kid,
                    "revoked_at": revocation.revoked_at,
                    "detail": revocation.describe(),
                }
            )
    return chain
