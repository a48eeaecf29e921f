"""The monitor reaches a log through the environment's HTTP proxy, as httpx (the package's
other client, `verify-proof`'s) does: `HTTP_PROXY` is used, `NO_PROXY` naming the host
bypasses it, a proxy that is down is exit 2 naming the URL, and a SOCKS proxy (which
urllib3 cannot speak by itself) is exit 2 before any request. The proxy is a real one on
loopback: a forward proxy in a thread that relays each absolute-URI GET to a real `serve`."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from capability_anchor.log import Log
from tests.e2e.test_monitor_http import ORIGIN, SERVE_ARGS, grow
from tests.kit.logkit import CLI, ISS
from tests.kit.serverkit import Server, ThreadServer, free_port, serving


class ForwardProxy:
    """Relays `GET http://host:port/path` (the form a client sends to a proxy)."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.server = ThreadServer(self.answer)
        self.url = self.server.url

    def answer(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        self.seen.append(handler.path)
        if not handler.path.startswith("http://"):
            handler.send_error(400, "a proxy takes absolute URIs")
            return
        got = httpx.get(handler.path, timeout=10, trust_env=False)
        handler.send_response(got.status_code)
        handler.send_header("Content-Length", str(len(got.content)))
        handler.end_headers()
        handler.wfile.write(got.content)

    def close(self) -> None:
        self.server.close()


@contextlib.contextmanager
def forward_proxy() -> Iterator[ForwardProxy]:
    proxy = ForwardProxy()
    try:
        yield proxy
    finally:
        proxy.close()


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    data = tmp_path_factory.mktemp("proxied") / "data"
    Log.init(data, iss=ISS).close()
    grow(data, "p", 3)
    with serving(data, *SERVE_ARGS) as server:
        keys = data.parent / "keys.json"
        keys.write_bytes(httpx.get(f"{server.url}/keys", trust_env=False).content)
        yield server, keys


def monitor(server: Server, keys: Path, state: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CAPABILITY_ANCHOR_") and k.lower() not in PROXY_VARS
    }
    argv = [str(CLI), "monitor", server.url, "--keys", str(keys), "--state", str(state)]
    return subprocess.run(
        [*argv, "--origin", ORIGIN],
        capture_output=True,
        text=True,
        env={**clean, **env},
        check=False,
    )


PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


def test_the_monitor_goes_through_http_proxy(log: tuple[Server, Path], tmp_path: Path) -> None:
    server, keys = log
    with forward_proxy() as proxy:
        done = monitor(server, keys, tmp_path / "state", HTTP_PROXY=proxy.url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["result"] == "consistent"
    assert f"{server.url}/history/checkpoint" in proxy.seen, proxy.seen
    assert any("/roots/" in url for url in proxy.seen), proxy.seen  # the heads' documents too


def test_no_proxy_naming_the_host_bypasses_it(log: tuple[Server, Path], tmp_path: Path) -> None:
    server, keys = log
    with forward_proxy() as proxy:
        done = monitor(server, keys, tmp_path / "state", http_proxy=proxy.url, no_proxy="127.0.0.1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert proxy.seen == []


def test_a_proxy_that_is_down_is_exit_2(log: tuple[Server, Path], tmp_path: Path) -> None:
    server, keys = log
    done = monitor(server, keys, tmp_path / "state", HTTP_PROXY=f"http://127.0.0.1:{free_port()}")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{server.url}/history/checkpoint" in done.stderr and done.stdout == ""
    assert not (tmp_path / "state" / "state.json").exists()


def test_a_socks_proxy_is_refused_before_any_request(
    log: tuple[Server, Path], tmp_path: Path
) -> None:
    server, keys = log
    done = monitor(server, keys, tmp_path / "state", ALL_PROXY="socks5://127.0.0.1:1080")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "not an http(s) proxy" in done.stderr
