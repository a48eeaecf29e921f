"""A write queue smaller than one batch is refused when the service starts, in both forms
(`serve --write-queue`, env CAPABILITY_ANCHOR_WRITE_QUEUE): a sequencer cannot take it, and
each new candidate would die alike while writes waited for one."""

from __future__ import annotations

from pathlib import Path

import pytest

from capability_anchor.api import Settings, create_app
from capability_anchor.errors import UsageError
from capability_anchor.log import MAX_BATCH, Log
from tests.kit.logkit import ISS


def test_a_write_queue_smaller_than_a_batch_is_refused_at_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    Log.init(data, iss=ISS).close()
    with pytest.raises(UsageError, match="CAPABILITY_ANCHOR_WRITE_QUEUE"):
        create_app(Settings(data_dir=data, write_queue=MAX_BATCH - 1))
