"""Run the HTTP service as a real process on a free loopback port, for end-to-end tests and
`tools/bench_api.py`.

    with serving(tmp_path / "data", "--checkpoint-interval", "1") as server:
        with server.client() as client:
            client.get("/healthz")

`start` launches `capability-anchor serve --data DIR --host 127.0.0.1 --port P --init ARGS` (or any
argv, e.g. `uvicorn capability_anchor.api.asgi:app --workers 2`), waits until `/healthz`
answers 200 and returns a `Server`; if the process exits first, or does not answer in time,
it is stopped and `ServerFailed` names its exit code and stderr. `Server.stop` sends SIGTERM
and waits; a server that does not exit in time is SIGKILLed (its whole process group: it is
started in a session of its own, so uvicorn workers never outlive it) and the failure raised.

stdout and stderr go to files beside the data dir (never a pipe nobody reads, which would
block the server once full). The environment is the caller's minus `CAPABILITY_ANCHOR_*`,
so a developer's own token or data dir never leaks into a test. Only 127.0.0.1 is used.
"""

from __future__ import annotations

import contextlib
import http.server
import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

HOST = "127.0.0.1"
CLI = Path(sys.executable).parent / "capability-anchor"
READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0
_launches = itertools.count(1)


class ServerFailed(RuntimeError):
    """The server did not start, or did not stop, as expected."""


# Ports to hand out lie below Linux's ephemeral range (32768 on), where no client connection
# takes one. Each pytest-xdist worker owns a slice of them, so two workers never hand out the
# same port between its pick and the server's bind; a run (and each process in it: a tool a
# test starts inherits the worker's slice) starts at an offset of its own.
PORTS = range(10000, 32768)
_picks = itertools.count()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, from this worker's slice."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    run = zlib.crc32(os.environ.get("PYTEST_XDIST_TESTRUNUID", str(os.getpid())).encode())
    span = len(PORTS) // workers
    mine = zlib.crc32(str(os.getpid()).encode())
    for _ in range(span):
        port = PORTS[(run + worker * span + (mine + next(_picks)) % span) % len(PORTS)]
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((HOST, port))
            except OSError:
                continue
            return port
    raise ServerFailed(f"no free port in this worker's {span} ports")


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPABILITY_ANCHOR_")}
    env.update(extra or {})
    return env


def accepts_connections(port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    argv: list[str]
    port: int
    data: Path
    stdout_path: Path
    stderr_path: Path
    started: float = field(default_factory=time.monotonic)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def token(self) -> str:
        return (self.data / "writer-token").read_text().strip()

    def writer_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token()}"}

    def client(self, *, timeout: float = 30.0, **kwargs: object) -> httpx.Client:
        """A client for this server (the caller closes it: use `with`)."""
        return httpx.Client(base_url=self.url, timeout=timeout, **kwargs)  # type: ignore[arg-type]

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int = signal.SIGTERM) -> None:
        # poll() first: once reaped, the pid may belong to someone else.
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int | None:
        """The exit code (negative: killed by that signal), or None if still running."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL the server and anything it started (its own process group), then reap."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        self.proc.wait()

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM and wait for the exit code; SIGKILL and raise if it takes over `timeout`."""
        self.signal(signal.SIGTERM)
        code = self.wait(timeout)
        if code is None:
            self.kill()
            raise ServerFailed(
                f"{self.argv[0]} did not exit within {timeout} s of SIGTERM\n{self.stderr()}"
            )
        return code

    def wait_ready(self, timeout: float = READY_TIMEOUT_S, answered: bool = False) -> None:
        """Until /healthz answers 200 (ANSWERED: answers at all, e.g. the 503 of a service
        that found its database damaged before the first poll)."""
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self.url, timeout=1.0) as client:
            while True:
                code = self.proc.poll()
                if code is not None:
                    raise ServerFailed(
                        f"the server exited with {code} before answering /healthz\n{self.stderr()}"
                    )
                try:
                    if client.get("/healthz").status_code == 200 or answered:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise ServerFailed(
                        f"the server did not answer /healthz within {timeout} s\n{self.stderr()}"
                    )
                time.sleep(0.05)


def serve_argv(data: Path, port: int, args: Sequence[str] = (), *, init: bool = True) -> list[str]:
    """`serve` on DATA; with `init` (the default for tests) `--init`, which creates the log
    there when there is none (iss http://127.0.0.1:PORT) and otherwise uses it as it is."""
    argv = [str(CLI), "serve", "--data", str(data), "--host", HOST, "--port", str(port)]
    return [*argv, *(["--init"] if init else []), *args]


def uvicorn_argv(port: int, workers: int, args: Sequence[str] = ()) -> list[str]:
    """The production form (`capability_anchor.api.asgi`); give CAPABILITY_ANCHOR_DATA."""
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "capability_anchor.api.asgi:app",
        "--host",
        HOST,
        "--port",
        str(port),
        "--workers",
        str(workers),
        # The operations guide's production form (web/nodelay.py).
        "--http",
        "capability_anchor.web.nodelay:NoDelayProtocol",
        "--loop",
        "uvloop",
        "--log-level",
        "warning",
        *args,
    ]


