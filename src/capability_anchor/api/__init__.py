"""The HTTP service (Litestar + msgspec). `create_app(settings)` is the one factory.

It owns the HTTP edge: routes, bodies, errors as `{v, error, note}`, pages, the service's
background work. May import every stage below it (log, read, export, store through
`store.open`, timestamp, witness.client, metrics); never `cli/` or `audit/`, and never an
engine's package."""

from .app import create_app
from .settings import Settings

__all__ = ["Settings", "create_app"]
