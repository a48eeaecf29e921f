"""The verifying path imports no server, storage or HTTP code, so an auditor's run starts fast
and its trust does not depend on code it does not need."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.kit import paths

FORBIDDEN = ("sqlite3", "sqlite_utils", "litestar", "httpx", "uvicorn", "msgspec", "rfc3161ng")
# The verifying path, as package prefixes: the kernel, the offline verifier and its command.
VERIFYING_PREFIXES = (
    "capability_anchor.merkle",
    "capability_anchor.note",
    "capability_anchor.keys",
    "capability_anchor.leaf",
    "capability_anchor.head",
    "capability_anchor.jws",
    "capability_anchor.encoding",
    "capability_anchor.strictjson",
    "capability_anchor.errors",
    "capability_anchor.verify",
    "capability_anchor.cli.verify_proof",
    "capability_anchor.cli.inputs",
)
SRC = paths.ROOT / "src"


def _modules_under(prefixes: tuple[str, ...]) -> tuple[str, ...]:
    """Every module of the package whose dotted name is one of the prefixes or below one."""
    names = []
    for path in sorted((SRC / "capability_anchor").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            names.append(name)
    return tuple(names)


VERIFYING_PATH = _modules_under(VERIFYING_PREFIXES)


def test_verifying_path_imports_no_server_or_storage_code() -> None:
    code = (
        "import sys, json\n"
        + "".join(f"import {m}\n" for m in VERIFYING_PATH)
        + f"print(json.dumps([m for m in {FORBIDDEN!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_an_offline_timestamp_check_loads_no_http_or_storage_code() -> None:
    """verify-proof with --tsa-ca on the sample folder: rfc3161-client and cryptography are
    loaded to check the stamp, never an HTTP client, SQLite or the request builder."""
    roots = paths.ROOT / "roots"
    record = roots / "records" / "2026-11-01-calendar.json"
    code = (
        "import sys, json\n"
        "from capability_anchor.cli.verify_proof import main\n"
        f"code = main([{str(record)!r}, '--roots', {str(roots)!r}, '--at', '1793797200',\n"
        f"             '--tsa-ca', {str(roots / 'tsa-ca.pem')!r}, '--json'])\n"
        f"print(json.dumps([code, [m for m in {FORBIDDEN!r} if m in sys.modules]]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    last = out.stdout.strip().splitlines()[-1]
    assert json.loads(last) == [0, []], out.stdout


# --- the same rule, read from the source ------------------------------------------------------
# The subprocess tests above see only what one run loads. This one reads the import statements
# of every module the verifying path can reach, so an import that only some input would
# trigger (a rarely taken branch, a lazily imported module) is caught too.

PACKAGE = "capability_anchor"
# The verifying path's modules; what they import lazily is followed too (stamps are only
# checked when there is a --tsa-ca, so `timestamp` is reached that way).
VERIFYING_ROOTS = VERIFYING_PATH
FORBIDDEN_INTERNAL = ("capability_anchor.store", "capability_anchor.log", "capability_anchor.api")


def _module_file(name: str) -> Path | None:
    base = SRC.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement and whether it runs when the module is imported (module level,
    not under `if TYPE_CHECKING:`, not inside a function or class body)."""

    def walk(
        nodes: list[ast.stmt], top: bool
    ) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                yield node, top
            elif isinstance(node, ast.If) and _is_type_checking(node):
                continue  # never runs
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield from walk(node.body, False)
            else:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.stmt):
                        yield from walk([child], top)

    yield from walk(tree.body, True)


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The absolute module names an import statement loads (for `from X import y`, X and,
    when it is a module of the package, X.y)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        parts = module.split(".")
        base_parts = parts if is_package else parts[:-1]
        base_parts = base_parts[: len(base_parts) - (node.level - 1)]
        base = ".".join(base_parts + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    names = [base]
    for alias in node.names:
        if _module_file(f"{base}.{alias.name}") is not None:
            names.append(f"{base}.{alias.name}")
    return names


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _reached(roots: tuple[str, ...]) -> dict[str, list[tuple[str, str, bool]]]:
    """Each package module the verifying path reaches, with what it imports: (module
    imported, how it was reached, runs at import time)."""
    seen: dict[str, list[tuple[str, str, bool]]] = {}
    todo = [m for root in roots for m in (*_parents(root), root)]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        path = _module_file(module)
        assert path is not None, f"{module} is not a module of the package"
        seen[module] = []
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, top in _imports(tree):
            for target in _targets(module, path.name == "__init__.py", node):
                seen[module].append((target, node.__class__.__name__, top))
                if target.split(".")[0] == PACKAGE:
                    # Package modules are followed however they are imported: running the
                    # verifier may import any of them.
                    todo.extend(m for m in (*_parents(target), target) if m not in seen)
    return seen


def _problems(reached: dict[str, list[tuple[str, str, bool]]]) -> list[str]:
    problems = []
    for module, imports in sorted(reached.items()):
        if module.startswith(FORBIDDEN_INTERNAL):
            problems.append(f"{module} is reachable from the verifying path")
        for target, _, top in imports:
            top_name = target.split(".")[0]
            if target.startswith(FORBIDDEN_INTERNAL):
                problems.append(f"{module} imports {target}")
            elif top_name in FORBIDDEN and top:
                problems.append(f"{module} imports {target} at module level")
    return problems


def test_the_verifying_path_imports_no_server_storage_or_http_code_statically() -> None:
    reached = _reached(VERIFYING_ROOTS)
    assert "capability_anchor.verify.record" in reached and "capability_anchor.timestamp" in reached
    assert _problems(reached) == []


def test_the_static_check_flags_a_module_that_reaches_storage() -> None:
    """The audit is not on the verifying path: it opens the store, and the walk says so."""
    problems = _problems(_reached(("capability_anchor.audit",)))
    assert "capability_anchor.audit imports capability_anchor.log" in problems
    assert any(p.endswith("imports sqlite3 at module level") for p in problems), problems


def test_the_static_layering_check_sees_an_import_of_storage() -> None:
    """The walker itself: a module-level `sqlite3` import and a relative import of the store
    are both found (so the test above cannot pass by seeing nothing)."""
    tree = ast.parse("import sqlite3\nfrom .store import Store\ndef f():\n    import httpx\n")
    found = [
        (target, top)
        for node, top in _imports(tree)
        for target in _targets("capability_anchor.verify", False, node)
    ]
    assert ("sqlite3", True) in found
    assert ("capability_anchor.store", True) in found
    assert ("httpx", False) in found


# --- the storage engine stays inside the storage package ----------------------------------------
STORAGE_ENGINE = ("sqlite3", "sqlite_utils")
# Each engine is a package of `store/`; only it may import its driver.
STORAGE_PACKAGE = SRC / PACKAGE / "store" / "sqlite"


POSTGRES_DRIVER = ("psycopg", "psycopg_pool")
POSTGRES_PACKAGE = SRC / PACKAGE / "store" / "postgres"


def _engine_imports(path: Path, drivers: tuple[str, ...] = STORAGE_ENGINE) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [
        target
        for node, _ in _imports(tree)
        for target in _targets(PACKAGE, False, node)
        if target.split(".")[0] in drivers
    ]


def test_no_module_outside_the_store_imports_sqlite() -> None:
    """Lazily or not: only `store/sqlite/` may import SQLite or sqlite-utils, so another engine
    can follow without touching the log, the API, the audit, export or the store's contract."""
    outside = [p for p in (SRC / PACKAGE).rglob("*.py") if STORAGE_PACKAGE not in p.parents]
    assert len(outside) > 30
    found = {str(p.relative_to(SRC)): _engine_imports(p) for p in outside}
    assert {p: names for p, names in found.items() if names} == {}
    inside = [p for p in STORAGE_PACKAGE.rglob("*.py") if _engine_imports(p)]
    assert STORAGE_PACKAGE / "base.py" in inside  # the walk sees an import that is there


def test_no_module_outside_the_postgresql_engine_imports_its_driver() -> None:
    outside = [p for p in (SRC / PACKAGE).rglob("*.py") if POSTGRES_PACKAGE not in p.parents]
    found = {str(p.relative_to(SRC)): _engine_imports(p, POSTGRES_DRIVER) for p in outside}
    assert {p: names for p, names in found.items() if names} == {}
    inside = [p for p in POSTGRES_PACKAGE.rglob("*.py") if _engine_imports(p, POSTGRES_DRIVER)]
    assert POSTGRES_PACKAGE / "schema.py" in inside


# --- engines are reached only through `store/open.py` -------------------------------------------
STORE_PACKAGE = SRC / PACKAGE / "store"
ENGINE_MODULE = f"{PACKAGE}.store.sqlite"


def _module_name(path: Path) -> tuple[str, bool]:
    parts = path.relative_to(SRC).with_suffix("").parts
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def _engine_package_imports(path: Path) -> list[str]:
    module, is_package = _module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [
        target
        for node, _ in _imports(tree)
        for target in _targets(module, is_package, node)
        if target == ENGINE_MODULE or target.startswith(ENGINE_MODULE + ".")
    ]


def test_nothing_outside_the_store_imports_an_engine() -> None:
    """Lazily or not: outside `store/` nothing imports `store.sqlite` (its classes, its file
    names); every store and witness store is opened through `store.open`, so a second engine
    plugs in there and nowhere else."""
    outside = [p for p in (SRC / PACKAGE).rglob("*.py") if STORE_PACKAGE not in p.parents]
    assert len(outside) > 30
    found = {str(p.relative_to(SRC)): _engine_package_imports(p) for p in outside}
    assert {p: names for p, names in found.items() if names} == {}
    # The walk sees such an import where there is one: the registry's engine imports it.
    assert _engine_package_imports(STORE_PACKAGE / "sqlite" / "engine.py")


# --- which stage may import which -------------------------------------------------------------
# Each package's docstring says what it may import; these are the edges it must not have, as
# package prefixes (any import, lazy or not, outside `if TYPE_CHECKING:`).
_P = "capability_anchor."
_KERNEL = ("merkle", "note", "keys", "leaf", "head", "jws", "encoding", "strictjson", "errors")
_UPPER = ("log", "read", "export", "audit", "api", "cli", "store", "monitor", "witness")
_EDGES = ("api", "cli")
FORBIDDEN_EDGES: dict[str, tuple[str, ...]] = {
    **{k: (*_UPPER, "metrics", "timestamp", "verify") for k in _KERNEL},
    "record": (*_UPPER, "metrics", "timestamp", "verify"),
    "bounded": (*_UPPER, "metrics", "timestamp", "verify"),
    "verify": ("log", "read", "export", "audit", "api", "cli", "store", "monitor", "witness"),
    "store": ("log", "read", "export", "audit", "api", "cli", "monitor", "witness", "verify"),
    "read": ("log", "export", "audit", "monitor", "witness", *_EDGES),
    "log": ("audit", "export", *_EDGES),
    "export": ("audit", "witness", *_EDGES),
    "audit": _EDGES,
    "monitor": ("store", "log", "read", "export", "audit", "witness", *_EDGES),
    "timestamp": ("store", "read", "export", "audit", "monitor", "witness", *_EDGES),
    "metrics": ("export", "audit", "monitor", "witness", *_EDGES),
    "witness.client": ("witness.server", "audit", "export", *_EDGES),
    "witness.server": ("witness.client", "log", "read", "export", "audit", "cli"),
    "api": ("cli", "audit"),
}


def _package_of(module: str) -> str:
    rest = module.removeprefix(_P)
    return next(
        (
            p
            for p in sorted(FORBIDDEN_EDGES, key=len, reverse=True)
            if rest == p or rest.startswith(p + ".")
        ),
        rest,
    )


def _edge_problems() -> list[str]:
    problems = []
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_package else parts)
        package = _package_of(module)
        banned = FORBIDDEN_EDGES.get(package, ())
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, _ in _imports(tree):
            for target in _targets(module, is_package, node):
                rest = target.removeprefix(_P)
                if target.startswith(_P) and any(
                    rest == b or rest.startswith(b + ".") for b in banned
                ):
                    problems.append(f"{module} ({package}) imports {target}")
    return problems


def test_each_stage_imports_only_what_its_docstring_allows() -> None:
    assert _edge_problems() == []


def test_each_package_docstring_says_what_it_owns_and_may_import() -> None:
    for init in sorted((SRC / PACKAGE).rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert len(doc) > 80 and "import" in doc.lower(), init.relative_to(SRC)


def test_the_edge_check_sees_a_forbidden_edge() -> None:
    tree = ast.parse("from capability_anchor.log import Log\n")
    found = [
        t for node, _ in _imports(tree) for t in _targets("capability_anchor.store", True, node)
    ]
    assert "capability_anchor.log" in found
    assert _package_of("capability_anchor.store.sqlite.base") == "store"
    assert _package_of("capability_anchor.witness.client.rounds") == "witness.client"
