#!/usr/bin/env python3
"""Kernel benchmarks (issue: the verifiable kernel). Goals, not test assertions.

    .venv/bin/python tools/bench_kernel.py            # full run, ~1 minute, ~1.5 GB RAM
    .venv/bin/python tools/bench_kernel.py --big 1000000   # smaller proof tree

Machines here are noisy, so every figure that has a baseline is printed as a ratio against
that baseline measured in the same process, interleaved, best of several rounds:
  1. root of 1,000,000 leaf hashes through the incremental tree vs a bare hashlib loop
     computing the same root (goal: <= 1.3x);
  2. inclusion proof at 10,000,000 leaves from the tiles held in memory (goal: median <= 50 us),
     and from tiles alone with interior nodes recomputed (what the store does);
  3. verify_inclusion at that size (goal: median <= 30 us).
Latencies are also given in units of one SHA-256 interior-node hash timed in the same run.
"""

from __future__ import annotations

import argparse
import gc
import platform
import random
import statistics
import sys
import time
from hashlib import sha256

import benchdoc
from capability_anchor import merkle


def bare_root(hashes: list[bytes]) -> bytes:
    """The plainest correct RFC 9162 root: pair each level, promote an odd last node."""
    level = hashes
    while len(level) > 1:
        nxt = [
            sha256(b"\x01" + level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)
        ]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def best_of(fn, rounds: int) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(rounds):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def medians(fn, args: list[tuple[int, ...]]) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    samples = []
    for a in args:
        t0 = time.perf_counter_ns()
        fn(*a)
        samples.append(time.perf_counter_ns() - t0)
    samples.sort()
    return statistics.median(samples) / 1000, samples[int(len(samples) * 0.99)] / 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--root-leaves", type=int, default=1_000_000)
    ap.add_argument("--big", type=int, default=10_000_000, help="tree size for proof timings")
    ap.add_argument("--proofs", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rng = random.Random(42)
    print(
        f"# {platform.python_implementation()} {platform.python_version()} "
        f"on {platform.machine()}, {platform.processor() or 'cpu'}"
    )

    node_ns = best_of(lambda: [sha256(b"\x01" + b"a" * 64).digest() for _ in range(100_000)], 5)
    node_us = node_ns / 100_000 * 1e6
    print(f"one interior-node hash: {node_us * 1000:.0f} ns")

    bench_root(args.root_leaves, args.rounds)
    bench_proofs(args.big, args.proofs, node_us, rng)


def bench_root(n: int, rounds: int) -> None:
    hashes = [sha256(i.to_bytes(8, "big")).digest() for i in range(n)]
    concatenated = b"".join(hashes)
    want = bare_root(hashes)

    def batched() -> None:
        tree = merkle.TiledTree()
        for i in range(0, len(concatenated), 32 * 1000):
            tree.extend_concatenated(concatenated[i : i + 32 * 1000])
        assert tree.root() == want

    def one_by_one() -> None:
        tree = merkle.TiledTree()
        for h in hashes:
            tree.append(h)
        assert tree.root() == want

    base = inc = single = float("inf")
    for _ in range(rounds):  # interleaved so drift hits both sides alike
        base = min(base, best_of(lambda: bare_root(hashes), 1))
        inc = min(inc, best_of(batched, 1))
        single = min(single, best_of(one_by_one, 1))
    print(f"root of {n:,} leaves: bare hashlib loop {base:.3f} s")
    print(
        f"  incremental tree, 1000-leaf batches: {inc:.3f} s  "
        f"ratio {inc / base:.2f}x (goal <= 1.3x)"
    )
    print(f"  incremental tree, one append at a time: {single:.3f} s  ratio {single / base:.2f}x")


def bench_proofs(big: int, count: int, node_us: float, rng: random.Random) -> None:
    t0 = time.perf_counter()
    tree = merkle.TiledTree()
    chunk = 100_000
    for start in range(0, big, chunk):
        tree.extend_concatenated(
            b"".join(
                sha256(i.to_bytes(8, "big")).digest() for i in range(start, min(big, start + chunk))
            )
        )
    print(f"built a {big:,}-leaf tree in {time.perf_counter() - t0:.1f} s")
    root = tree.root()
    picks = [(rng.randrange(big), big) for _ in range(count)]

    med, p99 = medians(tree.inclusion_proof, picks)
    print(
        f"inclusion proof at {big:,} (tiles in memory): median {med:.1f} us, p99 {p99:.1f} us "
        f"= {med / node_us:.0f} node hashes (goal: median <= 50 us)"
    )

    def from_tiles(index: int, size: int) -> None:
        source = merkle.TileNodes(tree.tile)
        merkle.nodes.resolve(merkle.inclusion_nodes(index, size), source.node)

    med_t, p99_t = medians(from_tiles, picks[: count // 10])
    print(
        f"inclusion proof at {big:,} (tiles only, interiors recomputed): median {med_t:.1f} us, "
        f"p99 {p99_t:.1f} us = {med_t / node_us:.0f} node hashes"
    )

    proofs = [(tree.node(0, i), i, s, tree.inclusion_proof(i, s), root) for i, s in picks[:5000]]
    med_v, p99_v = medians(merkle.verify_inclusion, proofs)
    print(
        f"verify_inclusion at {big:,}: median {med_v:.1f} us, p99 {p99_v:.1f} us "
        f"= {med_v / node_us:.0f} node hashes (goal: median <= 30 us)"
    )


if __name__ == "__main__":
    sys.exit(benchdoc.run("kernel", main))
