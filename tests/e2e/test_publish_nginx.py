"""The static read path as published: a real `serve --publish DIR` grows a log, Debian's nginx
serves DIR with the docs' config (docs/how-to/postgresql.md, "Publish the static read
path"), and every reader is pointed at nginx only (the service is stopped by then):

- `capability-anchor monitor NGINX_URL` follows the log once nginx also maps the read API's
  paths onto the files (`/roots/<day>/<n>` is `<day>/<n>.json`, as the monitor's own
  FolderSource maps them); with the docs' config alone it cannot (exit 2, no alarm);
- `verify-proof --head URL` of a proved record, every check but the stamp passing;
- a tlog-tiles client: the checkpoint and history tiles over HTTP, an inclusion proof of a
  history leaf (the package's own tile reader and verifier, and tilekit's independent one);
- the Cache-Control headers;
- a published head rewritten in the folder: `audit --roots` exits 1 and the next publish
  refuses, saying so in the service's log.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from capability_anchor.keys import KeySet
from capability_anchor.merkle import TileNodes, hash_leaf, inclusion_nodes, verify_inclusion
from capability_anchor.merkle.nodes import resolve
from capability_anchor.note import open_checkpoint
from capability_anchor.read.source import HttpSource, read_bundles, read_tile
from capability_anchor.verify.history_checks import log_verifiers
from tests.kit.apikit import wait_clear_of_midnight
from tests.kit.nginxkit import API_PATHS, IMMUTABLE, Nginx, nginx, nginx_serving
from tests.kit.obskit import observation, verify_answered_proof
from tests.kit.serverkit import CLI, serving
from tests.kit.tilekit import TileClient, payload

VERIFY_PROOF = CLI.parent / "verify-proof"
RECORDS = 3
SERVE_ARGS = ("--checkpoint-interval", "1", "--rate-limit", "0")


def until(done: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=120, check=False
    )


@dataclass
class Published:
    data: Path
    folder: Path
    day: str
    size: int  # the history's size, as the last checkpoint has it
    origin: str
    checkpoint: bytes
    record: dict[str, Any]  # as GET /record served it
    entries: list[dict[str, Any]]  # the ?prove=1 answers' entries


def publish(data: Path, folder: Path) -> Published:
    """A served log (RECORDS records, each posted alone with ?prove=1), published into
    `folder` until its checkpoint is the service's; the service is stopped on return."""
    wait_clear_of_midnight()
    with serving(data, "--publish", str(folder), *SERVE_ARGS) as server, server.client() as c:
        entries = []
        for n in range(RECORDS):
            answer = c.post(
                "/records?prove=1",
                headers=server.writer_headers(),
                json={"records": [observation(n, "nginx", iss=server.url)]},
            )
            assert answer.status_code == 200, answer.text
            entries.append(answer.json()["entries"][0])
        record = c.get("/record", params={"id": "example:nginx-1"})
        assert record.status_code == 200, record.text
        checkpoint = c.get("/history/checkpoint").content
        published = folder / "history" / "checkpoint"
        until(
            lambda: published.exists() and published.read_bytes() == checkpoint,
            30,
            f"the published checkpoint is not the service's\n{server.stderr()}",
        )
    lines = checkpoint.decode().split("\n")
    return Published(
        data,
        folder,
        entries[-1]["anchor"]["day"],
        int(lines[1]),
        lines[0],
        checkpoint,
        record.json(),
        entries,
    )


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Published:
    nginx()  # skips before the log is built when nginx cannot be had
    root = tmp_path_factory.mktemp("publish-nginx")
    return publish(root / "data", root / "public")


@pytest.fixture(scope="module")
def web(published: Published) -> Iterator[Nginx]:
    """nginx with the docs' config, serving the folder."""
    with nginx_serving(published.folder, published.folder.parent / "nginx") as server:
        yield server


@pytest.fixture(scope="module")
def api_web(published: Published) -> Iterator[Nginx]:
    """The docs' config plus rewrites from the read API's paths to the export's files."""
    prefix = published.folder.parent / "nginx-api"
    with nginx_serving(published.folder, prefix, extra=API_PATHS) as server:
        yield server


def get(url: str) -> bytes:
    answer = httpx.get(url, timeout=10)
    assert answer.status_code == 200, (url, answer.status_code)
    return answer.content


# --- monitor -------------------------------------------------------------------------------


