"""Key trust on PostgreSQL: rotation records and signed settings (`log/trust.py`)."""

from __future__ import annotations

from .base import PostgresBase


class PostgresTrust(PostgresBase):
    def clear_meta(self, key: str) -> None:
        self._exec("DELETE FROM meta WHERE key = %s", (key,))

    def add_key_record(self, signer: str, kid: str, token: str, added: int) -> None:
        self._exec(
            "INSERT INTO key_records (id, signer, kid, jws, added) "
            "SELECT COALESCE(max(id), 0) + 1, %s, %s, %s, %s FROM key_records",
            (signer, kid, token, added),
        )

    def key_records(self) -> list[tuple[int, str, str, str]]:
        """(id, signer kid, endorsed kid, compact JWS) of every rotation record, in order."""
        return [
            (int(i), str(s), str(k), str(j))
            for i, s, k, j in self._exec("SELECT id, signer, kid, jws FROM key_records ORDER BY id")
        ]

    def add_settings(self, kid: str, token: str, added: int) -> None:
        self._exec(
            "INSERT INTO settings (id, kid, jws, added) "
            "SELECT COALESCE(max(id), 0) + 1, %s, %s, %s FROM settings",
            (kid, token, added),
        )

    def settings_statements(self) -> list[tuple[int, str, str]]:
        """(id, signer kid, compact JWS) of every settings statement, oldest first."""
        return [
            (int(i), str(k), str(j))
            for i, k, j in self._exec("SELECT id, kid, jws FROM settings ORDER BY id")
        ]

    def added_times(self) -> dict[str, dict[int, int]]:
        """`added` of every settings statement and rotation record, by table and id."""
        return {
            table: {int(i): int(a) for i, a in self._exec(f"SELECT id, added FROM {table}")}
            for table in ("settings", "key_records")
        }


__all__ = ["PostgresTrust"]
