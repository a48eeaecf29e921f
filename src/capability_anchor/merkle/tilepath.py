"""C2SP tlog-tiles resource paths (`tile/<L>/<N>[.p/<W>]`, `tile/entries/<N>[.p/<W>]`), read and
written in their one spelling: anything else (leading zeros, an `x000` group, `.p/256`, a width of
0, a level of 64 or more) is refused, since an immutable resource has one URL."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from capability_anchor.errors import MalformedProof, UsageError

from .tiles import TILE_HEIGHT, TILE_WIDTH, tile_path

MAX_LEVEL = 63
MAX_INDEX = 2**63 - 1  # no tree the store can hold has more tiles than leaves
_LEVEL = re.compile(r"0|[1-9][0-9]?")
_WIDTH = re.compile(r"[1-9][0-9]{0,2}")
_GROUP = re.compile(r"x[0-9]{3}")
_LAST = re.compile(r"[0-9]{3}")
_MAX_GROUPS = 7  # 10**21 > MAX_INDEX


@dataclass(frozen=True, slots=True)
class TileRequest:
    """A hash tile (`level` 0..63) or an entry bundle (`level` None), with index and width."""

    level: int | None
    index: int
    width: int

    @property
    def entries(self) -> bool:
        return self.level is None

    @property
    def partial(self) -> bool:
        return self.width < TILE_WIDTH

    @property
    def hash_level(self) -> int:
        """The tile level whose hashes this resource's items are (entries: the leaves)."""
        return 0 if self.level is None else self.level

    @property
    def path(self) -> str:
        if self.level is None:
            return entries_path(self.index, self.width)
        return tile_path(self.level, self.index, self.width)


def entries_path(index: int, width: int = TILE_WIDTH) -> str:
    """`tile/entries/<N>[.p/<W>]`, N encoded as in `tile_path`."""
    return "tile/entries/" + tile_path(0, index, width).removeprefix("tile/0/")


def _index(groups: list[str], text: str) -> int:
    if not 1 <= len(groups) <= _MAX_GROUPS:
        raise UsageError(f"tile path {text!r}: the index has {len(groups)} groups of digits")
    *upper, last = groups
    if not all(_GROUP.fullmatch(g) for g in upper) or not _LAST.fullmatch(last):
        raise UsageError(
            f"tile path {text!r}: the index must be groups of three digits, every one but "
            "the last prefixed with x (1234067 is x001/x234/067)"
        )
    if upper and upper[0] == "x000":
        raise UsageError(f"tile path {text!r}: the index has a leading group of zeros")
    index = int("".join(g.removeprefix("x") for g in groups))
    if index > MAX_INDEX:
        raise UsageError(f"tile path {text!r}: the index is over {MAX_INDEX}")
    return index


def parse_tile_path(text: str) -> TileRequest:
    """What follows `tile/`, in its one spelling; anything else is a `UsageError` saying why."""
    parts = text.split("/")
    if len(parts) < 2:
        raise UsageError(f"tile path {text!r}: expected <L>/<N>[.p/<W>] or entries/<N>")
    head, rest = parts[0], parts[1:]
    if head == "entries":
        level: int | None = None
    elif _LEVEL.fullmatch(head) and int(head) <= MAX_LEVEL:
        level = int(head)
    else:
        raise UsageError(
            f"tile path {text!r}: the level must be 0..{MAX_LEVEL} without leading zeros, "
            "or 'entries'"
        )
    width = TILE_WIDTH
    if len(rest) >= 2 and rest[-2].endswith(".p"):
        w = rest[-1]
        if not _WIDTH.fullmatch(w) or not 1 <= int(w) < TILE_WIDTH:
            raise UsageError(
                f"tile path {text!r}: a partial tile's width must be 1..{TILE_WIDTH - 1} "
                "without leading zeros"
            )
        width = int(w)
        rest = [*rest[:-2], rest[-2].removesuffix(".p")]
    return TileRequest(level, _index(rest, text), width)


def published_resources(sizes: Iterable[int], current: int) -> Iterator[TileRequest]:
    """The tiles and bundles to publish for published sizes `sizes`, the newest `current`."""
    found: set[tuple[int, int, int]] = set()
    level = 0
    while current >> (TILE_HEIGHT * level):
        for index in range((current >> (TILE_HEIGHT * level)) // TILE_WIDTH):
            found.add((level, index, TILE_WIDTH))
        level += 1
    for size in sizes:
        level = 0
        while count := size >> (TILE_HEIGHT * level):
            index, width = divmod(count, TILE_WIDTH)
            full_at_current = (current >> (TILE_HEIGHT * level)) // TILE_WIDTH
            if width and index >= full_at_current:
                found.add((level, index, width))
            level += 1
    for level, index, width in sorted(found):
        yield TileRequest(level, index, width)
        if level == 0:
            yield TileRequest(None, index, width)


def entry_bundle(leaves: Iterable[bytes]) -> bytes:
    """C2SP entry bundle: each leaf prefixed by its big-endian uint16 length."""
    out = bytearray()
    for data in leaves:
        if len(data) > 0xFFFF:
            raise MalformedProof(f"a leaf of {len(data)} bytes does not fit an entry bundle")
        out += len(data).to_bytes(2, "big") + data
    return bytes(out)
