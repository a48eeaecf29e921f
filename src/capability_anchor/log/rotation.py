"""`rotate-key` in two phases (SPEC §13.2, CR 0.2 §11), and `--compromised`. Each step
survives a crash and a rerun resumes (the phases: docs/explanation/procedures.md).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capability_anchor.encoding import utc_second
from capability_anchor.errors import CapabilityAnchorError, Conflict, KeyFileError, NotFound
from capability_anchor.files import fsync_dir
from capability_anchor.keys import (
    KeySet,
    PublicKey,
    SigningKey,
    create_key_file,
    load_key_file,
    trust,
)
from capability_anchor.keys.trust import (
    PendingRotation,
    make_pending_rotation,
    make_revocation,
    verify_pending_rotation,
)
from capability_anchor.log import policies as policytrust
from capability_anchor.note import TYPE_ED25519, format_vkey, origin_from_url, parse_policy
from capability_anchor.store import HISTORY_ORIGIN, Store
from capability_anchor.store import open as stores

from .days import Clock
from .trust import KEY_FILE, NEW_KEY_FILE, backup_name, sign_settings

if TYPE_CHECKING:
    from capability_anchor.log import Log

PENDING = "pending_rotation"  # the meta row holding the pending rotation's JWS
REVOKING = "revoking"  # the kid a committed `--compromised` activation has yet to revoke
DEFAULT_NOTICE = 3600

Opener = Callable[[Path], "Log"]


@dataclass(frozen=True)
class Published:
    """Phase 1 done: `kid` is published and may sign from `activate_at` on."""

    current_kid: str
    kid: str
    vkey: str
    published: int
    activate_at: int

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": "published",
            "current_kid": self.current_kid,
            "kid": self.kid,
            "vkey": self.vkey,
            "published": utc_second(self.published),
            "activate_at": utc_second(self.activate_at),
        }


@dataclass(frozen=True)
class Activated:
    """Phase 2 done: `kid` signs; `old_kid` is kept in `backup` (revoked if `revoked_at`)."""

    old_kid: str
    kid: str
    vkey: str
    backup: Path
    revoked_at: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "phase": "activated",
            "old_kid": self.old_kid,
            "kid": self.kid,
            "vkey": self.vkey,
            "backup": str(self.backup),
        }
        if self.revoked_at is not None:
            out["revoked"] = self.old_kid
            out["revoked_at"] = utc_second(self.revoked_at)
        return out


# --- reading the state -----------------------------------------------------------------------


def pending_rotation(log: Log) -> PendingRotation | None:
    """The stored pending rotation, verified with the key file's key, or None."""
    token = log.store.meta().get(PENDING)
    if token is None:
        return None
    return verify_pending_rotation(token, KeySet.of(log.key.public), iss=log.iss)


def pending_problems(log: Log) -> list[str]:
    """The audit of the pending rotation (signed by the key file's key, naming a trusted
    key) and of a revocation still owed (`REVOKING`)."""
    try:
        found = pending_rotation(log)
    except CapabilityAnchorError as exc:
        return [
            f"meta.{PENDING}: the pending rotation is not signed by the key file's key "
            f"{log.key.kid} or is malformed: {exc}"
        ]
    problems: list[str] = []
    if found is not None and found.kid not in log.keyset():
        problems.append(
            f"meta.{PENDING}: it names key {found.kid}, which the key records do not endorse"
        )
    revoking = log.store.meta().get(REVOKING)
    if revoking is not None:
        problems.append(
            f"meta.{REVOKING}: the revocation of key {revoking} by `rotate-key --compromised` "
            "was interrupted: run `capability-anchor rotate-key --compromised` again"
        )
    return problems


def note_vkey(meta: Mapping[str, str], key: PublicKey) -> str:
    origin = meta.get(HISTORY_ORIGIN) or origin_from_url(meta.get("public_url") or meta["iss"])
    return format_vkey(origin, TYPE_ED25519, key.raw)


def _add_record(log: Log, signer: SigningKey, endorsed: PublicKey, now: int) -> None:
    if (signer.kid, endorsed.kid) not in {(s, k) for _, s, k, _ in log.store.key_records()}:
        token = trust.make_key_record(signer, endorsed, iss=log.iss, iat=now)
        log.store.add_key_record(signer.kid, endorsed.kid, token, now)


