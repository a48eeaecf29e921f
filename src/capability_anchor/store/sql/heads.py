"""Heads, stamps, and the history's signed checkpoints, the witnesses' cosignatures and
policies, and the per-witness state (SPEC §12.2-§12.3). A head and a checkpoint carry the
fencing term of an engine that has one (`_term`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from capability_anchor.store.rows import (
    CosignatureRow,
    HeadRow,
    StampRow,
    WitnessState,
    server_key_digest,
)

from . import SqlBase
from .rows import HEAD_COLUMNS, head_row

# A day's sealed head and its largest unsealed one (a row each, when there are).
_NEWEST_HEADS = (
    f"SELECT * FROM (SELECT {HEAD_COLUMNS} FROM heads WHERE day = ? AND sealed = 1 "
    f"LIMIT 1) AS s UNION ALL SELECT * FROM (SELECT {HEAD_COLUMNS} FROM heads "
    "WHERE day = ? AND sealed = 0 ORDER BY tree_size DESC LIMIT 1) AS u"
)
# `record_sources`: the index's (day, leaf_index), the day's newest head (the sealed one, else
# the largest: each a seek in `heads_by_kind`), the entry's (claims, accepted_at), the kid.
RecordSource = tuple[str, int, HeadRow | None, tuple[bytes, int] | None, str | None]
_NEWEST_SEALED = "(SELECT max(sealed) FROM heads WHERE day = s.day)"
_RECORD_SOURCES = (
    "SELECT s.day, s.leaf_index, "
    + ", ".join(f"h.{c}" for c in HEAD_COLUMNS.split(", "))
    + ", e.claims, e.accepted_at, (SELECT kid FROM settings ORDER BY id DESC LIMIT 1) "
    "FROM (SELECT day, leaf_index FROM servers WHERE key = ? "
    "ORDER BY day DESC, leaf_index DESC LIMIT ?) AS s "
    f"LEFT JOIN heads h ON h.day = s.day AND h.sealed = {_NEWEST_SEALED} "
    "AND h.tree_size = (SELECT max(tree_size) FROM heads WHERE day = s.day "
    f"AND sealed = {_NEWEST_SEALED}) "
    "LEFT JOIN entries e ON e.day = s.day AND e.leaf_index = s.leaf_index "
    "ORDER BY s.day DESC, s.leaf_index DESC"
)
# `record_entries`: the index and the entries only (the servers primary key gives the order).
RecordEntry = tuple[str, int, tuple[bytes, int] | None]
_RECORD_ENTRIES = (
    "SELECT s.day, s.leaf_index, e.claims, e.accepted_at FROM servers s "
    "LEFT JOIN entries e ON e.day = s.day AND e.leaf_index = s.leaf_index "
    "WHERE s.key = ? ORDER BY s.day DESC, s.leaf_index DESC LIMIT ?"
)

_COSIGNATURE_COLUMNS = "witness, key_id, size, timestamp, line"
_STATE_COLUMNS = "witness, size, status, retry_at, failures, detail, updated"


def _cosignature(row: Any) -> CosignatureRow:
    witness, key_id, size, timestamp, line = row
    return CosignatureRow(str(witness), bytes(key_id), int(size), int(timestamp), str(line))


def _state(row: Any) -> WitnessState:
    w, size, status, retry_at, failures, detail, updated = row
    return WitnessState(
        str(w), int(size), str(status), int(retry_at), int(failures), str(detail), int(updated)
    )


class SqlHeads(SqlBase):
    def _term(self) -> int | None:
        """The fencing term a head or checkpoint is written under (None: the engine has
        one writer and no term)."""
        return None

    def _fenced(self, table: str, cols: str, values: tuple[object, ...]) -> None:
        term = self._term()
        if term is not None:
            cols, values = f"{cols}, term", (*values, term)
        marks = ", ".join("?" * len(values))
        self._exec(f"INSERT INTO {table} ({cols}) VALUES ({marks})", values)

    # --- heads -----------------------------------------------------------------------------

    def insert_head(self, head: HeadRow) -> None:
        h = head
        values = (h.day, h.tree_size, int(h.sealed), h.root, h.iat, h.kid, h.doc)
        self._fenced("heads", HEAD_COLUMNS, values)

    def _heads(
        self, where: str, params: Sequence[object], order: str, limit: int | None = None
    ) -> list[HeadRow]:
        sql = f"SELECT {HEAD_COLUMNS} FROM heads WHERE {where} ORDER BY {order} LIMIT ?"
        return [head_row(r) for r in self._exec(sql, (*params, self._limit(limit)))]

    def _head(self, where: str, params: Sequence[object], order: str = "day") -> HeadRow | None:
        return next(iter(self._heads(where, params, order, 1)), None)

    def heads(self, day: str) -> list[HeadRow]:
        return self._heads("day = ?", (day,), "tree_size, sealed")

    def all_heads(self) -> list[HeadRow]:
        return self._heads("TRUE", (), "day, tree_size, sealed")

    def head(self, day: str, tree_size: int, sealed: bool) -> HeadRow | None:
        return self._head("day = ? AND tree_size = ? AND sealed = ?", (day, tree_size, int(sealed)))

    def sealed_head(self, day: str) -> HeadRow | None:
        return self._head("day = ? AND sealed = 1", (day,))

    def newest_head(self, day: str) -> HeadRow | None:
        """The sealed head of the day, else its largest unsealed head: one statement of two
        primary-key lookups (every `GET /proof` asks), where one `ORDER BY sealed DESC,
        tree_size DESC` would sort every head of the day, documents and all."""
        found = [head_row(r) for r in self._exec(_NEWEST_HEADS, (day, day))]
        return max(found, key=lambda row: row.sealed, default=None)

    def record_sources(self, key: str, limit: int = 50) -> list[RecordSource]:
        """What `/record` reads, in one statement: for each entry indexed under `key`'s digest
        (`server_entries`), newest first, its day and index, its day's newest head (None
        without one), its (claims, accepted_at) and the kid of the newest settings statement."""
        found = self._exec(_RECORD_SOURCES, (server_key_digest(key), self._limit(limit)))
        return [
            (
                str(day),
                int(index),
                None if head[0] is None else head_row(head),
                None if claims is None else (bytes(claims), int(accepted_at)),
                None if kid is None else str(kid),
            )
            for day, index, *head, claims, accepted_at, kid in found
        ]

    def record_entries(self, key: str, limit: int = 50) -> list[RecordEntry]:
        """`record_sources` without the heads and the kid, for a reader that keeps those."""
        found = self._exec(_RECORD_ENTRIES, (server_key_digest(key), self._limit(limit)))
        return [
            (str(day), int(index), None if claims is None else (bytes(claims), int(at)))
            for day, index, claims, at in found
        ]

    def newest_head_state(self, day: str) -> tuple[int, bool] | None:
        """(tree size, sealed) of `newest_head(day)`: one seek in the covering index
        `heads_by_kind`, no document read (a reader checks a head it keeps against it)."""
        row = self._one(
            "SELECT tree_size, sealed FROM heads WHERE day = ? "
            "ORDER BY sealed DESC, tree_size DESC LIMIT 1",
            (day,),
        )
        return None if row is None else (int(row[0]), bool(row[1]))

    def newest_unsealed(self, day: str) -> HeadRow | None:
        return self._head("day = ? AND sealed = 0", (day,), "tree_size DESC")

    def has_head_between(self, day: str, low: int, high: int) -> bool:
        """Whether a head of `day` has a size in `low <= size < high` (its partial tiles)."""
        row = self._one(
            "SELECT 1 FROM heads WHERE day = ? AND tree_size >= ? AND tree_size < ? LIMIT 1",
            (day, low, high),
        )
        return row is not None

    def sealed_heads(self, before: str | None = None, limit: int | None = None) -> list[HeadRow]:
        """Sealed heads, newest day first, optionally only days before `before`."""
        if before is None:
            return self._heads("sealed = 1", (), "day DESC", limit)
        return self._heads("sealed = 1 AND day < ?", (before,), "day DESC", limit)

    def last_sealed_day(self) -> str | None:
        row = self._one("SELECT max(day) FROM heads WHERE sealed = 1")
        return None if row[0] is None else str(row[0])

    def newest_published(self) -> HeadRow | None:
        return self._head("TRUE", (), "day DESC, sealed DESC, tree_size DESC")

    def newest_covering(self, day: str, leaf_index: int) -> HeadRow | None:
        """The newest head of `day` that covers `leaf_index`, if any."""
        order = "sealed DESC, tree_size DESC"
        return self._head("day = ? AND tree_size > ?", (day, leaf_index), order)

    # --- stamps: the first of a day is "the earliest stored" (SPEC §6) ---------------------

    def insert_stamp(self, stamp: StampRow, added: int) -> None:
        self._exec(
            "INSERT INTO stamps (day, tsa, token, gen_time, added) VALUES (?, ?, ?, ?, ?)",
            (stamp.day, stamp.tsa, stamp.token, stamp.gen_time, added),
        )

    def stamps(self, day: str) -> list[StampRow]:
        """Stamps of a day in the order they were stored, whatever their genTime."""
        return [
            StampRow(str(d), str(t), bytes(tok), str(g))
            for d, t, tok, g, _ in self._stamps("WHERE day = ?", (day,))
        ]

    def stamp_rows(self) -> list[tuple[str, str, bytes, int]]:
        """(day, tsa, token, added) of every stamp, in the order they were stored."""
        return [(str(d), str(t), bytes(tok), int(a)) for d, t, tok, _, a in self._stamps("", ())]

    def _stamps(self, where: str, params: Sequence[object]) -> list[Any]:
        return self._exec(
            f"SELECT day, tsa, token, gen_time, added FROM stamps {where} "
            f"ORDER BY {self._dialect.stamp_order}",
            params,
        )

    # --- checkpoints, cosignatures, policies -----------------------------------------------

    def insert_checkpoint(self, size: int, note: bytes) -> None:
        self._fenced("checkpoints", "size, note", (size, note))

    def checkpoint_note(self, size: int) -> bytes | None:
        """The log-signed checkpoint note of `size`, if stored."""
        row = self._one("SELECT note FROM checkpoints WHERE size = ?", (size,))
        return None if row is None else bytes(row[0])

    def checkpoint_size(self) -> int:
        """The newest stored checkpoint's size (0 when none)."""
        row = self._one("SELECT max(size) FROM checkpoints")
        return 0 if row is None or row[0] is None else int(row[0])

    def iter_checkpoints(self, chunk: int = 10_000) -> Iterator[tuple[int, bytes]]:
        """(size, note) of every stored checkpoint, by size."""
        start = 0
        while True:
            rows = self._exec(
                "SELECT size, note FROM checkpoints WHERE size > ? ORDER BY size LIMIT ?",
                (start, chunk),
            )
            yield from ((int(s), bytes(n)) for s, n in rows)
            if len(rows) < chunk:
                return
            start = int(rows[-1][0])

    def insert_cosignature(self, row: CosignatureRow, added: int) -> bool:
        """Store `row` unless that line is already stored for its size (then False): asked
        first, under the write lock, since the table refuses a stored one outright."""
        if self._one(
            "SELECT 1 FROM cosignatures WHERE size = ? AND line = ?", (row.size, row.line)
        ):
            return False
        self._exec(
            f"INSERT INTO cosignatures ({_COSIGNATURE_COLUMNS}, added) VALUES (?, ?, ?, ?, ?, ?)",
            (row.witness, row.key_id, row.size, row.timestamp, row.line, added),
        )
        return True

    def cosignatures(self, size: int) -> list[CosignatureRow]:
        """The stored cosignatures of the checkpoint of `size`, in the order stored."""
        return [
            _cosignature(r)
            for r in self._exec(
                f"SELECT {_COSIGNATURE_COLUMNS} FROM cosignatures WHERE size = ? ORDER BY id",
                (size,),
            )
        ]

    def cosigned_sizes(self, limit: int | None = None) -> list[int]:
        """Every size with a stored cosignature, newest first (the `limit` newest)."""
        sql = "SELECT DISTINCT size FROM cosignatures ORDER BY size DESC LIMIT ?"
        return [int(s) for (s,) in self._exec(sql, (self._limit(limit),))]

    def witnessed_marker(self) -> tuple[int, int, int]:
        """(newest checkpoint size, newest cosignature's id, newest policy's id), each 0 when
        none: it changes whenever what `/history/checkpoint` serves may have changed."""
        row = self._one(
            "SELECT (SELECT max(size) FROM checkpoints), (SELECT max(id) FROM cosignatures), "
            "(SELECT max(id) FROM policies)"
        )
        return (int(row[0] or 0), int(row[1] or 0), int(row[2] or 0))

    def iter_cosignatures(self) -> Iterator[CosignatureRow]:
        return (row for _, _, row in self.iter_cosignature_rows())

    def iter_cosignature_rows(self) -> Iterator[tuple[int, int, CosignatureRow]]:
        """(id, added, row) of every stored cosignature, by id (the audit)."""
        rows = self._iter(f"SELECT id, added, {_COSIGNATURE_COLUMNS} FROM cosignatures ORDER BY id")
        return ((int(r[0]), int(r[1]), _cosignature(r[2:])) for r in rows)

    def policy_rows(self) -> list[tuple[int, int, bytes]]:
        """(id, added, text) of every stored policy, oldest first."""
        return [
            (int(i), int(a), bytes(p))
            for i, a, p in self._exec("SELECT id, added, policy FROM policies ORDER BY id")
        ]

    def set_policy(self, text: bytes, added: int) -> None:
        """Store a new witness policy (the old ones are kept; the newest is the policy)."""
        self._exec(
            "INSERT INTO policies (id, policy, added) "
            "SELECT COALESCE(max(id), 0) + 1, ?, ? FROM policies",
            (text, added),
        )

    def policy(self) -> bytes | None:
        row = self._one("SELECT policy FROM policies ORDER BY id DESC LIMIT 1")
        return None if row is None else bytes(row[0])

    # --- the submitter's per-witness state: the one table whose rows are replaced ----------

    def witness_state(self, name: str) -> WitnessState | None:
        row = self._one(f"SELECT {_STATE_COLUMNS} FROM witness_state WHERE witness = ?", (name,))
        return None if row is None else _state(row)

    def set_witness_state(self, state: WitnessState) -> None:
        s = state
        self._exec(
            f"INSERT INTO witness_state ({_STATE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (witness) DO UPDATE SET size = excluded.size, "
            "status = excluded.status, retry_at = excluded.retry_at, "
            "failures = excluded.failures, detail = excluded.detail, updated = excluded.updated",
            (s.witness, s.size, s.status, s.retry_at, s.failures, s.detail, s.updated),
        )

    def witness_states(self) -> list[WitnessState]:
        sql = f"SELECT {_STATE_COLUMNS} FROM witness_state ORDER BY witness{self._dialect.collate}"
        return [_state(r) for r in self._exec(sql)]
