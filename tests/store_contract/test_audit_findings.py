"""The engine's own diagnostics (`Store.engine_findings`): nothing on a store as made,
a finding for each way an attacker with access to the stored data changes it."""

from __future__ import annotations

import pytest

from capability_anchor.errors import StoreError
from capability_anchor.store import SCHEMA_VERSION

from .backends import TAMPERS
from .conftest import AT, DAY, Opened, leaf


def _filled(opened: Opened) -> None:
    with opened.store.write():
        opened.store.insert_entries(DAY, 0, [leaf(n) for n in range(300)], AT)
    opened.store.close()


def test_a_store_as_made_has_no_engine_findings(opened: Opened) -> None:
    _filled(opened)
    store = opened.readonly()
    try:
        with store.snapshot():
            found = store.engine_findings()
            assert found.problems == [] and found.stopped is None
            assert found.version == SCHEMA_VERSION
            assert found.checked  # it says what it checked
            assert store.index_mismatches() == []
            assert store.day_size(DAY) == 300
        assert store.engine_findings(after_reads=True).problems == []
        assert not store.changed_under_read()
    finally:
        store.close()


@pytest.mark.parametrize("what", TAMPERS)
def test_tampering_is_an_engine_finding(opened: Opened, what: str) -> None:
    _filled(opened)
    opened.backend.tamper(opened.where, what)
    store = opened.readonly()
    try:
        try:
            with store.snapshot():
                found = store.engine_findings()
        except StoreError as exc:  # damage may stop the reading itself: that is found too
            assert what == "zero a page", exc
            return
        assert found.problems or found.stopped is not None, what
    finally:
        store.close()
