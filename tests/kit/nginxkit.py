"""Debian's nginx serving a folder on a free loopback port, for the static read path's tests.

    with nginx_serving(folder, tmp_path / "nginx") as web:
        httpx.get(f"{web.url}/history/checkpoint")

nginx runs in the foreground (`daemon off;`) from a generated config in a temporary prefix
folder that holds everything it writes: its pid file, error and access logs, and every
`*_temp_path`. The server block is the one of docs/how-to/postgresql.md ("Publish the static
read path"), on plain HTTP at 127.0.0.1: `root FOLDER;` and its Cache-Control headers.
`extra` adds lines to that server block (e.g. rewrites).

As root, nginx's workers drop to `nobody`, which cannot read pytest's 0700 tmp dirs: the
workers then stay root (`user root;`). The process is always stopped: SIGQUIT (graceful),
then SIGTERM, then SIGKILL; its stdout and stderr go to files in the prefix, never a pipe.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from .serverkit import HOST, free_port
from .systools import ensure_tool

NGINX = Path("/usr/sbin/nginx")
MIME_TYPES = Path("/etc/nginx/mime.types")
READY_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0

IMMUTABLE = "public, max-age=31536000, immutable"

# The docs' server block, less `listen 443 ssl` and `server_name`.
SERVER_BLOCK = """\
    # Never change once written: heads of a size, sealed roots, stamps, tiles, proofs.
    location / {
        add_header Cache-Control "public, max-age=31536000, immutable";
    }
    # Replaced as the log grows: short lives, so clients see new heads within seconds.
    location = /history/checkpoint { add_header Cache-Control "public, max-age=5"; }
    location = /index.json         { add_header Cache-Control "public, max-age=5"; }
    location = /keys.json          { add_header Cache-Control "public, max-age=300"; }
    location ~ \\.timestamps\\.json$ { add_header Cache-Control "public, max-age=300"; }
"""

# The HTTP read API's paths (what `monitor URL` and an anchor's url ask for) mapped onto the
# export's files, as read/source.py's FolderSource maps them. Not in the docs.
API_PATHS = """\
    rewrite ^/roots/([^/]+)$ /$1.json last;
    rewrite ^/roots/([^/]+)/([0-9]+)$ /$1/$2.json last;
    rewrite ^/roots/(.+)$ /$1 last;
    rewrite ^/keys/records$ /key-records.json last;
"""


class NginxFailed(RuntimeError):
    """nginx did not start, or did not stop, as expected."""


def nginx() -> Path:
    """Debian's nginx, once `tools/dev.py nginx` has had its chance to install it."""
    return ensure_tool(NGINX, "nginx", "nginx", timeout=600)


def config(prefix: Path, root: Path, port: int, extra: str = "") -> str:
    user = "user root;\n" if os.geteuid() == 0 else ""
    types = (
        f"include {MIME_TYPES};"
        if MIME_TYPES.exists()
        else "types { application/json json; text/html html; }"
    )
    temp = "".join(
        f"    {kind}_temp_path {prefix / (kind + '_temp')};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return (
        f"{user}daemon off;\n"
        "master_process on;\n"
        "worker_processes 1;\n"
        f"pid {prefix / 'nginx.pid'};\n"
        f"error_log {prefix / 'error.log'} info;\n"
        "events { worker_connections 64; }\n"
        "http {\n"
        f"    {types}\n"
        "    default_type application/octet-stream;\n"
        f"    access_log {prefix / 'access.log'};\n"
        f"{temp}"
        "    server {\n"
        f"        listen {HOST}:{port};\n"
        f"        root {root};\n"
        f"{extra}"
        f"{SERVER_BLOCK}"
        "    }\n"
        "}\n"
    )


@dataclass
class Nginx:
    proc: subprocess.Popen[bytes]
    port: int
    prefix: Path
    conf: Path

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def error_log(self) -> str:
        return self._read("error.log") + self._read("nginx.err")

    def access_log(self) -> str:
        return self._read("access.log")

    def _read(self, name: str) -> str:
        path = self.prefix / name
        return path.read_text(errors="replace") if path.exists() else ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self.url, timeout=1.0) as client:
            while True:
                if self.proc.poll() is not None:
                    raise NginxFailed(
                        f"nginx exited with {self.proc.returncode}\n{self.error_log()}"
                    )
                with contextlib.suppress(httpx.TransportError):
                    client.get("/")  # any answer, even a 403 or 404: it listens
                    return
                if time.monotonic() > deadline:
                    raise NginxFailed(
                        f"nginx did not answer within {timeout} s\n{self.error_log()}"
                    )
                time.sleep(0.05)

    def stop(self) -> int:
        """SIGQUIT (graceful), then SIGTERM, then SIGKILL of its process group; the exit code."""
        for sig in (signal.SIGQUIT, signal.SIGTERM):
            if self.proc.poll() is None:
                self.proc.send_signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                return self.proc.wait(STOP_TIMEOUT_S / 2)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        return self.proc.wait()


def start(root: Path, prefix: Path, *, extra: str = "") -> Nginx:
    """nginx serving `root` on a free port from the prefix folder `prefix` (made if need be),
    once it answers (else stopped and NginxFailed)."""
    binary = nginx()
    prefix.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = prefix / "nginx.conf"
    conf.write_text(config(prefix, root.resolve(), port, extra))
    argv = [str(binary), "-p", f"{prefix}/", "-c", str(conf), "-e", str(prefix / "error.log")]
    with open(prefix / "nginx.out", "wb") as out, open(prefix / "nginx.err", "wb") as err:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True
        )
    web = Nginx(proc, port, prefix, conf)
    try:
        web.wait_ready()
    except BaseException:
        web.stop()
        raise
    return web


@contextlib.contextmanager
def nginx_serving(root: Path, prefix: Path, *, extra: str = "") -> Iterator[Nginx]:
    """`start`, and always stop nginx afterwards."""
    web = start(root, prefix, extra=extra)
    try:
        yield web
    finally:
        web.stop()
