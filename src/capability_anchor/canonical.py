"""Capability Resolution §4 canonical server URLs."""

from __future__ import annotations

from urllib.parse import urlsplit

from .errors import UsageError


def canonical_url(url: object) -> str:
    """https only, no credentials, lower-case host without a leading `www.`, no `:443`, no
    query, fragment or trailing slashes. Raises UsageError for anything else."""
    if not isinstance(url, str):
        raise UsageError("a server URL must be a string")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"not a URL: {exc}") from None
    if parts.scheme.lower() != "https":
        raise UsageError("a server URL must use https")
    if parts.username is not None or parts.password is not None:
        raise UsageError("a server URL must not carry credentials")
    host = (parts.hostname or "").lower()
    if not host:
        raise UsageError("a server URL needs a host")
    host = host.removeprefix("www.")
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    netloc = host if port in (None, 443) else f"{host}:{port}"
    return f"https://{netloc}{parts.path.rstrip('/')}"
