"""A real PostgreSQL server for one test session: Debian's initdb and pg_ctl in a temporary
folder, listening only on a unix socket inside it (no TCP port to collide with anything),
run as the `postgres` user when the tests run as root (PostgreSQL refuses to run as root).

Each test that needs a database asks `fresh_database()` for one of its own, so tests never
see each other's rows, and the one server start (about a second) is paid once per session.
Faults are real: `restart_immediate()` is `pg_ctl restart -m immediate` (a crash as far as
the server's WAL is concerned), `terminate_backends()` is `pg_terminate_backend`.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from .systools import ensure_tool

BINDIR = Path("/usr/lib/postgresql/15/bin")
PORT = 5432  # only names the socket file (.s.PGSQL.5432) in our own folder
# pg_ctl -w waits for the condition (server stopped, or ready after crash recovery); this is
# only its give-up bound, wide because a loaded 2-core machine made 60 s too short.
START_TIMEOUT_S = 600
_names = itertools.count(1)


def _os_user() -> str:
    """Who runs the server: `postgres` when we are root, else whoever we are."""
    return "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@dataclass(frozen=True)
class PgServer:
    root: Path
    superuser: str

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "sock"

    def conninfo(self, dbname: str = "postgres", user: str | None = None) -> str:
        return psycopg.conninfo.make_conninfo(
            host=str(self.socket_dir), port=PORT, dbname=dbname, user=user or self.superuser
        )

    def url(self, dbname: str, user: str | None = None) -> str:
        """The `postgresql://` form of a database on this server (socket in `host=`)."""
        return f"postgresql://{user or self.superuser}@/{dbname}?host={self.socket_dir}&port={PORT}"

    def connect(self, dbname: str = "postgres", user: str | None = None) -> psycopg.Connection:
        return psycopg.connect(self.conninfo(dbname, user), autocommit=True)

    def fresh_database(self, prefix: str = "t") -> str:
        """A new, empty database that no other test uses; its name."""
        name = f"{prefix}_{os.getpid()}_{next(_names)}"
        with self.connect() as conn:
            conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
        return name

    def pg_ctl(self, *args: str) -> None:
        argv = [str(BINDIR / "pg_ctl"), "-D", str(self.datadir), "-w", "-t", str(START_TIMEOUT_S)]
        done = subprocess.run(_as_server_user([*argv, *args]), capture_output=True, text=True)
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise AssertionError(f"pg_ctl {' '.join(args)}: {done.stderr}\n{tail}")

    def start(self) -> None:
        options = f"-c listen_addresses='' -c unix_socket_directories='{self.socket_dir}'"
        options += f" -c port={PORT} -c fsync=on -c max_connections=200"
        self.pg_ctl("-l", str(self.root / "server.log"), "-o", options, "start")

    def restart_immediate(self) -> None:
        """The server killed without a shutdown checkpoint, then started: crash recovery."""
        self.pg_ctl("-m", "immediate", "stop")
        self.start()

    def terminate_backends(self, dbname: str) -> int:
        """`pg_terminate_backend` of every other session on `dbname`; how many."""
        with self.connect() as conn:
            row = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (dbname,),
            ).fetchone()
        return int(row[0]) if row else 0


def start_server() -> PgServer:
    ensure_tool(BINDIR / "pg_ctl", "postgresql-15", "PostgreSQL 15", timeout=900)
    root = Path(tempfile.mkdtemp(prefix="ca-pg-"))
    server = PgServer(root=root, superuser=_os_user())
    server.socket_dir.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        shutil.chown(server.socket_dir, "postgres", "postgres")
    initdb = [str(BINDIR / "initdb"), "-D", str(server.datadir), "-U", server.superuser]
    initdb += ["-A", "trust", "-E", "UTF8", "--locale", "C.UTF-8", "--no-sync"]
    subprocess.run(_as_server_user(initdb), check=True, capture_output=True)
    server.start()
    return server


def stop_server(server: PgServer) -> None:
    try:
        server.pg_ctl("-m", "immediate", "stop")
    finally:
        shutil.rmtree(server.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PgServer]:
    """The session's PostgreSQL server (started on first use, stopped at the end)."""
    server = start_server()
    try:
        yield server
    finally:
        stop_server(server)
