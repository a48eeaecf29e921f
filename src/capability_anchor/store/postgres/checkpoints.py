"""The signed checkpoints, cosignatures, policies and witness state in PostgreSQL (SPEC
§12.2-§12.3), as SQLite's (`store/sqlite/checkpoints.py`). A checkpoint is inserted under
the store's fencing term (lease.py); the witness state is the one table the service
replaces rows of (its grants allow it, migration 1)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from capability_anchor.store.rows import CosignatureRow, WitnessState

from .leader import PostgresLeader

_COSIGNATURE_COLUMNS = "witness, key_id, size, timestamp, line"
_STATE_COLUMNS = "witness, size, status, retry_at, failures, detail, updated"


def _cosignature(row: Sequence[object]) -> CosignatureRow:
    witness, key_id, size, timestamp, line = row
    return CosignatureRow(str(witness), bytes(key_id), int(size), int(timestamp), str(line))  # type: ignore[call-overload]


def _state(row: Sequence[object]) -> WitnessState:
    witness, size, status, retry_at, failures, detail, updated = row
    return WitnessState(
        str(witness),
        int(size),  # type: ignore[call-overload]
        str(status),
        int(retry_at),  # type: ignore[call-overload]
        int(failures),  # type: ignore[call-overload]
        str(detail),
        int(updated),  # type: ignore[call-overload]
    )


class PostgresCheckpoints(PostgresLeader):
    """Checkpoints by size, cosignatures by size, the policies, the witness state."""

    def insert_checkpoint(self, size: int, note: bytes) -> None:
        term = self._signing_term()
        self._exec(
            "INSERT INTO checkpoints (size, note, term) VALUES (%s, %s, %s)", (size, note, term)
        )

    def checkpoint_note(self, size: int) -> bytes | None:
        row = self._one("SELECT note FROM checkpoints WHERE size = %s", (size,))
        return None if row is None else bytes(row[0])

    def checkpoint_size(self) -> int:
        row = self._one("SELECT max(size) FROM checkpoints")
        return 0 if row is None or row[0] is None else int(row[0])

    def iter_checkpoints(self, chunk: int = 10_000) -> Iterator[tuple[int, bytes]]:
        start = 0
        while True:
            rows = self._exec(
                "SELECT size, note FROM checkpoints WHERE size > %s ORDER BY size LIMIT %s",
                (start, chunk),
            )
            yield from ((int(s), bytes(n)) for s, n in rows)
            if len(rows) < chunk:
                return
            start = int(rows[-1][0])

    def insert_cosignature(self, row: CosignatureRow, added: int) -> bool:
        # Asked first, as on SQLite: the insert rule refuses a stored one before any
        # ON CONFLICT could skip it, and writers hold the write lock, so none comes between.
        if self._one(
            "SELECT 1 FROM cosignatures WHERE size = %s AND line = %s", (row.size, row.line)
        ):
            return False
        self._exec(
            f"INSERT INTO cosignatures ({_COSIGNATURE_COLUMNS}, added) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            (row.witness, row.key_id, row.size, row.timestamp, row.line, added),
        )
        return True

    def cosignatures(self, size: int) -> list[CosignatureRow]:
        return [
            _cosignature(r)
            for r in self._exec(
                f"SELECT {_COSIGNATURE_COLUMNS} FROM cosignatures WHERE size = %s ORDER BY id",
                (size,),
            )
        ]

    def cosigned_sizes(self, limit: int | None = None) -> list[int]:
        """Every size with at least one stored cosignature, newest first (a backward walk
        of the (size, line) index: `limit` bounds it)."""
        sql = "SELECT DISTINCT size FROM cosignatures ORDER BY size DESC LIMIT %s"
        return [int(s) for (s,) in self._exec(sql, (limit,))]

    def witnessed_marker(self) -> tuple[int, int, int]:
        row = self._one(
            "SELECT (SELECT max(size) FROM checkpoints), (SELECT max(id) FROM cosignatures), "
            "(SELECT max(id) FROM policies)"
        )
        return (int(row[0] or 0), int(row[1] or 0), int(row[2] or 0))

    def iter_cosignatures(self) -> Iterator[CosignatureRow]:
        rows = self._iter(f"SELECT {_COSIGNATURE_COLUMNS} FROM cosignatures ORDER BY id")
        return (_cosignature(r) for r in rows)

    def iter_cosignature_rows(self) -> Iterator[tuple[int, int, CosignatureRow]]:
        rows = self._iter(f"SELECT id, added, {_COSIGNATURE_COLUMNS} FROM cosignatures ORDER BY id")
        return ((int(r[0]), int(r[1]), _cosignature(r[2:])) for r in rows)

    def policy_rows(self) -> list[tuple[int, int, bytes]]:
        return [
            (int(i), int(a), bytes(p))
            for i, a, p in self._exec("SELECT id, added, policy FROM policies ORDER BY id")
        ]

    def set_policy(self, text: bytes, added: int) -> None:
        # The id as SQLite's rowid would give it (rows.py: no sequence gaps), under the lock.
        self._exec(
            "INSERT INTO policies (id, policy, added) "
            "SELECT COALESCE(max(id), 0) + 1, %s, %s FROM policies",
            (text, added),
        )

    def policy(self) -> bytes | None:
        row = self._one("SELECT policy FROM policies ORDER BY id DESC LIMIT 1")
        return None if row is None else bytes(row[0])

    def witness_state(self, name: str) -> WitnessState | None:
        row = self._one(f"SELECT {_STATE_COLUMNS} FROM witness_state WHERE witness = %s", (name,))
        return None if row is None else _state(row)

    def set_witness_state(self, state: WitnessState) -> None:
        self._exec(
            f"INSERT INTO witness_state ({_STATE_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (witness) DO UPDATE SET size = EXCLUDED.size, "
            "status = EXCLUDED.status, retry_at = EXCLUDED.retry_at, "
            "failures = EXCLUDED.failures, detail = EXCLUDED.detail, updated = EXCLUDED.updated",
            (
                state.witness,
                state.size,
                state.status,
                state.retry_at,
                state.failures,
                state.detail,
                state.updated,
            ),
        )

    def witness_states(self) -> list[WitnessState]:
        return [
            _state(r)
            for r in self._exec(
                f'SELECT {_STATE_COLUMNS} FROM witness_state ORDER BY witness COLLATE "C"'
            )
        ]


__all__ = ["PostgresCheckpoints"]
