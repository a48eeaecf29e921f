"""URL rules: Capability Resolution §4 canonical server URLs, and the log's own origin and
public URL (SPEC §1)."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

from capability_anchor.errors import UsageError

from .fast import url_matches


def canonical_url(url: object) -> str:
    """Capability Resolution §4: https, no credentials, lower-case host without `www.`, no `:443`,
    query, fragment or trailing slash; else UsageError. A URL the §4 pattern accepts is its own
    canonical form, so that check answers the common case."""
    if type(url) is str and url_matches(url):
        return url
    return urllib_canonical_url(url)


def urllib_canonical_url(url: object) -> str:
    """`canonical_url` through urllib's `urlsplit`, for every URL."""
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
    host = (parts.hostname or "").lower().removeprefix("www.")
    if not host:  # also `https://www.`: nothing is left once the www. is gone
        raise UsageError("a server URL needs a host")
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    netloc = host if port in (None, 443) else f"{host}:{port}"
    return f"https://{netloc}{parts.path.rstrip('/')}"


def split_http_url(url: str, *, path: bool) -> SplitResult | None:
    """The parts of an http(s) URL with a host and no query, fragment or credentials (`path=False`:
    nothing after the authority), else None: the one ladder `iss` and the public URL are both held
    to."""
    parts = urlsplit(url)
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.query
        or parts.fragment
        or parts.username
        or parts.password
        or url.endswith(("?", "#"))
    ):
        return None
    if not path and (parts.path or url != f"{parts.scheme}://{parts.netloc}"):
        return None
    return parts


def check_origin(iss: str) -> None:
    """`iss` is `scheme://host[:port]` with no path (SPEC §1)."""
    if split_http_url(iss, path=False) is None:
        raise UsageError(f"iss must be an origin scheme://host[:port] with no path, got {iss!r}")


def check_base_url(url: str) -> None:
    """The public URL anchors point at: http(s), no query or fragment (a path is allowed)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise UsageError(f"public URL must be an http(s) URL without query, got {url!r}")
