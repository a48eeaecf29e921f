"""A data dir bound to a store elsewhere: the file `DATA/store-url`, one line, the URL every
command given the data dir opens (`init --store URL`); a URL with a password is refused
(docs/explanation/store.md, "Module notes")."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from urllib.parse import parse_qs, parse_qsl, urlsplit

from capability_anchor.envvars import STORE
from capability_anchor.errors import StoreError, UsageError
from capability_anchor.files import fsync_dir, write_secret_file

STORE_FILE = "store-url"
_MAX = 4096


def has_password(url: str) -> bool:
    parts = urlsplit(url)
    return parts.password is not None or "password" in parse_qs(parts.query)


def check_url(url: str) -> str:
    """`url` as a store URL may be given: one line, no password; its scheme lower-cased, and
    libpq's short `postgres://` spelled `postgresql://`."""
    url = url.strip()
    if "://" in url:
        scheme, rest = url.split("://", 1)
        scheme = scheme.lower()
        url = f"{'postgresql' if scheme == 'postgres' else scheme}://{rest}"
    if not url or "\n" in url or len(url) > _MAX:
        raise UsageError("--store: a store URL is one line, such as postgresql://USER@HOST/DB")
    if "://" not in url:
        raise UsageError(
            f"--store {url!r}: a store is named by a URL (postgresql://USER@HOST/DBNAME); "
            "a SQLite log is its data dir (--data)"
        )
    if has_password(url):
        raise UsageError(
            "--store: a URL with a password is refused (it would be kept in the data dir and "
            "shown in the process list); put the password in ~/.pgpass, PGPASSFILE or "
            "PGPASSWORD"
        )
    return url


def same_database(a: str, b: str) -> bool:
    """Whether two store URLs name one database, perhaps as different users (the owner, who
    migrates, and the service's role)."""
    x, y = urlsplit(check_url(a)), urlsplit(check_url(b))
    return (x.scheme, x.hostname, x.port, x.path, _params(x.query)) == (
        y.scheme,
        y.hostname,
        y.port,
        y.path,
        _params(y.query),
    )


def _params(query: str) -> list[tuple[str, str]]:
    """A URL's parameters in one order, without `user` (a different user is the point)."""
    return sorted((k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "user")


def bound(data_dir: Path) -> str | None:
    """The URL `data_dir` is bound to, or None (its store is its own SQLite database).
    $CAPABILITY_ANCHOR_STORE naming the same database as another user (the owner, to
    migrate) is used instead: `--store` sets it for this process and the ones it starts."""
    url = bound_file(data_dir)
    chosen = (STORE.get() or "").strip()
    if url is None or not chosen or chosen == url:
        return url
    if same_database(url, chosen) and not has_password(chosen):
        return chosen
    return url


def bound_file(data_dir: Path) -> str | None:
    """The URL in `data_dir`'s `store-url`, or None."""
    path = data_dir / STORE_FILE
    try:
        with open(path, "rb") as handle:
            raw = handle.read(_MAX + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}") from None
    try:
        url = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        url = ""
    if (
        not url
        or "\n" in url
        or len(raw) > _MAX
        or "://" not in url
        or has_password(url)
        or url.split("://", 1)[0].lower() == "sqlite"
    ):
        raise StoreError(
            f"{path} is not one store URL without a password, of a store outside the data "
            "dir: write the log's URL "
            "(postgresql://USER@HOST/DBNAME) into it, or remove it if the log is the SQLite "
            "database in this data dir"
        )
    return url


def bind(data_dir: Path, url: str) -> None:
    """Bind `data_dir` to the store at `url`, durably, replacing an earlier binding (only
    `init` does this, before the store holds a log: an init that crashed left it)."""
    url = check_url(url)
    if urlsplit(url).scheme.lower() == "sqlite":
        raise UsageError("a SQLite log lives in its data dir: it is never bound to a URL")
    path, temp = data_dir / STORE_FILE, data_dir / f".{STORE_FILE}.new"
    with contextlib.suppress(FileNotFoundError):
        temp.unlink()
    write_secret_file(temp, url.encode("utf-8") + b"\n")
    os.replace(temp, path)
    fsync_dir(data_dir)
