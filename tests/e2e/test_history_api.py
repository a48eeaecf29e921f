"""SPEC §12.4 read API, against a real server process on a log of three days.

The tiles are read back by `tilekit.TileClient`, written from the C2SP tlog-tiles text with
no product code, which rebuilds every day's root at each of its heads' sizes and the history's
root at every size from the served tiles alone; the hashes are compared byte for byte with
`naive_rfc9162` over leaf hashes computed here with hashlib and rfc8785.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from capability_anchor.merkle import verify_inclusion
from capability_anchor.note import parse_tlog_proof
from tests.kit.apikit import IMMUTABLE, assert_error, wait_clear_of_midnight
from tests.kit.c2spkit import ensure_venv, run_peer
from tests.kit.logkit import ISS, record
from tests.kit.naive_rfc9162 import Naive
from tests.kit.serverkit import Server, serving
from tests.kit.tilekit import (
    D1_SIZES,
    D2_HEADS,
    Built,
    TileClient,
    build,
    head_key,
    payload,
    split_bundle,
    tile_name,
)


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build(tmp_path_factory.mktemp("history-api") / "data")


@pytest.fixture(scope="module")
def server(built: Built) -> Iterator[Server]:
    with serving(built.data, "--rate-limit", "0") as s:
        yield s


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


def fetcher(client: httpx.Client, prefix: str) -> TileClient:
    def fetch(name: str) -> bytes:
        r = client.get(f"{prefix}/{name}")
        assert r.status_code == 200, (prefix, name, r.text)
        assert r.headers["content-type"] == "application/octet-stream"
        assert r.headers["cache-control"] == IMMUTABLE
        return r.content

    return TileClient(fetch, 0)


def day_sizes(built: Built, day: str) -> list[int]:
    return [size for d, _, size in map(head_key, built.heads) if d == day]


def day_leaf_hashes(day: str, size: int) -> list[bytes]:
    # logkit's records carry no reserved members: the leaf claims are the record itself.
    return [leaf_hash(rfc8785.dumps(record(day, n))) for n in range(size)]


def test_the_log_is_as_built(built: Built, client: httpx.Client) -> None:
    assert day_sizes(built, built.d2) == [*range(1, D2_HEADS + 1), D2_HEADS]
    assert day_sizes(built, built.d1) == [*D1_SIZES, 310]
    assert len(built.heads) == D2_HEADS + 1 + len(D1_SIZES) + 1 + 1
    assert client.get(f"/roots/{built.today}").json()["tree_size"] == 3


def test_every_days_root_is_rebuilt_from_its_tiles_at_every_head(
    built: Built, client: httpx.Client
) -> None:
    for doc in built.heads:
        day, _, size = head_key(doc)
        tiles = fetcher(client, f"/roots/{day}")
        tiles.size = size
        root = tiles.root()
        assert root.hex() == client.get(f"/roots/{day}/{size}").json()["root"], (day, size)
        assert root == Naive(day_leaf_hashes(day, size)).root(size)


def test_day_tiles_and_bundles_match_the_naive_tree_byte_for_byte(
    built: Built, client: httpx.Client
) -> None:
    day = built.d1
    hashes = day_leaf_hashes(day, 310)
    naive = Naive(hashes)
    full = client.get(f"/roots/{day}/tile/0/000").content
    assert full == b"".join(hashes[:256])
    for width in (1, 44, 54):  # sizes 257, 300 and the sealed 310
        r = client.get(f"/roots/{day}/tile/0/001.p/{width}")
        assert r.content == b"".join(hashes[256 : 256 + width])
    level1 = client.get(f"/roots/{day}/tile/1/000.p/1").content
    assert level1 == naive.mth(0, 256)
    tiles = fetcher(client, f"/roots/{day}")
    tiles.size = 310
    leaves = tiles.leaves()
    assert leaves == [rfc8785.dumps(record(day, n)) for n in range(310)]
    bundle = split_bundle(client.get(f"/roots/{day}/tile/entries/001.p/44").content)
    assert bundle == leaves[256:300]


def test_the_history_root_is_rebuilt_from_its_tiles_at_every_size(
    built: Built, client: httpx.Client
) -> None:
    leaves = [payload(doc) for doc in built.heads]
    naive = Naive([leaf_hash(x) for x in leaves])
    tiles = fetcher(client, "/history")
    for size in range(1, len(leaves) + 1):
        tiles.size = size
        assert tiles.root() == naive.root(size), size
    assert tiles.leaves() == leaves
    assert client.get("/history/tile/1/000.p/1").content == naive.mth(0, 256)
    # A partial tile at every size: each level-0 width of the second tile, one per head.
    for width in range(1, len(leaves) - 255):
        r = client.get(f"/history/tile/0/001.p/{width}")
        assert r.content == b"".join(leaf_hash(x) for x in leaves[256 : 256 + width])


def test_tiles_no_published_size_makes_are_404(built: Built, client: httpx.Client) -> None:
    n = len(built.heads)
    d1 = built.d1
    missing = [
        "/history/tile/0/001",  # the second full tile: the history is at n < 512
        f"/history/tile/0/001.p/{n - 255}",  # one past the history's size
        "/history/tile/0/002.p/1",
        "/history/tile/1/000",
        "/history/tile/2/000.p/1",
        f"/history/tile/entries/001.p/{n - 255}",
        f"/roots/{d1}/tile/0/001.p/10",  # size 266: no head of that size
        f"/roots/{d1}/tile/0/001.p/55",  # past the sealed 310
        f"/roots/{d1}/tile/0/001",
        f"/roots/{d1}/tile/1/000.p/2",
        f"/roots/{d1}/tile/entries/001.p/10",
        f"/roots/{built.today}/tile/0/000.p/4",
        f"/roots/{built.today}/tile/0/000.p/2",  # 2 entries of today were never a head
        "/roots/2001-01-01/tile/0/000.p/1",  # a day with no head
    ]
    for url in missing:
        assert_error(client.get(url), "not_found")
    for url in (f"/roots/{d1}/tile/0/001.p/1", f"/roots/{d1}/tile/1/000.p/1"):
        assert client.get(url).status_code == 200, url


BAD_PATHS = [
    "00/000",  # leading zero in the level
    "01/000",
    "64/000",  # level 64
    "100/000",
    "-1/000",
    "0/0",  # the index is groups of three digits
    "0/0000",
    "0/x000/001",  # a leading group of zeros
    "0/x001",  # the last group has no x
    "0/001/001",  # every group but the last has an x
    "0/xx01/001",
    "0/x01/001",
    "0/000.p/0",  # width 0
    "0/000.p/256",  # a full tile is never .p/
    "0/000.p/257",
    "0/000.p/010",  # leading zero in the width
    "0/000.p/",
    "0/000.p",
    "0/000.q/1",
    "0",
    "entries",
    "entries/1",
    "entries/000.p/0",
    "Entries/000",
    "0/x001/x234/x567/x890/x123/x456/x789/000",  # more groups than any index
    "0/x009/x223/x372/x036/x854/x775/808",  # 2**63: over the largest index
    "a/000",
]


def test_bad_tile_paths_are_400(built: Built, client: httpx.Client) -> None:
    for path in BAD_PATHS:
        for prefix in ("/history/tile", f"/roots/{built.d1}/tile"):
            r = client.get(f"{prefix}/{path}")
            # A trailing slash is another spelling of a path, refused before the tile path
            # is parsed (one spelling per path, issue #20).
            want = (404, "not_found") if path.endswith("/") else (400, "bad_request")
            assert r.status_code == want[0], (prefix, path, r.status_code)
            assert_error(r, want[1])
    assert_error(client.get("/roots/2026-1-01/tile/0/000"), "bad_request")


def test_tiles_are_immutable_with_an_etag(built: Built, client: httpx.Client) -> None:
    r = client.get(f"/roots/{built.d1}/tile/0/000")
    assert r.status_code == 200
    assert r.headers["cache-control"] == IMMUTABLE
    assert r.headers["content-type"] == "application/octet-stream"
    again = client.get(
        f"/roots/{built.d1}/tile/0/000", headers={"If-None-Match": r.headers["etag"]}
    )
    assert again.status_code == 304 and again.content == b""


def test_a_tile_url_encodes_large_indices_as_the_text_says() -> None:
    assert tile_name(0, 1234067, 256) == "tile/0/x001/x234/067"
    assert tile_name(1, 5, 7) == "tile/1/005.p/7"
    assert tile_name("entries", 1000, 256) == "tile/entries/x001/000"


def test_the_product_parser_reads_what_the_client_writes() -> None:
    """The third opinion: our parser and the independent encoder agree on every index form."""
    from capability_anchor.merkle.tilepath import TileRequest, parse_tile_path

    for level, n, width in [
        (0, 0, 256),
        (0, 999, 1),
        (0, 1000, 255),
        (63, 1234067, 256),
        (2, 10**18, 3),
    ]:
        name = tile_name(level, n, width).removeprefix("tile/")
        assert parse_tile_path(name) == TileRequest(level, n, width)
        assert TileRequest(level, n, width).path == f"tile/{name}"
    assert parse_tile_path("entries/x001/000.p/9") == TileRequest(None, 1000, 9)


# --- checkpoints, proofs, the note key, the policy ------------------------------------------

ORIGIN = ISS.removeprefix("https://") + "/history"  # SPEC §12.2: resolver.example/history


def log_public_key(client: httpx.Client) -> bytes:
    (jwk,) = client.get("/keys").json()["keys"]
    x = jwk["x"]
    return base64.urlsafe_b64decode(x + "=" * (-len(x) % 4))


def read_checkpoint(note: bytes, public: bytes) -> tuple[int, bytes, list[str]]:
    """C2SP signed-note + tlog-checkpoint, read here with `cryptography` alone: the size,
    the root and the lines after the log's own signature line (cosignatures)."""
    text, sep, signatures = note.partition(b"\n\n")
    assert sep, note
    body = text + b"\n"
    origin, size, root_b64 = body.decode().split("\n")[:3]
    assert origin == ORIGIN
    lines = signatures.decode().split("\n")
    assert lines[-1] == ""
    dash, name, blob = lines[0].split(" ")
    assert (dash, name) == ("\u2014", ORIGIN)
    raw = base64.b64decode(blob, validate=True)
    key_id = hashlib.sha256(ORIGIN.encode() + b"\n\x01" + public).digest()[:4]
    assert raw[:4] == key_id
    Ed25519PublicKey.from_public_bytes(public).verify(raw[4:], body)
    return int(size), base64.b64decode(root_b64, validate=True), lines[1:-1]


