"""What the write benchmark (`bench_writes.py`) asks a server besides its load: how long an
acknowledged record waits for a signed head that covers it, how large today's tree is, and
whether sampled acknowledged entries are stored where their answers said.

Black-box over HTTP only (SPEC §6), so the same checks run against any implementation of
the write path: the prober posts one record every PROBE_EVERY s through a connection of its
own and notes when its 200 arrived and its (day, leaf_index); a poller reads
`GET /roots/<day>` (the day's newest head) every POLL_EVERY s and, for each noted record
whose index is below the head's `tree_size`, takes (that answer's arrival - the ack) as the
record's wait. The figure is what a client sees: it includes the poll period and the
latency of the poll itself, never less than the server's real delay.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field

from bench_api import Client, ClientError
from benchkit import quantile, record
from wrkkit import Sample

PROBE_EVERY = 0.2
POLL_EVERY = 0.05
ANSWER_WITHIN = 10.0  # s: a request without an answer by then counts as "no answer"


async def ask(
    client: Client, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """One request, bounded in time; (0, reason) when there was no answer."""
    try:
        if method == "GET":
            return await asyncio.wait_for(client.get(path), ANSWER_WITHIN)
        return await asyncio.wait_for(client.post(path, body, headers or {}), ANSWER_WITHIN)
    except (ClientError, TimeoutError) as exc:
        return 0, type(exc).__name__.encode()


@dataclass
class Probe:
    sent: int = 0
    acked: int = 0
    refused: Counter[str] = field(default_factory=Counter)  # by status, 0 = no answer
    waits: list[float] = field(default_factory=list)  # covered - acked, s
    uncovered: int = 0  # acknowledged, and no head covered them within the grace period

    def describe(self, interval: float) -> str:
        waits = sorted(self.waits)
        p50, p99 = quantile(waits, 0.5), quantile(waits, 0.99)
        top = waits[-1] if waits else float("nan")
        refused = dict(self.refused) or 0
        return (
            f"{self.acked}/{self.sent} probes acknowledged (refused {refused}); ack to covering "
            f"head p50 {p50:.2f} s, p99 {p99:.2f} s, max {top:.2f} s; {self.uncovered} never "
            f"covered within {grace(interval):g} s (interval {interval:g} s)"
        )

    def p99(self) -> float:
        return quantile(sorted(self.waits), 0.99)


def grace(interval: float) -> float:
    """How long after the load the poller keeps waiting for the last probes' head."""
    return 4 * interval + 5


async def run_probe(
    poster: Client,
    poller: Client,
    headers: dict[str, str],
    stop: asyncio.Event,
    interval: float,
    tag: str,
) -> Probe:
    """Probe until `stop` is set, then wait up to `grace(interval)` s for the last heads."""
    probe = Probe()
    pending: list[tuple[float, str, int]] = []  # (acked at, day, leaf_index)
    posted = asyncio.Event()  # the last post has its answer: nothing more will be pending

    async def post() -> None:
        began = time.monotonic()
        while not stop.is_set():
            body = json.dumps({"records": [record(probe.sent, tag)]}).encode()
            probe.sent += 1
            status, answer = await ask(poster, "POST", "/records", body, headers)
            if status == 200:
                entry = json.loads(answer)["entries"][0]
                if entry.get("duplicate") is not True:
                    probe.acked += 1
                    pending.append((time.monotonic(), entry["day"], entry["leaf_index"]))
            else:
                probe.refused[str(status)] += 1
            due = began + probe.sent * PROBE_EVERY  # a fixed schedule, not one after another
            with_stop = asyncio.create_task(stop.wait())
            await asyncio.wait({with_stop}, timeout=max(0.0, due - time.monotonic()))
            with_stop.cancel()
        posted.set()

    async def poll() -> None:
        ends: float | None = None
        while True:
            if posted.is_set() and ends is None:
                ends = time.monotonic() + grace(interval)
            if ends is not None and (not pending or time.monotonic() > ends):
                return
            for day in sorted({d for _, d, _ in pending}):
                status, doc = await ask(poller, "GET", f"/roots/{day}")
                if status != 200:
                    continue
                size, now = json.loads(doc)["tree_size"], time.monotonic()
                for item in [p for p in pending if p[1] == day and p[2] < size]:
                    probe.waits.append(now - item[0])
                    pending.remove(item)
            await asyncio.sleep(POLL_EVERY)

    await asyncio.gather(post(), poll())
    probe.uncovered = len(pending)
    return probe


async def tree_size(client: Client, headers: dict[str, str], tries: int = 20) -> int:
    """Today's tree size, from the head `POST /checkpoint` signs (or finds) over all of it;
    a busy answer is asked again a second later."""
    for _ in range(tries):
        status, doc = await ask(client, "POST", "/checkpoint", b"", headers)
        if status == 200:
            head = json.loads(doc)
            return 0 if head is None else int(head["tree_size"])
        await asyncio.sleep(1.0)
    raise RuntimeError(f"POST /checkpoint did not answer 200 in {tries} tries (last {status})")


async def stored(client: Client, samples: list[Sample]) -> int:
    """How many sampled acks `/entries` shows stored at their (day, leaf_index), same hash."""
    found = 0
    for s in samples:
        status, body = await ask(client, "GET", f"/entries/{s.day}?start={s.leaf_index}&limit=1")
        if status == 200:
            entries = json.loads(body)["entries"]
            found += bool(entries) and (entries[0]["leaf_index"], entries[0]["leaf_hash"]) == (
                s.leaf_index,
                s.leaf_hash,
            )
    return found