def _next_key(data_dir: Path, expected: str | None) -> SigningKey:
    """The next key from `signing-key.jwk.new` (one no stored row names yet is replaced)."""
    path = data_dir / NEW_KEY_FILE
    try:
        found: SigningKey | None = load_key_file(path) if path.exists() else None
    except KeyFileError:
        if expected is not None:
            raise
        found = None
    if expected is not None:
        if found is None or found.kid != expected:
            raise KeyFileError(
                f"{path} does not hold the pending next key {expected}; restore it from a "
                "backup, or publish another one with `capability-anchor rotate-key --compromised`"
            )
        return found
    if found is not None:
        return found
    path.unlink(missing_ok=True)
    return create_key_file(path)


# --- phase 1 ---------------------------------------------------------------------------------


def publish(data_dir: Path, log_open: Opener, notice: int = DEFAULT_NOTICE) -> Published:
    """Phase 1: publish the next key; a rerun reports the pending one and changes nothing."""
    if notice < 0:
        raise CapabilityAnchorError("--notice must be 0 or more seconds")
    log = log_open(Path(data_dir))
    try:
        found = pending_rotation(log)
        if found is None:
            current = log.key
            nxt = _next_key(log.data_dir, None)
            now = int(log.clock())
            token = make_pending_rotation(
                current, nxt.kid, iss=log.iss, iat=now, activate_at=now + notice
            )
            with log.store.write():
                log.store.add_key(nxt.kid, json.dumps(nxt.public.jwk(), sort_keys=True), now)
                _add_record(log, current, nxt.public, now)
                log.store.set_meta(PENDING, token)
            found = verify_pending_rotation(token, KeySet.of(current.public), iss=log.iss)
        vkey = note_vkey(log.store.meta(), log.keyset().get(found.kid))
        return Published(log.key.kid, found.kid, vkey, found.published, found.activate_at)
    finally:
        log.close()


# --- phase 2 ---------------------------------------------------------------------------------


def activate(
    data_dir: Path, log_open: Opener, *, force: bool = False, compromised: bool = False
) -> Activated:
    """Phase 2 (or, `compromised`, both phases and the revocation)."""
    data_dir = Path(data_dir)
    finished = _finish_swap(data_dir)
    if finished is not None:
        return finished
    log = log_open(data_dir)
    try:
        found = pending_rotation(log)
        now = int(log.clock())
        if found is None and not compromised:
            raise NotFound("no rotation is pending: run `capability-anchor rotate-key` first")
        if found is not None and not (force or compromised) and now < found.activate_at:
            raise Conflict(
                f"activation is allowed from {utc_second(found.activate_at)} (in "
                f"{found.activate_at - now} s; notice given at {utc_second(found.published)}); "
                "wait until then, or override with --force"
            )
        old = log.key
        nxt = _next_key(data_dir, found.kid if found is not None else None)
        backup = data_dir / backup_name(old.kid)
        _link_backup(data_dir / KEY_FILE, backup, old)
        meta = log.store.meta()
        old_vkey, new_vkey = note_vkey(meta, old.public), note_vkey(meta, nxt.public)
        with log.store.write():
            now = int(log.clock())
            log.store.add_key(nxt.kid, json.dumps(nxt.public.jwk(), sort_keys=True), now)
            _add_record(log, old, nxt.public, now)
            _add_record(log, nxt, old.public, now)
            policy = log.store.policy()
            if policy is not None:
                drop = old_vkey if compromised else None
                updated = policy_with(
                    policy, new_vkey, keep=None if compromised else old_vkey, drop=drop
                )
                # The key that signs from now on vouches for every stored policy.
                if updated != policy:
                    policytrust.store_policy(log.store, nxt, log.iss, updated, now)
                else:
                    policytrust.sign_policies(log.store, nxt, log.iss, now)
            sign_settings(log, nxt, "rotate-key")
            log.store.clear_meta(PENDING)
            if compromised:
                log.store.set_meta(REVOKING, old.kid)
        # Only now can nothing the old key signs be dated after the revocation time.
        revoked_at = revoke(log.store, log.clock, log.iss, nxt, old.kid) if compromised else None
    finally:
        log.close()
    # Durable from here: the database names the next key as current. Only now is it the file.
    _swap(data_dir)
    return Activated(old.kid, nxt.kid, new_vkey, backup, revoked_at)


