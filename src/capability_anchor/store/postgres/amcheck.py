"""`pg_amcheck` for the audit (SPEC §13.5): PostgreSQL's check of every table's pages and
B-tree index against its table; skipped, and said so, without the `amcheck` extension or
a role allowed to run it (configuration, not damage)."""

from __future__ import annotations

import glob
import shutil
import subprocess

import psycopg

TIMEOUT_S = 600.0
_LINES = 20


def binary() -> str | None:
    """pg_amcheck on PATH, else the newest of Debian's /usr/lib/postgresql/*/bin."""
    found = shutil.which("pg_amcheck")
    if found:
        return found
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_amcheck"),
        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0,
    )
    return candidates[-1] if candidates else None


def skipped_because(conn: psycopg.Connection) -> str | None:
    """Why pg_amcheck cannot run on this database as this role, with the fix; None if it can."""
    if binary() is None:
        return "pg_amcheck is not installed (Debian: postgresql-client-15)"
    row = conn.execute(
        "SELECT has_function_privilege(p.oid, 'EXECUTE') FROM pg_proc p"
        " JOIN pg_extension e ON p.pronamespace = e.extnamespace"
        " WHERE e.extname = 'amcheck' AND p.proname = 'bt_index_check' LIMIT 1"
    ).fetchone()
    if row is None:
        return (
            "the amcheck extension is not in the log's database (as a superuser: "
            "CREATE EXTENSION amcheck)"
        )
    if not row[0]:
        return "this role may not run amcheck's functions (audit with the owner's URL: --store)"
    return None


def run(conninfo: str) -> list[str]:
    """pg_amcheck's findings (its lines, at most a few), none when it found nothing."""
    tool = binary()
    assert tool is not None
    # The program found above, the log's own conninfo as its one argument: no shell.
    done = subprocess.run(  # noqa: S603
        [tool, "--heapallindexed", "--no-password", conninfo],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    if done.returncode == 0 and not done.stdout.strip():
        return []
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    shown = [f"pg_amcheck: {line}" for line in lines[:_LINES]]
    if len(lines) > _LINES:
        shown.append(f"pg_amcheck: ... and {len(lines) - _LINES} more lines")
    return shown or [f"pg_amcheck: exit {done.returncode}"]


__all__ = ["binary", "run", "skipped_because"]
