"""`GET /metrics`: the service's Prometheus metrics (`metrics.py`), public unless the
service was given a metrics token (`--metrics-token`), then Bearer only. Never rate limited
(a scraper behind one address must not be refused), and built off the event loop: the
scrape reads files and the store, and no other request waits for it."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get

from capability_anchor.api.models import success
from capability_anchor.api.service import service_of
from capability_anchor.web.guards import metrics_answer

METRICS_SECURITY: list[dict[str, list[str]]] = [{"metrics": []}, {}]
"""Bearer with the metrics token when the service has one, else nothing."""


def metrics_responses() -> dict[int, Any]:
    """Its 200; the 401 of a metrics token and the 503 come from `guards.before`."""
    return success(str, "the Prometheus text exposition format, version 0.0.4", "text/plain")


@get(
    "/metrics",
    summary="Prometheus metrics",
    description=(
        "Every process of the service summed (uvicorn workers and body workers), and the "
        "log's state read from the store at the scrape. Needs Authorization: Bearer "
        "<metrics token> when the service was started with one; never rate limited."
    ),
    opt={"metrics": True},
    responses=metrics_responses(),
    security=METRICS_SECURITY,
)
async def metrics_page(request: Request[Any, Any, Any]) -> Response[bytes]:
    return await metrics_answer(service_of(request).collector)
