"""Every third-party package `src/` imports is a declared dependency of the project, so an
install from the package index never depends on what some other package happened to pull in
(cryptography, anyio, pyasn1 and h11 once came only that way)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib

from tests.kit.paths import ROOT

SRC = ROOT / "src" / "capability_anchor"


def _normal(name: str) -> str:
    """PEP 503 normalised distribution name (`PyNaCl` and `pynacl` are one)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_top_level_names() -> dict[str, set[str]]:
    """Top-level names of every absolute import anywhere in src/ (lazy and typing-only
    imports too: they run somewhere), with the files that import each."""
    found: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(SRC)))
    return found


def declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    return {
        _normal(re.split(r"[\s<>=!~;\[]", spec, maxsplit=1)[0]) for spec in project["dependencies"]
    }


def test_every_third_party_import_of_src_is_a_declared_dependency() -> None:
    distributions = importlib.metadata.packages_distributions()
    wanted = declared()
    third_party = {
        name: files
        for name, files in imported_top_level_names().items()
        if name not in sys.stdlib_module_names and name != "capability_anchor"
    }
    assert {"nacl", "rfc8785", "cryptography", "anyio", "pyasn1"} <= set(third_party)
    problems = []
    for name, files in sorted(third_party.items()):
        dists = distributions.get(name)
        if not dists:
            problems.append(f"{name} (imported by {sorted(files)}) is installed by no distribution")
        elif not {_normal(d) for d in dists} & wanted:
            problems.append(f"{name} (from {dists}, imported by {sorted(files)}) is not declared")
    assert not problems, problems
