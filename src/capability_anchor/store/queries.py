"""SQL text both engines run as it is, but for the placeholder (`?` on SQLite, `%s` on
PostgreSQL) and the text order of their keys: one copy, formatted by each engine."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

# A run is a stretch of consecutive indices with one accepted_at: its indices less their
# rank among that second's entries are one number.
ACCEPTED_RUNS = (
    "SELECT min(leaf_index), count(*), accepted_at FROM (SELECT leaf_index, accepted_at, "
    "leaf_index - row_number() OVER (PARTITION BY accepted_at ORDER BY leaf_index) AS run "
    "FROM entries WHERE day = {p}) AS numbered GROUP BY accepted_at, run ORDER BY 1"
)

KEY_ROWS = "SELECT kid, jwk, added FROM keys ORDER BY kid{c}"


def accepted_runs(rows: Iterable[Sequence[Any]]) -> list[tuple[int, int, int]]:
    """(first leaf_index, count, accepted_at) of ACCEPTED_RUNS' rows."""
    return [(int(f), int(n), int(a)) for f, n, a in rows]


def key_rows(rows: Iterable[Sequence[Any]]) -> list[tuple[str, str, int]]:
    """(kid, jwk json, added) of KEY_ROWS' rows."""
    return [(str(k), str(j), int(a)) for k, j, a in rows]


__all__ = ["ACCEPTED_RUNS", "KEY_ROWS", "accepted_runs", "key_rows"]
