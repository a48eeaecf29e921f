"""The HTTP service (Litestar + msgspec). `create_app(settings)` is the one factory.

It owns the log's routes, bodies, pages and the service's background work; the HTTP edge
it stands behind (errors as `{v, error, note}`, limits, the access log) is `web/`, shared
with the witness server. May import every layer below it (log, read, export, store through
`store.open`, timestamp, web, witness.client, metrics); never `cli/` or `audit/`, and never
an engine's package (docs/explanation/decisions/36-layers.md)."""

from .app import create_app
from .settings import Settings

__all__ = ["Settings", "create_app"]
