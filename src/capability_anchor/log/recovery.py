"""`recover --from URL|DIR`: bring back what the log published and this data dir lacks (a
restored backup), byte for byte, verified before anything is stored (SPEC §13.3). Nothing
here signs a head (the steps: docs/explanation/procedures.md).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from capability_anchor import head as heads
from capability_anchor import jws
from capability_anchor.errors import CapabilityAnchorError, Conflict, InputError, VerificationError
from capability_anchor.merkle import TILE_WIDTH, TreeEdge, hash_leaf
from capability_anchor.note import parse_note
from capability_anchor.note.cosignature import timestamp_of
from capability_anchor.read.source import FolderSource, LogSource, open_source, read_bundles
from capability_anchor.store import CosignatureRow, HeadRow

from .datafiles import locked
from .marks import BEHIND, behind_state, clear_behind, clear_restored
from .policies import stored_policy
from .published import Seen, verified_checkpoint
from .serverindex import key_digests, leaf_keys

if TYPE_CHECKING:
    from .lifecycle import Log

_HEAD_FILE = re.compile(r"^\d{4}-\d{2}-\d{2}\.json$")
_UNSEALED_FILE = re.compile(r"^\d+\.json$")
MAX_PROBE = 1 << 62


@dataclass
class Recovered:
    """What `recover` did, as it prints it."""

    source: str
    before_size: int
    size: int
    root: bytes
    entries: int = 0
    heads: int = 0
    days: list[str] = field(default_factory=list)
    cosignatures: int = 0
    checkpoint_identical: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "entries": self.entries,
            "heads": self.heads,
            "days": self.days,
            "history": {"size": self.size, "root": self.root.hex()},
            "before": {"size": self.before_size},
            "cosignatures": self.cosignatures,
            "checkpoint_identical": self.checkpoint_identical,
        }


def recover(log: Log, where: str, *, deadline: float = 30.0) -> Recovered:
    """Recover from `where` (VerificationError: it does not verify or conflicts)."""
    state = behind_state(log.data_dir)
    if state is not None and state.kind != BEHIND:
        raise VerificationError(
            f"this data dir conflicts with what was published ({state.reason()}): it forked "
            "and cannot be recovered; restore a backup the published history extends"
        )
    busy = Conflict(
        f"a service is running on {log.data_dir} (it holds background.lock): stop it, then run "
        "recover"
    )
    with locked(log.data_dir / "background.lock", busy):
        source = open_source(where, deadline=deadline)  # a URL or an export folder
        try:
            done = _recover(log, source, where)
        finally:
            source.close()
        state = behind_state(log.data_dir)
        if state is not None and state.published_size > done.size:
            raise VerificationError(
                f"recovered up to history size {done.size}, but {state.source} showed "
                f"{state.published_size}: still behind; recover from a source that holds it"
            )
        clear_behind(log.data_dir)
        # A verified comparison with what was published: a restored copy may sign (§14.2).
        clear_restored(log.data_dir, f"recovered from {where}")
    return done


def _recover(log: Log, source: LogSource, where: str) -> Recovered:
    note = source.read("history/checkpoint")
    if note is None:
        raise InputError(f"{where}: no history/checkpoint (give the log's URL or an export)")
    try:
        seen = verified_checkpoint(log, where, note)
    except CapabilityAnchorError as exc:
        raise VerificationError(
            f"{where}: its history/checkpoint is not the log's: {exc}"
        ) from None
    store = log.store
    with store.read():
        ours = store.history_size()
        edge = TreeEdge(ours, store.history_edge_partials(ours))
        ours_root = log.read.history.root(seen.size) if 0 < seen.size <= ours else None
    if ours_root is not None and ours_root != seen.root:
        raise VerificationError(
            f"{where} published history size {seen.size} with root {seen.root.hex()}; this "
            f"data dir holds {ours_root.hex()} at that size: it forked and cannot be recovered"
        )
    target = max(seen.size, _newest_size(log, source, seen))
    done = Recovered(where, ours, max(ours, target), edge.root())
    if target <= ours:
        with store.read():
            done.root = log.read.history.root(ours)
        return done
    new = _heads(log, source, edge, ours, target, seen)
    entries = _entries(log, source, new)
    _store(log, new, entries, done)
    done.cosignatures = _cosignatures(log, note, seen.size)
    with store.read():
        done.root = log.read.history.root(target)
        done.checkpoint_identical = note.startswith(log.read.history.checkpoint(seen.size))
    return done


def _newest_size(log: Log, source: LogSource, seen: Seen) -> int:
    """The source's newest history size (recovery's step 1); at least `seen.size`."""
    if isinstance(source, FolderSource):
        return _heads_in_folder(source)
    # Over HTTP: every history size of a serving log has its checkpoint (a static export
    # over HTTP has none of them: its quorum checkpoint is the newest it tells).
    if source.read(f"history/checkpoint/{seen.size + 1}") is None:
        return seen.size
    low, step = seen.size + 1, 1
    while low + step < MAX_PROBE and source.read(f"history/checkpoint/{low + step}") is not None:
        low, step = low + step, step * 2
    high = low + step  # low exists, high does not
    while high - low > 1:
        mid = (low + high) // 2
        if source.read(f"history/checkpoint/{mid}") is None:
            high = mid
        else:
            low = mid
    return low


def _heads_in_folder(source: FolderSource) -> int:
    """An export's history size: its number of head files (each head is a history leaf)."""
    folder = source.file("history").parent
    count = 0
    for item in folder.iterdir():
        if item.is_file() and _HEAD_FILE.match(item.name):
            count += 1
        elif item.is_dir() and _HEAD_FILE.match(item.name + ".json"):
            count += sum(1 for f in item.iterdir() if f.is_file() and _UNSEALED_FILE.match(f.name))
    return count


