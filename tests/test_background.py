"""Background work: checkpoints when the tree grew, sealing after midnight, and exactly one
process per data dir doing it (an flock in the data dir)."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

from capability_anchor.api.background import Background
from capability_anchor.log import Log
from obskit import observation

ISS = "https://resolver.example"
T0 = dt.datetime(2026, 11, 2, 23, 59, 0, tzinfo=dt.UTC).timestamp()


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


def test_checkpoints_and_seals_in_the_background(tmp_path: Path) -> None:
    clock = Clock()
    data = tmp_path / "d"
    Log.init(data, iss=ISS, clock=clock).close()

    async def scenario() -> None:
        with Log.open(data, clock=clock) as writer:
            bg = Background(writer, data, checkpoint_interval=0.0)
            writer.append([observation(1), observation(2)])
            await bg.start()
            await asyncio.sleep(0.3)
            heads = writer.store.heads("2026-11-02")
            assert [(h.tree_size, h.sealed) for h in heads] == [(2, False)]
            clock.t += 120  # past midnight: the day is sealed within the next tick
            await asyncio.sleep(1.5)
            await bg.stop()
            assert writer.store.sealed_head("2026-11-02") is not None
            assert bg.ticks >= 2

    asyncio.run(scenario())


def test_only_one_process_per_data_dir_does_background_work(tmp_path: Path) -> None:
    data = tmp_path / "d"
    Log.init(data, iss=ISS).close()

    async def scenario() -> None:
        with Log.open(data) as a_log, Log.open(data) as b_log:
            a = Background(a_log, data, checkpoint_interval=3600)
            b = Background(b_log, data, checkpoint_interval=3600)
            await a.start()
            await asyncio.sleep(0.2)
            await b.start()
            await asyncio.sleep(0.3)
            assert a.ticks >= 1 and b.ticks == 0  # b waits for the lock
            await a.stop()  # the lock is released: b takes over at its next try
            await asyncio.sleep(1.3)
            assert b.ticks >= 1
            await b.stop()

    asyncio.run(scenario())
