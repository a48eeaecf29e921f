"""The log's witness policy (SPEC §12.3): a C2SP tlog-policy file, checked against this log
before it is stored (a `log` line must be one of the log's own vkeys, the current one among
them), and the witnesses the log submits to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from capability_anchor.errors import MalformedPolicy
from capability_anchor.note import (
    TYPE_ED25519,
    Policy,
    PolicyWitness,
    format_vkey,
    origin_from_url,
    parse_policy,
)

if TYPE_CHECKING:
    from capability_anchor.keys import SigningKey


def check_policy(data: bytes, log_vkey: str | Sequence[str]) -> Policy:
    """The parsed policy in DATA, or MalformedPolicy (a usage error, exit 2) saying why.
    `log_vkey` is the log's vkey, or its vkeys with the current one first."""
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
    for witness in policy.witnesses:
        if witness.url is not None:
            _check_url(witness)
    return policy


def _check_url(witness: PolicyWitness) -> None:
    url = witness.url or ""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise MalformedPolicy(f"witness {witness.name}: {url!r} is not an http(s):// URL")
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise MalformedPolicy(
            f"witness {witness.name}: a submission prefix has no query or fragment: {url!r}"
        )


def submitted_to(policy: Policy) -> list[PolicyWitness]:
    """The witnesses the log submits to: those with a URL, in policy order."""
    return [w for w in policy.witnesses if w.url is not None]


def log_vkey(public_url: str, key: SigningKey) -> str:
    """The vkey a log with this URL and key will have (SPEC §12.2), for `init`."""
    return format_vkey(origin_from_url(public_url), TYPE_ED25519, key.public.raw)
