"""A store read that stalls stalls its own request, not the server: every read the handlers
do not answer on the event loop by design (docs/explanation/api-reads.md) is made to block
on an event inside the reader's real store, and while it blocks the same server answers
`/healthz` and a head document (a read bounded by design, on the loop); the witness server
likewise. No timing is asserted: the stalled request is still waiting when the others have
been answered, and it completes once released."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar.testing import TestClient

from capability_anchor.api.app import create_app
from capability_anchor.api.settings import Settings
from capability_anchor.witness.server.app import create_witness_app
from capability_anchor.witness.server.protocol import Witness
from tests.kit.apikit import build_history, insert_stamp
from tests.kit.witnesskit import witness_cli

HANG_GUARD_S = 60.0
"""Only so a broken server fails the test instead of hanging it; nothing is timed."""


def _stalls(h: Any) -> list[tuple[str, str, str]]:
    """(store method made to block, method, URL of a request that reads through it)."""
    x_hash = h.leaf_hashes(h.d2)[5].hex()
    return [
        ("entries", "GET", f"/entries/{h.today}"),
        ("sealed_heads", "GET", "/roots"),
        ("sealed_heads", "GET", "/roots/latest"),
        ("sealed_heads", "GET", "/"),
        ("key_records", "GET", "/keys"),
        ("key_records", "GET", "/keys/records"),
        ("stamps", "GET", f"/roots/{h.d2}/timestamps"),
        ("stamps", "GET", f"/roots/{h.d2}/timestamp"),
        ("find_leaf", "GET", f"/proof?leaf_hash={x_hash}"),
        ("find_leaf", "POST", "/prove"),
        ("witnessed_marker", "GET", "/history/checkpoint"),
        ("cosignatures", "GET", "/history/checkpoint/2"),
    ]


@contextmanager
def stalled(store: Any, name: str) -> Iterator[tuple[threading.Event, threading.Event]]:
    """`store.<name>` blocks until released: (entered, release)."""
    entered, release = threading.Event(), threading.Event()
    real: Callable[..., Any] = getattr(store, name)

    def blocking(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        release.wait(HANG_GUARD_S)
        return real(*args, **kwargs)

    setattr(store, name, blocking)
    try:
        yield entered, release
    finally:
        release.set()
        delattr(store, name)


def _in_thread(call: Callable[[], httpx.Response]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        out["response"] = call()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _answered(call: Callable[[], httpx.Response]) -> httpx.Response | None:
    """The response, or None when the server has not answered (the loop is blocked)."""
    thread, out = _in_thread(call)
    thread.join(HANG_GUARD_S)
    return None if thread.is_alive() else out["response"]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Any, TestClient[Any]]]:
    h = build_history(tmp_path / "data")
    insert_stamp(h.data, h.d2, "https://tsa.example", b"0\x00", "2026-01-01T00:00:00Z")
    app = create_app(Settings(data_dir=h.data, background=False, rate_limit=0, clock=h.clock))
    with TestClient(app) as client:
        yield h, client


def test_a_stalled_store_read_leaves_the_server_answering(
    served: tuple[Any, TestClient[Any]],
) -> None:
    h, client = served
    store = client.app.state.service.reader.store
    for name, method, url in _stalls(h):
        body = {"json": {"record": h.x}} if method == "POST" else {}
        with stalled(store, name) as (entered, release):
            slow, slow_out = _in_thread(partial(client.request, method, url, **body))
            assert entered.wait(HANG_GUARD_S), f"{url} never read {name}"
            # The stalled read holds a worker thread; the loop still takes requests.
            health = _answered(partial(client.get, "/healthz"))
            assert health is not None, f"/healthz waited for {url}'s stalled {name}"
            head = _answered(partial(client.get, f"/roots/{h.d2}"))
            assert head is not None, f"a head document waited for {url}'s stalled {name}"
            assert slow.is_alive() and "response" not in slow_out, url
            assert (health.status_code, head.status_code) == (200, 200)
            release.set()
            slow.join(HANG_GUARD_S)
        assert not slow.is_alive(), url
        assert slow_out["response"].status_code == 200, (url, slow_out["response"].text)


def test_a_stalled_witness_store_read_leaves_the_witness_answering(tmp_path: Path) -> None:
    """The witness server reads its store only on worker threads, too."""
    data = tmp_path / "witness"
    assert witness_cli(data, "init", "--name", "witness.test/ours").returncode == 0
    witness = Witness.open(data)
    url = f"/{hashlib.sha256(b'log.test/none').hexdigest()}/checkpoint"
    with TestClient(create_witness_app(witness, rate_limit=0)) as client:
        with stalled(witness.store, "log_by_hash") as (entered, release):
            slow, slow_out = _in_thread(partial(client.get, url))
            assert entered.wait(HANG_GUARD_S), "the monitoring view never read the store"
            health = _answered(partial(client.get, "/healthz"))
            assert health is not None, "/healthz waited for the stalled monitoring view"
            assert slow.is_alive() and "response" not in slow_out
            assert health.status_code == 200 and health.text == "ok\n"
            release.set()
            slow.join(HANG_GUARD_S)
        assert not slow.is_alive()
        assert slow_out["response"].status_code == 404  # no checkpoint cosigned for it