def launch(
    data: Path,
    *args: str,
    port: int | None = None,
    argv: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    logs: Path | None = None,
) -> Server:
    """Start the server process and return at once (no readiness wait)."""
    port = free_port() if port is None else port
    argv = list(argv) if argv is not None else serve_argv(data, port, args)
    logs = logs if logs is not None else data.parent
    logs.mkdir(parents=True, exist_ok=True)
    n = next(_launches)
    out_path = logs / f"server-{os.getpid()}-{n}.out"
    err_path = logs / f"server-{os.getpid()}-{n}.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        # The child has its own copies of the descriptors; ours are closed at once.
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=clean_env(env),
            start_new_session=True,
        )
    return Server(proc, argv, port, Path(data), out_path, err_path)


def start(
    data: Path,
    *args: str,
    port: int | None = None,
    argv: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    logs: Path | None = None,
    ready_timeout: float = READY_TIMEOUT_S,
    answered: bool = False,
) -> Server:
    """Start the server and wait until /healthz answers 200, or with ANSWERED answers at all
    (else stop it and raise)."""
    server = launch(data, *args, port=port, argv=argv, env=env, logs=logs)
    try:
        server.wait_ready(ready_timeout, answered)
    except BaseException:
        server.kill()
        raise
    return server


@contextlib.contextmanager
def serving(
    data: Path,
    *args: str,
    port: int | None = None,
    argv: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    logs: Path | None = None,
    answered: bool = False,
) -> Iterator[Server]:
    """`start`, and always stop the server afterwards (SIGTERM, then SIGKILL if it hangs)."""
    server = start(data, *args, port=port, argv=argv, env=env, logs=logs, answered=answered)
    try:
        yield server
    finally:
        if server.alive():
            try:
                server.stop()
            finally:
                server.kill()  # reaps; a no-op once it exited


# --- processes, as /proc shows them (Linux) ----------------------------------------------------


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, None once it is gone (a zombie counts as gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, ppid = text.rsplit(")", 1)[1].split()[:2]
    return None if state in ("Z", "X") else (state, int(ppid))


def process_alive(pid: int) -> bool:
    return _stat(pid) is not None


def command_line(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def descendants(pid: int) -> dict[int, str]:
    """Every live process below `pid` (children, theirs, ...), with its command line."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            children.setdefault(stat[1], []).append(int(entry.name))
    found: dict[int, str] = {}
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found[child] = command_line(child)
        todo += children.get(child, [])
    return found


def holders(path: Path) -> set[int]:
    """The live processes with a descriptor open on `path` or a file beside it named after it
    (a database's -wal and -shm)."""
    name = str(path.resolve())
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd).startswith(name) and process_alive(int(entry.name)):
                        found.add(int(entry.name))
                        break
    return found


def left_alive(pids: Iterable[int], within: float) -> set[int]:
    """Those of `pids` still alive after waiting up to `within` seconds for them to go."""
    deadline = time.monotonic() + within
    while True:
        alive = {p for p in pids if process_alive(p)}
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def serve_crash_loop(
    data: Path,
    iterations: int,
    work: Callable[[Server, int], None],
    *,
    logs: Path | None = None,
    within: float = 5.0,
) -> Iterator[tuple[dict[int, str], set[int]]]:
    """The red team's crash loop: start `serve` on `data`, give it `work`, kill -9 that one
    process (not its group: what a crash or the OOM killer does), and start it again. Yields,
    per kill, the processes it had started and those of every run so far still alive
    `within` seconds after the kill."""
    seen: dict[int, str] = {}
    for n in range(iterations):
        server = start(data, logs=logs)
        try:
            work(server, n)
            tree = descendants(server.pid)
            seen.update(tree)
            os.kill(server.pid, signal.SIGKILL)
            server.wait(30)
        finally:
            server.kill()
        yield tree, left_alive(seen, within)


class ThreadServer:
    """A stdlib HTTP server in a thread on loopback, for a test's own stand-in between a
    client and a real `serve` (a relay that breaks answers, a forward proxy): `answer`
    serves each GET with the request's handler."""

    def __init__(self, answer: Callable[[http.server.BaseHTTPRequestHandler], None]) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                answer(self)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer((HOST, 0), Handler)
        self.url = f"http://{HOST}:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


__all__ = [
    "CLI",
    "HOST",
    "Server",
    "ServerFailed",
    "ThreadServer",
    "accepts_connections",
    "clean_env",
    "command_line",
    "descendants",
    "free_port",
    "holders",
    "launch",
    "left_alive",
    "process_alive",
    "serve_argv",
    "serve_crash_loop",
    "serving",
    "start",
    "uvicorn_argv",
]


def refused_start(
    data: Path,
    port: int,
    argv: list[str] | None = None,
    env: dict[str, str] | None = None,
    wait_s: float = 20.0,
) -> str:
    """Run a service form (`launch`) and return its stderr, asserting that it exited 2
    without ever accepting a connection on `port` and without a traceback."""
    server = launch(data, port=port, argv=argv, env=env)
    try:
        deadline = time.monotonic() + wait_s
        while server.alive() and time.monotonic() < deadline:
            assert not accepts_connections(port, timeout=0.05), "it listens"
            time.sleep(0.05)
        code = server.wait(1)
    finally:
        server.kill()
    assert code == 2, server.stderr()
    assert not accepts_connections(port)
    stderr = server.stderr()
    assert "Traceback" not in stderr and "serving on" not in stderr, stderr
    return stderr