def _heads(
    log: Log, source: LogSource, edge: TreeEdge, ours: int, target: int, seen: Seen
) -> list[HeadRow]:
    """The published history leaves ours..target-1 as verified heads (step 2)."""
    leaves = _leaves(source, "history/", ours, target)
    edge = edge.copy()
    upto = seen.size - ours
    if upto > 0:
        edge.extend(b"".join(hash_leaf(leaf) for leaf in leaves[:upto]))
        if edge.root() != seen.root:
            raise VerificationError(
                f"{source.where}: the history's entries do not give its checkpoint's root at "
                f"size {seen.size} ({edge.root().hex()}, signed {seen.root.hex()}); nothing stored"
            )
    paths = [_head_path(leaf, ours + n) for n, leaf in enumerate(leaves)]
    ahead = source.read_ahead(paths)
    try:
        return [
            _head(log, source, path, leaf, ahead.take(path))
            for path, leaf in zip(paths, leaves, strict=True)
        ]
    finally:
        ahead.close()


def _head_path(leaf: bytes, index: int) -> str:
    try:
        claims = heads.check_claims(json.loads(leaf))
    except (ValueError, CapabilityAnchorError) as exc:
        raise VerificationError(f"history leaf {index} is not a head's claims: {exc}") from None
    day, size = claims["day"], claims["tree_size"]
    return f"roots/{day}" if claims["sealed"] else f"roots/{day}/{size}"


def _head(log: Log, source: LogSource, path: str, leaf: bytes, doc: bytes | None) -> HeadRow:
    if doc is None:
        raise InputError(f"{source.where}/{path}: not found (a head the history holds)")
    try:
        checked = heads.verify_document(doc, log.keyset())
        verified = jws.verify(checked.head.jws, log.keyset(), jws.HEAD_TYP)
    except CapabilityAnchorError as exc:
        raise VerificationError(f"{source.where}/{path}: not a head of this log: {exc}") from None
    claims = checked.head.claims
    if verified.payload != leaf or not checked.claims_match or claims["iss"] != log.iss:
        raise VerificationError(
            f"{source.where}/{path}: the head document is not the history's leaf byte for "
            "byte (or its plain claims are not the signed ones, or its iss is not the log's)"
        )
    return HeadRow(
        claims["day"],
        claims["tree_size"],
        claims["sealed"],
        bytes.fromhex(claims["root"]),
        claims["iat"],
        verified.kid,
        doc,
    )


def _entries(log: Log, source: LogSource, new: list[HeadRow]) -> dict[str, tuple[int, list[bytes]]]:
    """Each day's stored size and the published leaf bytes from it to its largest new head."""
    largest: dict[str, int] = {}
    for h in new:
        largest[h.day] = max(largest.get(h.day, 0), h.tree_size)
    out: dict[str, tuple[int, list[bytes]]] = {}
    for day, size in largest.items():
        with log.store.read():
            have = log.store.day_size(day)
        out[day] = (have, _leaves(source, f"roots/{day}/", have, size) if size > have else [])
    return out


def _leaves(source: LogSource, prefix: str, start: int, end: int) -> list[bytes]:
    """The published leaves `start`..`end - 1` of the tree under `prefix`, from its bundles."""
    leaves: list[bytes] = []
    indices = list(range(start // TILE_WIDTH, (end - 1) // TILE_WIDTH + 1))
    for n, bundle in zip(indices, read_bundles(source, prefix, end, indices), strict=True):
        leaves += bundle[max(0, start - n * TILE_WIDTH) :]
    return leaves


def _store(
    log: Log, new: list[HeadRow], entries: dict[str, tuple[int, list[bytes]]], done: Recovered
) -> None:
    """Step 4, in one write transaction."""
    store, writer = log.store, log.writer
    with writer.lock, store.write():
        for h in new:
            day, size = h.day, h.tree_size
            have = store.day_size(day)
            if size > have:
                first, published = entries[day]
                if have < first:
                    raise Conflict(f"day {day} changed while recover read; run it again")
                leaves = published[have - first : size - first]
                edge = TreeEdge(have, store.edge_partials(day, have))
                accepted = h.iat - 1 if h.sealed else h.iat
                # As an append stores them: with their tiles and /record index runs.
                new_entries = [(hash_leaf(b), b, key_digests(leaf_keys(b))) for b in leaves]
                writer.integrate(day, edge, new_entries, accepted)
                done.entries += len(leaves)
            writer.store_published_head(h)
            done.heads += 1
            if day not in done.days:
                done.days.append(day)
    # The writer's caches were made before these rows: rebuilt from the store when needed.
    writer.edge = writer.edge_day = None


def _cosignatures(log: Log, note: bytes, size: int) -> int:
    """Store the verifying cosignatures of the policy's witnesses on the published checkpoint
    of `size`; returns how many were new."""
    policy = stored_policy(log)
    if policy is None:
        return 0
    parsed = parse_note(note)
    text = parsed.text.encode("utf-8")
    rows: list[CosignatureRow] = []
    for witness in policy.witnesses:
        verifier = witness.verifier
        for line in parsed.signatures:
            if (line.name, line.key_id) != (verifier.name, verifier.key_id):
                continue
            try:
                verifier.verify(text, line.signature)
                stamp = timestamp_of(line.signature)
            except CapabilityAnchorError:
                continue
            rows.append(
                CosignatureRow(witness.name, line.key_id, size, stamp, line.line().rstrip("\n"))
            )
            break
    stored = 0
    with log.writer.lock, log.store.write():
        have = {(c.witness, c.key_id) for c in log.store.cosignatures(size)}
        for row in rows:
            if (row.witness, row.key_id) not in have:
                stored += int(log.store.insert_cosignature(row, int(log.clock())))
    return stored
