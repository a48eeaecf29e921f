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
FORBIDDEN_INTERNAL = tuple(
    f"capability_anchor.{name}"
    for name in ("store", "log", "read", "metrics", "web", "service", "api", "witness.server")
)


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


# --- the layers: an allow-list, bottom to top ---------------------------------------------------
# Each unit (a package, or a group of small ones) may import only units of lower layers; units
# of one layer are independent (neither imports the other). Every import counts: at module
# level, inside functions, and under `if TYPE_CHECKING:` (a type named there is a dependency
# of the code all the same, and would let a cycle hide). A module in no unit fails the test.
# docs/explanation/decisions/36-layers.md gives the order's reasons.
_P = "capability_anchor."
UNITS: dict[str, tuple[str, ...]] = {
    # The root and witness/ namespaces (a docstring, `__version__`) and the helpers every
    # layer uses; metrics are counters that import nothing above these.
    "base": (
        "capability_anchor",
        "errors",
        "envvars",
        "strictjson",
        "encoding",
        "files",
        "progress",
        "parentdeath",
        "witness",
    ),
    "metrics": ("metrics",),
    "kernel": ("merkle", "note", "keys", "leaf", "head", "jws", "record", "bounded"),
    "timestamp": ("timestamp",),
    "verify": ("verify",),
    "store": ("store",),
    "read": ("read",),
    "log": ("log",),
    "export": ("export",),
    "audit": ("audit",),
    "web": ("web",),
    "monitor": ("monitor",),
    "witness.client": ("witness.client",),
    "witness.server": ("witness.server",),
    "service": ("service",),
    "api": ("api",),
    "cli": ("cli",),
}
LAYERS: tuple[tuple[str, ...], ...] = (
    ("base",),
    ("metrics",),
    ("kernel",),
    ("timestamp",),
    ("verify",),
    ("store",),
    ("read",),
    ("log",),
    ("export",),
    ("audit",),
    ("web",),
    ("monitor", "witness.client", "witness.server"),
    ("service",),
    ("api",),
    ("cli",),
)
LAYER_OF = {unit: n for n, layer in enumerate(LAYERS) for unit in layer}


def _unit_of(module: str) -> str | None:
    """The unit of a module of the package (the longest prefix that names one), else None."""
    best: tuple[int, str] | None = None
    for unit, prefixes in UNITS.items():
        for prefix in prefixes:
            name = prefix if prefix == PACKAGE else _P + prefix
            if (module == name or (prefix != PACKAGE and module.startswith(name + "."))) and (
                best is None or len(name) > best[0]
            ):
                best = (len(name), unit)
    return best[1] if best else None


def _all_imports(module: str, is_package: bool, tree: ast.Module) -> Iterator[str]:
    """Every module of the package an import statement of TREE names, wherever it is
    (module level, a function, a class, `if TYPE_CHECKING:`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            targets = _targets(module, is_package, node)
            if isinstance(node, ast.ImportFrom) and len(targets) == 1 + len(node.names):
                targets = targets[1:]  # `from pkg import mod, ...`: the modules, not pkg's names
            for target in targets:
                if target == PACKAGE or target.startswith(_P):
                    yield target


def _module_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        module, is_package = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        graph[module] = {t for t in _all_imports(module, is_package, tree) if t != module}
    return graph


def _layer_problems(graph: dict[str, set[str]]) -> list[str]:
    problems = []
    for module, targets in sorted(graph.items()):
        unit = _unit_of(module)
        if unit is None:
            problems.append(f"{module} is in no unit of the layers")
            continue
        for target in sorted(targets):
            other = _unit_of(target)
            if other is None or other == unit:
                continue
            if LAYER_OF[other] == LAYER_OF[unit]:
                problems.append(f"{module} ({unit}) imports {target} ({other}, its sibling)")
            elif LAYER_OF[other] > LAYER_OF[unit]:
                problems.append(f"{module} ({unit}) imports {target} ({other}, a higher layer)")
    return problems


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _unit_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    units: dict[str, set[str]] = {unit: set() for unit in UNITS}
    for module, targets in graph.items():
        unit = _unit_of(module)
        for target in targets:
            other = _unit_of(target)
            if unit is not None and other is not None and other != unit:
                units[unit].add(other)
    return units


def test_every_module_imports_only_lower_layers() -> None:
    """The allow-list: however it imports (lazily, for a type only), a unit imports only the
    units of the layers below its own."""
    assert _layer_problems(_module_graph()) == []


def test_no_import_cycle_between_units() -> None:
    assert _cycles(_unit_graph(_module_graph())) == []


# Module-level cycles left, each inside one package: the log's modules and `Log` name each
# other's types (`Log` holds its `LogWriter`, whose helpers take the `Log`).
MODULE_CYCLES_ALLOWED_IN = ("capability_anchor.log",)


def test_no_import_cycle_between_modules_but_inside_the_log() -> None:
    cycles = _cycles(_module_graph())
    assert [c for c in cycles if not all(m.startswith(MODULE_CYCLES_ALLOWED_IN) for m in c)] == []


LAZY_NOTE = "# Imported inside functions:"


def _function_level_imports(tree: ast.Module, module: str, is_package: bool) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    found += [
                        t for t in _targets(module, is_package, inner) if t.startswith(PACKAGE)
                    ]
    return found


def test_a_function_imports_the_project_only_where_the_cost_is_written() -> None:
    """A module that imports the project inside a function says, beside its imports, which
    start-up cost that saves and how it was measured (the `LAZY_NOTE` comment)."""
    lazy, silent = [], []
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        module, is_package = _module_name(path)
        text = path.read_text(encoding="utf-8")
        if _function_level_imports(ast.parse(text), module, is_package):
            lazy.append(module)
            if LAZY_NOTE not in text:
                silent.append(module)
    assert silent == []
    assert "capability_anchor.store.open" in lazy  # the walk sees a lazy import that is there


def test_every_unit_of_the_order_is_named_once() -> None:
    assert sorted(LAYER_OF) == sorted(UNITS)
    assert sum(len(layer) for layer in LAYERS) == len(UNITS)


def test_the_layer_check_sees_an_upward_import_and_a_cycle() -> None:
    """The walker counts imports inside functions and under TYPE_CHECKING, and an import
    upward or between siblings is named (so the tests above cannot pass by seeing nothing)."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from capability_anchor.log import Log\n"
        "def f():\n    from ..api import app\n"
    )
    found = set(_all_imports("capability_anchor.store.open", False, tree))
    assert {"capability_anchor.log", "capability_anchor.api.app"} <= found
    graph = {
        "capability_anchor.store.open": found,
        "capability_anchor.monitor.follow": {"capability_anchor.witness.client.rounds"},
    }
    problems = _layer_problems(graph)
    assert any("capability_anchor.log (log, a higher layer)" in p for p in problems)
    assert any("witness.client, its sibling" in p for p in problems)
    assert _unit_of("capability_anchor.witness.client.rounds") == "witness.client"
    assert _unit_of("capability_anchor.strictjson") == "base"
    assert _unit_of("capability_anchor.nothing") is None
    cyclic = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(cyclic) == [["a", "b", "c"]]


def test_each_package_docstring_says_what_it_owns_and_may_import() -> None:
    for init in sorted((SRC / PACKAGE).rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert len(doc) > 80 and "import" in doc.lower(), init.relative_to(SRC)
