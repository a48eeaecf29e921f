"""The HTTP service (Litestar + msgspec): the log's routes, bodies, pages and background
work, behind the HTTP edge of `web/`. May import every layer below it, never `cli/`,
`audit/` or an engine's package (docs/explanation/decisions/36-layers.md)."""

from .app import create_app
from .settings import Settings

__all__ = ["Settings", "create_app"]
