"""`verify-proof`'s inputs (keys, key records, TSA CAs, head, tlog-proof, policy, RECORD, URLs),
read and checked before the library runs: anything unreadable, unreachable or malformed is an
InputError (exit 2). Every read is bounded (`bounded.read`); urllib3 loads only for a URL."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from capability_anchor.bounded.read import DEFAULT_DEADLINE_S, INPUT_LIMIT, Getter, read_file
from capability_anchor.errors import (
    InputError,
    InvalidKey,
    MalformedJSON,
    MalformedPolicy,
    UsageError,
)
from capability_anchor.keys import KeySet, trust
from capability_anchor.keys.trust import Revocation
from capability_anchor.verify.anchor import Anchor
from capability_anchor.verify.record import Result, verify
from capability_anchor.verify.sources import (
    FolderSources,
    ProofSource,
    StampSource,
    no_anchor,
    proof_limit,
)

if TYPE_CHECKING:
    from capability_anchor.note import Policy

# Imported inside functions: `note` ~90 ms and `timestamp` ~20 ms (python -X importtime after
# `cli.verify_proof`, min of 7 runs, 2026-12-05): only inputs that need them load them.


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def fetch(url: str, *, limit: int = INPUT_LIMIT, deadline: float = DEFAULT_DEADLINE_S) -> bytes:
    """GET `url` (`limit` bytes, `deadline` seconds); any failure, a 404 too, is an InputError."""
    body = fetch_if_found(url, limit=limit, deadline=deadline)
    if body is None:
        raise InputError(f"GET {url}: HTTP 404")
    return body


def fetch_if_found(
    url: str, *, limit: int = INPUT_LIMIT, deadline: float = DEFAULT_DEADLINE_S
) -> bytes | None:
    """`fetch`, except that HTTP 404 is None: the server has no such thing (yet)."""
    with Getter(url, deadline=deadline) as getter:
        return getter.get(url, limit=limit)


def read_source(
    source: str, *, limit: int = INPUT_LIMIT, deadline: float = DEFAULT_DEADLINE_S
) -> bytes:
    """A file's or URL's bytes, at most `limit`; any failure is an InputError."""
    if is_url(source):
        return fetch(source, limit=limit, deadline=deadline)
    return read_file(source, limit=limit)


def load_keys(data: bytes, where: str) -> KeySet:
    """A JWK set; malformed JSON or keys are an InputError (exit 2)."""
    try:
        keys = KeySet.from_json(data)
    except (InvalidKey, MalformedJSON) as exc:
        raise InputError(f"{where}: {exc}") from None
    if not len(keys):
        raise InputError(f"{where}: the JWK set holds no keys")
    return keys


def trust_chain(
    keys: KeySet, where: str, roots: Path | None, *, deadline: float = DEFAULT_DEADLINE_S
) -> trust.TrustChain:
    """`keys` and every key the key records lead to, with their revocations: the `--roots`
    folder's `key-records.json`, else the `/keys/records` beside a `--keys` URL (404: `keys`)."""
    data = None
    if roots is not None:
        source = str(roots / trust.KEY_RECORDS_FILE)
        if Path(source).exists():
            data = read_source(source, deadline=deadline)
    elif is_url(where) and where.rstrip("/").endswith("/keys"):
        source = where.rstrip("/") + "/records"
        data = fetch_if_found(source, deadline=deadline)
    if data is None:
        return trust.TrustChain(keys)
    return trust.published_closure(keys, data, source)


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


def load_policy(source: str, *, deadline: float = DEFAULT_DEADLINE_S) -> Policy:
    """`--policy` (file or URL): unreadable or malformed is an InputError, as a bad `--keys` is."""
    from capability_anchor.note import parse_policy
    from capability_anchor.note.policy import MAX_POLICY_SIZE

    data = read_source(source, limit=MAX_POLICY_SIZE, deadline=deadline)
    try:
        return parse_policy(data)
    except MalformedPolicy as exc:
        raise InputError(f"{source}: {exc}") from None


@dataclass(frozen=True)
class CommandLineSources:
    """The head, stamps and tlog-proof from the options, else `--roots`, else the anchor's url."""

    given_head: str | None = None
    roots: Path | None = None
    given_history_proof: str | None = None
    deadline: float = DEFAULT_DEADLINE_S

    @property
    def names_head(self) -> bool:
        return self.given_head is not None

    def head(self, anchor: Anchor | None) -> tuple[bytes, str]:
        if self.given_head is not None:
            return read_source(self.given_head, deadline=self.deadline), self.given_head
        if anchor is None:
            raise no_anchor()
        if self.roots is not None:
            return FolderSources(self.roots).head(anchor)
        return fetch(anchor.url, deadline=self.deadline), anchor.url

    def stamps(self, day: str, anchor: Anchor | None) -> StampSource:
        if self.roots is not None:
            return FolderSources(self.roots).stamps(day, anchor)
        if anchor is None:
            return StampSource("nowhere (no anchor and no --roots)")
        where = f"{anchor.url}/timestamps"
        return StampSource(where, listing=fetch(where, deadline=self.deadline))

    def history_proof(self, anchor: Anchor | None, leaf_hash: bytes) -> ProofSource:
        given = self.given_history_proof
        if given is not None:
            return ProofSource(
                given, read_source(given, limit=proof_limit(), deadline=self.deadline)
            )
        if self.roots is not None:
            return FolderSources(self.roots).history_proof(anchor, leaf_hash)
        if self.given_head is not None:
            return ProofSource("none given (the head came from --head: give --history-proof)")
        if anchor is None:
            return ProofSource("nowhere (no anchor)")
        where = f"{anchor.base}/history/proof?leaf_hash={leaf_hash.hex()}"
        found = fetch_if_found(where, limit=proof_limit(), deadline=self.deadline)
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
    deadline: float = DEFAULT_DEADLINE_S,
    revocations: Mapping[str, Revocation] | None = None,
) -> Result:
    """`verify` over what the command line names (see `CommandLineSources`); the TSA CAs and the
    policy are read first, so a bad one stops everything (exit 2). Each URL read has `deadline`
    seconds in all."""
    from capability_anchor.timestamp import trusted_cas

    cas = trusted_cas(tsa_ca, error=InputError)
    loaded = None if policy is None else load_policy(policy, deadline=deadline)
    folder = None if roots is None else Path(roots)
    sources = CommandLineSources(head, folder, history_proof, deadline)
    return verify(
        record,
        keys=keys,
        sources=sources,
        iss=iss,
        cas=cas,
        at=at,
        policy=loaded,
        origin=origin,
        revocations=revocations,
    )
