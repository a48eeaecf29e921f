"""The signed checkpoints, cosignatures, policies and witness state in SQLite (SPEC
§12.2-§12.3; migration 4, `store.sqlite.migrations.v4`)."""

from __future__ import annotations

from collections.abc import Iterator

from capability_anchor.store.rows import CosignatureRow, WitnessState

from .base import SqliteBase

_COSIGNATURE_COLUMNS = "witness, key_id, size, timestamp, line"
_STATE_COLUMNS = "witness, size, status, retry_at, failures, detail, updated"


def _cosignature(row: tuple[object, ...]) -> CosignatureRow:
    witness, key_id, size, timestamp, line = row
    return CosignatureRow(str(witness), bytes(key_id), int(size), int(timestamp), str(line))  # type: ignore[call-overload]


def _state(row: tuple[object, ...]) -> WitnessState:
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


class SqliteCheckpoints(SqliteBase):
    """Checkpoints by size, cosignatures by size, the policies, the witness state."""

    def insert_checkpoint(self, size: int, note: bytes) -> None:
        self._exec("INSERT INTO checkpoints (size, note) VALUES (?, ?)", (size, note))

    def checkpoint_note(self, size: int) -> bytes | None:
        row = self._one("SELECT note FROM checkpoints WHERE size = ?", (size,))
        return None if row is None else bytes(row[0])

    def checkpoint_size(self) -> int:
        row = self._one("SELECT max(size) FROM checkpoints")
        return 0 if row is None or row[0] is None else int(row[0])

    def iter_checkpoints(self, chunk: int = 10_000) -> Iterator[tuple[int, bytes]]:
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
        return [
            _cosignature(r)
            for r in self._exec(
                f"SELECT {_COSIGNATURE_COLUMNS} FROM cosignatures WHERE size = ? ORDER BY id",
                (size,),
            )
        ]

    def cosigned_sizes(self, limit: int | None = None) -> list[int]:
        """Every size with at least one stored cosignature, newest first (a backward walk
        of the (size, line) index: `limit` bounds it)."""
        sql = "SELECT DISTINCT size FROM cosignatures ORDER BY size DESC LIMIT ?"
        return [int(s) for (s,) in self._exec(sql, (-1 if limit is None else limit,))]

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
        self._exec("INSERT INTO policies (policy, added) VALUES (?, ?)", (text, added))

    def policy(self) -> bytes | None:
        row = self._one("SELECT policy FROM policies ORDER BY id DESC LIMIT 1")
        return None if row is None else bytes(row[0])

    def witness_state(self, name: str) -> WitnessState | None:
        row = self._one(f"SELECT {_STATE_COLUMNS} FROM witness_state WHERE witness = ?", (name,))
        return None if row is None else _state(row)

    def set_witness_state(self, state: WitnessState) -> None:
        self._exec(
            f"INSERT OR REPLACE INTO witness_state ({_STATE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
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
            for r in self._exec(f"SELECT {_STATE_COLUMNS} FROM witness_state ORDER BY witness")
        ]
