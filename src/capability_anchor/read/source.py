"""Where a monitor or `recover` reads a log: its HTTP read API or an export folder (SPEC §6, §8,
§12.4), by path. A missing resource is None (HTTP 404, no file), anything else that goes wrong an
InputError (exit 2): a broken network looks like a broken log, so I/O never raises an alarm."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from capability_anchor.bounded.read import DEFAULT_DEADLINE_S, INPUT_LIMIT, Getter, read_file
from capability_anchor.errors import InputError
from capability_anchor.merkle import HASH_SIZE, TILE_HEIGHT, TILE_WIDTH, tile_path
from capability_anchor.merkle.tilepath import entries_path

HTTP_PARALLEL = 8  # requests in flight, each on its own kept-alive connection
READ_AHEAD = 256  # fetched but not yet checked, at most (about 150 kB of head documents)
FETCH_LIMIT = INPUT_LIMIT  # a tile or entry bundle is far smaller; a head document too


class ReadAhead(Protocol):
    """Resources asked for in advance; `take` each once, in any order."""

    def take(self, path: str) -> bytes | None: ...

    def close(self) -> None: ...


class LogSource(Protocol):
    """Read one resource by its path relative to the log's base (`history/checkpoint`)."""

    where: str
    deadline: float  # what each network read may take in all (a folder has none to keep)

    def read(self, path: str) -> bytes | None: ...

    def read_ahead(self, paths: list[str]) -> ReadAhead: ...

    def close(self) -> None: ...


class _InFlight:
    """The paths are fetched in the order given, at most READ_AHEAD of them ahead of the
    checks that `take` them (bounded memory), so the network and the checks overlap."""

    def __init__(
        self, pool: ThreadPoolExecutor, read: Callable[[str], bytes | None], paths: list[str]
    ) -> None:
        self._pool = pool
        self._read = read
        self._queue = iter(dict.fromkeys(paths))
        self._futures: dict[str, Future[bytes | None]] = {}
        self._top_up()

    def _top_up(self) -> None:
        while len(self._futures) < READ_AHEAD:
            path = next(self._queue, None)
            if path is None:
                return
            self._futures[path] = self._pool.submit(self._read, path)

    def take(self, path: str) -> bytes | None:
        future = self._futures.pop(path, None)
        self._top_up()
        return self._read(path) if future is None else future.result()

    def close(self) -> None:
        for future in self._futures.values():
            future.cancel()
        self._futures.clear()
        self._queue = iter(())


class HttpSource:
    """The read API over HTTP(S): `bounded.read.Getter` (urllib3, HTTP_PARALLEL kept-alive
    connections), each GET within `deadline` seconds in all and FETCH_LIMIT bytes."""

    def __init__(self, base: str, *, deadline: float = DEFAULT_DEADLINE_S) -> None:
        self.where = base.rstrip("/")
        self.deadline = deadline
        self._getter = Getter(self.where, deadline=deadline, parallel=HTTP_PARALLEL)
        self._pool: ThreadPoolExecutor | None = None

    def read(self, path: str) -> bytes | None:
        return self._getter.get(f"{self.where}/{path}", limit=FETCH_LIMIT)

    def read_ahead(self, paths: list[str]) -> ReadAhead:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(HTTP_PARALLEL, thread_name_prefix="monitor-get")
        return _InFlight(self._pool, self.read, paths)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
        self._getter.close()


class FolderSource:
    """An export folder: `/roots/<day>` is `<day>.json`, `/roots/<day>/<n>` `<day>/<n>.json`,
    `/roots/<day>/tile/...` `<day>/tile/...` (export --tiles), the rest the same path."""

    def __init__(self, folder: Path) -> None:
        if not folder.is_dir():
            raise InputError(f"{folder}: not a folder (give an export folder or a URL)")
        self.where = str(folder)
        self.deadline = DEFAULT_DEADLINE_S
        self._folder = folder

    def file(self, path: str) -> Path:
        """The file that holds the log's resource `path`."""
        parts = path.split("/")
        if path == "keys/records":
            path = "key-records.json"
        elif parts[0] == "roots" and len(parts) == 2:
            path = f"{parts[1]}.json"
        elif parts[0] == "roots" and len(parts) == 3:
            path = f"{parts[1]}/{parts[2]}.json"
        elif parts[0] == "roots":
            path = "/".join(parts[1:])
        return self._folder / path

    def read(self, path: str) -> bytes | None:
        file = self.file(path)
        if not file.exists():
            return None
        return read_file(file, limit=FETCH_LIMIT)  # bounded as over HTTP

    def read_ahead(self, paths: list[str]) -> ReadAhead:
        return self  # a folder is read on demand: `take` is `read`

    take = read

    def close(self) -> None:
        pass


