"""The WAL stays bounded under steady writes (issue #23): the background checkpointer
truncates it past its soft threshold, the writer itself past the hard limit.

Scaled down: the limits are set small (the module's settings, read when a store starts its
upkeep) and a real log on disk takes steady batched appends while another thread reads
proofs and entries the whole time; the WAL file's size is sampled throughout. Before the
bound, passive checkpoints alone let the file grow past many times these limits.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from capability_anchor.log import Log
from capability_anchor.store.sqlite import DB_NAME, wal
from tests.kit.logkit import ISS, Clock, at, record

DAY = "2026-03-01"
LIMIT = 1 * 2**20
SOFT = LIMIT // 2
BATCH = 20
RECORDS = 12_000


def test_the_wal_stays_bounded_under_steady_writes_and_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wal, "WAL_LIMIT_BYTES", LIMIT)
    monkeypatch.setattr(wal, "WAL_TRUNCATE_BYTES", SOFT)
    clock = Clock(at(DAY, 10))
    data = tmp_path / "data"
    log = Log.init(data, iss=ISS, clock=clock)
    wal_file = data / f"{DB_NAME}-wal"
    done = threading.Event()
    sizes: list[int] = []
    read_errors: list[BaseException] = []

    def sample() -> None:
        while not done.wait(0.002):
            if wal_file.exists():
                sizes.append(wal_file.stat().st_size)

    def read() -> None:
        try:
            while not done.is_set():
                size = log.store.day_size(DAY)
                if size:
                    assert log.store.entry(DAY, size // 2) is not None
                    log.checkpoint()
                    log.proof(DAY, size // 3)
        except BaseException as exc:  # reported by the main thread
            read_errors.append(exc)

    threads = [threading.Thread(target=sample), threading.Thread(target=read)]
    for thread in threads:
        thread.start()
    try:
        for first in range(0, RECORDS, BATCH):
            log.append([record(DAY, n) for n in range(first, first + BATCH)])
            if wal_file.exists():
                sizes.append(wal_file.stat().st_size)
    finally:
        done.set()
        for thread in threads:
            thread.join()
        log.close()
    assert not read_errors
    assert sizes
    # The writer truncates when one more commit as large as its largest (counted up to a
    # quarter of the limit) would pass the limit: the file passes it by at most one commit.
    # 2 MiB of slack leaves a truncation that once had to wait for a reader its turn.
    # Unbounded, the same run passes 40 MiB.
    assert max(sizes) <= LIMIT + 2 * 2**20, max(sizes)