def revoke(store: Store, clock: Clock, iss: str, successor: SigningKey, kid: str) -> int | None:
    """Store the owed (`REVOKING`) revocation of `kid` and return its `revoked_at` (now, or
    `kid`'s newest stored `iat` if later); None when none is owed."""
    with store.write():
        if store.meta().get(REVOKING) != kid:
            return None
        revoked_at = max(int(clock()), newest_signed(store, kid))
        token = make_revocation(successor, kid, iss=iss, revoked_at=revoked_at)
        store.add_key_record(successor.kid, kid, token, revoked_at)
        store.clear_meta(REVOKING)
    return revoked_at


HEADS_CHUNK = 1024


def newest_signed(store: Store, kid: str) -> int:
    """The newest `iat` of what `kid` signed that the store keeps (0: none); of the heads
    (in day order, `iat` on their day) only the newest day's are read."""
    added = store.added_times()
    found = [added["settings"].get(i, 0) for i, k, _ in store.settings_statements() if k == kid]
    found += [added["key_records"].get(i, 0) for i, s, _, _ in store.key_records() if s == kid]
    end = store.history_size()
    newest_day: str | None = None
    while end > 0:
        start = max(0, end - HEADS_CHUNK)
        rows = store.history_heads(start, end)
        if not rows:
            break
        newest_day = newest_day or rows[-1].day
        found += [r.iat for r in rows if r.kid == kid and r.day == newest_day]
        if rows[0].day != newest_day:
            break
        end = start
    return max(found, default=0)


def _link_backup(key_file: Path, backup: Path, old: SigningKey) -> None:
    if backup.exists():
        if load_key_file(backup).kid != old.kid:
            raise KeyFileError(f"{backup} exists and holds another key; refusing to rotate")
        return
    # A hard link: the same inode, so the same 0600 mode and bytes, never re-written.
    os.link(key_file, backup)


def _swap(data_dir: Path) -> None:
    os.replace(data_dir / NEW_KEY_FILE, data_dir / KEY_FILE)
    fsync_dir(data_dir)


def _finish_swap(data_dir: Path) -> Activated | None:
    """Finish an activation that committed but did not swap the key file yet (or None)."""
    new_file = data_dir / NEW_KEY_FILE
    if not new_file.exists():
        return None
    old = load_key_file(data_dir / KEY_FILE)
    try:
        nxt = load_key_file(new_file)
    except KeyFileError:
        return None  # a half-written next key from phase 1: `_next_key` deals with it
    store = stores.open(data_dir)
    try:
        statements = store.settings_statements()
        meta = store.meta()
        if not statements or statements[-1][1] != nxt.kid:
            return None
        try:
            trust.verify_settings(statements[-1][2], KeySet.of(nxt.public))
        except CapabilityAnchorError:
            return None
        revoked_at = None
        if meta.get(REVOKING) == old.kid:
            revoked_at = revoke(store, time.time, meta["iss"], nxt, old.kid)
    finally:
        store.close()
    backup = data_dir / backup_name(old.kid)
    _link_backup(data_dir / KEY_FILE, backup, old)
    _swap(data_dir)
    return Activated(old.kid, nxt.kid, note_vkey(meta, nxt.public), backup, revoked_at)


# --- the witness policy ----------------------------------------------------------------------


def policy_with(text: bytes, add: str, *, keep: str | None, drop: str | None) -> bytes:
    """`text` with `log` lines for `add` (after the last one) and `keep`, without `drop`'s;
    every other line kept byte for byte."""
    lines = text.split(b"\n")

    def vkey_of(line: bytes) -> str | None:
        items = line.replace(b"\t", b" ").split()
        return items[1].decode() if len(items) >= 2 and items[0] == b"log" else None

    positions = [i for i, line in enumerate(lines) if vkey_of(line) is not None]
    at = positions[-1] + 1 if positions else 0
    if drop is not None:
        at -= sum(1 for i in positions if vkey_of(lines[i]) == drop)
        lines = [line for line in lines if vkey_of(line) != drop]
    present = {vkey_of(line) for line in lines}
    wanted = [v for v in (keep, add) if v is not None and v not in present]
    lines[at:at] = [f"log {v}".encode() for v in wanted]
    updated = b"\n".join(lines)
    parse_policy(updated)  # never store a policy that does not parse
    return updated
