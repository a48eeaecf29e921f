"""An exact copy of one log's store into a new, empty one, over the `Store` interface only
(`migrate`), in one transaction of the target; `fingerprint` compares a copy with its source
(docs/explanation/procedures.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from capability_anchor.errors import StoreCorrupt
from capability_anchor.merkle import hash_leaf
from capability_anchor.progress import Progress, silent
from capability_anchor.store import EntryRow, StampRow, Store

from .serverindex import ServerIndex, chunk_of, stored_watermark

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
    # Derived from the copied entries, not copied: a source whose index lacks rows (one
    # recovered before #35) gives a copy whose index is whole (SPEC §14.1).
    index = ServerIndex(dst, chunk_of(dst.meta()))
    for day in days:
        index.rebuild(day, 0, stored_watermark(dst, day, index.chunk))
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
    copied = 0
    for first, count, accepted in runs:
        while count:
            take = min(count, BATCH)
            batch = [_next(rows, day, first + i) for i in range(take)]
            dst.insert_entries(
                day, first, [(hash_leaf(e.claims), e.claims) for e in batch], accepted
            )
            first, count, copied = first + take, count - take, copied + take
            copying(copied)
    if next(rows, None) is not None or copied != src.day_size(day):
        raise StoreCorrupt(f"{day}: the source's entries are not one run of indices from 0")
    dst.insert_tiles(
        day, ((t.level, t.index, t.width, t.hashes, t.root) for t in src.iter_tiles(day))
    )
    return copied


def _next(rows: Iterator[EntryRow], day: str, want: int) -> EntryRow:
    entry = next(rows, None)
    if entry is None or entry.leaf_index != want:
        raise StoreCorrupt(f"{day}: the source has no entry {want} where its times say one is")
    return entry


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