def test_checkpoint_of_every_size_is_the_tiles_root_signed_by_the_log(
    built: Built, client: httpx.Client
) -> None:
    public = log_public_key(client)
    naive = Naive([leaf_hash(payload(doc)) for doc in built.heads])
    for size in range(1, len(built.heads) + 1):
        r = client.get(f"/history/checkpoint/{size}")
        assert r.status_code == 200, (size, r.text)
        assert r.headers["content-type"] == "text/plain; charset=utf-8"
        assert r.headers["cache-control"] == "no-cache"
        assert read_checkpoint(r.content, public) == (size, naive.root(size), [])
    served = client.get("/history/checkpoint")
    assert served.headers["cache-control"] == "no-cache" and served.headers["etag"]
    # No policy: the newest checkpoint with whatever cosignatures it has (none).
    assert served.content == client.get(f"/history/checkpoint/{len(built.heads)}").content
    again = client.get("/history/checkpoint", headers={"If-None-Match": served.headers["etag"]})
    assert again.status_code == 304


def test_checkpoint_sizes_are_digits_and_published(built: Built, client: httpx.Client) -> None:
    n = len(built.heads)
    for bad in ("0", "01", "+1", "1.0", "x", "1e3", "-1", str(2**63)):
        r = client.get(f"/history/checkpoint/{bad}")
        assert r.status_code == 400, bad
        assert_error(r, "bad_request")
    assert_error(client.get(f"/history/checkpoint/{n + 1}"), "not_found")


