"""The stored witness policies, vouched for by the log's key (issue #21, item 6): a signed
statement of every stored policy row, which the audit checks (docs/explanation/procedures.md).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from capability_anchor import jws
from capability_anchor.errors import CapabilityAnchorError, MalformedPolicy
from capability_anchor.keys import KeySet, SigningKey
from capability_anchor.note import (
    TYPE_ED25519,
    Policy,
    PolicyWitness,
    format_vkey,
    origin_from_url,
    parse_policy,
)
from capability_anchor.store import Store

if TYPE_CHECKING:
    from . import Log

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
    """Store a new witness policy and sign every stored one (the only writer of `policies`)."""
    store.set_policy(text, now)
    sign_policies(store, key, iss, now)


def vouch_unsigned(log: Log) -> None:
    """A log whose policies were stored before they were signed: sign them now."""
    if not log.store.policy() or POLICIES_META in log.store.meta():
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


# --- the policy file, checked against the log ------------------------------------------------


def check_policy(data: bytes, log_vkey: str | Sequence[str]) -> Policy:
    """The policy in DATA, or MalformedPolicy; `log_vkey`: the log's vkey(s), current first."""
    policy = parse_policy(data)
    vkeys = (log_vkey,) if isinstance(log_vkey, str) else tuple(log_vkey)
    for entry in policy.logs:
        if entry.verifier.vkey() not in vkeys:
            raise MalformedPolicy(
                f"the policy's log line names the key {entry.verifier.vkey()}, but this "
                f"log's key is {vkeys[0]}: a log line, if present, must be the log's own vkey"
            )
    named = [entry.verifier.vkey() for entry in policy.logs]
    if named and vkeys[0] not in named:
        raise MalformedPolicy(
            f"the policy's log lines name the keys {', '.join(named)}, but this log's key is "
            f"{vkeys[0]}: add `log {vkeys[0]}` to the policy (`capability-anchor policy FILE`)"
        )
    for witness in submitted_to(policy):
        url = witness.url or ""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise MalformedPolicy(f"witness {witness.name}: {url!r} is not an http(s):// URL")
        if parts.query or parts.fragment or url.endswith(("?", "#")):
            raise MalformedPolicy(
                f"witness {witness.name}: a submission prefix has no query or fragment: {url!r}"
            )
    return policy


def submitted_to(policy: Policy) -> list[PolicyWitness]:
    """The witnesses the log submits to: those with a URL, in policy order."""
    return [w for w in policy.witnesses if w.url is not None]


def log_vkey(public_url: str, key: SigningKey) -> str:
    """The vkey a log with this public URL and key will have (SPEC §12.2; `init`)."""
    return format_vkey(origin_from_url(public_url), TYPE_ED25519, key.public.raw)


def stored_policy(log: Log) -> Policy | None:
    """The data dir's policy, checked again against the log's note keys now, or None."""
    with log.store.read():
        text = log.store.policy()
    if text is None:
        return None
    return check_policy(text, log.read.history.vkeys())
