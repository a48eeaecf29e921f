"""What the replica benchmarks share (bench_replicas.py, replicareads.py, bench_pg.py): a real
`serve` on its own data dir and port (`Replica`), fresh logs on the bench's PostgreSQL, the
CPU each part used (replicas, this PostgreSQL server's processes, the generator), and a
replica's counters read from its `/metrics`."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from benchkit import ISS, processes

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from kit.pgkit import PgServer, start_server, stop_server

__all__ = ["PgServer", "Replica", "start_server", "stop_server"]

CLI = Path(sys.executable).parent / "capability-anchor"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Replica:
    def __init__(self, data: Path, log: Path) -> None:
        self.data = data
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [str(CLI), "serve", "--data", str(data), "--port", str(self.port)]
        argv += ["--checkpoint-interval", "1", "--rate-limit", "0"]
        self.log = log.open("w")
        self.proc = subprocess.Popen(argv, stderr=self.log, start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{self.url}/healthz", timeout=1)
                return
            except httpx.HTTPError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"the replica on {self.port} did not start") from None
                time.sleep(0.2)

    def token(self) -> str:
        return (self.data / "writer-token").read_text().strip()

    def metrics(self) -> Counter[str]:
        """Every sample of its `/metrics` by name, summed over labels."""
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        found: Counter[str] = Counter()
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                found[s.name] += s.value
        return found

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def _postmaster(server: PgServer) -> int:
    return int((server.datadir / "postmaster.pid").read_text().split()[0])


def cpu_seconds(server: PgServer, replicas: list[Replica]) -> dict[str, float]:
    """CPU seconds used so far by each replica (its process group), by this bench's
    PostgreSQL server (the postmaster and its children, not another one on the machine),
    and by this process (the generator)."""
    groups = {r.proc.pid: r.url for r in replicas}
    postmaster = _postmaster(server)
    used: Counter[str] = Counter()
    for proc in processes():
        if proc.group in groups:
            used[groups[proc.group]] += proc.cpu
        elif postmaster in (proc.pid, proc.ppid):
            used["postgres"] += proc.cpu
    used["generator"] = time.process_time()
    return dict(used)


def cpu_line(before: dict[str, float], after: dict[str, float], wall: float) -> str:
    """Each one's share of a core over `wall` seconds (100% = one core of the machine's)."""
    return ", ".join(f"{k} {(after[k] - before.get(k, 0.0)) / wall:.0%}" for k in sorted(after))


def fresh_log(server: PgServer, work: Path, replicas: int) -> list[Path]:
    """A new log in a new database, and `replicas` copies of its data dir under `work`."""
    url = server.url(server.fresh_database("replicas"))
    first = work / "r0"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    argv = [str(CLI), "init", "--data", str(first), "--store", url, "--iss", ISS]
    subprocess.run(argv, check=True, capture_output=True)
    dirs = [first]
    for n in range(1, replicas):
        shutil.copytree(first, work / f"r{n}")
        dirs.append(work / f"r{n}")
    return dirs


def newest(url: str, day: str) -> int:
    answer = httpx.get(f"{url}/roots/{day}", timeout=5)
    return int(json.loads(answer.text).get("tree_size", 0)) if answer.status_code == 200 else 0


def heads_reach(replicas: list[Replica], day: str, size: int) -> None:
    """Until every replica serves a head of `day` of at least `size` (at most 30 s)."""
    deadline = time.monotonic() + 30
    for replica in replicas:
        while newest(replica.url, day) < size:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no head of {day} reached {size:,} within 30 s")
            time.sleep(0.05)
