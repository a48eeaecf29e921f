"""Every path the documentation names exists (issue #35 item 9): the repository files and
folders it names, and the HTTP paths it names as the service's.

What a new user met: the systemd unit's `Documentation=` and the nginx sample pointed to
`docs/operations.md`, gone since #22, and `docs/reference/http.md` named `/openapi.json` and
`/docs`, both 404. Scanned: README.md, docs/**/*.md, docs/capability-anchor.service and
docs/nginx-capability-anchor.conf. (Markdown links are test_docs_links.py's.)

The rules, so that nothing needs an allow-list:

- A repository path is a word that starts with one of the repository's top-level folders
  (`docs/`, `src/`, `tools/`, `tests/`, `roots/`, `.ci/`) and is not the tail of a longer
  path or URL, or the path in a URL of this repository on GitHub (`.../blob/main/PATH`). One
  with a placeholder (`<`, `{`, `*`, `…`) is a pattern, not a path, and is not checked.
- An HTTP path is a code span that starts with an absolute path (after an optional method:
  `GET /roots`), or the path of a URL of the service's default address
  (`http://127.0.0.1:8000/...`). An absolute path under a top-level folder of a Unix file
  system (`/var`, `/opt`, `/etc`, ...) is a file, not an HTTP path. It must be a route of
  the log's app (built here with `create_app`, its OpenAPI pages included) or of `witness
  serve`'s, or the folder of such routes (`/history` for `/history/checkpoint`...); a
  placeholder segment (`<day>`, `{size}`, `N`) matches any value, a part in brackets
  (`[?prove=1]`) is optional, a query is ignored, and a trailing `…` stands for the rest.
- docs/explanation/decisions/ is a record of choices, which names on purpose what was
  renamed or removed since ("`docs/operations.md`, since #22 `docs/how-to/operate.md`",
  "`/redoc` ... are gone"): it is not checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from capability_anchor.api.app import create_app
from capability_anchor.api.settings import Settings
from capability_anchor.log import Log
from capability_anchor.witness.server import app as witness_app
from tests.kit.paths import ROOT

PAGES = sorted(
    [
        ROOT / "README.md",
        *(ROOT / "docs").rglob("*.md"),
        ROOT / "docs" / "capability-anchor.service",
        ROOT / "docs" / "nginx-capability-anchor.conf",
    ]
)
RECORD_OF_CHOICES = ROOT / "docs" / "explanation" / "decisions"

TOP_FOLDERS = ("docs", "src", "tools", "tests", "roots", ".ci")
REPO_PATH = re.compile(
    r"(?<![\w.@/~$-])((?:" + "|".join(re.escape(f) for f in TOP_FOLDERS) + r")/[\w./<>{}*…-]*)"
)
REPO_URL = re.compile(
    r"github\.com/capability-anchor/capability-anchor/(?:blob|tree)/[\w.-]+/([\w./<>{}*…-]+)"
)
PLACEHOLDER = re.compile(r"[<>{}*…]")

CODE_SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)")
FILE_SYSTEM = ("bin", "dev", "etc", "home", "lib", "mnt", "opt", "proc", "root", "run", "sbin")
FILE_SYSTEM += ("srv", "sys", "tmp", "usr", "var")
SPAN_PATH = re.compile(r"^(?:(?:GET|HEAD|POST|PUT|DELETE) )?(/[^\s`'\"|,;)]*)")
SERVICE_URL = re.compile(r"http://127\.0\.0\.1:8000(/[^\s`'\")>\]]*)")


def repository_paths(text: str) -> Iterator[str]:
    for pattern in (REPO_PATH, REPO_URL):
        for match in pattern.finditer(text):
            path = match.group(1).rstrip(".,:;")
            if not PLACEHOLDER.search(path):
                yield path


def http_paths(text: str) -> Iterator[str]:
    for span in CODE_SPAN.finditer(text):
        found = SPAN_PATH.match(span.group(2).strip())
        if found:
            yield found.group(1)
    for match in SERVICE_URL.finditer(text):
        yield match.group(1)


def _pattern(path: str) -> str:
    """A route's path format as a regex: `{tile}` (a path parameter) takes slashes."""
    out = ""
    for part in re.split(r"(\{[^}]+\})", path):
        if part.startswith("{"):
            out += ".+" if part == "{tile}" else "[^/]+"
        else:
            out += re.escape(part)
    return out


