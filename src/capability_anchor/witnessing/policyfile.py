"""The log's witness policy (SPEC §12.3): a C2SP tlog-policy file, checked against this log
before it is stored, and the witnesses the log submits to.

    policy = check_policy(Path("policy.txt").read_bytes(), log_vkey)   # or MalformedPolicy
    policy = check_policy(text, *note_keys(log))   # across a rotation: current, all trusted
    submitted = submitted_to(policy)        # the witnesses with a URL, in policy order

`log` lines, if present, must be the log's own vkeys (a policy naming another log's key
would tell verifiers to trust a key this log never signs with): the current note key among
them, and the others keys this log trusts (during a rotation's overlap the policy lists the
old and the new key, SPEC §13.2). A witness URL is the witness's submission prefix:
http:// or https://, a host, no query or fragment.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..errors import MalformedPolicy
from ..note import TYPE_ED25519, Policy, PolicyWitness, format_vkey, origin_from_url, parse_policy

if TYPE_CHECKING:
    from ..keys import SigningKey
    from ..log import Log


def check_policy(data: bytes, log_vkey: str, trusted: Collection[str] = ()) -> Policy:
    """The parsed policy in DATA, or MalformedPolicy (a usage error, exit 2) saying why.
    LOG_VKEY is the log's current note key; TRUSTED its other note keys (the keys it
    rotated from, and the next one it published), which a `log` line may also name."""
    policy = parse_policy(data)
    named = [entry.verifier.vkey() for entry in policy.logs]
    for vkey in named:
        if vkey != log_vkey and vkey not in trusted:
            raise MalformedPolicy(
                f"the policy's log line names the key {vkey}, but this log's key is "
                f"{log_vkey}: a log line, if present, must be the log's own vkey (or a key "
                "it rotated from or to)"
            )
    if named and log_vkey not in named:
        raise MalformedPolicy(
            f"the policy's log lines name the keys {', '.join(named)}, but this log's key is "
            f"{log_vkey}: add `log {log_vkey}` to the policy (`capability-anchor policy FILE`)"
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


def note_keys(log: Log) -> tuple[str, frozenset[str]]:
    """The log's current note key (the one signing checkpoints now) and every note key it
    trusts (`Log.keyset`: the current key and the chain of rotation records), as vkeys, read
    now: a running process follows a rotation at its next call."""
    history = log.read.history
    origin = history.origin()
    trusted = frozenset(format_vkey(origin, TYPE_ED25519, k.raw) for k in log.keyset())
    return history.vkey(), trusted


def log_vkey(public_url: str, key: SigningKey) -> str:
    """The vkey a log with this public URL and key will have (SPEC §12.2), for a policy
    checked before the log exists (`init --witness-policy`)."""
    return format_vkey(origin_from_url(public_url), TYPE_ED25519, key.public.raw)
