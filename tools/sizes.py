"""Size measures of issue 36 for `src/` (or the folders named): lines per package, the median
module docstring, functions whose body (docstring aside) is 2 lines or fewer, and function
docstrings longer than that body.

    PYTHONPATH=src .venv/bin/python tools/sizes.py [folder ...]
"""

from __future__ import annotations

import ast
import statistics
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "capability_anchor"


def _lines(node: ast.AST) -> int:
    return (node.end_lineno or node.lineno) - node.lineno + 1  # type: ignore[attr-defined]


def measure(files: list[Path]) -> dict[str, object]:
    """The measures over `files`, as a dict a test can compare against limits."""
    per_package: Counter[str] = Counter()
    module_docs, bodies, long_docs = [], [], 0
    for path in files:
        text = path.read_text()
        rel = path.relative_to(PACKAGE) if path.is_relative_to(PACKAGE) else path
        per_package[rel.parts[0] if len(rel.parts) > 1 else "(top)"] += len(text.splitlines())
        tree = ast.parse(text)
        if (doc := ast.get_docstring(tree, clean=False)) is not None:
            module_docs.append(len(doc.strip().splitlines()))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            body = node.body
            doc_lines = 0
            if ast.get_docstring(node, clean=False) is not None:
                doc_lines, body = _lines(body[0]), body[1:]
            body_lines = sum(_lines(s) for s in body)
            bodies.append(body_lines)
            long_docs += doc_lines > body_lines
    return {
        "lines": sum(per_package.values()),
        "per_package": dict(sorted(per_package.items())),
        "module_docstring_median": statistics.median(module_docs) if module_docs else 0,
        "functions": len(bodies),
        "short_bodies": sum(b <= 2 for b in bodies),
        "docstrings_longer_than_body": long_docs,
    }


def main(argv: list[str]) -> None:
    roots = [Path(a).resolve() for a in argv] or [PACKAGE]
    files = sorted(f for r in roots for f in ([r] if r.is_file() else r.rglob("*.py")))
    m = measure(files)
    for name, n in m["per_package"].items():  # type: ignore[attr-defined]
        print(f"{n:7d}  {name}")
    print(f"{m['lines']:7d}  total")
    short = m["short_bodies"]
    print(f"module docstring median: {m['module_docstring_median']} lines")
    print(f"functions with a body of <=2 lines: {short} of {m['functions']}")
    print(f"docstrings longer than their function body: {m['docstrings_longer_than_body']}")


if __name__ == "__main__":
    main(sys.argv[1:])