def test_monitor_follows_the_folder_behind_nginx(published: Published, api_web: Nginx) -> None:
    state = published.folder.parent / "monitor-state"
    keys = published.folder / "keys.json"
    argv = (CLI, "monitor", api_web.url, "--keys", keys, "--state", state)
    done = run(*argv, "--origin", published.origin, "--entries")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["result"] == "consistent"
    assert summary["size"] == published.size
    assert summary["origin"] == published.origin
    # Every head document was read through nginx, by the API's path.
    log = api_web.access_log()
    for size in range(1, RECORDS + 1):
        assert f'"GET /roots/{published.day}/{size} HTTP/1.1" 200' in log
    again = run(*argv)  # the origin is pinned in the state now
    assert again.returncode == 0, again.stdout + again.stderr


def test_verify_proof_with_the_head_nginx_serves(published: Published, web: Nginx) -> None:
    record = published.record
    day, size = record["anchor"]["day"], record["proof"]["tree_size"]
    path = published.folder.parent / "record.json"
    path.write_text(json.dumps(record))
    head = f"{web.url}/{day}/{size}.json"
    done = run(
        VERIFY_PROOF,
        path,
        "--head",
        head,
        "--keys",
        f"{web.url}/keys.json",
        "--history-proof",
        f"{web.url}/{day}/{size}.tlog-proof",
        "--json",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    checks = {c["name"]: c["result"] for c in json.loads(done.stdout)["checks"]}
    assert checks == {
        "record_signature": "PASS",
        "record_lifetime": "PASS",
        "leaf": "PASS",
        "inclusion": "PASS",
        "head_signature": "PASS",
        "head_matches": "PASS",
        "timestamp": "SKIP",  # an unsealed head: no stamp, and no --tsa-ca
        "history": "PASS",
        "witnesses": "SKIP",  # no --policy
    }
    assert f'"GET /{day}/{size}.json HTTP/1.1" 200' in web.access_log()


def test_verify_proof_refuses_a_head_of_another_size(published: Published, web: Nginx) -> None:
    """The URL names a head nginx serves, but not the one the record's proof is against."""
    record = published.record
    day, size = record["anchor"]["day"], record["proof"]["tree_size"]
    other = 1 if size != 1 else 2
    path = published.folder.parent / "record-other.json"
    path.write_text(json.dumps(record))
    head, keys = f"{web.url}/{day}/{other}.json", f"{web.url}/keys.json"
    done = run(VERIFY_PROOF, path, "--head", head, "--keys", keys, "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    checks = {c["name"]: c["result"] for c in json.loads(done.stdout)["checks"]}
    assert checks["head_signature"] == "PASS"  # a genuine head: only not this record's
    assert checks["head_matches"] == "FAIL"


# --- tlog-tiles over HTTP --------------------------------------------------------------------


def test_a_tlog_tiles_client_proves_a_history_leaf(published: Published, web: Nginx) -> None:
    source = HttpSource(web.url)
    try:
        data = source.read("history/checkpoint")
        assert data == published.checkpoint
        keys = KeySet.from_json(get(f"{web.url}/keys.json"))
        verifiers = log_verifiers(published.origin, keys, None)
        checkpoint = open_checkpoint(data, verifiers, origin=published.origin).checkpoint
        size = checkpoint.size
        assert size == published.size
        # The leaves: the entry bundle the size needs, each a head's JWS payload.
        (leaves,) = list(read_bundles(source, "history/", size, [0]))
        assert len(leaves) == size
        nodes = TileNodes(lambda level, i: read_tile(source, "history/", size, level, i))
        for index, leaf in enumerate(leaves):
            path = resolve(inclusion_nodes(index, size), nodes.node)
            verify_inclusion(hash_leaf(leaf), index, size, path, checkpoint.root)
        # Leaf i is the head of size i + 1 (one record per head), as nginx serves it.
        for index, leaf in enumerate(leaves):
            assert payload(get(f"{web.url}/{published.day}/{index + 1}.json")) == leaf
    finally:
        source.close()
    # tilekit's client, written from the tlog-tiles text alone, rebuilds the same root.
    independent = TileClient(lambda name: get(f"{web.url}/history/{name}"), size)
    assert independent.root() == checkpoint.root
    assert independent.leaves() == leaves


def test_a_tampered_tile_fails_the_inclusion_proof(published: Published, web: Nginx) -> None:
    """The same proof with one hash of the fetched tile changed: the root does not match."""
    from capability_anchor.errors import CapabilityAnchorError

    source = HttpSource(web.url)
    try:
        size = published.size
        keys = KeySet.from_json(get(f"{web.url}/keys.json"))
        root = open_checkpoint(
            published.checkpoint, log_verifiers(published.origin, keys, None)
        ).checkpoint.root
        (leaves,) = list(read_bundles(source, "history/", size, [0]))

        def tampered(level: int, i: int) -> bytes:
            tile = bytearray(read_tile(source, "history/", size, level, i))
            tile[-1] ^= 1  # the last leaf's hash: on leaf 0's path
            return bytes(tile)

        path = resolve(inclusion_nodes(0, size), TileNodes(tampered).node)
        with pytest.raises(CapabilityAnchorError):
            verify_inclusion(hash_leaf(leaves[0]), 0, size, path, root)
    finally:
        source.close()


# --- cache headers ---------------------------------------------------------------------------


def test_cache_headers(published: Published, web: Nginx) -> None:
    day = published.day
    expected = {
        f"{day}/1.json": IMMUTABLE,
        f"{day}/1.tlog-proof": IMMUTABLE,
        f"{day}/tile/0/000.p/1": IMMUTABLE,
        "history/tile/0/000.p/1": IMMUTABLE,
        "history/tile/entries/000.p/1": IMMUTABLE,
        "history/vkey": IMMUTABLE,
        "history/checkpoint": "public, max-age=5",
        "index.json": "public, max-age=5",
        "keys.json": "public, max-age=300",
    }
    with httpx.Client(base_url=web.url, timeout=10) as client:
        for path, cache in expected.items():
            answer = client.get(f"/{path}")
            assert answer.status_code == 200, path
            assert answer.headers["cache-control"] == cache, path
            assert answer.content == (published.folder / path).read_bytes(), path
    checkpoint = httpx.get(f"{web.url}/history/checkpoint", timeout=10)
    assert checkpoint.headers.get_list("cache-control") == ["public, max-age=5"]


# --- attack ----------------------------------------------------------------------------------


def test_attack_tampered_published_head_fails_audit_and_stops_publishing(
    published: Published, tmp_path: Path
) -> None:
    """An attacker with write access to the folder rewrites a published head document (one
    hex digit of its root): `audit --roots` exits 1 naming it, and the service, publishing
    again into that folder, refuses to overwrite it and publishes no newer checkpoint."""
    data, folder = tmp_path / "data", tmp_path / "public"
    shutil.copytree(published.data, data)
    shutil.copytree(published.folder, folder)
    target = folder / published.day / "2.json"
    doc = json.loads(target.read_bytes())
    doc["root"] = ("0" if doc["root"][0] != "0" else "1") + doc["root"][1:]
    target.write_text(json.dumps(doc, separators=(",", ":")))
    tampered = target.read_bytes()

    audit = run(CLI, "audit", "--data", data, "--roots", folder)
    assert audit.returncode == 1, audit.stdout + audit.stderr
    problems = json.loads(audit.stdout)["problems"]
    assert f"{target} differs from the log's head {published.day}/2" in problems

    with serving(data, "--publish", str(folder), *SERVE_ARGS) as server, server.client() as c:
        answer = c.post(
            "/records?prove=1",
            headers=server.writer_headers(),
            json={"records": [observation(RECORDS, "nginx")]},
        )
        assert answer.status_code == 200, answer.text
        verify_answered_proof(answer.json()["entries"][0])
        until(
            lambda: "exists with different bytes" in server.stderr(),
            30,
            f"the service did not refuse to publish\n{server.stderr()}",
        )
        # The log itself goes on: a checkpoint covering the new head, then a tick to publish it.
        until(
            lambda: int(c.get("/history/checkpoint").text.split("\n")[1]) > published.size,
            30,
            "no checkpoint covers the new head",
        )
        time.sleep(2.5)
        stderr = server.stderr()
    assert f"publish to {folder} failed" in stderr
    assert str(target) in stderr
    assert target.read_bytes() == tampered  # compared, never rewritten
    assert "nothing was written" in stderr
    assert not (folder / published.day / f"{RECORDS + 1}.json").exists()
    assert (folder / "history" / "checkpoint").read_bytes() == published.checkpoint
