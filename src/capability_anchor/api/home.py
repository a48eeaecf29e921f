"""The home page `/`, a log explorer for a person: what this log is and has published (the
parts in explorer.py, kept while the store's change mark holds) and a record lookup
(`?id=` or `?url=`) that explorer.js checks in the browser. Every stored value is HTML-escaped;
a part the store cannot answer says so, never a 500; links are relative (a path prefix works).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from litestar import Request, get
from litestar.enums import MediaType

from capability_anchor import __version__
from capability_anchor.encoding import utc_second
from capability_anchor.errors import CapabilityAnchorError, UsageError
from capability_anchor.log.issuance import issue_record
from capability_anchor.strictjson import loads
from capability_anchor.web.errors import HTTP_STATUS

from .caching import Answer, cached, content_type
from .explorer import (
    DAYS_PAGE,
    ServedCheckpoint,
    chart_counts,
    chart_svg,
    checkpoint_section,
    day_rows,
    days_section,
    served_checkpoint,
)
from .pages import CSP, _e, _page
from .service import day_param, service_of

KEPT_PAGES = 16  # renders of `/` kept per process (a few `?before=` pages and today)
_HEADERS = ((b"content-security-policy", CSP.encode()),)


@dataclass(frozen=True)
class NewestHead:
    """A published head as the page shows it."""

    day: str
    tree_size: int
    root: str
    iat: int
    sealed: bool


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
        f"<dt>Time</dt><dd><time>{_e(utc_second(head.iat))}</time> (signed, UTC)</dd>"
        f'<dt>Head</dt><dd><a href="{_e(href)}">{_e(href)}</a>'
        ' <span class="note">(the signed head document, JWS)</span></dd>'
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


def _lookup_form(sub: str, url: str) -> str:
    return (
        '<h2>Look a record up</h2><form method="get" class="lookup">'
        f'<label>Server ID <input name="id" value="{_e(sub)}" placeholder="example:1"></label> '
        f'<label>or URL <input name="url" value="{_e(url)}" placeholder="https://mcp.example/">'
        '</label> <button type="submit">Look up</button></form>'
        '<p class="note">Give one of them: the page fetches the server\'s signed record and your '
        "browser checks it with <code>verify.js</code>, against this log's keys and files.</p>"
    )


@dataclass(frozen=True)
class Lookup:
    """A record lookup's outcome: the record (`query` names it for explorer.js), else why not."""

    status: int
    query: str = ""
    record: Mapping[str, Any] | None = None
    message: str = ""
    title: str = "No record"


def _member(value: Any) -> str:
    if isinstance(value, str):
        return f'<code class="hash">{_e(value)}</code>'
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return f'<code class="hash">{_e(text)}</code>'


def lookup_html(found: Lookup) -> str:
    """The record and the place of the browser's verdicts, or the plain reason there is none."""
    if found.record is None:
        message = f'<p class="error">{_e(found.message)}</p>'
        return f'<section id="lookup"><h2>{_e(found.title)}</h2>{message}</section>'
    members = "".join(
        f"<dt>{_e(name)}</dt><dd>{_member(value)}</dd>" for name, value in found.record.items()
    )
    href = f"record?{found.query}"
    return (
        f'<section id="lookup" data-query="{_e(found.query)}"><h2>Record</h2>'
        f'<p>As <a href="{_e(href)}">{_e(href)}</a> serves it.</p>'
        f'<dl id="record-members">{members}</dl>'
        "<h3>Checked in this browser</h3>"
        '<p id="verdict" class="note" aria-live="polite">Not checked yet: the check runs as '
        'JavaScript (<a href="verify.js">verify.js</a>, the same verifier as the npm package).</p>'
        '<table id="checks"><tr><th>Check</th><th>Verdict</th><th>Detail</th></tr></table>'
        '</section><script type="module" src="explorer.js"></script>'
    )


def front_page_html(
    listing: Mapping[str, Any],
    head: NewestHead | None = None,
    checkpoint: ServedCheckpoint | None = None,
    today: str | None = None,
    *,
    days: str = "",
    chart: str = "",
    lookup: str = "",
    form: str = "",
) -> bytes:
    """The page for a `/roots` listing of at most one day (`{v, iss, days}`), the newest
    published head, the served checkpoint and the service's UTC day; `days`, `chart`, `lookup`
    and `form` are HTML parts (`explorer.py`, `lookup_html`, `_lookup_form`)."""
    iss = str(listing["iss"])
    items = "".join(
        f'<li><a href="{_e(href)}"><code>/{_e(text)}</code></a> — {_e(what)}</li>'
        for href, text, what in LINKS
    )
    body = (
        f"{form or _lookup_form('', '')}{lookup}"
        f"<h2>Log</h2><dl><dt>Issuer (iss)</dt><dd><code>{_e(iss)}</code></dd></dl>"
        f"{_head_section(head, today)}"
        f"{checkpoint_section(checkpoint)}"
        f"{days}{chart}"
        f"{_sealed_section(listing)}"
        f"<h2>Documents</h2><ul>{items}</ul>"
        '<p class="note">Check a record offline with <code>verify-proof</code>; '
        f"capability-anchor {_e(__version__)}.</p>"
    )
    return _page(
        f"capability-anchor: {iss}", "capability-anchor", f"Transparency log {_e(iss)}", body
    )


