"""The stored witness policies, vouched for by the log's key (issue #21, item 6).

The `policies` table is append-only by its triggers, but whoever can write `log.sqlite3`
can drop a trigger, change a row and put the trigger back. Nothing else in the store
would show it: a cosignature row names its witness, and a replaced policy text can name
other witnesses or other keys. So every time a policy is stored, the log signs, with its
key, a statement of all stored policies so far:

    {"iss": ..., "policies": <how many>, "digest": <hex>, "iat": <when>}

where `digest` is SHA-256 over the JSON list `[[id, added, sha256(text) hex], ...]` of
every row, oldest first. It is kept in `meta` under `policies_signed` (a JWS of typ
`capability-anchor-policies+jws`; no schema change). The audit verifies it with the log's
trusted keys and recomputes the digest: a replaced, added or deleted policy row, or a
changed `added` time (which decides which policy was in force when a cosignature was
stored), is named.

What it cannot show: the whole witness configuration rolled back to an earlier signed
state (an older statement put back with the policy rows it covered), since a statement
says nothing of the time after it. A log that stored policies before this statement
existed gets one at its next writer's open (`vouch_unsigned`): the key-file holder vouches
for the policies as they are then, as for the settings at an upgrade.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from capability_anchor import jws
from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.keys import KeySet, SigningKey
from capability_anchor.store import Store

if TYPE_CHECKING:
    from capability_anchor.log import Log

POLICIES_META = "policies_signed"
POLICIES_TYP = "capability-anchor-policies+jws"


def digest(rows: list[tuple[int, int, bytes]]) -> str:
    listed = [[i, added, hashlib.sha256(text).hexdigest()] for i, added, text in rows]
    return hashlib.sha256(json.dumps(listed, separators=(",", ":")).encode()).hexdigest()


def _claims(store: Store, iss: str) -> dict[str, Any]:
    rows = store.policy_rows()
    return {"iss": iss, "policies": len(rows), "digest": digest(rows)}


def sign_policies(store: Store, key: SigningKey, iss: str, now: int) -> None:
    """Sign the stored policies as they are now (inside the caller's write)."""
    token = jws.sign_claims({**_claims(store, iss), "iat": now}, key, POLICIES_TYP)
    store.set_meta(POLICIES_META, token)


def store_policy(store: Store, key: SigningKey, iss: str, text: bytes, now: int) -> None:
    """Store a new witness policy and sign every stored policy (inside the caller's write).
    Every writer of the `policies` table goes through here."""
    store.set_policy(text, now)
    sign_policies(store, key, iss, now)


def vouch_unsigned(log: Log) -> None:
    """A log whose policies were stored before they were signed: sign them now."""
    if not log.read.history.policy() or POLICIES_META in log.read.meta():
        return
    with log.writer.lock, log.store.write():
        if POLICIES_META not in log.store.meta():
            sign_policies(log.store, log.key, log.iss, int(log.clock()))


def policies_problems(store: Store, iss: str, keys: KeySet) -> list[str]:
    """What the audit says of the stored policies and their signed statement."""
    token = store.meta().get(POLICIES_META)
    want = _claims(store, iss)
    if token is None:
        if want["policies"] == 0:
            return []
        return [
            f"witnesses: {want['policies']} stored policies are not signed by the log "
            f"(meta {POLICIES_META} is missing)"
        ]
    try:
        signed = jws.verify_claims(token, keys, POLICIES_TYP)
    except CapabilityAnchorError as exc:
        return [f"witnesses: the signed statement of the stored policies does not verify: {exc}"]
    got = {name: signed.get(name) for name in want}
    if got != want:
        return [
            f"witnesses: the stored policies are not the ones the log signed ({got['policies']}"
            f" signed, {want['policies']} stored; a policy text replaced, added or deleted, "
            "or its time changed)"
        ]
    return []


__all__ = ["POLICIES_META", "policies_problems", "sign_policies", "store_policy", "vouch_unsigned"]
