"""The HTTP API's bodies as msgspec Structs: each request's and each answer's one definition,
from which the OpenAPI document is generated and through which the routes encode (so a
member cannot be missing or extra). Bytes served as stored are described, not re-encoded.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar.openapi import ResponseSpec

from capability_anchor.web.errors import ErrorBody


class Health(msgspec.Struct, forbid_unknown_fields=True, frozen=True, omit_defaults=True):
    """`status` is `ok`, or `degraded` with the `reason` (a log behind what it published
    refuses appends and signs nothing, SPEC §13.3; reads are still answered)."""

    v: str
    status: str
    version: str
    reason: str | None = None


class Anchor(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The head an inclusion proof is against (SPEC §5): its day, root and URL."""

    day: str
    root: str
    url: str


class InclusionProof(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """An RFC 9162 inclusion proof (`type` is "rfc9162-sha256"; `path` in hex)."""

    type: str
    leaf_index: int
    tree_size: int
    path: list[str]


class HeadDocument(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A signed head (SPEC §4): its claims in RFC 8785 order plus the compact JWS over them;
    the bytes are served exactly as stored."""

    day: str
    iat: int
    iss: str
    jws: str
    prev: str | None
    root: str
    sealed: bool
    tree_size: int
    v: str


class SealedDay(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    day: str
    root: str
    tree_size: int
    url: str


class RootsListing(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """`GET /roots`: sealed days, newest first."""

    days: list[SealedDay]
    iss: str
    v: str


class Timestamp(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """An RFC 3161 stamp of a sealed head: its TSA, its generation time, the token (base64)."""

    gen_time: str
    token: str
    tsa: str


class TimestampsDocument(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    day: str
    timestamps: list[Timestamp]
    v: str


class ProofAnswer(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """`GET /proof`, `POST /prove`: an entry's inclusion proof and the head it is against."""

    anchor: Anchor
    proof: InclusionProof
    v: str


class ConsistencyAnswer(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """`GET /consistency`: the RFC 9162 consistency path (hex) between two sizes of a day."""

    day: str
    first: int
    path: list[str]
    second: int
    v: str


RecordClaims = Annotated[
    dict[str, Any],
    msgspec.Meta(
        description="the record as appended: any JSON object SPEC §2 allows, with the members "
        "the log's record rule asks for (an observation's v, sub, url, status, checked_at, "
        "evidence, ...)"
    ),
]
"""A record is the writer's JSON object: the log fixes its rules, not its member list."""


class Entry(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """An entry of a day: its index, leaf hash (hex) and the record's claims as stored."""

    claims: RecordClaims
    leaf_hash: str
    leaf_index: int


class EntriesListing(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    day: str
    entries: list[Entry]
    v: str


Evidence = Annotated[
    dict[str, Any],
    msgspec.Meta(description="how the resolver checked the server: its own JSON object"),
]


class ServerRecord(msgspec.Struct, frozen=True):
    """`GET /record` (Capability Resolution §6.3): the newest covered entry of a server, its
    leaf's members (these, as an observation log's rule has them, and any others the record
    carries) plus `iat`, `exp`, `anchor`, `proof` and `expires`, and `jws`, the record token
    signing all but `expires`."""

    anchor: Anchor
    checked_at: str
    evidence: Evidence
    exp: int
    expires: str
    iat: int
    iss: str
    jws: str
    proof: InclusionProof
    status: str
    sub: str
    url: str
    v: str


class Jwk(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """An Ed25519 public key as a JWK (RFC 8037)."""

    kty: str
    crv: str
    x: str
    kid: str
    use: str
    alg: str


class Jwks(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """`GET /keys`: every key the log has signed with, sorted by `kid`."""

    keys: list[Jwk]


class KeyRecords(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """`GET /keys/records`: the log's key rotation records and revocations (compact JWS,
    told apart by their `typ`), in the order it stored them."""

    v: str
    iss: str
    records: list[str]


class AppendedEntry(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Where a record of `POST /records` is: `duplicate` when the day already held it."""

    day: str
    leaf_index: int
    leaf_hash: str
    duplicate: bool


class ProvedEntry(AppendedEntry, forbid_unknown_fields=True, frozen=True):
    """An entry of `POST /records?prove=1`: as `AppendedEntry`, with its anchor and proof."""

    anchor: Anchor
    proof: InclusionProof


class RecordsAnswer(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """`POST /records`: one entry per record, in order."""

    v: str
    entries: list[AppendedEntry]


class ProvedRecordsAnswer(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """`POST /records?prove=1`: one entry per record, in order, each with its proof."""

    v: str
    entries: list[ProvedEntry]


def success(
    model: Any, description: str, media_type: str = "application/json"
) -> dict[int, ResponseSpec]:
    """The OpenAPI entry of an operation's 200: handlers answer with bytes made once, so the
    body's shape is named here rather than read from their return annotation."""
    spec = ResponseSpec(
        data_container=model,
        description=description,
        generate_examples=False,
        media_type=media_type,
    )
    return {200: spec}


BAD_PARAMETER = "bad_request: a parameter is malformed or out of range; the note names it"


def documented(*statuses: int, unavailable: str | None = None) -> dict[int, ResponseSpec]:
    """OpenAPI entries for what the handler itself answers besides 200 (a 400 when it reads
    its own query, 304, 404, 409, its 503 reasons); the guards' answers and 405 are added by
    `openapi.finish`."""
    described = {
        400: BAD_PARAMETER,
        304: "not modified: If-None-Match names the answer's current ETag (no body)",
        404: "not_found: the log holds no such thing (yet); the note says what is missing",
        409: "conflict: refused by the log's rules (a sealed day, a day before the log's first)",
    }
    if unavailable is not None:
        described[503] = f"unavailable: {unavailable}"
        statuses = (*statuses, 503)
    return {
        s: ResponseSpec(
            data_container=None if s == 304 else ErrorBody,
            description=described[s],
            generate_examples=False,
        )
        for s in statuses
    }