def test_vkey_is_the_log_key_under_the_origin(client: httpx.Client) -> None:
    r = client.get("/history/vkey")
    assert r.status_code == 200 and r.headers["content-type"] == "text/plain; charset=utf-8"
    public = log_public_key(client)
    key_id = hashlib.sha256(ORIGIN.encode() + b"\n\x01" + public).digest()[:4]
    key = base64.b64encode(b"\x01" + public).decode()
    expected = f"{ORIGIN}+{key_id.hex()}+{key}\n"
    assert r.text == expected


def test_no_policy_is_404(client: httpx.Client) -> None:
    assert_error(client.get("/history/policy"), "not_found")


def test_a_tlog_proof_for_every_head(built: Built, client: httpx.Client) -> None:
    leaves = [payload(doc) for doc in built.heads]
    naive = Naive([leaf_hash(x) for x in leaves])
    served = client.get("/history/checkpoint").content
    public = log_public_key(client)
    for index, doc in enumerate(built.heads):
        h = leaf_hash(leaves[index])
        r = client.get("/history/proof", params={"leaf_hash": h.hex()})
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "text/plain; charset=utf-8"
        assert r.headers["cache-control"] == "no-cache"
        proof = parse_tlog_proof(r.content)
        assert proof.extra == json.loads(doc)["jws"].encode("ascii")
        assert proof.index == index and proof.note == served
        size, root, _ = read_checkpoint(proof.note, public)
        path, _ = naive.inclusion(index, size)
        assert list(proof.path) == path
        verify_inclusion(h, index, size, list(proof.path), root)
    # At a size: the checkpoint of that size.
    h = leaf_hash(leaves[5])
    r = client.get("/history/proof", params={"leaf_hash": h.hex(), "size": "6"})
    proof = parse_tlog_proof(r.content)
    assert proof.note == client.get("/history/checkpoint/6").content
    assert list(proof.path) == naive.inclusion(5, 6)[0]


