"""Key trust and signed settings of a log: trust comes only from the key file; a `keys` row
is trusted only when rotation records chain to it from the key file's key, so whoever can
write the database but not read the key file can add rows, never trust.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from capability_anchor import jws, strictjson
from capability_anchor.encoding import b64url_decode
from capability_anchor.errors import CapabilityAnchorError, StartupCheckFailed
from capability_anchor.keys import KeySet, SigningKey, load_key_file, trust
from capability_anchor.keys.trust import voided
from capability_anchor.note import TYPE_ED25519, key_id, parse_note
from capability_anchor.store import HISTORY_ORIGIN, SETTINGS_UNSIGNED, HeadRow

from .policies import POLICIES_META

if TYPE_CHECKING:
    from capability_anchor.log import Log

KEY_FILE = "signing-key.jwk"
NEW_KEY_FILE = "signing-key.jwk.new"
_events = logging.getLogger("capability_anchor.heads")  # who signs them


def backup_name(kid: str) -> str:
    """Where `rotate-key` keeps a retired private key (mode 0600, as the key file was)."""
    return f"signing-key.{kid}.jwk"


def trusted_chain(log: Log) -> trust.TrustChain:
    """The key file's key closed over the stored records (revoked keys included), cached
    until the records (append-only) or the key change."""
    records = log.store.key_records()
    cached = log._trust_cache
    marker = (log.key.kid, len(records), records[-1][0] if records else 0)
    if cached is not None and cached[0] == marker:
        return cached[1]
    found = trust.closure([log.key.public], [r[3] for r in records], iss=log.iss)
    log._trust_cache = (marker, found)
    return found


# --- which key signs now ---------------------------------------------------------------------


def current_key(log: Log, newest_kid: str | None = None) -> SigningKey:
    """The key that signs the store's newest settings statement: one another process
    activated is adopted once it verifies that statement; else StartupCheckFailed.
    `newest_kid`: that statement's kid as the caller just read it (`/record`), if ours."""
    key = log.key
    if newest_kid == key.kid:
        return key
    newest = log.store.newest_settings()  # one primary-key lookup
    if newest is None or newest[1] == key.kid:
        return key
    _, kid, token = newest
    with log._key_lock:
        if log.key.kid == kid:
            return log.key
        # The key file last again: `rotate-key` renames the new file over it between our
        # two reads (the old key read, the new file gone), and a rename is atomic.
        for name in (KEY_FILE, NEW_KEY_FILE, KEY_FILE):
            try:
                candidate = load_key_file(log.data_dir / name)
            except (OSError, CapabilityAnchorError):
                continue
            if candidate.kid != kid:
                continue
            try:
                trust.verify_settings(token, KeySet.of(candidate.public))
            except CapabilityAnchorError:
                break
            _events.info("key rotation: this process now signs with %s (was %s)", kid, log.key.kid)
            log.key = candidate
            return candidate
    raise StartupCheckFailed(
        f"the log's newest settings statement is signed by key {kid}, which this process "
        f"cannot load (its key is {log.key.kid}); nothing is signed until "
        "`capability-anchor rotate-key --activate` has finished"
    )


# --- the settings statement ------------------------------------------------------------------


def settings_problems(log: Log) -> list[str]:
    """What is wrong with the stored settings statements (none, the newest not the key
    file's or not meta, an older one signed by no trusted key)."""
    statements = log.store.settings_statements()
    if not statements:
        return ["the log has no signed settings statement (meta is not vouched for)"]
    problems: list[str] = []
    *older, (newest_id, _, newest) = statements
    try:
        signed = trust.verify_settings(newest, KeySet.of(log.key.public))
    except CapabilityAnchorError as exc:
        problems.append(
            f"settings statement #{newest_id} (the newest) is not signed by the key file's "
            f"key {log.key.kid}: {exc}"
        )
    else:
        problems += [
            f"settings statement #{newest_id}: {d}"
            for d in trust.settings_differences(signed, log.store.meta())
        ]
    keys = log.keyset()
    for number, _, token in older:
        try:
            trust.verify_settings(token, keys)
        except CapabilityAnchorError as exc:
            problems.append(f"settings statement #{number}: {exc}")
    return problems


def sign_settings(log: Log, key: SigningKey, reason: str) -> None:
    """Store a settings statement of the current meta signed by `key` (inside a write)."""
    meta = log.store.meta()
    now = int(log.clock())  # one reading: the row's `added` is the statement's `iat`
    token = trust.sign_settings(meta, key, reason=reason, iat=now)
    log.store.add_settings(key.kid, token, now)


