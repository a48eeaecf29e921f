"""RFC 3161 time-stamps for sealed heads (SPEC §7): request, fetch, verify.

    cas = load_cas([Path("tsa-ca.pem")])
    reply, verified = stamp("https://tsa.example/", head_jws, cas)   # store `reply` raw
    verify_reply(reply, digest=digest_of(head_jws), cas=cas, nonce=None)  # audit it later

`stamp` is `make_request` -> `fetch` -> `verify_reply`. What is stamped is the SHA-256 of the
ASCII bytes of the head's compact JWS, so `openssl ts -verify -data <day>.jws -in <day>.tsr
-CAfile <tsa-ca.pem>` checks a stored stamp without this code.

The parts: `cas` (the trusted TSA CAs: `--tsa-ca` files, the PEM text `init` stores),
`client` (the TimeStampReq, the HTTP exchange under a deadline, `stamp`), `verify` (reply
verification: who checks which rule is listed there) and `der` (the small DER reader for
what rfc3161-client cannot take: status, genTime's fraction, certificate order, ESS).
This package is the only importer of rfc3161ng and rfc3161-client.

Every failure is a `TimestampError` whose message says what was wrong; httpx, pyasn1,
rfc3161-client and cryptography exceptions never escape. The heavy imports (httpx ~100 ms,
rfc3161ng/pyasn1 ~120 ms, rfc3161-client ~70 ms) happen inside the functions that need
them, so importing this package is cheap and the offline verifying path never loads httpx.
"""

from __future__ import annotations

from .cas import cas_of_pem, load_cas, pem_of, trusted_cas
from .client import DEFAULT_DEADLINE_S, QUERY_TYPE, REPLY_CAP, Request, fetch, make_request, stamp
from .verify import (
    SHA256_OID,
    Parsed,
    Verified,
    carried_certificates,
    digest_of,
    read_reply,
    verify_reply,
)

__all__ = [
    "DEFAULT_DEADLINE_S",
    "QUERY_TYPE",
    "REPLY_CAP",
    "SHA256_OID",
    "Parsed",
    "Request",
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
