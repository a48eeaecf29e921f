#!/usr/bin/env python3
"""verify-proof offline with checks 8-9 (SPEC §12.5) against the seven checks of §9, side by
side in one run (issue 13's goal: <= 150 ms wall with checks 8-9). Goals, not assertions.

    .venv/bin/python tools/bench_verify_history.py [--runs 15]

Builds a log with the library in a temporary folder: 1,000 records on one day in ten
batches, a checkpoint after each (ten unsealed heads), the day sealed (eleven history
leaves), a resolver-2 record anchored to the sealed head, an export; a 2-of-3 tlog-policy
and two test witnesses' cosignatures of the newest checkpoint are stored in the log. Next to
the export, a copy holds the sealed head's tlog-proof as the log makes it
(`log.read.history.tlog_proof`). Then the
real console script runs in fresh processes, the two commands alternating (so both see the
same machine load):
  1. seven checks: `verify-proof RECORD --roots EXPORT` (no tlog-proof: history SKIPs, and
     `note` is never imported);
  2. nine checks: `verify-proof RECORD --roots WITH_PROOF --policy POLICY` (history and
     witnesses PASS).
Both times include compiling any module without a bytecode cache: with
PYTHONDONTWRITEBYTECODE set and no `__pycache__` in `src/`, every run compiles every module
(about +40 ms here); run `python -m compileall -q src` once first to time what users see.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchdoc
from capability_anchor import head as heads
from capability_anchor.export.days import export
from capability_anchor.keys import SigningKey
from capability_anchor.log import Log
from capability_anchor.merkle import hash_leaf
from capability_anchor.note import Cosigner, parse_note
from capability_anchor.store import CosignatureRow
from capability_anchor.verify.history_checks import head_payload

VERIFY_PROOF = Path(sys.executable).parent / "verify-proof"
SRC = Path(__file__).resolve().parent.parent / "src"
ISS = "https://resolver.example"
DAY1, DAY2 = "2026-03-01", "2026-03-02"


def _at(day: str, seconds: int) -> float:
    start = dt.datetime.combine(dt.date.fromisoformat(day), dt.time(), dt.UTC)
    return start.timestamp() + seconds


def _record(n: int) -> dict[str, object]:
    return {
        "v": "0.2",
        "iss": ISS,
        "sub": f"example:s{n}",
        "url": f"https://s{n}.example",
        "status": "ok",
        "checked_at": "2026-03-01T01:00:00Z",
        "evidence": {"n": n},
    }


def _policy(log: Log, witnesses: list[Cosigner]) -> bytes:
    return (
        f"log {log.read.history.vkey()}\n"
        + "".join(f"witness w{n} {w.verifier.vkey()}\n" for n, w in enumerate(witnesses, 1))
        + "group two 2 w1 w2 w3\nquorum two\n"
    ).encode()


def build(root: Path) -> tuple[Path, Path, Path, Path, int]:
    t = [_at(DAY1, 3600)]
    witnesses = [Cosigner(f"w{n}.example", SigningKey.generate()) for n in (1, 2, 3)]
    with Log.init(root / "data", iss=ISS, clock=lambda: t[0]) as log:
        for batch in range(10):
            log.append([_record(n) for n in range(batch * 100, batch * 100 + 100)])
            t[0] += 60
            log.checkpoint()
        t[0] = _at(DAY2, 60)
        log.seal()
        record = log.record(sub="s500")
        export(log, root / "export")
        size = log.store.checkpoint_size()
        text = parse_note(log.read.history.checkpoint(size)).text
        policy = _policy(log, witnesses)
        with log.store.write():
            log.store.set_policy(policy, int(t[0]))
            for n, w in enumerate(witnesses[:2], 1):  # two of three cosign
                line = w.cosign(text, int(t[0]) - 5)
                row = CosignatureRow(f"w{n}", line.key_id, size, int(t[0]) - 5, line.line()[:-1])
                log.store.insert_cosignature(row, int(t[0]))
        sealed = next(r for r in log.store.sealed_heads() if r.day == DAY1)
        leaf = hash_leaf(head_payload(heads.parse_document(sealed.doc)))
        proof = log.read.history.tlog_proof(leaf)
    with_proof = root / "with-proof"
    shutil.copytree(root / "export", with_proof)
    (with_proof / f"{DAY1}.tlog-proof").write_bytes(proof)
    (root / "policy.txt").write_bytes(policy)
    path = root / "record.json"
    path.write_text(json.dumps(record))
    return path, root / "export", with_proof, root / "policy.txt", int(t[0])


def _time(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(args, check=False, capture_output=True)
    return (time.perf_counter() - start) * 1000


def _check(args: list[str], expect: str) -> None:
    result = subprocess.run(args, check=False, capture_output=True, text=True)
    if result.returncode != 0 or expect not in result.stdout:
        sys.exit(f"verification did not give {expect!r}:\n{result.stdout}{result.stderr}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        record, bare, with_proof, policy, when = build(Path(tmp))
        base = [str(VERIFY_PROOF), str(record), "--at", str(when), "--roots"]
        seven = [*base, str(bare)]
        nine = [*base, str(with_proof), "--policy", str(policy)]
        _check(seven, "SKIP history:")
        _check(nine, "PASS witnesses:")
        for args in (seven, nine):  # warm the page cache
            _time(args)
        seven_ms: list[float] = []
        nine_ms: list[float] = []
        for _ in range(runs):
            seven_ms.append(_time(seven))
            nine_ms.append(_time(nine))
    s, n = statistics.median(seven_ms), statistics.median(nine_ms)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"seven checks (history SKIP): median {s:.1f} ms, min {min(seven_ms):.1f} ms")
    print(
        f"nine checks (history + witnesses PASS): median {n:.1f} ms, min {min(nine_ms):.1f} ms "
        "(goal <= 150 ms)"
    )
    print(f"ratio nine/seven: {n / s:.2f} (medians of {runs}, alternating; load {load})")
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and not any(SRC.rglob("*.pyc")):
        print("note: no bytecode caches in src/ and PYTHONDONTWRITEBYTECODE is set: both times")
        print("include compiling every module (python -m compileall -q src first)")


if __name__ == "__main__":
    sys.exit(benchdoc.run("verify_history", main))