def check_settings(log: Log) -> None:
    """Start-up: the newest settings statement is the key file's and says what meta says;
    only the `SETTINGS_UNSIGNED` mark of an upgrade has unsigned settings signed now."""
    if SETTINGS_UNSIGNED in log.store.meta():
        with log.store.write():
            if not log.store.settings_statements():
                sign_settings(log, log.key, "upgrade")
            log.store.clear_meta(SETTINGS_UNSIGNED)
    problems = settings_problems(log)
    if problems:
        hint = ""
        if (log.data_dir / NEW_KEY_FILE).exists():
            hint = (
                " (a key rotation was interrupted: run `capability-anchor rotate-key --activate`)"
            )
        raise StartupCheckFailed("; ".join(problems) + hint)


# --- what the audit reports ------------------------------------------------------------------


def trust_problems(log: Log) -> list[str]:
    """The audit of `keys` rows, rotation records, settings statements and their `added`."""
    records = log.store.key_records()
    found = trust.closure([log.key.public], [r[3] for r in records], iss=log.iss)
    problems = [f"key record #{records[p][0]}: {m}" for p, m in sorted(found.problems.items())]
    for position, record in sorted(found.records.items()):
        number, signer, kid, _ = records[position]
        if (signer, kid) != (record.signer, record.key.kid):
            problems.append(
                f"key record #{number}: stored as {signer} -> {kid}, it says "
                f"{record.signer} -> {record.key.kid}"
            )
    listed: set[str] = set()
    for kid, jwk in log.store.signing_keys():
        listed.add(kid)
        try:
            key = KeySet.from_jwks({"keys": [json.loads(jwk)]}, require_thumbprints=True).get(kid)
        except (ValueError, CapabilityAnchorError) as exc:
            problems.append(f"keys table: the key stored as {kid} is not a valid JWK: {exc}")
            continue
        if key.kid not in found.keys:
            problems.append(
                f"keys table: key {kid} has no endorsement chain from the key file's key "
                f"{log.key.kid} (not trusted, not served, not exported)"
            )
    for kid in found.keys.kids:
        if kid not in listed:
            problems.append(f"keys table: trusted key {kid} is not listed")
    problems += settings_problems(log)
    for number, kid, token in log.store.settings_statements():
        # The column is what rotation dates a revocation by; the header is what was signed.
        try:
            signed_kid = jws.unverified_header(token).get("kid")
        except CapabilityAnchorError:
            continue  # an unreadable statement is reported by `settings_problems`
        if isinstance(signed_kid, str) and signed_kid != kid:
            problems.append(
                f"settings statement #{number}: the kid column says {kid!r}, "
                f"its JWS header {signed_kid!r}"
            )
    return problems + _added_problems(log, records)


def _added_problems(log: Log, records: list[tuple[int, str, str, str]]) -> list[str]:
    """`added` beside each statement and record is read with its `iat`: they must agree."""
    problems: list[str] = []
    added = log.store.added_times()
    signed = {
        "settings": [(i, token) for i, _, token in log.store.settings_statements()],
        "key_records": [(i, token) for i, _, _, token in records],
    }
    for table, rows in signed.items():
        for number, token in rows:
            try:
                iat = strictjson.loads(b64url_decode(token.split(".")[1]))["iat"]
            except (IndexError, KeyError, TypeError, ValueError, CapabilityAnchorError):
                continue  # an unreadable token is reported by the checks of its own
            if added[table].get(number) != iat:
                problems.append(
                    f"{table} #{number}: stored as added at {added[table].get(number)}, "
                    f"signed at iat {iat}"
                )
    return problems


Dated = tuple[str, str, int]  # what was signed, by which kid, at which iat


def late_signature_problems(log: Log, all_heads: Sequence[HeadRow]) -> list[str]:
    """Every kept signature (heads, history checkpoints, statements) a revoked key made
    after its `revoked_at` (SPEC §13.2)."""
    revoked = trusted_chain(log).revocations
    if not revoked:
        return []
    return [
        f"{what}: signed at iat {iat}, after its key's revocation: {gone.describe()}"
        for what, kid, iat in (*_head_signatures(log, all_heads, revoked), *_statements(log))
        if (gone := voided(revoked, kid, iat)) is not None
    ]


