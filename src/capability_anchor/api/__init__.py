"""The HTTP service (Litestar + msgspec). `create_app(settings)` is the one factory."""

from .app import create_app
from .settings import Settings

__all__ = ["Settings", "create_app"]
