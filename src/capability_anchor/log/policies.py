"""The stored witness policies, vouched for by the log's key (issue #21, item 6): a signed
statement of every stored policy row, which the audit checks (docs/explanation/procedures.md).
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