def _head_signatures(
    log: Log, all_heads: Sequence[HeadRow], revoked: Iterable[str]
) -> Iterator[Dated]:
    """Each head, and each history checkpoint a revoked key signed, dated."""
    history = sorted(all_heads, key=lambda h: (h.day, h.sealed, h.tree_size))
    for row in history:
        state = "sealed" if row.sealed else "unsealed"
        yield f"head {row.day} size {row.tree_size} {state}", row.kid, row.iat
    origin = log.store.meta().get(HISTORY_ORIGIN)
    if origin is None or not history:
        return
    wanted = set(revoked)
    by_id = {key_id(origin, TYPE_ED25519, k.raw): k.kid for k in log.keyset() if k.kid in wanted}
    dates = list(itertools.accumulate((h.iat for h in history), max))
    for size, note in log.store.iter_checkpoints():
        try:
            signatures = parse_note(note).signatures if 0 < size <= len(dates) else []
        except CapabilityAnchorError:
            continue  # reported by the checkpoint audit, as a size beyond the history is
        for signature in signatures:
            if signature.key_id in by_id:
                yield f"history checkpoint {size}", by_id[signature.key_id], dates[size - 1]


def _statements(log: Log) -> Iterator[Dated]:
    """The settings statements and the policies' statement, dated by their `iat`."""
    signed = [(f"settings statement #{n}", t) for n, _, t in log.store.settings_statements()]
    statement = log.store.meta().get(POLICIES_META)
    if statement is not None:
        signed.append((f"meta.{POLICIES_META}", statement))
    for what, token in signed:
        try:
            kid = jws.unverified_header(token).get("kid")
            iat = strictjson.loads(b64url_decode(token.split(".")[1]))["iat"]
        except (IndexError, KeyError, TypeError, ValueError, CapabilityAnchorError):
            continue  # an unreadable statement is reported by the checks of its own
        if isinstance(kid, str) and strictjson.is_int(iat):
            yield what, kid, int(iat)


# --- an exported folder ----------------------------------------------------------------------


def audit_key_records(problems: list[str], folder: Path, keys: KeySet) -> KeySet:
    """Check the folder's `key-records.json` against `keys` and keys.json; returns `keys`
    extended by its records (what the folder's heads are checked with)."""
    path = folder / trust.KEY_RECORDS_FILE
    if not path.exists():
        return keys
    try:
        iss, tokens = trust.read_key_records(path.read_bytes())
    except CapabilityAnchorError as exc:
        problems.append(f"{path}: {exc}")
        return keys
    found = trust.closure(keys, tokens, iss=iss)
    for position, message in sorted(found.problems.items()):
        problems.append(f"{path}: record {position}: {message}")
    try:
        index_iss = json.loads((folder / "index.json").read_bytes()).get("iss")
    except (OSError, ValueError, AttributeError):
        index_iss = None  # index.json's own problems are reported by its check
    if index_iss is not None and index_iss != iss:
        problems.append(f"{path}: iss {iss!r} is not index.json's {index_iss!r}")
    try:
        published = KeySet.from_json((folder / "keys.json").read_bytes())
    except (OSError, CapabilityAnchorError):
        return found.keys
    unlisted = [k for k in found.keys.kids if k not in published and k not in found.revocations]
    if unlisted:
        problems.append(f"{path} endorses key(s) {unlisted} that keys.json does not list")
    return found.keys


def folder_trust_problems(folder: Path, log: Log) -> list[str]:
    """keys.json is the log's trusted set, key-records.json its records (or a prefix)."""
    problems: list[str] = []
    trusted = log.keyset()
    try:
        published = KeySet.from_json((folder / "keys.json").read_bytes())
    except (OSError, CapabilityAnchorError):
        published = None  # reported by the folder's own checks
    if published is not None:
        extra = [kid for kid in published.kids if kid not in trusted]
        if extra:
            problems.append(
                f"{folder / 'keys.json'} holds key(s) {extra} that the log does not trust "
                f"(no endorsement chain from the key file's key {log.key.kid})"
            )
    path = folder / trust.KEY_RECORDS_FILE
    tokens = [token for _, _, _, token in log.store.key_records()]
    if path.exists():
        try:
            iss, published_tokens = trust.read_key_records(path.read_bytes())
        except CapabilityAnchorError:
            return problems  # reported by audit_key_records
        if iss != log.iss or published_tokens != tokens[: len(published_tokens)]:
            problems.append(f"{path} differs from the log's key rotation records")
    elif tokens and published == trusted:  # keys.json is current, its records are not
        problems.append(f"{path} is missing (the log has key rotation records)")
    return problems
