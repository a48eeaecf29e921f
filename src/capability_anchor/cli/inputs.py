"""`verify-proof`'s inputs: what the command line names, read and checked before the library
runs (`--at`, `--keys`, `--roots`' key records, `--tsa-ca`, `--head`, `--history-proof`,
`--policy`, RECORD, URLs).

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
from ..verify_sources import FolderSources, ProofSource, StampSource, no_anchor, read_file

if TYPE_CHECKING:
    from cryptography.x509 import Certificate

    from ..note import Policy

__all__ = [
    "FETCH_LIMIT",
    "FETCH_TIMEOUT",
    "CommandLineSources",
    "InputError",
    "fetch",
    "fetch_if_found",
    "follow_key_records",
    "is_url",
    "load_keys",
    "load_policy",
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
    body = _get(url, absent_ok=False)
    if body is None:  # pragma: no cover (only with absent_ok)
        raise InputError(f"GET {url}: HTTP 404")
    return body


def fetch_if_found(url: str) -> bytes | None:
    """`fetch`, except that HTTP 404 is None: the server has no such thing (yet)."""
    return _get(url, absent_ok=True)


def _get(url: str, *, absent_ok: bool) -> bytes | None:
    import httpx  # lazily: the offline path never loads an HTTP client

    try:
        with httpx.stream("GET", url, timeout=FETCH_TIMEOUT, follow_redirects=True) as response:
            if response.status_code == 404 and absent_ok:
                return None
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


def load_policy(source: str) -> Policy:
    """`--policy`: a C2SP tlog-policy file (or URL); unreadable or malformed is an
    InputError (exit 2), as a bad --keys is: it is trust, not evidence."""
    from ..errors import MalformedPolicy
    from ..note import parse_policy

    try:
        return parse_policy(read_source(source))
    except MalformedPolicy as exc:
        raise InputError(f"{source}: {exc}") from None


@dataclass(frozen=True)
class CommandLineSources:
    """The head from `--head` (a file or URL), else from `--roots`, else the anchor's url;
    stamps from `--roots`, else `<anchor.url>/timestamps`; the tlog-proof from
    `--history-proof`, else `--roots`, else `<base>/history/proof?leaf_hash=` (404: none),
    asked only when the head itself came from the anchor's url: a run given its head
    (`--head`) reaches out to no server it was not told of."""

    given_head: str | None = None
    roots: Path | None = None
    given_history_proof: str | None = None

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

    def history_proof(self, anchor: Anchor | None, leaf_hash: bytes) -> ProofSource:
        if self.given_history_proof is not None:
            return ProofSource(self.given_history_proof, read_source(self.given_history_proof))
        if self.roots is not None:
            return FolderSources(self.roots).history_proof(anchor, leaf_hash)
        if self.given_head is not None:
            return ProofSource("none given (the head came from --head: give --history-proof)")
        if anchor is None:
            return ProofSource("nowhere (no anchor)")
        where = f"{anchor.base}/history/proof?leaf_hash={leaf_hash.hex()}"
        found = fetch_if_found(where)
        return ProofSource(where if found is not None else f"{where} answered 404", found)


def verify_inputs(
    record: bytes,
    *,
    keys: KeySet,
    head: str | None = None,
    roots: Path | None = None,
    iss: str | None = None,
    tsa_ca: Sequence[str] = (),
    at: int | None = None,
    history_proof: str | None = None,
    policy: str | None = None,
    origin: str | None = None,
) -> Result:
    """`verify` over what the command line names: the head from `head` (a file path or
    URL), else `roots` (an exported folder), else the anchor's URL; the tlog-proof from
    `history_proof`, else as `CommandLineSources` says; the TSA CAs from the `tsa_ca` files
    and the policy from `policy` (both read first: a bad one stops everything, exit 2)."""
    cas = load_tsa_cas(tsa_ca)
    loaded = None if policy is None else load_policy(policy)
    sources = CommandLineSources(head, None if roots is None else Path(roots), history_proof)
    return verify(
        record, keys=keys, sources=sources, iss=iss, cas=cas, at=at, policy=loaded, origin=origin
    )