def test_tlog_proof_refusals(built: Built, client: httpx.Client) -> None:
    h = leaf_hash(payload(built.heads[5])).hex()
    for params in (
        {"leaf_hash": h, "size": "5"},  # a history of 5 does not hold leaf 5
        {"leaf_hash": h, "size": "0"},
        {"leaf_hash": h, "size": "06"},
        {"leaf_hash": h[:-1]},
        {"leaf_hash": "zz" * 32},
        {},
    ):
        assert_error(client.get("/history/proof", params=params), "bad_request")
    unknown = hashlib.sha256(b"no head").hexdigest()
    assert_error(client.get("/history/proof", params={"leaf_hash": unknown}), "not_found")
    past = {"leaf_hash": h, "size": str(len(built.heads) + 1)}  # no checkpoint of that size
    assert_error(client.get("/history/proof", params=past), "not_found")


def test_aics_tlog_verifies_the_served_checkpoint(client: httpx.Client) -> None:
    """An independent C2SP implementation reads what the real server serves."""
    python = ensure_venv()
    note = client.get("/history/checkpoint").text
    vkey = client.get("/history/vkey").text.strip()
    answer = run_peer(
        python,
        {
            "op": "verify",
            "note": note,
            "log_vkey": vkey,
            "witness_vkeys": [],
            "quorum": 0,
            "origin": ORIGIN,
        },
    )
    assert answer["ok"] and answer["log_ok"], answer
    flipped = note.replace(note.split("\n")[2], base64.b64encode(b"\x00" * 32).decode())
    answer = run_peer(
        python,
        {
            "op": "verify",
            "note": flipped,
            "log_vkey": vkey,
            "witness_vkeys": [],
            "quorum": 0,
            "origin": ORIGIN,
        },
    )
    assert not answer["ok"]


def test_head_requests_answer_like_get(built: Built, client: httpx.Client) -> None:
    for url in (f"/roots/{built.d1}/tile/0/000", "/history/tile/0/000", "/history/checkpoint"):
        got, head = client.get(url), client.head(url)
        assert head.status_code == 200 and head.content == b"", url
        assert head.headers["etag"] == got.headers["etag"], url
        assert head.headers["cache-control"] == got.headers["cache-control"], url


def test_verify_proof_fetches_the_history_proof_from_a_real_server(tmp_path: Path) -> None:
    """SPEC §12.5: with neither --history-proof nor --roots, verify-proof asks
    `<base>/history/proof` of the server the anchor names: check 8 passes over HTTP."""
    wait_clear_of_midnight()
    with serving(tmp_path / "data", "--rate-limit", "0") as s, s.client() as c:
        record = {
            "v": "0.2",
            "iss": s.url,
            "sub": "example:1",
            "url": "https://mcp.example.com",
            "status": "ok",
            "checked_at": "2026-12-01T09:00:00Z",
            "evidence": {"http_status": 200},
        }
        r = c.post("/records?prove=1", json={"records": [record]}, headers=s.writer_headers())
        assert r.status_code == 200, r.text
        served = c.get("/record", params={"id": "example:1"})
        assert served.status_code == 200, served.text
        path = tmp_path / "record.json"
        path.write_bytes(served.content)
        verify = Path(sys.executable).parent / "verify-proof"
        done = subprocess.run(
            [str(verify), str(path), "--keys", f"{s.url}/keys"],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS history: tlog-proof from " in done.stdout, done.stdout
    assert "/history/proof?leaf_hash=" in done.stdout
