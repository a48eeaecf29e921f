"""An independent C2SP tlog-tiles client, written from the tlog-tiles text alone (no code
shared with `capability_anchor`), and the test log the history tests read.

The client knows only what the text says: a tile at level L, index N holds the Merkle Tree
Hashes `MTH(D[(N·256 + i)·256**L : (N·256 + i + 1)·256**L])`, 256 of them when full; the
partial tile at level L of a tree of size s has `floor(s / 256**L) mod 256` of them; index
N is written in zero-padded groups of three digits, all but the last prefixed with `x`; an
entry bundle is the leaves, each prefixed by its big-endian uint16 length. From that and a
tree size it fetches just the tiles that size needs and rebuilds the root (RFC 6962 §2.1:
the tree splits at the largest power of two smaller than its size).
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from capability_anchor.log import Log

from .apikit import Clock, day_start, shift_day, wait_clear_of_midnight
from .logkit import ISS, record

WIDTH = 256
HASH = 32


def encode_index(n: int) -> str:
    digits = str(n)
    digits = "0" * (-len(digits) % 3) + digits
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    return "/".join(["x" + g for g in groups[:-1]] + [groups[-1]])


def tile_name(level: int | str, n: int, width: int) -> str:
    suffix = "" if width == WIDTH else f".p/{width}"
    return f"tile/{level}/{encode_index(n)}{suffix}"


def perfect_root(hashes: list[bytes]) -> bytes:
    while len(hashes) > 1:
        hashes = [
            hashlib.sha256(b"\x01" + hashes[i] + hashes[i + 1]).digest()
            for i in range(0, len(hashes), 2)
        ]
    return hashes[0]


def split_bundle(data: bytes) -> list[bytes]:
    leaves, at = [], 0
    while at < len(data):
        n = int.from_bytes(data[at : at + 2], "big")
        leaves.append(data[at + 2 : at + 2 + n])
        at += 2 + n
    assert at == len(data), "an entry bundle ends inside an entry"
    return leaves


@dataclass
class TileClient:
    """`fetch(name)` returns the bytes of `tile/...` under some prefix (HTTP or a folder)."""

    fetch: Callable[[str], bytes]
    size: int
    fetched: list[str] = field(default_factory=list)

    def width(self, level: int, n: int) -> int:
        return min(WIDTH, (self.size >> (8 * level)) - WIDTH * n)

    def tile(self, level: int, n: int) -> list[bytes]:
        width = self.width(level, n)
        name = tile_name(level, n, width)
        self.fetched.append(name)
        data = self.fetch(name)
        assert len(data) == HASH * width, (name, len(data))
        return [data[i : i + HASH] for i in range(0, len(data), HASH)]

    def node(self, height: int, index: int) -> bytes:
        """The hash of the perfect subtree at `height` (2**height leaves) number `index`."""
        level, k = divmod(height, 8)
        first = index << k  # in hashes of tile level `level`
        n, offset = divmod(first, WIDTH)
        return perfect_root(self.tile(level, n)[offset : offset + (1 << k)])

    def root(self) -> bytes:
        if self.size == 0:
            return hashlib.sha256(b"").digest()
        subtrees, start = [], 0
        for height in range(63, -1, -1):
            if self.size & (1 << height):
                subtrees.append(self.node(height, start >> height))
                start += 1 << height
        root = subtrees[-1]
        for left in reversed(subtrees[:-1]):
            root = hashlib.sha256(b"\x01" + left + root).digest()
        return root

    def leaves(self) -> list[bytes]:
        """Every entry, from the entry bundles, each checked against its level-0 tile."""
        out: list[bytes] = []
        for n in range((self.size + WIDTH - 1) // WIDTH):
            width = self.width(0, n)
            name = tile_name("entries", n, width)
            entries = split_bundle(self.fetch(name))
            assert len(entries) == width, (name, len(entries))
            hashes = self.tile(0, n)
            assert [hashlib.sha256(b"\x00" + e).digest() for e in entries] == hashes, name
            out += entries
        return out


def payload(doc: bytes) -> bytes:
    token = json.loads(doc)["jws"]
    middle = token.split(".")[1]
    return base64.urlsafe_b64decode(middle + "=" * (-len(middle) % 4))


def head_key(doc: bytes) -> tuple[str, bool, int]:
    claims = json.loads(payload(doc))
    return (claims["day"], claims["sealed"], claims["tree_size"])


# --- the test log -----------------------------------------------------------------------------


@dataclass
class Built:
    data: Path
    d2: str
    d1: str
    today: str
    now: float
    heads: list[bytes]  # every head document, in SPEC §12.1 order


D2_HEADS = 262  # one entry and one head at a time: the history passes a full tile
D1_SIZES = (2, 256, 257, 300)  # checkpoints; sealed at 310
TODAY_SIZES = (3,)


def build(data: Path) -> Built:
    """A log of three real days (the last is today, so a server process on it has nothing
    to seal): day -2 with 262 heads of one entry each, day -1 with 310 entries (a full tile)
    and checkpoints at 2, 256, 257, 300, and today with a checkpoint at 3."""
    wait_clear_of_midnight()
    now = time.time()
    today = time.strftime("%Y-%m-%d", time.gmtime(now))
    d2, d1 = shift_day(today, -2), shift_day(today, -1)
    clock = Clock(day_start(d2) + 60)
    with Log.init(data, iss=ISS, clock=clock) as log:
        for n in range(D2_HEADS):
            clock.t += 1
            log.append([record(d2, n)])
            assert log.checkpoint() is not None
        clock.t = day_start(d1) + 60
        done = 0
        for size in (*D1_SIZES, 310):
            log.append([record(d1, n) for n in range(done, size)])
            done = size
            clock.t += 1
            if size != 310:
                assert log.checkpoint() is not None
        clock.t = now
        log.append([record(today, n) for n in range(3)])
        assert log.checkpoint() is not None
        heads = sorted((row.doc for row in log.store.all_heads()), key=head_key)
    return Built(data, d2, d1, today, now, heads)
