"""The history's part of the static publication (SPEC §12.4): `history/tile/...` and, with
`export --tiles`, each day's tiles under `<day>/tile/...`, as the same bytes the API serves
(`reading_published_tiles`).

Which tiles: every full tile at the tree's current size, and every partial tile of a
published size whose full tile does not exist yet. C2SP tlog-tiles lets a log drop a partial
tile once its full tile is there, and a folder that kept one per history size would grow by
a file per head forever; partial tiles already in a folder are never removed (every tile is
create-or-identical). Entry bundles follow the level-0 tiles.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from .log import Log
from .merkle import TILE_HEIGHT, TILE_WIDTH
from .merkle.tilepath import TileRequest


def published_resources(sizes: Iterable[int], current: int) -> Iterator[TileRequest]:
    """The tiles and entry bundles to publish for a tree whose published sizes are `sizes`
    and whose newest published size is `current` (see the module docstring)."""
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


def tile_files(log: Log, outdir: Path, day_tiles: bool) -> list[tuple[Path, bytes]]:
    """(path, bytes) of every tile to write, all create-or-identical."""
    read = log.read
    files: list[tuple[Path, bytes]] = []
    size = read.history.size()
    for request in published_resources(range(1, size + 1), size):
        files.append((outdir / "history" / request.path, read.tiles.history(request)))
    if day_tiles:
        by_day: dict[str, list[int]] = {}
        for row in read.all_heads():
            by_day.setdefault(row.day, []).append(row.tree_size)
        for day, sizes in sorted(by_day.items()):
            for request in published_resources(sizes, max(sizes)):
                files.append((outdir / day / request.path, read.tiles.day(day, request)))
    return files


__all__ = ["published_resources", "tile_files"]
