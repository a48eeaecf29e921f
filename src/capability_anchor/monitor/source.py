"""Where a monitor reads a log: its HTTP read API or an export folder (SPEC §6, §8, §12.4).

Both answer the same questions by path; a missing resource is None (HTTP 404, no file),
anything else that goes wrong is an InputError (exit 2): the monitor cannot tell a broken
network from a broken log, so it never raises an alarm for I/O.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ..errors import InputError
from ..merkle import HASH_SIZE, TILE_HEIGHT, TILE_WIDTH, tile_path
from ..merkle.tilepath import entries_path

FETCH_TIMEOUT = 10.0
HTTP_PARALLEL = 8  # requests in flight (httpx's pool keeps up to 10 connections)
FETCH_LIMIT = 1 << 20  # a tile or entry bundle is far smaller; a head document too


class LogSource(Protocol):
    """Read one resource by its path relative to the log's base (`history/checkpoint`)."""

    where: str

    def read(self, path: str) -> bytes | None: ...

    def read_many(self, paths: list[str]) -> dict[str, bytes | None]: ...

    def close(self) -> None: ...


class HttpSource:
    def __init__(self, base: str) -> None:
        import httpx  # lazily: an export folder needs no HTTP client

        self.where = base.rstrip("/")
        self._httpx = httpx
        self._client = httpx.Client(timeout=FETCH_TIMEOUT, follow_redirects=True)

    def read(self, path: str) -> bytes | None:
        url = f"{self.where}/{path}"
        try:
            response = self._client.get(url)
        except (self._httpx.HTTPError, self._httpx.InvalidURL) as exc:
            raise InputError(f"GET {url}: {exc}") from None
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise InputError(f"GET {url}: HTTP {response.status_code}")
        if len(response.content) > FETCH_LIMIT:
            raise InputError(f"GET {url}: the reply is larger than {FETCH_LIMIT} bytes")
        return response.content

    def read_many(self, paths: list[str]) -> dict[str, bytes | None]:
        """`read` of each path, HTTP_PARALLEL at a time (a catch-up is latency-bound)."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(HTTP_PARALLEL) as pool:
            return dict(zip(paths, pool.map(self.read, paths), strict=True))

    def close(self) -> None:
        self._client.close()


class FolderSource:
    """An export folder: `/roots/<day>` is `<day>.json`, `/roots/<day>/<n>` `<day>/<n>.json`,
    `/roots/<day>/tile/...` `<day>/tile/...` (export --tiles), the rest the same path."""

    def __init__(self, folder: Path) -> None:
        if not folder.is_dir():
            raise InputError(f"{folder}: not a folder (give an export folder or a URL)")
        self.where = str(folder)
        self._folder = folder

    def read(self, path: str) -> bytes | None:
        parts = path.split("/")
        if parts[0] == "roots" and len(parts) == 2:
            path = f"{parts[1]}.json"
        elif parts[0] == "roots" and len(parts) == 3:
            path = f"{parts[1]}/{parts[2]}.json"
        elif parts[0] == "roots":
            path = "/".join(parts[1:])
        try:
            return (self._folder / path).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise InputError(f"{self._folder / path}: {exc}") from None

    def read_many(self, paths: list[str]) -> dict[str, bytes | None]:
        return {path: self.read(path) for path in paths}

    def close(self) -> None:
        pass


def open_source(where: str) -> LogSource:
    if where.startswith(("http://", "https://")):
        return HttpSource(where)
    return FolderSource(Path(where))


def tile_width(size: int, level: int, index: int) -> int:
    """How many hashes tile (level, index) holds at tree `size` (TILE_WIDTH when full)."""
    count = size >> (TILE_HEIGHT * level)
    return max(0, min(TILE_WIDTH, count - index * TILE_WIDTH))


def read_tile(source: LogSource, prefix: str, size: int, level: int, index: int) -> bytes:
    """The tile as it is at tree `size` under `prefix` (`history/` or `roots/<day>/`)."""
    width = tile_width(size, level, index)
    path = prefix + tile_path(level, index, width)
    data = _read_or_full(source, path, prefix + tile_path(level, index), width)
    if data is None:
        raise InputError(f"{source.where}/{path}: not found (a tile the size needs)")
    return data[: width * HASH_SIZE]


def _read_or_full(source: LogSource, path: str, full: str, width: int) -> bytes | None:
    """C2SP tlog-tiles: a partial tile may be gone once the full one exists, and a client
    then reads the full tile and uses its first `width` hashes (or entries)."""
    data = source.read(path)
    if data is None and width < TILE_WIDTH:
        data = source.read(full)
    return data


def read_bundle(source: LogSource, prefix: str, size: int, index: int) -> list[bytes]:
    """The entries of bundle `index` at tree `size`, split (C2SP: uint16 length prefixes)."""
    width = tile_width(size, 0, index)
    path = prefix + entries_path(index, width)
    data = _read_or_full(source, path, prefix + entries_path(index), width)
    if data is None:
        raise InputError(f"{source.where}/{path}: not found (an entry bundle the size needs)")
    entries: list[bytes] = []
    at = 0
    while at < len(data):
        if at + 2 > len(data):
            raise InputError(f"{path}: a truncated length prefix at byte {at}")
        length = int.from_bytes(data[at : at + 2], "big")
        if at + 2 + length > len(data):
            raise InputError(f"{path}: an entry runs past the end of the bundle")
        entries.append(data[at + 2 : at + 2 + length])
        at += 2 + length
        if len(entries) == width:
            break  # the rest of a full bundle read for a smaller size
    if len(entries) != width:
        raise InputError(f"{path}: {len(entries)} entries, the size needs {width}")
    return entries
