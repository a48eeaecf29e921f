"""The home page `/`: what this log is and what it has published, for a person. Every stored
value is HTML-escaped; a part the store cannot answer says so, never a 500; links are
relative, so a path prefix keeps them right.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from litestar import Request, get
from litestar.enums import MediaType

from capability_anchor import __version__
from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.note import parse_checkpoint, parse_note
from capability_anchor.note.signed import b64encode

from .caching import Answer, cached
from .pages import CSP, _e, _page
from .service import service_of


@dataclass(frozen=True)
class NewestHead:
    """A published head as the page shows it."""

    day: str
    tree_size: int
    root: str
    iat: int
    sealed: bool


@dataclass(frozen=True)
class ServedCheckpoint:
    """The checkpoint `/history/checkpoint` serves: its size, root (base64, as in the note)
    and the names of its cosigners, in the note's order."""

    size: int
    root: str
    cosigners: tuple[str, ...]


def _time(epoch: int) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _head_section(head: NewestHead | None, today: str | None) -> str:
    if head is None:
        return '<h2>Newest head</h2><p class="note">No head is published yet.</p>'
    title = "Today's newest head" if head.day == today else "Newest head"
    kind = "sealed" if head.sealed else "unsealed: the day is still open"
    href = f"roots/{head.day}" if head.sealed else f"roots/{head.day}/{head.tree_size}"
    note = "" if head.day == today or today is None else '<p class="note">None of today yet.</p>'
    return (
        f"<h2>{title}</h2>{note}<dl>"
        f"<dt>Day</dt><dd>{_e(head.day)} ({kind})</dd>"
        f"<dt>Size</dt><dd>{_e(head.tree_size)}</dd>"
        f'<dt>Root</dt><dd><code class="hash">{_e(head.root)}</code></dd>'
        f"<dt>Time</dt><dd><time>{_e(_time(head.iat))}</time> (signed, UTC)</dd>"
        f'<dt>Head</dt><dd><a href="{_e(href)}">{_e(href)}</a>'
        ' <span class="note">(the signed head document, JWS)</span></dd>'
        "</dl>"
    )


def _checkpoint_section(checkpoint: ServedCheckpoint | None) -> str:
    if checkpoint is None:
        return '<h2>Newest checkpoint</h2><p class="note">No checkpoint yet.</p>'
    if checkpoint.cosigners:
        names = ", ".join(f"<code>{_e(name)}</code>" for name in checkpoint.cosigners)
    else:
        names = '<span class="note">nobody yet (no witness cosignature)</span>'
    return (
        "<h2>Newest checkpoint</h2><dl>"
        f"<dt>Size</dt><dd>{_e(checkpoint.size)} heads</dd>"
        f'<dt>Root</dt><dd><code class="hash">{_e(checkpoint.root)}</code></dd>'
        f'<dt>Cosigned by</dt><dd class="cosigners">{names}</dd>'
        '<dt>Note</dt><dd><a href="history/checkpoint">history/checkpoint</a>'
        ' <span class="note">(C2SP signed note)</span></dd>'
        "</dl>"
    )


def _sealed_section(listing: Mapping[str, Any]) -> str:
    days = listing["days"]
    if not days:
        return '<h2>Newest sealed day</h2><p class="note">No day is sealed yet.</p>'
    newest = days[0]
    day = str(newest["day"])
    return (
        "<h2>Newest sealed day</h2><dl>"
        f"<dt>Day</dt><dd>{_e(day)}</dd>"
        f"<dt>Entries</dt><dd>{_e(newest['tree_size'])}</dd>"
        f'<dt>Root</dt><dd><code class="hash">{_e(newest["root"])}</code></dd>'
        f'<dt>Head</dt><dd><a href="roots/{_e(day)}">roots/{_e(day)}</a>'
        ' <span class="note">(the signed head document, JWS)</span></dd>'
        "</dl>"
    )


LINKS = (
    ("roots", "roots", "sealed days, newest first, with their roots (JSON)"),
    ("roots/latest", "roots/latest", "the newest sealed head document"),
    ("history/checkpoint", "history/checkpoint", "the newest witnessed checkpoint (C2SP)"),
    ("history/vkey", "history/vkey", "the log's note verifier key"),
    ("history/policy", "history/policy", "the witness policy (C2SP tlog-policy)"),
    ("record", "record", "a server's signed record: ?id=<server ID> or ?url=<https URL>"),
    ("keys", "keys", "every public key the log has signed with (JWKS)"),
    ("schema", "schema", "the HTTP API, every operation (HTML)"),
    ("schema/openapi.json", "schema/openapi.json", "the same as an OpenAPI document"),
)


def front_page_html(
    listing: Mapping[str, Any],
    head: NewestHead | None = None,
    checkpoint: ServedCheckpoint | None = None,
    today: str | None = None,
) -> bytes:
    """The page for a `/roots` listing of at most one day (`{v, iss, days}`), the newest
    published head, the served checkpoint and the service's UTC day."""
    iss = str(listing["iss"])
    items = "".join(
        f'<li><a href="{_e(href)}"><code>/{_e(text)}</code></a> — {_e(what)}</li>'
        for href, text, what in LINKS
    )
    lookup = (
        '<form action="record" method="get"><label>Record of server ID '
        '<input name="id" placeholder="example:1" required></label> '
        '<button type="submit">Look up</button></form>'
    )
    body = (
        f"<h2>Log</h2><dl><dt>Issuer (iss)</dt><dd><code>{_e(iss)}</code></dd></dl>"
        f"{_head_section(head, today)}"
        f"{_checkpoint_section(checkpoint)}"
        f"{_sealed_section(listing)}"
        f"<h2>Documents</h2><ul>{items}</ul>{lookup}"
        '<p class="note">Check a record offline with <code>verify-proof</code>; '
        f"capability-anchor {_e(__version__)}.</p>"
    )
    return _page(
        f"capability-anchor: {iss}", "capability-anchor", f"Transparency log {_e(iss)}", body
    )


def served_checkpoint(note: bytes) -> ServedCheckpoint:
    """What the page shows of a served checkpoint note: the log signs with its origin as
    its key name (SPEC §12.2), so every other signature line is a cosignature."""
    parsed = parse_note(note)
    body = parse_checkpoint(parsed.text)
    names = tuple(s.name for s in parsed.signatures if s.name != body.origin)
    return ServedCheckpoint(body.size, b64encode(body.root), tuple(dict.fromkeys(names)))


def _front_page_bytes(log: Any) -> bytes:
    """The page of the newest head, the served checkpoint and today, each left out when the
    log has none (or cannot say: the page still shows everything else)."""
    row = log.store.newest_published()
    head = None
    if row is not None:
        head = NewestHead(row.day, row.tree_size, row.root.hex(), row.iat, row.sealed)
    try:
        checkpoint = served_checkpoint(log.read.history.served_checkpoint())
    except CapabilityAnchorError:
        checkpoint = None  # no checkpoint yet
    try:
        today = log.today()
    except CapabilityAnchorError:
        today = None  # the clock guard distrusts the wall clock: the day is not named
    return front_page_html(log.roots(None, 1), head, checkpoint, today)


@get("/", include_in_schema=False, media_type=MediaType.HTML)
async def front_page(request: Request[Any, Any, Any]) -> Answer:
    service = service_of(request)
    page = await service.read(_front_page_bytes, service.reader)
    csp = ((b"content-security-policy", CSP.encode()),)
    return cached(request, page, immutable=False, media_type="text/html", extra=csp)
