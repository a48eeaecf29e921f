"""The service itself: liveness, and the JWKS of every key the log has signed with."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get

from ... import __version__
from ...head import VERSION
from ..caching import cached
from ..errors import PUBLIC_ERRORS, documented
from ..models import Health, Jwks, success
from ..service import service_of


@get("/healthz", summary="Liveness", responses=PUBLIC_ERRORS)
async def healthz() -> Health:
    return Health(VERSION, "ok", __version__)


@get(
    "/keys",
    summary="JWKS of every key the log has signed with, less the revoked ones",
    responses={**success(Jwks, "the JWK Set, RFC 8785"), **documented(304), **PUBLIC_ERRORS},
)
async def keys(request: Request[Any, Any, Any]) -> Response[bytes]:
    return cached(request, service_of(request).reader.published_keys().to_json(), immutable=False)