def open_source(where: str, *, deadline: float = DEFAULT_DEADLINE_S) -> LogSource:
    if where.startswith(("http://", "https://")):
        return HttpSource(where, deadline=deadline)
    return FolderSource(Path(where))


def tile_width(size: int, level: int, index: int) -> int:
    """How many hashes tile (level, index) holds at tree `size` (TILE_WIDTH when full)."""
    count = size >> (TILE_HEIGHT * level)
    return max(0, min(TILE_WIDTH, count - index * TILE_WIDTH))


def read_tile(source: LogSource, prefix: str, size: int, level: int, index: int) -> bytes:
    """The tile as it is at tree `size` under `prefix` (`history/` or `roots/<day>/`)."""
    width = tile_width(size, level, index)
    path = prefix + tile_path(level, index, width)
    data = _or_full(source, source.read(path), prefix + tile_path(level, index), width)
    if data is None:
        raise InputError(
            f"{where_of(source, path)}: not found (a tile the size needs){_hint(source, prefix)}"
        )
    if len(data) < width * HASH_SIZE or len(data) % HASH_SIZE:
        # A cut-off transfer looks the same: I/O, not an alarm (the module docstring).
        raise InputError(
            f"{where_of(source, path)}: {len(data)} bytes, not the {width} hashes the size needs"
        )
    return data[: width * HASH_SIZE]


def where_of(source: LogSource, path: str) -> str:
    """Where the resource `path` is: its URL, or the file a folder holds it in."""
    if isinstance(source, FolderSource):
        return str(source.file(path))
    return f"{source.where}/{path}"


def _hint(source: LogSource, prefix: str) -> str:
    """The fix for a folder without the day tiles, which only `export --tiles` writes."""
    if isinstance(source, FolderSource) and prefix.startswith("roots/"):
        return (
            f"; {source.where} has no tiles of that day: re-export it with "
            "`capability-anchor export --data DATA OUT --tiles`"
        )
    return ""


def _or_full(source: LogSource, data: bytes | None, full: str, width: int) -> bytes | None:
    """C2SP tlog-tiles: a partial tile may be gone once the full one exists, and a client
    then reads the full tile and uses its first `width` hashes (or entries)."""
    if data is None and width < TILE_WIDTH:
        data = source.read(full)
    return data


def read_bundles(
    source: LogSource, prefix: str, size: int, indices: list[int]
) -> Iterator[list[bytes]]:
    """The entries of each bundle in `indices` at tree `size`, split (C2SP: uint16 length
    prefixes), in turn; the reads run ahead (a catch-up over HTTP is bound by round trips)."""
    paths = [prefix + entries_path(i, tile_width(size, 0, i)) for i in indices]
    ahead = source.read_ahead(paths)
    try:
        for index, path in zip(indices, paths, strict=True):
            width = tile_width(size, 0, index)
            data = _or_full(source, ahead.take(path), prefix + entries_path(index), width)
            if data is None:
                raise InputError(
                    f"{where_of(source, path)}: not found (an entry bundle the size needs)"
                    + _hint(source, prefix)
                )
            yield split_bundle(where_of(source, path), data, width)
    finally:
        ahead.close()


def read_leaves(
    source: LogSource, prefix: str, start: int, size: int, bundles: int | None = None
) -> Iterator[list[bytes]]:
    """The entries `start`.. of the tree at `size`, bundle by bundle (at most `bundles`)."""
    first = start // TILE_WIDTH
    indices = list(range(first, (size - 1) // TILE_WIDTH + 1))[:bundles] if start < size else []
    skip = start - first * TILE_WIDTH
    for bundle in read_bundles(source, prefix, size, indices):
        yield bundle[skip:]
        skip = 0


def split_bundle(where: str, data: bytes, width: int) -> list[bytes]:
    """The first `width` entries of the bundle read at `where` (a full bundle serves a
    smaller size too)."""
    entries: list[bytes] = []
    at = 0
    while at < len(data) and len(entries) < width:
        if at + 2 > len(data):
            raise InputError(f"{where}: a truncated length prefix at byte {at}")
        length = int.from_bytes(data[at : at + 2], "big")
        if at + 2 + length > len(data):
            raise InputError(f"{where}: an entry runs past the end of the bundle")
        entries.append(data[at + 2 : at + 2 + length])
        at += 2 + length
    if len(entries) != width:
        raise InputError(f"{where}: {len(entries)} entries, the size needs {width}")
    return entries
