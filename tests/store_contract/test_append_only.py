"""Append-only, atomic batches and the dedupe, as the contract promises them
(`store.interface`'s module docstring)."""

from __future__ import annotations

import pytest

from capability_anchor.errors import Conflict, StoreError
from capability_anchor.store.rows import server_key_digest

from .backends import ATTEMPTS
from .conftest import AT, DAY, NEXT_DAY, Opened, cosignature, head, history_leaf, leaf


def _append(opened: Opened, day: str, first: int, count: int) -> None:
    with opened.store.write():
        opened.store.insert_entries(day, first, [leaf(first + n, day) for n in range(count)], AT)


def _some_of_everything(opened: Opened) -> None:
    store = opened.store
    _append(opened, DAY, 0, 3)
    with store.write():
        store.insert_tiles(DAY, [(0, 0, 3, b"".join(leaf(n)[0] for n in range(3)), None)])
        store.insert_head(head(DAY, 3))
        store.insert_history_leaf(history_leaf(0, DAY, 3))
        store.insert_checkpoint(1, b"checkpoint 1\n")
        store.insert_cosignature(cosignature(1), AT)


@pytest.mark.parametrize("what", ATTEMPTS)
def test_no_stored_row_is_ever_changed_or_removed(opened: Opened, what: str) -> None:
    _some_of_everything(opened)
    store = opened.store
    before = (store.entries(DAY, 0, 10), store.heads(DAY), list(store.iter_tiles(DAY)))
    with pytest.raises(Conflict, match="append-only"):
        opened.backend.attempt(store, what)
    store = opened.reopen()
    assert (store.entries(DAY, 0, 10), store.heads(DAY), list(store.iter_tiles(DAY))) == before
    assert store.checkpoint_size() == 1 and len(store.cosignatures(1)) == 1


def test_an_entry_is_only_ever_the_next_of_its_day(opened: Opened) -> None:
    _append(opened, DAY, 0, 2)
    for first in (0, 1, 3):  # a stored index again (other content), and a gap
        with pytest.raises(Conflict), opened.store.write():
            opened.store.insert_entries(DAY, first, [leaf(100 + first)], AT)
    assert opened.store.day_size(DAY) == 2
    _append(opened, NEXT_DAY, 0, 1)  # every day counts from 0
    assert opened.store.day_size(NEXT_DAY) == 1


def test_a_failing_batch_stores_nothing(opened: Opened) -> None:
    store = opened.store
    with pytest.raises(RuntimeError), store.write():
        store.insert_entries(DAY, 0, [leaf(0), leaf(1)], AT)
        store.insert_head(head(DAY, 2))
        raise RuntimeError("the caller fails after its inserts")
    with pytest.raises(Conflict), store.write():
        store.insert_entries(DAY, 0, [leaf(0), leaf(1)], AT)
        store.insert_entries(DAY, 5, [leaf(5)], AT)  # refused: everything before goes too
    store = opened.reopen()
    assert store.day_size(DAY) == 0 and store.heads(DAY) == []
    _append(opened, DAY, 0, 2)
    assert opened.store.day_size(DAY) == 2


def test_writes_happen_only_inside_one_write_transaction(opened: Opened) -> None:
    store = opened.store
    # No second one on the same thread.
    with store.write(), pytest.raises(StoreError), store.write():
        pass


def test_the_dedupe_finds_each_stored_hash_in_its_day(opened: Opened) -> None:
    _append(opened, DAY, 0, 4)
    store = opened.store
    hashes = [leaf(n)[0] for n in (1, 3)] + [leaf(9)[0]]
    assert store.existing(DAY, hashes) == {leaf(1)[0]: 1, leaf(3)[0]: 3}
    assert store.existing(NEXT_DAY, hashes) == {}
    assert store.find_leaf(leaf(3)[0]) == [(DAY, 3)]
    entry = store.entry(DAY, 2)
    assert entry is not None and (entry.leaf_hash, entry.claims) == leaf(2)
    assert store.accepted_at(DAY, 2) == AT


def test_what_record_reads_is_the_newest_head_the_entry_and_the_signer(opened: Opened) -> None:
    _append(opened, DAY, 0, 4)
    store = opened.store
    with store.write():
        a, b = server_key_digest("sub:a"), server_key_digest("sub:b")
        store.insert_servers(DAY, [(a, 2), (a, 4), (b, 1)])
    two, four = (DAY, 2), (DAY, 4)
    assert store.record_sources("sub:a") == [
        (*four, None, None, None),
        (*two, None, (leaf(2)[1], AT), None),
    ]  # no head yet
    with store.write():
        store.insert_head(head(DAY, 2))
        store.insert_head(head(DAY, 3))
        store.add_settings("kid-1", "a.b.c", AT)
    assert store.record_sources("sub:a") == [
        (*four, head(DAY, 3), None, "kid-1"),
        (*two, head(DAY, 3), (leaf(2)[1], AT), "kid-1"),
    ]
    assert store.record_sources("sub:a", 1) == [(*four, head(DAY, 3), None, "kid-1")]
    with store.write():
        store.insert_head(head(DAY, 4, sealed=True))
        store.add_settings("kid-2", "d.e.f", AT + 1)
        store.insert_servers(NEXT_DAY, [(b, 0)])
    assert opened.reopen().record_sources("sub:b") == [
        (NEXT_DAY, 0, None, None, "kid-2"),  # no head, no entry
        (DAY, 1, head(DAY, 4, sealed=True), (leaf(1)[1], AT), "kid-2"),
    ]
    assert opened.store.record_sources("sub:c") == []
    # Without the heads and the kid (a reader that keeps them): the same rows otherwise.
    for key, limit in (("sub:a", 50), ("sub:a", 1), ("sub:b", 50), ("sub:c", 50)):
        want = [(d, i, found) for d, i, _, found, _ in opened.store.record_sources(key, limit)]
        assert opened.store.record_entries(key, limit) == want


def test_a_key_is_stored_once_and_never_replaced(opened: Opened) -> None:
    store = opened.store
    with store.write():
        store.add_key("kid-1", '{"kty":"OKP"}', AT)
        store.add_key("kid-1", '{"kty":"OKP"}', AT)  # the same again: a no-op
    with pytest.raises(Conflict), store.write():
        store.add_key("kid-1", '{"kty":"EC"}', AT)
    assert opened.reopen().signing_keys() == [("kid-1", '{"kty":"OKP"}')]


def test_the_newest_settings_statement_is_the_last_stored(opened: Opened) -> None:
    store = opened.store
    assert store.newest_settings() is None
    with store.write():
        store.add_settings("kid-1", "a.b.c", AT)
        store.add_settings("kid-2", "d.e.f", AT + 1)
    assert opened.reopen().newest_settings() == (2, "kid-2", "d.e.f")