def _template(path: str) -> re.Pattern[str]:
    """A route's path format as a pattern, which its folders match too (`/history` for
    `/history/checkpoint`)."""
    segments = path.split("/")
    prefixes = ["/".join(segments[:n]) for n in range(2, len(segments) + 1)]
    return re.compile("|".join(_pattern(p) for p in prefixes) or re.escape(path))


def _concrete(path: str) -> str | None:
    """The doc's path with its query dropped and each placeholder a sample value; None for
    one that names no resource (a bare `/`, or a file system path)."""
    path = re.sub(r"\[[^\]]*\]", "", path)
    path = re.sub(r"/(?:…|\.\.\.)$", "/x", path.split("?", 1)[0].split("#", 1)[0])
    path = path.rstrip(".,:")
    if path in ("", "/") or path.strip("/").split("/", 1)[0] in FILE_SYSTEM:
        return None
    segments = [
        "x" if re.fullmatch(r"<[^>]+>|\{[^}]+\}|[A-Z_]+", s) else s for s in path.split("/")
    ]
    return "/".join(segments)


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory) -> list[re.Pattern[str]]:
    """Every path the log's app routes (its OpenAPI pages included) and `witness serve`'s."""
    data = tmp_path_factory.mktemp("docs-paths") / "data"
    Log.init(data, iss="https://resolver.example").close()
    app = create_app(Settings(data_dir=data, background=False, body_workers=0))
    try:
        formats = {route.path_format for route in app.routes}
    finally:
        app.state.service.close()
    for handler in (
        witness_app.add_checkpoint,
        witness_app.checkpoint,
        witness_app.healthz,
        witness_app.metrics_page,
    ):
        formats |= {re.sub(r"\{(\w+):\w+\}", r"{\1}", p) for p in handler.paths}
    return [_template(f) for f in formats]


def test_the_rules_find_what_a_new_user_met() -> None:
    assert list(repository_paths("see docs/operations.md, and tools/dev.py.")) == [
        "docs/operations.md",
        "tools/dev.py",
    ]
    unit = (
        "Documentation=https://github.com/capability-anchor/capability-anchor/blob/main/docs/x.md"
    )
    assert list(repository_paths(unit)) == ["docs/x.md"]
    assert list(repository_paths("`roots/<day>/<size>.json`, ~/docs/x, a/tests/y")) == []
    text = "(`/openapi.json`, rendered at `/docs`) `GET /roots/{day}` `/var/lib/x` `--data`"
    assert list(http_paths(text)) == ["/openapi.json", "/docs", "/roots/{day}", "/var/lib/x"]
    assert _concrete("/var/lib/x") is None
    assert _concrete("/roots/<day>/tile/…") == "/roots/x/tile/x"
    assert _concrete("/proof?day&index") == "/proof"
    assert _concrete("/history/checkpoint[/N]") == "/history/checkpoint"


def test_the_pages_are_found_and_name_paths() -> None:
    names = {str(p.relative_to(ROOT)) for p in PAGES}
    assert {
        "README.md",
        "docs/capability-anchor.service",
        "docs/nginx-capability-anchor.conf",
    } <= names
    assert sum(len(list(repository_paths(p.read_text()))) for p in PAGES) > 50
    assert sum(len(list(http_paths(p.read_text()))) for p in PAGES) > 50


CHECKED = [p for p in PAGES if RECORD_OF_CHOICES not in p.parents]


@pytest.mark.parametrize("page", CHECKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_named_exists(page: Path) -> None:
    missing = sorted({p for p in repository_paths(page.read_text()) if not (ROOT / p).exists()})
    assert missing == [], f"{page.relative_to(ROOT)} names what the repository lacks: {missing}"


@pytest.mark.parametrize("page", CHECKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_http_path_named_is_a_route(page: Path, routes: list[re.Pattern[str]]) -> None:
    unknown = sorted(
        {
            path
            for path in http_paths(page.read_text())
            if (concrete := _concrete(path)) is not None
            and not any(route.fullmatch(concrete) for route in routes)
        }
    )
    assert unknown == [], f"{page.relative_to(ROOT)} names paths no service routes: {unknown}"
