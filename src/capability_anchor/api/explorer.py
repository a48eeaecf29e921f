"""The log explorer's parts of `/` (home.py assembles them): the days, newest first, a page at a
time; the served checkpoint's cosigners against the policy's quorum; and records per day over
the last 90 days as an SVG drawn here. Every read is bounded (a page of days, 90 index seeks);
home.py keeps the result while the store's change mark holds. Values are HTML-escaped.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from capability_anchor.encoding import utc_second
from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.note import check_cosignatures, parse_checkpoint, parse_note
from capability_anchor.note.signed import b64encode

from .pages import _e

DAYS_PAGE = 30
CHART_DAYS = 90


@dataclass(frozen=True)
class DayRow:
    """A day as the table shows it: its newest head and the stamps of its sealed head."""

    day: str
    size: int
    sealed: bool
    stamps: int
    first_stamp: str | None  # the earliest genTime, as stored


@dataclass(frozen=True)
class WitnessView:
    """A policy witness and what the served checkpoint holds of it."""

    name: str
    state: str  # "cosigned", "missing" or "failed"
    detail: str


@dataclass(frozen=True)
class ServedCheckpoint:
    """The checkpoint `/history/checkpoint` serves: its size, root (base64, as in the note),
    the names of its cosigners in the note's order and, with a policy, each policy witness
    and whether the quorum is met (`quorum_note` says what is missing)."""

    size: int
    root: str
    cosigners: tuple[str, ...]
    quorum: str | None = None
    quorum_met: bool = False
    quorum_note: str = ""
    witnesses: tuple[WitnessView, ...] = ()


def served_checkpoint(note: bytes, policy: Any = None, at: int = 0) -> ServedCheckpoint:
    """What the page shows of a served checkpoint note: the log signs with its origin as its
    key name (SPEC §12.2), so every other signature line is a cosignature; with a parsed
    `policy`, its witnesses' lines are checked as verify-proof's check 9 does, at `at`."""
    parsed = parse_note(note)
    body = parse_checkpoint(parsed.text)
    names = tuple(dict.fromkeys(s.name for s in parsed.signatures if s.name != body.origin))
    served = ServedCheckpoint(body.size, b64encode(body.root), names)
    if policy is None:
        return served
    witnessed = check_cosignatures(parsed, policy, at=at)
    views = []
    for w in policy.witnesses:
        if w.name in witnessed.cosigned:
            when = utc_second(witnessed.cosigned[w.name])
            views.append(WitnessView(w.name, "cosigned", when))
        elif w.name in witnessed.failed:
            views.append(WitnessView(w.name, "failed", witnessed.failed[w.name]))
        else:
            views.append(WitnessView(w.name, "missing", "no cosignature"))
    note_text = ""
    try:
        witnessed.require()
    except CapabilityAnchorError as exc:
        note_text = str(exc)
    return ServedCheckpoint(
        served.size, served.root, names, policy.quorum, witnessed.ok, note_text, tuple(views)
    )


# --- reads ------------------------------------------------------------------------------------


def day_rows(store: Any, before: str | None, limit: int = DAYS_PAGE) -> list[DayRow]:
    """The `limit` newest days with a published head, before `before`: a seek for each day,
    its newest head (two), and the stamps of a sealed one."""
    rows = []
    for day in store.head_days(before, limit):
        head = store.newest_head(day)
        if head is None:
            continue
        stamps = store.stamps(day) if head.sealed else []
        first = min((s.gen_time for s in stamps), default=None)
        rows.append(DayRow(day, head.tree_size, head.sealed, len(stamps), first))
    return rows


def chart_counts(store: Any, today: str, days: int = CHART_DAYS) -> list[tuple[str, int]]:
    """(day, size of its newest head) for the `days` days ending today, oldest first."""
    end = dt.date.fromisoformat(today)
    out = []
    for back in range(days - 1, -1, -1):
        day = (end - dt.timedelta(days=back)).isoformat()
        state = store.newest_head_state(day)
        out.append((day, 0 if state is None else state[0]))
    return out


# --- HTML -------------------------------------------------------------------------------------


def _head_href(row: DayRow) -> str:
    return f"roots/{row.day}" if row.sealed else f"roots/{row.day}/{row.size}"


def days_section(rows: Sequence[DayRow], more: str | None) -> str:
    """The days table; `more`: the day before which the next page starts (None: no more)."""
    if not rows:
        return '<h2>Days</h2><p class="note">No day has a published head yet.</p>'
    cells = []
    for r in rows:
        stamps = (
            f"{r.stamps}, first {_e(r.first_stamp)}"
            if r.stamps
            else ("none yet" if r.sealed else "—")
        )
        href = _head_href(r)
        cells.append(
            f'<tr data-day="{_e(r.day)}"><td>{_e(r.day)}</td><td class="num">{_e(r.size)}</td>'
            f"<td>{'sealed' if r.sealed else 'open'}</td><td>{stamps}</td>"
            f'<td><a href="{_e(href)}">{_e(href)}</a></td></tr>'
        )
    link = ""
    if more is not None:
        link = (
            f'<p><a href="?before={_e(more)}">Older days</a> '
            '<span class="note">(or <a href="roots">roots</a>, every sealed day as JSON)</span></p>'
        )
    return (
        '<h2>Days</h2><table class="days"><tr><th>Day (UTC)</th><th>Records</th><th>State</th>'
        f"<th>Stamps</th><th>Newest head</th></tr>{''.join(cells)}</table>{link}"
    )


def checkpoint_section(checkpoint: ServedCheckpoint | None) -> str:
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
        f"{_quorum(checkpoint)}"
        '<dt>Note</dt><dd><a href="history/checkpoint">history/checkpoint</a>'
        ' <span class="note">(C2SP signed note)</span></dd>'
        "</dl>"
    )


def _quorum(checkpoint: ServedCheckpoint) -> str:
    if checkpoint.quorum is None:
        return '<dt>Quorum</dt><dd class="note">no witness policy</dd>'
    verdict = "met" if checkpoint.quorum_met else "not met"
    why = (
        f" <span class='note'>({_e(checkpoint.quorum_note)})</span>"
        if checkpoint.quorum_note
        else ""
    )
    rows = "".join(
        f'<tr data-witness="{_e(w.name)}"><td><code>{_e(w.name)}</code></td>'
        f'<td class="{_e(w.state)}">{_e(w.state)}</td><td>{_e(w.detail)}</td></tr>'
        for w in checkpoint.witnesses
    )
    table = f"<table><tr><th>Witness</th><th>State</th><th>Detail</th></tr>{rows}</table>"
    return (
        f'<dt>Quorum</dt><dd class="quorum" data-met="{str(checkpoint.quorum_met).lower()}">'
        f"<code>{_e(checkpoint.quorum)}</code>: {verdict}{why}</dd>"
        f"<dt>Witnesses</dt><dd>{table if checkpoint.witnesses else 'none in the policy'}</dd>"
    )


CHART_W, CHART_H = 720, 160
_LEFT, _TOP, _BOTTOM = 48, 10, 34


def chart_svg(counts: Sequence[tuple[str, int]]) -> str:
    """Records per day as bars, oldest left, with a title and description for screen readers,
    the axes labelled and each bar titled with its day and count. No script, no style."""
    if not counts:
        return ""
    top = max(c for _, c in counts)
    total = sum(c for _, c in counts)
    busiest = max(counts, key=lambda dc: dc[1])
    first, last = counts[0][0], counts[-1][0]
    step = (CHART_W - _LEFT - 4) / len(counts)
    base = _TOP + CHART_H
    bars = []
    for n, (day, count) in enumerate(counts):
        h = 0.0 if top == 0 else CHART_H * count / top
        x = _LEFT + n * step
        bars.append(
            f'<rect class="bar" data-day="{_e(day)}" data-count="{count}" x="{x:.1f}" '
            f'y="{base - h:.1f}" width="{max(step - 1, 1):.1f}" height="{h:.1f}" fill="#0b5cad">'
            f"<title>{_e(day)}: {count} records</title></rect>"
        )
    desc = f"{len(counts)} days from {first} to {last}: {total} records in all; " + (
        f"the most, {busiest[1]}, on {busiest[0]}." if top else "none."
    )
    height = _TOP + CHART_H + _BOTTOM
    text = 'font-size="11" fill="#57606a" font-family="sans-serif"'
    return (
        '<h2>Records per day</h2><figure class="chart">'
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{CHART_W}" height="{height}" '
        f'viewBox="0 0 {CHART_W} {height}" aria-labelledby="chart-title chart-desc">'
        '<title id="chart-title">Records per day, last 90 days</title>'
        f'<desc id="chart-desc">{_e(desc)}</desc>'
        f'<line x1="{_LEFT}" y1="{base}" x2="{CHART_W - 4}" y2="{base}" stroke="#57606a"/>'
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{base}" stroke="#57606a"/>'
        f'<text x="{_LEFT - 4}" y="{_TOP + 9}" text-anchor="end" {text}>{top}</text>'
        f'<text x="{_LEFT - 4}" y="{base}" text-anchor="end" {text}>0</text>'
        f'<text x="{_LEFT}" y="{base + 14}" {text}>{_e(first)}</text>'
        f'<text x="{CHART_W - 4}" y="{base + 14}" text-anchor="end" {text}>{_e(last)}</text>'
        f'<text x="{(CHART_W + _LEFT) / 2:.0f}" y="{base + 28}" text-anchor="middle" {text}>'
        "day (UTC)</text>"
        f'<text x="12" y="{_TOP + CHART_H / 2:.0f}" text-anchor="middle" {text} '
        f'transform="rotate(-90 12 {_TOP + CHART_H / 2:.0f})">records</text>'
        f"{''.join(bars)}</svg><figcaption>{_e(desc)}</figcaption></figure>"
    )
