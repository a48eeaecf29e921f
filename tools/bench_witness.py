"""`witness serve` under load: add-checkpoint requests per second and their p99 on loopback
(issue #14's goal: at least 500/s, p99 at most 20 ms), against `/healthz` of the same server
in the same run (the baseline: what the HTTP stack costs alone).

    .venv/bin/python tools/bench_witness.py --logs 8 --requests 300

Every add-checkpoint is one that succeeds: `--logs` logs, each with its own client thread
and keep-alive connection, each sending its chain old -> old+1 with the consistency proof,
so each answer is a signature check, a consistency check, a durable SQLite commit
(WAL, synchronous=FULL) and a cosignature. The data dir is on disk, never tmpfs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))  # repo root: tests.kit

from tests.kit.serverkit import CLI, free_port, start  # noqa: E402

import benchdoc  # noqa: E402
from benchkit import default_base, loadavg, ms, print_table, quantile, say  # noqa: E402
from capability_anchor.keys import SigningKey  # noqa: E402
from capability_anchor.merkle.tree import TiledTree  # noqa: E402
from capability_anchor.note import Checkpoint, NoteSigner, sign_checkpoint  # noqa: E402
from capability_anchor.note.signed import b64encode  # noqa: E402


def chain(origin: str, signer: NoteSigner, n: int) -> list[bytes]:
    """The add-checkpoint bodies 0 -> 1 -> ... -> n of one log."""
    tree = TiledTree(bytes([i % 256]) * 31 + bytes([i // 256]) for i in range(n))
    bodies = []
    for size in range(1, n + 1):
        old = size - 1
        proof = tree.consistency_proof(old, size) if old else []
        note = sign_checkpoint(Checkpoint(origin, size, tree.root(size)), signer)
        head = f"old {old}\n" + "".join(b64encode(h) + "\n" for h in proof) + "\n"
        bodies.append(head.encode() + note)
    return bodies


def run(url: str, work: list[list[bytes]], path: str) -> tuple[float, list[float], int]:
    """Each list in `work` sent in order by its own thread; (seconds, latencies, non-200s)."""
    latencies: list[float] = []
    failures = [0]
    lock = threading.Lock()
    barrier = threading.Barrier(len(work) + 1)

    def client(bodies: list[bytes]) -> None:
        mine: list[float] = []
        bad = 0
        with httpx.Client(base_url=url, timeout=30) as c:
            barrier.wait()
            for b in bodies:
                t = time.perf_counter()
                r = c.post(path, content=b) if path != "/healthz" else c.get(path)
                mine.append(time.perf_counter() - t)
                bad += r.status_code != 200
        with lock:
            latencies.extend(mine)
            failures[0] += bad

    threads = [threading.Thread(target=client, args=(w,)) for w in work]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, sorted(latencies), failures[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", type=int, default=8, help="logs (= client threads)")
    parser.add_argument("--requests", type=int, default=300, help="add-checkpoints per log")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-witness-", dir=default_base()))
    data = base / "witness"
    cli = [str(CLI), "witness"]
    subprocess.run(
        [*cli, "init", "--name", "bench/w", "--data", str(data)], check=True, capture_output=True
    )
    work = []
    for k in range(args.logs):
        origin = f"bench.example/log{k}"
        signer = NoteSigner(origin, SigningKey.generate())
        vkey = signer.verifier.vkey()
        subprocess.run(
            [*cli, "add-log", "--origin", origin, "--vkey", vkey, "--data", str(data)],
            check=True,
            capture_output=True,
        )
        work.append(chain(origin, signer, args.requests))
    port = free_port()
    argv = [*cli, "serve", "--data", str(data), "--port", str(port), "--rate-limit", "0"]
    server = start(data, port=port, argv=argv, logs=base)
    try:
        baseline = run(server.url, [[b""] * args.requests for _ in work], "/healthz")
        witnessed = run(server.url, work, "/add-checkpoint")
    finally:
        server.kill()
        shutil.rmtree(base, ignore_errors=True)
    rows = []
    results = {}
    for name, (seconds, lat, bad) in (("GET /healthz", baseline), ("add-checkpoint", witnessed)):
        rate = len(lat) / seconds
        results[name] = rate
        rows.append(
            [
                name,
                str(len(lat)),
                f"{rate:,.0f}/s",
                ms(quantile(lat, 0.5)),
                ms(quantile(lat, 0.99)),
                str(bad),
            ]
        )
    say(
        f"{args.logs} logs x {args.requests} requests, {args.logs} client threads; "
        f"load {loadavg()}; data on {data}"
    )
    print_table(["endpoint", "requests", "rate", "p50", "p99", "non-200"], rows)
    ratio = results["add-checkpoint"] / results["GET /healthz"]
    say(f"add-checkpoint / baseline: {ratio:.2f}")
    print(json.dumps({"rates": results, "ratio": ratio}))
    return 0 if witnessed[2] == 0 else 1


if __name__ == "__main__":
    sys.exit(benchdoc.run("witness", main))
