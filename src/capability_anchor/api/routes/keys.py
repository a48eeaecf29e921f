"""The service itself: liveness, and the JWKS and key records, as the export's bytes
(which reads leave the loop: docs/explanation/api-reads.md).
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get

from capability_anchor import __version__
from capability_anchor.api.caching import cached
from capability_anchor.api.errors import documented
from capability_anchor.api.models import Health, Jwks, KeyRecords, success
from capability_anchor.api.service import service_of
from capability_anchor.head import VERSION
from capability_anchor.keys import trust
from capability_anchor.log.marks import behind_state


@get("/healthz", summary="Liveness")
async def healthz(request: Request[Any, Any, Any]) -> Health:
    # 200 either way: a degraded log still serves every read, so a load balancer keeps it.
    behind = behind_state(service_of(request).settings.data_dir)
    if behind is not None:
        return Health(VERSION, "degraded", __version__, behind.error().http_note())
    return Health(VERSION, "ok", __version__)


@get(
    "/keys",
    summary="JWKS of every key the log has signed with, less the revoked ones",
    responses={**success(Jwks, "the JWK Set, RFC 8785"), **documented(304)},
)
async def keys(request: Request[Any, Any, Any]) -> Response[bytes]:
    service = service_of(request)
    keyset = await service.read(service.reader.published_keys)
    return cached(request, keyset.to_json(), immutable=False)


@get(
    "/keys/records",
    summary="The key rotation records and revocations (key-records.json)",
    responses={
        **success(KeyRecords, "the records in the order stored, RFC 8785"),
        **documented(304),
    },
)
async def key_records(request: Request[Any, Any, Any]) -> Response[bytes]:
    """What an export writes to key-records.json (SPEC §13.2): every rotation record and
    revocation, so a client holding an old key follows the log to its current one and
    learns which key was revoked when. Empty `records` until the log has rotated."""
    service = service_of(request)
    rows = await service.read(service.reader.read.key_records)
    tokens = [token for _, _, _, token in rows]
    body = trust.key_records_document(service.reader.iss, tokens)
    return cached(request, body, immutable=False)
