#!/usr/bin/env python3
"""Offline verification timings, JavaScript against Python, in one run (issue #38 item 4; the
verify-proof goals of issue 22). Goals, not test assertions.

    .venv/bin/python tools/bench_verify.py [--runs 15] [--records 500]

The inputs are the corpus's real log (tests/vectors/records/real/, made by
tools/make_record_corpus.py): a sealed day's record, its head, its tlog-proof and the 3-witness
policy (2 of 3), at the corpus time; no --tsa-ca (the JavaScript verifier SKIPs `timestamp`).
Timed, each with its median and p90:
  1. Node `verifyRecord` per record, the inputs in memory, after a warm-up
     (tools/bench_verify.mjs; goal <= 2 ms): with the same head and tlog-proof every time
     (verify.mjs remembers the signatures of evidence it has seen), and with new evidence
     each time (200 heads of the record's day differing in iat, each with its own one-leaf
     history and checkpoint, signed and cosigned by the corpus's TEST keys);
  2. Python `verify.record.verify` per record on the same new evidence, keys and policy
     parsed each time as Node does;
  3. the Node CLI and 4. the Python `verify-proof` end to end in fresh processes, alternating
     (goals <= 150 ms and <= 250 ms), 5. `verify-proof --help` (goal <= 150 ms), and the
     floors: an empty `node -e ''` and `python -c ''`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import benchdoc
from benchkit import loadavg, print_table, quantile, say
from capability_anchor import head as heads
from capability_anchor.keys import KeySet
from capability_anchor.merkle import hash_leaf
from capability_anchor.note import Checkpoint, Note, NoteSigner, origin_from_url, parse_policy
from capability_anchor.note.proof import format_tlog_proof
from capability_anchor.verify.anchor import Anchor
from capability_anchor.verify.history_checks import head_payload
from capability_anchor.verify.record import verify
from capability_anchor.verify.sources import ProofSource, StampSource
from corpus_cases import AT, COSIGNED, DAYS, ISS, test_signing_key
from make_record_corpus import witnesses

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


# Evidence as (head, tlog-proof) file pairs, paths relative to the corpus or absolute.
Pairs = list[tuple[str, str]]


def new_evidence(folder: Path, count: int) -> Pairs:
    """`count` (head, tlog-proof) pairs no signature memo has seen: the record's head with its
    iat moved by 1..count s, each the one leaf of its own history, whose checkpoint the log's
    TEST key signs and the three TEST witnesses cosign (when the corpus's were cosigned)."""
    head = heads.parse_document((CORPUS / ROOTS / f"{DAY}.json").read_bytes())
    key = test_signing_key()
    signer = NoteSigner(origin_from_url(ISS), key)
    pairs = []
    for k in range(count):
        fresh = heads.sign({**head.claims, "iat": head.claims["iat"] + 1 + k}, key)
        text = Checkpoint(signer.name, 1, hash_leaf(head_payload(fresh))).text()
        lines = [signer.signature(text)] + [w.cosign(text, COSIGNED) for _, w in witnesses()]
        note = Note(text=text, signatures=tuple(lines)).to_bytes()
        (folder / f"{k}.json").write_bytes(fresh.document())
        proof = format_tlog_proof(0, [], note, fresh.jws.encode("ascii"))
        (folder / f"{k}.tlog-proof").write_bytes(proof)
        pairs.append((str(folder / f"{k}.json"), str(folder / f"{k}.tlog-proof")))
    return pairs


def python_in_process(records: int, pairs: Pairs) -> tuple[list[float], list[str]]:
    record = (CORPUS / RECORD).read_bytes()
    keys, policy = (CORPUS / ROOTS / "keys.json").read_bytes(), (CORPUS / POLICY).read_bytes()
    evidence = [
        MemorySources((CORPUS / h).read_bytes(), (CORPUS / p).read_bytes()) for h, p in pairs
    ]
    turn = itertools.cycle(evidence)

    def once() -> list[str]:
        result = verify(
            record,
            keys=KeySet.from_json(keys),
            sources=next(turn),
            at=AT,
            policy=parse_policy(policy),
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


def node_in_process(records: int, pairs: Pairs) -> tuple[list[float], list[str]]:
    args = [RECORD, f"{ROOTS}/keys.json", POLICY, str(AT), str(records)]
    args += [str(max(200, records // 5)), *(f"{h}:{p}" for h, p in pairs)]
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
    median, p90 = _median(samples), quantile(ordered, 0.9)
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
    shared: Pairs = [(f"{ROOTS}/{DAY}.json", f"{ROOTS}/{DAY}.tlog-proof")]
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp:
        # 200 sets of 5 remembered signatures: more than verify.mjs's memo keeps (512).
        fresh = new_evidence(Path(tmp), 200)
        node_memo, statuses = node_in_process(args.records, shared)
        node, node_statuses = node_in_process(args.records, fresh)
        python, python_statuses = python_in_process(args.records, fresh)
    if not statuses == node_statuses == python_statuses:
        sys.exit(f"the verdicts differ: node {statuses} {node_statuses}, python {python_statuses}")
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
            row("Node verifyRecord, seen evidence (memo)", node_memo, GOALS["node"]),
            row("Node verifyRecord, new evidence", node, GOALS["node"]),
            row("Python verify, new evidence", python, None),
            row("Node CLI, end to end", walls["node-cli"], GOALS["node-cli"]),
            row("Python verify-proof, end to end", walls["python-cli"], GOALS["python-cli"]),
            row("Python verify-proof --help", walls["help"], GOALS["help"]),
            row("floor: node -e ''", walls["node-floor"], None),
            row("floor: python -c ''", walls["python-floor"], None),
        ],
    )
    say("")
    say(f"verdicts (both): {' '.join(python_statuses)}")
    say(f"ratio Node/Python per record, new evidence: {_ratio(node, python)}")
    say(f"ratio Node/Python end to end: {_ratio(walls['node-cli'], walls['python-cli'])}")
    for who, cli, floor in (
        ("Node", "node-cli", "node-floor"),
        ("Python", "python-cli", "python-floor"),
    ):
        above = _median(walls[cli]) - _median(walls[floor])
        say(f"{who} CLI above its floor (median - median): {above:.1f} ms")
    say(f"load average after: {loadavg()}")


def _median(samples: list[float]) -> float:
    return quantile(sorted(samples), 0.5)


def _ratio(a: list[float], b: list[float]) -> str:
    return f"{_median(a) / _median(b):.2f}"


def _node_version() -> str:
    done = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


if __name__ == "__main__":
    sys.exit(benchdoc.run("verify", main))
