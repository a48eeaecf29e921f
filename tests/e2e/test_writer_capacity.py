"""Writers keep their own capacity (issue #21, item 6): unauthenticated `POST /prove` work
never takes what Bearer-authenticated writers need.

The red team's attack, on a real `serve` over loopback: 32 connections sending ~61 KB
`/prove` bodies back to back, from 16 source addresses (127.0.0.2 to 127.0.0.17), each
address paced under the public rate limit, while a writer POSTs batches. With one shared
body-check queue 140 of 201 writer POSTs got 503; here every one gets 200. `/prove` may get
503 under the flood, and then says it is busy, that it is `/prove`'s own capacity that is
full, and when to retry.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

from capability_anchor.api.bodies import PUBLIC_BUSY_NOTE
from tests.kit.obskit import observation
from tests.kit.serverkit import Server, serving

CONNECTIONS = 32
ADDRESSES = 16
PER_CONNECTION_RATE = 40  # requests per second: 2 connections per address, 80/s < 100/s
WRITER_POSTS = 201


def _prove_body() -> bytes:
    """A record of ~61 KB (its leaf is over the 16 KiB limit: the worker parses all of it,
    then refuses it), under the 64 KiB `/prove` cap."""
    record = observation(0, "flood", pad="x" * 60_000)
    body = json.dumps({"record": record}).encode()
    assert 60_000 < len(body) < 64 * 1024
    return body


def _flood(server: Server, n: int, stop: threading.Event, seen: Counter[str]) -> None:
    address = f"127.0.0.{2 + n % ADDRESSES}"
    body = _prove_body()
    transport = httpx.HTTPTransport(local_address=address)
    with httpx.Client(base_url=server.url, transport=transport, timeout=60) as client:
        while not stop.is_set():
            started = time.monotonic()
            try:
                r = client.post(
                    "/prove", content=body, headers={"Content-Type": "application/json"}
                )
            except httpx.TransportError as exc:
                seen[f"transport: {type(exc).__name__}"] += 1
                continue
            if r.status_code == 503:
                seen[f"503 {r.json()['note']}"] += 1
            else:
                seen[str(r.status_code)] += 1
            # Paced: this connection never sends more than PER_CONNECTION_RATE a second.
            rest = 1 / PER_CONNECTION_RATE - (time.monotonic() - started)
            if rest > 0:
                time.sleep(rest)


def test_a_prove_flood_under_the_rate_limit_never_takes_writer_capacity(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serving(data, "--checkpoint-interval", "3600") as server:
        stop = threading.Event()
        seen: Counter[str] = Counter()
        flooders = [
            threading.Thread(target=_flood, args=(server, n, stop, seen), daemon=True)
            for n in range(CONNECTIONS)
        ]
        writer_answers: Counter[int] = Counter()
        refused: list[str] = []
        try:
            for t in flooders:
                t.start()
            # The flood is on before the first write.
            while sum(seen.values()) < CONNECTIONS:
                time.sleep(0.05)
            with server.client(timeout=120) as client:
                for n in range(WRITER_POSTS):
                    batch = {
                        "records": [
                            observation(i, f"w{n}", sub=f"example:w{n}-{i}") for i in range(5)
                        ]
                    }
                    r = client.post("/records", json=batch, headers=server.writer_headers())
                    writer_answers[r.status_code] += 1
                    if r.status_code != 200:
                        refused.append(r.text)
        finally:
            stop.set()
            for t in flooders:
                t.join(120)
        flood = dict(seen)
        assert writer_answers == {200: WRITER_POSTS}, (writer_answers, refused[:3], flood)
        # The flood was real: every connection was answered, none of them over the limit.
        assert sum(seen.values()) >= CONNECTIONS * 2, flood
        assert "429" not in seen, flood
        # /prove refuses its own work only, and says so: busy, whose capacity, when to retry.
        for answer in seen:
            assert answer in ("400", f"503 {PUBLIC_BUSY_NOTE}"), flood


def test_a_full_public_lane_leaves_the_writers_lane_free() -> None:
    """The pool itself (real worker processes), with room for one body per lane: while a
    slow public body is being checked a second public one is refused at once, busy, and a
    writer's body is checked all the same."""
    import asyncio

    from capability_anchor.api.bodies import INLINE_BODY, BodyChecker, Busy

    slow = b'{"record":{"a":[' + b",".join([b"1"] * 2_000_000) + b"]}}"
    # Over INLINE_BODY, both: a smaller body is checked on the loop, never queued.
    pad = b"x" * INLINE_BODY
    small = b'{"records":[{"a":1,"pad":"' + pad + b'"}]}'
    second = b'{"record":{"a":1,"pad":"' + pad + b'"}}'

    async def run() -> tuple[str, str, str]:
        checker = BodyChecker(workers=1, queue=1)
        checker.start()
        try:
            first = asyncio.create_task(checker.check("record", slow, "https://x.example", 10))
            await asyncio.sleep(0.05)
            try:
                await checker.check("record", second, "https://x.example", 10)
                public = "checked"
            except Busy as busy:
                public = busy.note
            code, _ = await checker.check("records", small, "https://x.example", 10, writer=True)
            await first
            return public, code, PUBLIC_BUSY_NOTE
        finally:
            checker.stop()

    public, writer, note = asyncio.run(run())
    assert public == note
    # Checked (and refused for what it is, not for want of room).
    assert writer == "invalid_record"
