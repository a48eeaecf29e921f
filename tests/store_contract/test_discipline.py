"""The head/checkpoint write discipline, tiles, the history and the cosignatures, as the
contract promises them (`store.interface`, docs/explanation/store.md)."""

from __future__ import annotations

import hashlib

import pytest

from capability_anchor.errors import Conflict
from capability_anchor.store import open as stores

from .conftest import AT, DAY, NEXT_DAY, Opened, cosignature, head, history_leaf, leaf


def _entries(opened: Opened, day: str, count: int) -> None:
    with opened.store.write():
        opened.store.insert_entries(day, 0, [leaf(n, day) for n in range(count)], AT)


def test_a_sealed_day_takes_no_entry_and_no_head(opened: Opened) -> None:
    _entries(opened, DAY, 2)
    store = opened.store
    with store.write():
        store.insert_head(head(DAY, 1))
        store.insert_head(head(DAY, 2, sealed=True))
    for write in (
        lambda: store.insert_entries(DAY, 2, [leaf(2)], AT),
        lambda: store.insert_head(head(DAY, 2)),
    ):
        with pytest.raises(Conflict), store.write():
            write()
    assert store.day_size(DAY) == 2
    assert store.sealed_head(DAY) == head(DAY, 2, sealed=True)
    assert store.newest_head(DAY) == head(DAY, 2, sealed=True)
    assert store.last_sealed_day() == DAY


def test_the_newest_head_state_is_the_newest_heads(opened: Opened) -> None:
    """`newest_head_state`: (size, sealed) of `newest_head`, from the index alone."""
    _entries(opened, DAY, 3)
    store = opened.store
    assert store.newest_head_state(DAY) is None
    for row in (head(DAY, 1), head(DAY, 3), head(DAY, 3, sealed=True)):
        with store.write():
            store.insert_head(row)
        newest = store.newest_head(DAY)
        assert newest == row
        assert store.newest_head_state(DAY) == (row.tree_size, row.sealed)
    assert store.newest_head_state(NEXT_DAY) is None


def test_head_days_are_the_days_with_a_head_newest_first(opened: Opened) -> None:
    """`head_days`: a page of the days that have a head (the explorer's), by seeks alone."""
    store = opened.store
    assert store.head_days(None, 5) == []
    _entries(opened, DAY, 3)
    _entries(opened, NEXT_DAY, 1)
    with store.write():
        for row in (head(DAY, 1), head(DAY, 3), head(DAY, 3, sealed=True), head(NEXT_DAY, 1)):
            store.insert_head(row)
    assert store.head_days(None, 5) == [NEXT_DAY, DAY]
    assert store.head_days(None, 1) == [NEXT_DAY]
    assert store.head_days(NEXT_DAY, 5) == [DAY]
    assert store.head_days(DAY, 5) == []


def test_the_change_mark_moves_with_every_commit(opened: Opened) -> None:
    """`change_mark`: equal only while nothing was committed, by this store's own writes or
    by another opening of the log (as another process's); none inside a read snapshot. An
    engine without one answers None throughout (its reader checks the rows)."""
    store = opened.store
    other = stores.open(opened.where)
    try:
        first = store.change_mark()
        _entries(opened, DAY, 2)
        second = store.change_mark()
        with other.write():
            other.insert_entries(DAY, 2, [leaf(2)], AT)
        third = store.change_mark()
        with store.read():
            inside = store.change_mark()
        if first is None:
            assert second is third is inside is None
            return
        assert store.change_mark() == third  # nothing committed since
        assert len({first, second, third}) == 3
        assert inside is None
    finally:
        other.close()


def test_a_head_never_gets_a_second_root(opened: Opened) -> None:
    _entries(opened, DAY, 2)
    store = opened.store
    with store.write():
        store.insert_head(head(DAY, 2))
    with pytest.raises(Conflict), store.write():
        store.insert_head(head(DAY, 2, root=hashlib.sha256(b"other").digest()))
    with pytest.raises(Conflict), store.write():  # nor when sealing at that size
        store.insert_head(head(DAY, 2, sealed=True, root=hashlib.sha256(b"other").digest()))
    assert opened.reopen().heads(DAY) == [head(DAY, 2)]


