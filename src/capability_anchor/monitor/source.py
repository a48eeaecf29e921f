"""Where a monitor reads a log: its HTTP read API or an export folder (SPEC §6, §8, §12.4).

Both answer the same questions by path; a missing resource is None (HTTP 404, no file),
anything else that goes wrong is an InputError (exit 2): the monitor cannot tell a broken
network from a broken log, so it never raises an alarm for I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from ..errors import InputError
from ..merkle import HASH_SIZE, TILE_HEIGHT, TILE_WIDTH, tile_path
from ..merkle.tilepath import entries_path

FETCH_TIMEOUT = 10.0
HTTP_PARALLEL = 8  # requests in flight, each on its own kept-alive connection
READ_AHEAD = 256  # fetched but not yet checked, at most (about 150 kB of head documents)
MAX_REDIRECTS = 5
FETCH_LIMIT = 1 << 20  # a tile or entry bundle is far smaller; a head document too


class ReadAhead(Protocol):
    """Resources asked for in advance; `take` each once, in any order."""

    def take(self, path: str) -> bytes | None: ...

    def close(self) -> None: ...


class LogSource(Protocol):
    """Read one resource by its path relative to the log's base (`history/checkpoint`)."""

    where: str

    def read(self, path: str) -> bytes | None: ...

    def read_ahead(self, paths: list[str]) -> ReadAhead: ...

    def close(self) -> None: ...


class _OnDemand:
    def __init__(self, read: Callable[[str], bytes | None]) -> None:
        self._read = read

    def take(self, path: str) -> bytes | None:
        return self._read(path)

    def close(self) -> None:
        pass


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
    """The read API over HTTP(S) with urllib3: a catch-up is one GET per head, and httpx
    spent about 0.5 ms of CPU per request where urllib3 spends about 0.2 (measured against
    a real `serve`, README Performance), which decides a 100,000-head catch-up."""

    def __init__(self, base: str) -> None:
        import urllib3  # lazily: an export folder needs no HTTP client

        self.where = base.rstrip("/")
        self._errors: tuple[type[Exception], ...] = (urllib3.exceptions.HTTPError,)
        # Redirects are followed (a CDN, http -> https); nothing else is retried: a failed
        # read is exit 2, and `--watch` owns the backoff.
        retries = urllib3.Retry(
            total=MAX_REDIRECTS, connect=0, read=0, status=0, other=0, redirect=MAX_REDIRECTS
        )
        options: dict[str, Any] = {
            "maxsize": HTTP_PARALLEL,
            "block": True,
            "timeout": urllib3.Timeout(FETCH_TIMEOUT),
            "retries": retries,
        }
        proxy = _proxy_for(self.where)
        self._http: urllib3.PoolManager = (
            urllib3.PoolManager(**options)
            if proxy is None
            else urllib3.ProxyManager(proxy, **options)
        )
        self._pool: ThreadPoolExecutor | None = None

    def read(self, path: str) -> bytes | None:
        url = f"{self.where}/{path}"
        try:
            response: Any = self._http.request("GET", url, preload_content=False)
        except self._errors as exc:
            raise InputError(f"GET {url}: {exc}") from None
        try:
            return _body(url, response)
        except self._errors as exc:
            raise InputError(f"GET {url}: {exc}") from None
        finally:
            response.release_conn()

    def read_ahead(self, paths: list[str]) -> ReadAhead:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(HTTP_PARALLEL, thread_name_prefix="monitor-get")
        return _InFlight(self._pool, self.read, paths)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
        self._http.clear()


def _proxy_for(base: str) -> str | None:
    """The proxy the environment names for the base URL's scheme (`HTTP_PROXY`,
    `HTTPS_PROXY`, else `ALL_PROXY`), unless `NO_PROXY` names its host: what httpx, the
    package's other HTTP client, does by default, so a monitor and `verify-proof` reach a
    log the same way. Only an http(s) proxy is supported (urllib3 has no SOCKS of its own)."""
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(base)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    if urlsplit(proxy).scheme not in ("http", "https"):
        raise InputError(f"{base}: the environment's proxy {proxy} is not an http(s) proxy")
    return proxy


def _body(url: str, response: Any) -> bytes | None:
    """The reply's body when it is a 200 of at most FETCH_LIMIT bytes; a 404 is None. An
    unread rest (an error, a body over the limit) closes the connection, never reused."""
    if response.status == 404:
        response.close()
        return None
    if response.status != 200:
        response.close()
        raise InputError(f"GET {url}: HTTP {response.status}")
    declared = response.headers.get("content-length", "0")
    if not declared.isdigit() or int(declared) <= FETCH_LIMIT:
        body = bytes(response.read(FETCH_LIMIT + 1))
        if len(body) <= FETCH_LIMIT:
            return body
    response.close()
    raise InputError(f"GET {url}: the reply is larger than {FETCH_LIMIT} bytes")


class FolderSource:
    """An export folder: `/roots/<day>` is `<day>.json`, `/roots/<day>/<n>` `<day>/<n>.json`,
    `/roots/<day>/tile/...` `<day>/tile/...` (export --tiles), the rest the same path."""

    def __init__(self, folder: Path) -> None:
        if not folder.is_dir():
            raise InputError(f"{folder}: not a folder (give an export folder or a URL)")
        self.where = str(folder)
        self._folder = folder

    def file(self, path: str) -> Path:
        """The file that holds the log's resource `path`."""
        parts = path.split("/")
        if parts[0] == "roots" and len(parts) == 2:
            path = f"{parts[1]}.json"
        elif parts[0] == "roots" and len(parts) == 3:
            path = f"{parts[1]}/{parts[2]}.json"
        elif parts[0] == "roots":
            path = "/".join(parts[1:])
        return self._folder / path

    def read(self, path: str) -> bytes | None:
        file = self.file(path)
        try:
            return file.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise InputError(f"{file}: {exc}") from None

    def read_ahead(self, paths: list[str]) -> ReadAhead:
        return _OnDemand(self.read)

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
    data = _or_full(source, source.read(path), prefix + tile_path(level, index), width)
    if data is None:
        raise InputError(
            f"{_where(source, path)}: not found (a tile the size needs){_hint(source, prefix)}"
        )
    if len(data) < width * HASH_SIZE or len(data) % HASH_SIZE:
        # A cut-off transfer looks the same: I/O, not an alarm (the module docstring).
        raise InputError(
            f"{_where(source, path)}: {len(data)} bytes, not the {width} hashes the size needs"
        )
    return data[: width * HASH_SIZE]


def _where(source: LogSource, path: str) -> str:
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
                    f"{_where(source, path)}: not found (an entry bundle the size needs)"
                    + _hint(source, prefix)
                )
            yield split_bundle(_where(source, path), data, width)
    finally:
        ahead.close()


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
