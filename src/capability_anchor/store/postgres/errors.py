"""PostgreSQL's errors as the project's, by SQLSTATE, never by message, except the schema's
own refusals (23000), whose text ("append-only: ...", "fenced: ...") names the rule; a
constraint that is itself a rule (`_RULE_CONSTRAINTS`) is named by its constraint."""

from __future__ import annotations

import psycopg
import psycopg_pool

from capability_anchor.errors import (
    CapabilityAnchorError,
    Conflict,
    LeaseLost,
    StoreBusy,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreIOError,
    StoreReadOnly,
)
from capability_anchor.store.sql import Kinds, classified, refused

# The server went away or the connection broke: a COMMIT's outcome is then unknown.
_GONE = ("57P01", "57P02", "57P03", "08")
# SQLSTATE classes and codes (PostgreSQL's Appendix A) and what each is for an operator.
_BY_STATE: Kinds = (
    (("53100",), StoreFull, "the database's disk is full"),
    (("53",), StoreIOError, "the database server is out of a resource"),
    (("25006",), StoreReadOnly, "the database is read-only (a standby, or read-only mode)"),
    (("XX001", "XX002"), StoreCorrupt, "the database reports damaged data"),
    (("40001", "40P01", "55P03"), StoreBusy, "another writer held the log's rows"),
    (_GONE, StoreIOError, "the database server is unavailable"),
    # The server ended a session that stalled inside its transaction (this process was
    # paused): nothing of the transaction is stored, and the next one gets a new session.
    (("25P03",), StoreIOError, "the database ended a transaction that stalled"),
    (("58",), StoreIOError, "the database server reports an I/O error"),
)

# Constraints that state an append-only rule themselves (migration 1), with its message:
# they are checked as each row is inserted, before the entries rule (once per statement).
_RULE_CONSTRAINTS = {
    "entries_by_hash": "append-only: this leaf is already stored in this day",
    "entries_leaf_index_check": "append-only: leaf_index is not the next index of its day",
    "entries_pkey": "append-only: leaf_index is not the next index of its day",
}


def store_error(
    exc: psycopg.Error | psycopg_pool.PoolTimeout, context: str
) -> CapabilityAnchorError:
    """The project's error for a psycopg one."""
    if isinstance(exc, psycopg_pool.PoolTimeout):
        return StoreIOError(f"{context}: no connection to the database in time: {exc}")
    state, detail = exc.sqlstate or "", _first(exc)
    if state == "42501":
        # The service's role may not change stored rows (SPEC §13.5): what the triggers
        # would refuse, refused one step earlier by the grants.
        return Conflict(f"append-only: the service's role may not do this: {detail}")
    if state.startswith("23"):
        rule = _RULE_CONSTRAINTS.get(exc.diag.constraint_name or "")
        if rule is not None:
            return Conflict(rule)
        return LeaseLost(detail) if detail.startswith("fenced:") else refused(detail)
    if not state and isinstance(exc, psycopg.OperationalError):
        # A connection that failed or broke has no SQLSTATE of its own.
        return StoreIOError(f"{context}: the database server is unavailable: {detail}")
    return classified(state, _BY_STATE, context, detail) or StoreError(
        f"{context}: {detail} (SQLSTATE {state or 'none'})"
    )


def outcome_lost(exc: psycopg.Error) -> bool:
    """Whether `exc`, raised by a COMMIT, leaves its outcome unknown: the connection broke
    or the server went away (it may have made the commit durable first), rather than a
    refusal the server answered with (then nothing was committed)."""
    state = exc.sqlstate
    return state.startswith(_GONE) if state else isinstance(exc, psycopg.OperationalError)


def _first(exc: psycopg.Error) -> str:
    """The server's primary message (psycopg's str() adds context lines)."""
    primary = exc.diag.message_primary
    if primary:
        return primary
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


__all__ = ["outcome_lost", "store_error"]