# The page's arguments (listing, head, checkpoint, today, days, chart) and the page without
# a lookup, made from them.
Parts = tuple[
    Mapping[str, Any], NewestHead | None, ServedCheckpoint | None, str | None, str, str, bytes
]


def _read_parts(log: Any, before: str | None, today: str | None) -> Parts:
    """Everything `/` shows of the log, each part left out when the log has none (or cannot
    say: the page still shows everything else). Bounded: a page of days, 90 seeks."""
    store = log.store
    row = store.newest_published()
    head = None
    if row is not None:
        head = NewestHead(row.day, row.tree_size, row.root.hex(), row.iat, row.sealed)
    try:
        history = log.read.history
        note = history.served_checkpoint()
        checkpoint = served_checkpoint(note, history.parsed_policy(), int(log.clock()))
    except CapabilityAnchorError:
        checkpoint = None  # no checkpoint yet (or a clock the guard distrusts)
    rows = day_rows(store, before, DAYS_PAGE + 1)
    more = rows[DAYS_PAGE - 1].day if len(rows) > DAYS_PAGE else None
    end = today or (head.day if head is not None else None)
    chart = "" if end is None else chart_svg(chart_counts(store, end))
    days = days_section(rows[:DAYS_PAGE], more)
    listing = log.roots(None, 1)
    page = front_page_html(listing, head, checkpoint, today, days=days, chart=chart)
    return listing, head, checkpoint, today, days, chart, page


def _kept_parts(log: Any, before: str | None, kept: dict[object, tuple[object, Any]]) -> Parts:
    """`_read_parts`, kept while the store's change mark holds (read first, in this thread:
    a commit in between makes the mark stale, never the parts) and the day is the same. An
    engine without a mark (PostgreSQL) keeps them for the second they were read in."""
    mark = log.store.change_mark()
    if mark is None:
        mark = ("second", int(time.monotonic()))
    try:
        today = log.today()
    except CapabilityAnchorError:
        today = None  # the clock guard distrusts the wall clock: the day is not named
    key = (before, today)
    found = kept.get(key)
    if found is not None and found[0] == mark:
        parts: Parts = found[1]
        return parts
    parts = _read_parts(log, before, today)
    if len(kept) >= KEPT_PAGES:
        kept.clear()
    kept[key] = (mark, parts)
    return parts


def _lookup(log: Any, sub: str, url: str, lifetime: int) -> Lookup:
    """The record of `sub` or `url` (exactly one), as `/record` answers it, or why not."""
    if bool(sub) == bool(url):
        return Lookup(400, message="Give a server ID or a URL (one of them, not both).")
    query = urlencode({"id": sub} if sub else {"url": url})
    try:
        answer = issue_record(log, sub=sub or None, url=url or None, lifetime=lifetime)
    except CapabilityAnchorError as exc:
        return Lookup(HTTP_STATUS.get(exc.http_error, 400), message=exc.http_note())
    return Lookup(200, query, loads(answer))


@get("/", include_in_schema=False, media_type=MediaType.HTML)
async def front_page(request: Request[Any, Any, Any]) -> Answer:
    service = service_of(request)
    params = request.query_params
    sub, url, before = params.get("id"), params.get("url"), params.get("before")
    found: Lookup | None = None
    try:
        bound = day_param(before) if before else None
    except UsageError as exc:  # shown on the page, with the newest days
        bound, found = None, Lookup(400, message=f"before: {exc.http_note()}", title="Days")
    parts = await service.read(_kept_parts, service.reader, bound, service.pages)
    if sub is None and url is None and found is None:
        return cached(request, parts[6], immutable=False, media_type="text/html", extra=_HEADERS)
    sub, url = (sub or "").strip(), (url or "").strip()
    if found is None:
        # On the loop, as `/record` is: index seeks and a signature (decisions/37-loopreads).
        found = _lookup(service.reader, sub, url, service.settings.record_lifetime)
    page = front_page_html(
        *parts[:4],
        days=parts[4],
        chart=parts[5],
        lookup=lookup_html(found),
        form=_lookup_form(sub, url),
    )
    raw = [(b"cache-control", b"no-cache"), *_HEADERS, (b"content-type", content_type("text/html"))]
    raw.append((b"content-length", str(len(page)).encode()))
    return Answer(found.status, raw, page)
