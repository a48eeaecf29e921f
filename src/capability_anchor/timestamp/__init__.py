"""RFC 3161 time-stamps of sealed heads (SPEC §7): request and fetch (`client`), verification and
the trusted CAs (`verify`, `der`) and the stamping schedule. What is stamped is the SHA-256
of the head's compact JWS, so `openssl ts -verify` checks a stored stamp too. Every failure is a
`TimestampError`; the only importer of rfc3161ng and rfc3161-client, and it imports them (and httpx)
lazily, so the verifying path stays light."""

from __future__ import annotations

from .client import DEFAULT_DEADLINE_S, fetch, make_request, stamp
from .verify import (
    Verified,
    carried_certificates,
    cas_of_pem,
    digest_of,
    load_cas,
    pem_of,
    read_reply,
    trusted_cas,
    verify_reply,
)

__all__ = [
    "DEFAULT_DEADLINE_S",
    "Verified",
    "carried_certificates",
    "cas_of_pem",
    "digest_of",
    "fetch",
    "load_cas",
    "make_request",
    "pem_of",
    "read_reply",
    "stamp",
    "trusted_cas",
    "verify_reply",
]
