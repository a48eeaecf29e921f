"""Time from a head's publication to its first cosignature from a loopback witness (SPEC
§12.3; issue 13's target: at most 2x the checkpoint interval).

    .venv/bin/python tools/bench_witnessing.py --interval 1 --interval 2 --seconds 15

The service's own background work (`service.background.Background` with `witnessing.Witnessing`,
as `serve` builds them) runs on a real data dir against the in-test witness of
`tests/kit/witnesskit.py` on 127.0.0.1, while records are appended all the time. For every
history size a checkpoint published, the latency is the time from the commit of that head
to the first stored cosignature covering it (of that size or a later one).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # repo root: tests.kit

from tests.kit.witnesskit import TestWitness  # noqa: E402

import benchdoc  # noqa: E402
from capability_anchor.log import Log  # noqa: E402
from capability_anchor.service.background import Background  # noqa: E402
from capability_anchor.witness.client import Witnessing  # noqa: E402

ISS = "https://resolver.example"


def record(n: int) -> dict[str, object]:
    return {
        "v": "0.2",
        "sub": f"example:bench-{n}",
        "url": f"https://s{n}.bench.example/mcp",
        "status": "ok",
        "checked_at": "2026-10-28T10:05:00Z",
        "evidence": {"method": "https://resolver.example/method"},
    }


async def run(interval: float, seconds: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        Log.init(data, iss=ISS).close()
        with Log.open(data) as log, TestWitness("witness.test/bench", log.read.history.vkey()) as w:
            policy = f"witness w1 {w.vkey} {w.url}\nquorum w1\n".encode()
            with log.writer.lock, log.store.write():
                log.store.set_policy(policy, int(time.time()))
            published: dict[int, float] = {}
            cosigned: list[tuple[float, int]] = []
            checkpoint = log.checkpoint

            def timed_checkpoint() -> bytes | None:
                doc = checkpoint()
                size = log.store.history_size()
                published.setdefault(size, time.monotonic())
                return doc

            log.checkpoint = timed_checkpoint  # type: ignore[method-assign]
            witnessing = Witnessing(log, interval)
            submit = witnessing.submit

            def timed_submit(witness):  # type: ignore[no-untyped-def]
                outcome = submit(witness)
                if outcome.result == "cosigned":
                    cosigned.append((time.monotonic(), outcome.size))
                return outcome

            witnessing.submit = timed_submit  # type: ignore[method-assign]
            bg = Background(log, data, interval, witnessing=witnessing)
            await bg.start()
            end = time.monotonic() + seconds
            n = 0
            while time.monotonic() < end:
                await asyncio.to_thread(log.append, [record(n)])
                n += 1
                await asyncio.sleep(0.05)
            await asyncio.sleep(interval * 2 + 1.5)  # the last head's cosignature
            await bg.stop()
    latencies = []
    for size, at in published.items():
        first = next((t for t, s in cosigned if s >= size and t >= at), None)
        if first is not None:
            latencies.append(first - at)
    missing = len(published) - len(latencies)
    return {
        "interval_s": interval,
        "heads": len(published),
        "uncosigned": missing,
        "p50_s": statistics.median(latencies),
        "max_s": max(latencies),
        "max_over_interval": max(latencies) / interval,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interval", type=float, action="append", default=[])
    parser.add_argument("--seconds", type=float, default=15.0)
    args = parser.parse_args()
    for interval in args.interval or [1.0, 2.0]:
        result = asyncio.run(run(interval, args.seconds))
        print(
            f"interval {result['interval_s']:g} s: {result['heads']:.0f} heads, "
            f"{result['uncosigned']:.0f} never cosigned; publication -> first cosignature "
            f"p50 {result['p50_s'] * 1000:.0f} ms, max {result['max_s'] * 1000:.0f} ms "
            f"= {result['max_over_interval']:.2f} x the interval"
        )


if __name__ == "__main__":
    sys.exit(benchdoc.run("witnessing", main))
