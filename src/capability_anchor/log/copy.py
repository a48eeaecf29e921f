"""An exact copy of one log's store into a new, empty one, over the `Store` interface only, so
it is the same for every pair of engines (`migrate`: SQLite to PostgreSQL).

Every row is copied as stored, with its stored times: meta, keys, the key trust (rotation
records, settings statements), entries with their accepted times, the `/record` index,
tiles, heads, the history and its tiles, checkpoints, cosignatures, policies, the witness
states and stamps. Nothing is signed or recomputed: a head is the bytes the log signed. The
rows go in the order the target's own rules accept (the entries of a day before any head,
a head before the history leaf that is it, a checkpoint before its cosignatures), inside
the one transaction `store.open.create` gives: either no log at the target or a whole copy.

`fingerprint` says what a store holds in a few numbers, so a copy can be compared with its
source once more at the moment the data dir switches over (nothing written meanwhile).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from capability_anchor.errors import StoreCorrupt
from capability_anchor.progress import Progress, silent
from capability_anchor.store import EntryRow, StampRow, Store, server_key_digest

from .serverindex import server_keys

BATCH = 1_000
"""Entries per insert (the target's own batch size for appends)."""


@dataclass(frozen=True)
class Copied:
    days: int
    entries: int
    heads: int
    history: int
    checkpoints: int
    cosignatures: int
    stamps: int

    def to_json(self) -> dict[str, int]:
        return dict(self.__dict__)


def copy_store(src: Store, dst: Store, progress: Progress = silent) -> Copied:
    """Copy every row of `src` into the empty `dst` (inside `dst.write()`; `src` read in one
    snapshot by the caller), reporting the entries copied."""
    for key, value in sorted(src.meta().items()):
        dst.set_meta(key, value)
    for kid, jwk, added in src.key_rows():
        dst.add_key(kid, jwk, added)
    times = src.added_times()
    for rid, signer, kid, token in src.key_records():
        dst.add_key_record(signer, kid, token, times["key_records"][rid])
    for sid, kid, token in src.settings_statements():
        dst.add_settings(kid, token, times["settings"][sid])
    days = src.entry_days()
    entries = _copy_entries(src, dst, days, progress)
    heads = sorted(src.all_heads(), key=lambda h: (h.day, h.sealed, h.tree_size))
    for head in heads:
        dst.insert_head(head)
    history = 0
    for leaf in src.iter_history():
        dst.insert_history_leaf(leaf)
        history += 1
    dst.insert_history_tiles(
        (t.level, t.index, t.width, t.hashes, t.root) for t in src.iter_history_tiles()
    )
    checkpoints = 0
    for size, note in src.iter_checkpoints():
        dst.insert_checkpoint(size, note)
        checkpoints += 1
    cosignatures = 0
    for _, when, row in src.iter_cosignature_rows():
        dst.insert_cosignature(row, when)
        cosignatures += 1
    for _, when, text in src.policy_rows():
        dst.set_policy(text, when)
    for state in src.witness_states():
        dst.set_witness_state(state)
    stamps = _copy_stamps(src, dst)
    return Copied(len(days), entries, len(heads), history, checkpoints, cosignatures, stamps)


def _copy_entries(src: Store, dst: Store, days: list[str], progress: Progress) -> int:
    """Every day's entries, reporting how many of them all were copied."""
    total = sum(src.day_size(day) for day in days)
    entries = 0
    progress(0, total, "copy")
    for day in days:

        def copying(copied: int, before: int = entries) -> None:
            progress(before + copied, total, "copy")

        entries += _copy_day(src, dst, day, copying)
    return entries


def _copy_day(src: Store, dst: Store, day: str, copying: Callable[[int], None]) -> int:
    runs = src.accepted_runs(day)
    rows = src.iter_entries(day)
    index = _IndexCopy(src, day)
    copied = 0
    for first, count, accepted in runs:
        while count:
            take = min(count, BATCH)
            batch = [_next(rows, day, first + i) for i in range(take)]
            dst.insert_entries(day, first, [(e.leaf_hash, e.claims) for e in batch], accepted)
            dst.insert_servers(day, index.keys_of(batch))
            first, count, copied = first + take, count - take, copied + take
            copying(copied)
    if next(rows, None) is not None or copied != src.day_size(day):
        raise StoreCorrupt(f"{day}: the source's entries are not one run of indices from 0")
    index.check_done()
    dst.insert_tiles(
        day, ((t.level, t.index, t.width, t.hashes, t.root) for t in src.iter_tiles(day))
    )
    return copied


def _next(rows: Iterator[EntryRow], day: str, want: int) -> EntryRow:
    entry = next(rows, None)
    if entry is None or entry.leaf_index != want:
        raise StoreCorrupt(f"{day}: the source has no entry {want} where its times say one is")
    return entry


class _IndexCopy:
    """The source's `/record` index rows of a day, as keys the target's `insert_servers`
    takes: the store keeps digests of the keys, so each is found again among the keys of
    the entry it points at (an index row no key of its entry gives is damage)."""

    def __init__(self, src: Store, day: str) -> None:
        self._day = day
        self._rows = iter(src.iter_servers(day))
        self._next = next(self._rows, None)

    def keys_of(self, batch: list[EntryRow]) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        for entry in batch:
            digests: set[str] = set()
            while self._next is not None and self._next[0] == entry.leaf_index:
                digests.add(self._next[1])
                self._next = next(self._rows, None)
            if not digests:
                continue
            keys = {server_key_digest(k): k for k in server_keys(json.loads(entry.claims))}
            if not digests <= keys.keys():
                raise StoreCorrupt(
                    f"{self._day}/{entry.leaf_index}: the source's /record index names a key "
                    "its entry does not have (run `capability-anchor audit` on it)"
                )
            out += [(keys[d], entry.leaf_index) for d in sorted(digests)]
        return out

    def check_done(self) -> None:
        if self._next is not None:
            raise StoreCorrupt(
                f"{self._day}: the source's /record index points past its entries "
                f"(index {self._next[0]})"
            )


def _copy_stamps(src: Store, dst: Store) -> int:
    """Stamps in the order they were stored, each with its `added`."""
    by_day: dict[str, dict[tuple[str, bytes], StampRow]] = {}
    count = 0
    for day, tsa, token, when in src.stamp_rows():
        if day not in by_day:
            by_day[day] = {(s.tsa, s.token): s for s in src.stamps(day)}
        stamp = by_day[day].get((tsa, token))
        if stamp is None:
            raise StoreCorrupt(f"{day}: a stamp of {tsa} is in the stamps table but not the day's")
        dst.insert_stamp(stamp, when)
        count += 1
    return count


def fingerprint(store: Store) -> dict[str, object]:
    """What `store` holds, in numbers that change with every write the log makes."""
    return {
        "days": {day: store.day_size(day) for day in store.entry_days()},
        "heads": len(store.all_heads()),
        "history": store.history_size(),
        "checkpoint": store.checkpoint_size(),
        "cosignatures": sum(1 for _ in store.iter_cosignatures()),
        "stamps": len(store.stamp_rows()),
        "keys": len(store.key_rows()),
        "key_records": len(store.key_records()),
        "settings": len(store.settings_statements()),
        "policies": len(store.policy_rows()),
        "meta": sorted(store.meta().items()),
        "witness_states": len(store.witness_states()),
    }


__all__ = ["BATCH", "Copied", "copy_store", "fingerprint"]
