"""The one way to open a store, and the engine registry: `where` is a data dir (SQLite, or
the store its `store-url` names) or a URL `scheme://...` of a registered engine. Engines
are imported when first asked for (docs/explanation/store.md).

    from capability_anchor.store import open as stores"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from capability_anchor.errors import UsageError

from . import binding
from .binding import bound
from .engines import Engine, Where

if TYPE_CHECKING:
    from .interface import Scrub, Store
    from .sqlite.witness import SqliteWitnessStore
    from .witness import WitnessStore

# Imported inside functions: the SQLite engine ~250 ms, the PostgreSQL engine ~200 ms (python -X
# importtime after `capability_anchor.store`, min of 7 runs, 2026-12-05): the contract alone
# loads no driver.

DEFAULT_SCHEME = "sqlite"


def _sqlite() -> type[Engine]:
    from .sqlite.engine import SqliteEngine

    return SqliteEngine


def _postgresql() -> type[Engine]:
    from .postgres.engine import PostgresEngine

    return PostgresEngine


# scheme -> a function that imports and returns its engine's class.
_ENGINES: dict[str, Callable[[], type[Engine]]] = {"sqlite": _sqlite, "postgresql": _postgresql}
_SPELLED = {"postgres": "postgresql"}  # libpq's short scheme
_loaded: dict[str, Engine] = {}


def grant_service(where: Where, role: str, *, check_only: bool = False) -> str:
    """Give the database role `role` what the service needs on the log at `where` (as its
    owner) and nothing more; the URL the service then connects with (`init --service-role`).
    `check_only`: only refuse a role that cannot be the service's (before `init` makes a log)."""
    eng, loc = resolve(where)
    return eng.grant_service(loc, role, check_only=check_only)


def schemes() -> list[str]:
    """Every registered scheme (the contract suite runs against each)."""
    return sorted(_ENGINES)


def engine(scheme: str) -> Engine:
    """The engine registered for `scheme` (UsageError for an unknown one)."""
    scheme = scheme.lower()
    found = _loaded.get(scheme)
    if found is not None:
        return found
    loader = _ENGINES.get(scheme)
    if loader is None:
        known = ", ".join(f"{s}://" for s in schemes())
        raise UsageError(f"no storage engine for {scheme}:// (this program knows {known})")
    made = loader()()
    _loaded[scheme] = made
    return made


def resolve(where: Where) -> tuple[Engine, Where]:
    """The engine of `where`, and `where` as that engine addresses it: a data dir bound to
    a store elsewhere (`store.binding`) is that store."""
    if isinstance(where, Path) or "://" not in where:
        url = bound(Path(where))
        if url is not None:
            return resolve(url)
        chosen = engine(DEFAULT_SCHEME)
        return chosen, chosen.location(Path(where))
    scheme, rest = where.split("://", 1)
    scheme = _SPELLED.get(scheme.lower(), scheme.lower())
    chosen = engine(scheme)
    return chosen, chosen.location(f"{scheme}://{rest}")


def given(data_dir: Path, url: str, *, creating: bool = False) -> str | None:
    """`--store URL` (or $CAPABILITY_ANCHOR_STORE) given with the data dir `data_dir`: the
    URL `init` is to bind the data dir to (`creating`; None: the log is the data dir's own
    SQLite database), else a check that the data dir is bound to exactly `url`. UsageError
    (exit 2) with the fix otherwise."""
    url = binding.check_url(url)
    have = binding.bound_file(data_dir)
    if url.split("://", 1)[0].lower() == DEFAULT_SCHEME:
        if Path(resolve(url)[1]).resolve() != data_dir.resolve() or have is not None:
            raise UsageError(
                f"--store {url} names a SQLite log in another folder than {data_dir}: a "
                "SQLite log is its data dir (give it as --data)"
            )
        return None
    resolve(url)  # an unknown scheme or a malformed URL is refused before anything is made
    if creating:
        if have not in (None, url) and exists(data_dir):
            raise UsageError(
                f"{data_dir} is the data dir of the log at {have}, not of {url}: give that "
                "URL, or a new data dir for a new log"
            )
        if have is None and engine(DEFAULT_SCHEME).exists(data_dir):
            raise UsageError(
                f"{data_dir} holds a SQLite log; move it with `capability-anchor migrate "
                f"--from {data_dir} --to URL` rather than a new init"
            )
        return url
    if have == url:
        return None
    if have is not None and binding.same_database(have, url):
        return None  # the owner, say, to migrate the schema: $CAPABILITY_ANCHOR_STORE
    if have is not None:
        raise UsageError(
            f"{data_dir} is the data dir of the log at {have}, not of {url}: give that URL, "
            "or the data dir of the log you meant (--data)"
        )
    raise UsageError(
        f"{data_dir} is not bound to {url} (it has no {binding.STORE_FILE}): create the log "
        f"with `init --data {data_dir} --store URL`, or give a copy of that log's data dir "
        "(its key files, writer token and store-url); a SQLite log moves with `migrate`"
    )


def bind(data_dir: Path, url: str) -> None:
    """Bind `data_dir` to the store at `url` (`init`, before the store holds a log)."""
    binding.bind(data_dir, url)


def exists(where: Where) -> bool:
    eng, loc = resolve(where)
    return eng.exists(loc)


def create(where: Where, fill: Callable[[Store], None]) -> None:
    eng, loc = resolve(where)
    eng.create(loc, fill)


def open(where: Where, *, upkeep: bool = False) -> Store:
    eng, loc = resolve(where)
    return eng.open(loc, upkeep=upkeep)


def open_readonly(where: Where) -> Store:
    eng, loc = resolve(where)
    return eng.open_readonly(loc)


def copy_to(where: Where, dest: Path) -> None:
    eng, loc = resolve(where)
    eng.copy_to(loc, dest)


def copy_name(where: Where) -> str:
    eng, loc = resolve(where)
    return eng.copy_name(loc)


def own_files(where: Where) -> list[str]:
    eng, loc = resolve(where)
    return eng.own_files(loc)


def is_runtime(where: Where, name: str) -> bool:
    return resolve(where)[0].is_runtime(name)


def describe(where: Where) -> str:
    eng, loc = resolve(where)
    return eng.describe(loc)


def scrubber(where: Where) -> Scrub | None:
    eng, loc = resolve(where)
    return eng.scrubber(loc)


def _witness(where: Path) -> type[SqliteWitnessStore]:
    """A witness keeps its state in SQLite, in its own data dir (never a log's store)."""
    if bound(where) is not None:
        raise UsageError("a witness keeps its state in SQLite, in its own data dir")
    from .sqlite.witness import SqliteWitnessStore

    return SqliteWitnessStore


def create_witness(where: Path, name: str) -> WitnessStore:
    """A new witness store holding the key name `name`; an existing one is `Conflict`."""
    return _witness(where).create(where, name)


def open_witness(where: Path) -> WitnessStore:
    return _witness(where).open(where)


def remove_witness(where: Path) -> None:
    """Remove a witness store `init` just made (its key could not be written)."""
    _witness(where).remove(where)
