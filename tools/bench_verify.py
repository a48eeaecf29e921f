#!/usr/bin/env python3
"""Offline verification timings, JavaScript against Python, in one run (issue #38 item 4; the
verify-proof goals of issue 22). Goals, not test assertions.

    .venv/bin/python tools/bench_verify.py [--runs 15] [--records 500]

The inputs are the corpus's real log (tests/vectors/records/real/, made by
tools/make_record_corpus.py): a sealed day's record, its head, its tlog-proof and the 3-witness
policy (2 of 3), at the corpus time; no --tsa-ca (the JavaScript verifier SKIPs `timestamp`).
Timed, each with its median and p90:
  1. Node `verifyRecord` per record, the inputs in memory, after a warm-up
     (tools/bench_verify.mjs; goal <= 2 ms);
  2. Python `verify.record.verify` per record, the same inputs in memory, keys and policy
     parsed each time as Node does;
  3. the Node CLI and 4. the Python `verify-proof` end to end in fresh processes, alternating
     (goals <= 150 ms and <= 250 ms), 5. `verify-proof --help` (goal <= 150 ms), and the
     floors: an empty `node -e ''` and `python -c ''`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import benchdoc
from benchkit import loadavg, print_table, quantile, say
from capability_anchor.keys import KeySet
from capability_anchor.note import parse_policy
from capability_anchor.verify.anchor import Anchor
from capability_anchor.verify.record import verify
from capability_anchor.verify.sources import ProofSource, StampSource
from corpus_cases import AT, DAYS

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "vectors" / "records"
VERIFY_PROOF = Path(sys.executable).parent / "verify-proof"
NODE_CLI = ROOT / "src" / "verify-js" / "bin" / "verify-proof.mjs"
RECORD = "real/records/d1-sealed-calendar.json"
ROOTS = "real/roots"
DAY = DAYS[0]
POLICY = f"{ROOTS}/policy.txt"
GOALS = {"node": 2.0, "node-cli": 150.0, "python-cli": 250.0, "help": 150.0}


@dataclass(frozen=True)
class MemorySources:
    """The head and tlog-proof already read, as Node's `head` and `tlogProof` options."""

    head_bytes: bytes
    proof: bytes
    names_head = True

    def head(self, anchor: Anchor | None) -> tuple[bytes, str]:
        return self.head_bytes, "memory"

    def stamps(self, day: str, anchor: Anchor | None) -> StampSource:
        return StampSource("memory")

    def history_proof(self, anchor: Anchor | None, leaf_hash: bytes) -> ProofSource:
        return ProofSource("memory", self.proof)


def python_in_process(records: int) -> tuple[list[float], list[str]]:
    record = (CORPUS / RECORD).read_bytes()
    keys, policy = (CORPUS / ROOTS / "keys.json").read_bytes(), (CORPUS / POLICY).read_bytes()
    sources = MemorySources(
        (CORPUS / ROOTS / f"{DAY}.json").read_bytes(),
        (CORPUS / ROOTS / f"{DAY}.tlog-proof").read_bytes(),
    )

    def once() -> list[str]:
        result = verify(
            record, keys=KeySet.from_json(keys), sources=sources, at=AT, policy=parse_policy(policy)
        )
        return [check.outcome.value for check in result.checks]

    statuses = once()
    for _ in range(min(50, records)):
        once()
    samples = []
    for _ in range(records):
        start = time.perf_counter()
        once()
        samples.append((time.perf_counter() - start) * 1000)
    return samples, statuses


def node_in_process(records: int) -> tuple[list[float], list[str]]:
    args = [RECORD, f"{ROOTS}/keys.json", f"{ROOTS}/{DAY}.json", f"{ROOTS}/{DAY}.tlog-proof"]
    args += [POLICY, str(AT), str(records), str(max(200, records // 5))]
    done = subprocess.run(
        ["node", str(ROOT / "tools" / "bench_verify.mjs"), *args],
        cwd=CORPUS,
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(done.stdout)
    return found["samples_ms"], found["statuses"]


def wall_ms(args: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    start = time.perf_counter()
    done = subprocess.run(args, cwd=CORPUS, env=env, capture_output=True, check=False)
    took = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        sys.exit(f"{' '.join(args)} exited {done.returncode}:\n{done.stdout.decode()}")
    return took


def alternating(commands: dict[str, list[str]], runs: int) -> dict[str, list[float]]:
    """Each command `runs` times in fresh processes, in turn, so all see the same load."""
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, args in commands.items():
            samples[name].append(wall_ms(args))
    return samples


def row(what: str, samples: list[float], goal: float | None) -> list[str]:
    ordered = sorted(samples)
    median, p90 = quantile(ordered, 0.5), quantile(ordered, 0.9)
    verdict = "" if goal is None else f"<= {goal:g} ms: {'met' if median <= goal else 'MISSED'}"
    return [what, str(len(samples)), f"{median:.2f} ms", f"{p90:.2f} ms", verdict]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15, help="fresh processes per CLI")
    parser.add_argument("--records", type=int, default=500, help="in-process records timed")
    args = parser.parse_args()
    say(f"# inputs: {CORPUS.relative_to(ROOT)}/{RECORD}, --roots {ROOTS}, --policy {POLICY}")
    say(f"#   (3 witnesses, 2 of 3), --at {AT}; no --tsa-ca; node {_node_version()}")
    say(f"# load average before: {loadavg()}")
    node, node_statuses = node_in_process(args.records)
    python, python_statuses = python_in_process(args.records)
    if node_statuses != python_statuses:
        sys.exit(f"the verdicts differ: node {node_statuses}, python {python_statuses}")
    cli_args = [RECORD, "--roots", ROOTS, "--policy", POLICY, "--at", str(AT)]
    walls = alternating(
        {
            "node-cli": ["node", str(NODE_CLI), *cli_args],
            "python-cli": [str(VERIFY_PROOF), *cli_args],
            "help": [str(VERIFY_PROOF), "--help"],
            "node-floor": ["node", "-e", ""],
            "python-floor": [sys.executable, "-c", ""],
        },
        args.runs,
    )
    print_table(
        ["what", "runs", "median", "p90", "goal"],
        [
            row("Node verifyRecord, per record (warm)", node, GOALS["node"]),
            row("Python verify, per record (warm)", python, None),
            row("Node CLI, end to end", walls["node-cli"], GOALS["node-cli"]),
            row("Python verify-proof, end to end", walls["python-cli"], GOALS["python-cli"]),
            row("Python verify-proof --help", walls["help"], GOALS["help"]),
            row("floor: node -e ''", walls["node-floor"], None),
            row("floor: python -c ''", walls["python-floor"], None),
        ],
    )
    say("")
    say(f"verdicts (both): {' '.join(python_statuses)}")
    say(f"ratio Node/Python per record: {_ratio(node, python)}")
    say(f"ratio Node/Python end to end: {_ratio(walls['node-cli'], walls['python-cli'])}")
    say(f"load average after: {loadavg()}")


def _ratio(a: list[float], b: list[float]) -> str:
    return f"{quantile(sorted(a), 0.5) / quantile(sorted(b), 0.5):.2f}"


def _node_version() -> str:
    done = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


if __name__ == "__main__":
    sys.exit(benchdoc.run("verify", main))
