"""Every link of the documentation resolves (issue #22 item 5): in README.md, docs/**/*.md
and roots/README.md, a relative link names a file or folder that exists, and its `#anchor`
(or a same-page `#anchor`) is the GitHub slug of a heading of that file. External http(s)
links are not fetched (no network here), only checked to be well formed. Links and headings
inside code are not links or headings, as GitHub renders them."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.kit.paths import ROOT

PAGES = sorted([ROOT / "README.md", ROOT / "roots" / "README.md", *(ROOT / "docs").rglob("*.md")])
FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.S | re.M)
INLINE_CODE = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^()\s>]*(?:\([^()\s]*\)[^()\s>]*)*)>?(?:\s+\"[^\"]*\")?\s*\)"
)
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$", re.M)


def _prose(text: str) -> str:
    """The text without fenced code blocks (lines kept, so nothing joins across them)."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation other than `-`
    and `_` removed, each space a `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for match in HEADING.finditer(_prose(page.read_text(encoding="utf-8"))):
        base = slug(match.group(2))
        name, n = base, 0
        while name in found:  # GitHub numbers repeated headings -1, -2, ...
            n += 1
            name = f"{base}-{n}"
        found.add(name)
    return found


def links(page: Path) -> list[str]:
    text = INLINE_CODE.sub("", _prose(page.read_text(encoding="utf-8")))
    return [m.group(1) for m in LINK.finditer(text)]


def test_the_pages_are_found_and_have_links() -> None:
    names = {str(p.relative_to(ROOT)) for p in PAGES}
    assert {"README.md", "roots/README.md", "docs/README.md", "docs/tutorial.md"} <= names
    assert sum(len(links(p)) for p in PAGES) > 50


def test_the_slugs_are_githubs() -> None:
    assert slug("Checking a record offline: `verify-proof`") == (
        "checking-a-record-offline-verify-proof"
    )
    assert slug("§12.2 checkpoints") == "122-checkpoints"
    assert slug("The files (SPEC §8)") == "the-files-spec-8"
    assert slug("Never fork after a restore (#21)") == "never-fork-after-a-restore-21"


def test_code_is_not_a_link_or_a_heading(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Top\n\n`[a](gone.md)`\n\n```sh\n# not a heading\n[b](gone.md)\n```\n")
    assert links(page) == []
    assert anchors(page) == {"top"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        parts = urlsplit(target)
        if parts.scheme in ("http", "https"):
            if not parts.netloc or " " in target:
                broken.append(f"{target}: not a well-formed URL")
            continue
        if parts.scheme == "mailto":
            continue
        assert not parts.scheme, f"{page}: link with scheme {parts.scheme}: {target}"
        path = unquote(parts.path)
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(
                f"{target}: no {file.relative_to(ROOT) if ROOT in file.parents else file}"
            )
            continue
        if parts.fragment:
            if file.is_dir() or file.suffix != ".md":
                broken.append(f"{target}: an anchor into a file that is not a page")
            elif unquote(parts.fragment) not in anchors(file):
                broken.append(f"{target}: no heading #{parts.fragment} in {file.name}")
    assert broken == [], f"{page.relative_to(ROOT)}:\n" + "\n".join(broken)
