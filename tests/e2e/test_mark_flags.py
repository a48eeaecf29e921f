"""The damage mark and the behind state as the request path sees them (`log.marks.MarkWatch`):
flags read again every WATCH_PERIOD_S. A mark another process writes (here: the test) is
refused at once by whatever would store or sign, which reads the files itself, and by every
read within the refresh period (decisions/37-stack.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx

from capability_anchor.log.marks import BEHIND, WATCH_PERIOD_S, Behind, mark_behind
from capability_anchor.store import damage
from tests.kit.obskit import observation
from tests.kit.serverkit import Server, serving

SEEN_WITHIN_S = WATCH_PERIOD_S + 2.0  # the period, and room for a loaded machine


def _soon(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + SEEN_WITHIN_S
    while not check():
        assert time.monotonic() < deadline, "the mark was not seen within the refresh period"
        time.sleep(0.05)


def _append(server: Server, client: httpx.Client, n: int) -> httpx.Response:
    batch = {"records": [observation(n, "marks")]}
    return client.post("/records", json=batch, headers=server.writer_headers())


def test_a_damage_mark_of_another_process_stops_writes_at_once_and_reads_soon(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with serving(data, "--rate-limit", "0") as server, server.client() as client:
        assert _append(server, client, 1).status_code == 200
        damage.mark(data, "a finding of another process")
        refused = _append(server, client, 2)
        assert refused.status_code == 503 and "damaged" in refused.json()["note"], refused.text
        assert client.post("/checkpoint", headers=server.writer_headers()).status_code == 503
        _soon(lambda: client.get("/roots").status_code == 503)
        assert client.get("/healthz").status_code == 503
        # Once seen it stays, the mark removed meanwhile (what was cached is not trusted).
        damage.clear(data)
        time.sleep(WATCH_PERIOD_S * 3)
        assert client.get("/roots").status_code == 503


def test_a_behind_state_of_another_process_stops_signing_at_once_and_shows_soon(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with serving(data, "--rate-limit", "0") as server, server.client() as client:
        assert _append(server, client, 1).status_code == 200
        assert client.get("/healthz").json()["status"] == "ok"
        mark_behind(data, Behind(BEHIND, "a test", 10, 1, int(time.time()), "published more"))
        refused = _append(server, client, 2)
        assert refused.status_code == 503, refused.text
        assert refused.json()["note"].startswith("behind_published"), refused.text
        assert client.post("/checkpoint", headers=server.writer_headers()).status_code == 503
        _soon(lambda: client.get("/healthz").json()["status"] == "degraded")