def test_tiles_are_kept_narrowest_first_and_never_replaced(opened: Opened) -> None:
    store = opened.store
    hashes = [leaf(n)[0] for n in range(4)]
    with store.write():
        store.insert_tiles(DAY, [(0, 0, 2, b"".join(hashes[:2]), None)])
        store.insert_tiles(DAY, [(0, 0, 4, b"".join(hashes), None)])
        store.insert_tiles(DAY, [(0, 0, 2, b"".join(hashes[:2]), None)])  # identical: a no-op
    with pytest.raises(Conflict), store.write():
        store.insert_tiles(DAY, [(0, 0, 2, b"".join(hashes[2:]), None)])
    store = opened.reopen()
    assert store.tile(DAY, 0, 0, 1) == b"".join(hashes[:2])
    assert store.tile(DAY, 0, 0, 3) == b"".join(hashes)
    assert store.tile(DAY, 0, 0, 5) is None
    assert [(t.level, t.index, t.width) for t in store.iter_tiles(DAY)] == [(0, 0, 2), (0, 0, 4)]


def test_the_history_is_one_leaf_per_stored_head_in_order(opened: Opened) -> None:
    _entries(opened, DAY, 2)
    store = opened.store
    with store.write():
        store.insert_head(head(DAY, 1))
        store.insert_head(head(DAY, 2))
        store.insert_history_leaf(history_leaf(0, DAY, 1))
    refused = (
        history_leaf(2, DAY, 2),  # not the next index
        history_leaf(1, DAY, 3),  # no such head
        history_leaf(1, DAY, 1),  # not after the last leaf
    )
    for bad in refused:
        with pytest.raises(Conflict), store.write():
            store.insert_history_leaf(bad)
    with store.write():
        store.insert_history_leaf(history_leaf(1, DAY, 2))
    store = opened.reopen()
    assert store.history_size() == 2
    assert [leaf.tree_size for leaf in store.iter_history()] == [1, 2]
    assert store.history_leaf_of(DAY, False, 2) == history_leaf(1, DAY, 2)
    assert store.history_heads(0, 2) == [head(DAY, 1), head(DAY, 2)]


def test_checkpoints_are_of_the_next_size_the_history_has(opened: Opened) -> None:
    _entries(opened, DAY, 1)
    store = opened.store
    with store.write():
        store.insert_head(head(DAY, 1))
        store.insert_history_leaf(history_leaf(0, DAY, 1))
        store.insert_checkpoint(1, b"checkpoint 1\n")
    for size in (1, 2, 3):  # again, beyond the history
        with pytest.raises(Conflict), store.write():
            store.insert_checkpoint(size, b"checkpoint %d\n" % size)
    assert store.checkpoint_size() == 1
    assert store.checkpoint_note(1) == b"checkpoint 1\n"


def test_a_cosignature_is_of_a_stored_checkpoint_and_stored_once(opened: Opened) -> None:
    _entries(opened, NEXT_DAY, 1)
    store = opened.store
    with pytest.raises(Conflict), store.write():
        store.insert_cosignature(cosignature(1), AT)
    with store.write():
        store.insert_head(head(NEXT_DAY, 1))
        store.insert_history_leaf(history_leaf(0, NEXT_DAY, 1))
        store.insert_checkpoint(1, b"checkpoint 1\n")
        assert store.insert_cosignature(cosignature(1), AT) is True
        assert store.insert_cosignature(cosignature(1), AT) is False
        assert store.insert_cosignature(cosignature(1, "\u2014 witness.example BBBB"), AT)
    store = opened.reopen()
    assert [c.line for c in store.cosignatures(1)] == [
        "\u2014 witness.example AAAA",
        "\u2014 witness.example BBBB",
    ]
    assert store.cosigned_sizes() == [1]
    assert [row.line for _, _, row in store.iter_cosignature_rows()] == [
        c.line for c in store.cosignatures(1)
    ]
