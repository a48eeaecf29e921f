"""`verify-proof`'s inputs: what the command line names, read and checked before the library
runs (`--at`, `--keys`, `--roots`' key records, `--tsa-ca`, `--head`, RECORD, URLs).

The library (`capability_anchor.verify`) takes these already loaded. Anything unreadable,
unreachable or malformed here is an InputError (a UsageError: exit 2). httpx is imported
inside `fetch` and only when a URL is given, so the offline path never loads an HTTP client.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .. import trust
from ..errors import ClaimsError, InputError, InvalidKey, MalformedJSON, UsageError
from ..keys import KeySet
from ..verify import Result, verify
from ..verify_anchor import Anchor
from ..verify_sources import FolderSources, StampSource, no_anchor, read_file

if TYPE_CHECKING:
    from cryptography.x509 import Certificate

__all__ = [
    "FETCH_LIMIT",
    "FETCH_TIMEOUT",
    "CommandLineSources",
    "InputError",
    "fetch",
    "follow_key_records",
    "is_url",
    "load_keys",
    "load_tsa_cas",
    "parse_at",
    "read_source",
    "verify_inputs",
]

FETCH_TIMEOUT = 10.0
FETCH_LIMIT = 1 << 20  # 1 MiB


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def fetch(url: str) -> bytes:
    """GET `url` (10 s timeout, 1 MiB cap); any failure is an InputError (exit 2)."""
    import httpx  # lazily: the offline path never loads an HTTP client

    try:
        with httpx.stream("GET", url, timeout=FETCH_TIMEOUT, follow_redirects=True) as response:
            if response.status_code != 200:
                raise InputError(f"GET {url}: HTTP {response.status_code}")
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > FETCH_LIMIT:
                    raise InputError(f"GET {url}: the reply is larger than {FETCH_LIMIT} bytes")
            return bytes(body)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise InputError(f"GET {url}: {exc}") from None


def read_source(source: str) -> bytes:
    """The bytes of a file path or a URL; unreadable or unreachable is an InputError."""
    return fetch(source) if is_url(source) else read_file(source)


def load_keys(data: bytes, where: str) -> KeySet:
    """A JWK set; malformed JSON or keys are an InputError (exit 2)."""
    try:
        keys = KeySet.from_json(data)
    except (InvalidKey, MalformedJSON) as exc:
        raise InputError(f"{where}: {exc}") from None
    if not len(keys):
        raise InputError(f"{where}: the JWK set holds no keys")
    return keys


def follow_key_records(keys: KeySet, roots: Path) -> KeySet:
    """`keys` plus every key the folder's `key-records.json` leads to from them (key
    rotation: an auditor holding the old key trusts the new one because the old one signed
    that record). A record not signed by a key already trusted adds nothing; a file that is
    not a key records document is an InputError (exit 2), as a bad keys.json is."""
    path = roots / trust.KEY_RECORDS_FILE
    if not path.exists():
        return keys
    try:
        iss, tokens = trust.read_key_records(read_source(str(path)))
    except ClaimsError as exc:
        raise InputError(str(exc)) from None
    return trust.closure(keys, tokens, iss=iss).keys


def parse_at(text: str) -> int:
    """`--at`: epoch seconds, or an RFC 3339 date-time with a zone (Z or ±hh:mm)."""
    value = text.strip()
    if re.fullmatch(r"-?[0-9]+", value):
        return int(value)
    if not re.fullmatch(
        r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
        r"([Zz]|[+-][0-9]{2}:[0-9]{2})",
        value,
    ):
        raise UsageError(f"--at must be RFC 3339 (with a zone) or epoch seconds, got {text!r}")
    try:
        when = dt.datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--at {text!r} is not a real date-time") from None
    return int(when.timestamp())


def load_tsa_cas(paths: Sequence[str]) -> list[Certificate]:
    """The `--tsa-ca` certificates; an unreadable file is an InputError (exit 2)."""
    from ..timestamp import trusted_cas

    return trusted_cas(paths, error=InputError)


@dataclass(frozen=True)
class CommandLineSources:
    """The head from `--head` (a file or URL), else from `--roots`, else the anchor's url;
    stamps from `--roots`, else `<anchor.url>/timestamps`."""

    given_head: str | None = None
    roots: Path | None = None

    @property
    def names_head(self) -> bool:
        return self.given_head is not None

    def head(self, anchor: Anchor | None) -> tuple[bytes, str]:
        if self.given_head is not None:
            return read_source(self.given_head), self.given_head
        if anchor is None:
            raise no_anchor()
        if self.roots is not None:
            return FolderSources(self.roots).head(anchor)
        return fetch(anchor.url), anchor.url

    def stamps(self, day: str, anchor: Anchor | None) -> StampSource:
        if self.roots is not None:
            return FolderSources(self.roots).stamps(day, anchor)
        if anchor is None:
            return StampSource("nowhere (no anchor and no --roots)")
        where = f"{anchor.url}/timestamps"
        return StampSource(where, listing=fetch(where))


def verify_inputs(
    record: bytes,
    *,
    keys: KeySet,
    head: str | None = None,
    roots: Path | None = None,
    iss: str | None = None,
    tsa_ca: Sequence[str] = (),
    at: int | None = None,
) -> Result:
    """`verify` over what the command line names: the head from `head` (a file path or
    URL), else `roots` (an exported folder), else the anchor's URL; the TSA CAs from the
    `tsa_ca` files (read first: a bad one stops everything with exit 2)."""
    cas = load_tsa_cas(tsa_ca)
    sources = CommandLineSources(head, None if roots is None else Path(roots))
    return verify(record, keys=keys, sources=sources, iss=iss, cas=cas, at=at)
