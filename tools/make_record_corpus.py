#!/usr/bin/env python3
"""Write the shared verifier corpus in tests/vectors/records/ (SPEC §14.4): cases.json, the
files its cases name, and README.md. Every case is a `verify-proof` argument list with the
verdict the Python `verify-proof --json` gave on it, which the JavaScript verifier must equal.

    .venv/bin/python tools/make_record_corpus.py            # (re)write the corpus
    .venv/bin/python tools/make_record_corpus.py --check    # exit 1 if a stored verdict moved
    .venv/bin/python tools/make_record_corpus.py --restamp  # the same with new stamps

A real log is made with the library (tools/make_sample.py's clock, TEST key, test TSA and
cosigning), exported to real/roots/, and its records issued by `Log.record`; the shipped
sample in roots/ is reused as it is; the other cases are in tools/corpus_cases.py, the
mutations (each one attack, named `attack-…`) in corpus_tokens.py and corpus_folders.py.
Stamps hold a TSA time and nonce: a rebuild stores the published ones again (so it writes the
same bytes), `--restamp` asks a new test TSA.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import corpus_cases
from capability_anchor.cli import verify_proof
from capability_anchor.export.days import export
from capability_anchor.keys import SigningKey
from capability_anchor.log import KEY_FILE, Log, rotation
from capability_anchor.log.policies import log_vkey
from capability_anchor.note import Cosigner
from corpus_cases import DAYS, Case
from corpus_folders import folder_cases
from corpus_tokens import token_cases
from make_sample import (
    ISS,
    RECORD_LIFETIME,
    Clock,
    at,
    server,
    stamp_sealed_days,
    test_signing_key,
    witness_new_checkpoints,
    write_key_file,
    write_record,
)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "vectors" / "records"
# TEST-ONLY keys, like make_sample's: each seed is SHA-256 of the text, which is public.
WITNESS_TEXT = "capability-anchor record corpus test witness {n} - NOT SECRET"
SUCCESSOR_TEXT = b"capability-anchor record corpus successor key - NOT SECRET"
QUORUM = 2  # of the 3 witnesses


def witnesses() -> list[tuple[str, Cosigner]]:
    """The corpus log's three TEST witnesses, as (policy name, cosigner)."""
    return [
        (
            f"w{n}",
            Cosigner(
                f"witness.example/corpus-{n}-TEST-ONLY",
                SigningKey.from_seed(corpus_cases.sha256(WITNESS_TEXT.format(n=n).encode())),
            ),
        )
        for n in (1, 2, 3)
    ]


def policy() -> bytes:
    """The corpus log's tlog-policy: its note key and 2 of the 3 test witnesses."""
    lines = [f"log {log_vkey(ISS, test_signing_key())}"]
    lines += [f"witness {name} {w.verifier.vkey()}" for name, w in witnesses()]
    lines += [f"group witnesses {QUORUM} w1 w2 w3", "quorum witnesses"]
    return ("\n".join(lines) + "\n").encode("ascii")


def _servers(day: str, hour: int, *slugs: str) -> list[dict[str, Any]]:
    return [
        server(
            slug,
            f"https://{slug}.example.com/mcp",
            slug.title(),
            "ok",
            f"{day}T{hour - 1:02}:5{i}:00Z",
        )
        for i, slug in enumerate(slugs)
    ]


def build_log(work: Path, roots: Path, stamps_from: Path | None) -> dict[str, dict[str, Any]]:
    """The real log: four days (the second empty), sealed and unsealed heads, three witnesses,
    stamps; exported to `roots` without tiles (no check reads them). Its records by name."""
    d1, _d2, d3, d4 = DAYS
    work.mkdir(parents=True)
    write_key_file(work / KEY_FILE, test_signing_key())
    clock = Clock(at(d1, 9))
    wits = witnesses()
    log = Log.init(work, iss=ISS, clock=clock, policy=policy())
    records: dict[str, dict[str, Any]] = {}
    try:
        for day, hour, slugs in (
            (d1, 9, ("weather", "calendar", "search", "files")),
            (d1, 11, ("maps", "mail")),
            (d3, 10, ("weather", "search", "notes")),
        ):
            clock.t = at(day, hour)
            log.append(_servers(day, hour, *slugs))
            clock.t = at(day, hour, 5)
            log.checkpoint()
            witness_new_checkpoints(log, clock, wits)
        clock.t = at(d4, 12)
        log.seal()
        witness_new_checkpoints(log, clock, wits)
        stamp_sealed_days(log, roots, stamps_from)
        for hour, slugs in ((13, ("tickets", "chat", "docs")), (14, ("photos", "weather"))):
            clock.t = at(d4, hour)
            log.append(_servers(d4, hour, *slugs))
            clock.t = at(d4, hour, 5)
            log.checkpoint()
            witness_new_checkpoints(log, clock, wits)
            if hour == 13:
                clock.t = at(d4, 13, 30)  # anchored to the unsealed head of size 3
                records["d4-older-head-chat"] = log.record(
                    sub="example:chat", lifetime=RECORD_LIFETIME
                )
        clock.t = at(d4, 15)
        records["d1-sealed-calendar"] = log.record(sub="example:calendar", lifetime=RECORD_LIFETIME)
        records["d1-sealed-maps"] = log.record(sub="example:maps", lifetime=RECORD_LIFETIME)
        records["d3-sealed-search"] = log.record(sub="example:search", lifetime=RECORD_LIFETIME)
        records["d4-unsealed-weather"] = log.record(sub="example:weather", lifetime=RECORD_LIFETIME)
        export(log, roots)
        (roots / "policy.txt").write_bytes(policy())
    finally:
        log.close()
    shutil.rmtree(roots / "history" / "tile")
    return records


def revoke_log_key(work: Path, roots: Path) -> int:
    """Rotate the real log's key as compromised (SPEC §13.2) an hour after its records, with a
    TEST successor key, and export it to `roots`: keys.json lists only the successor and
    key-records.json revokes the old key. The revocation time."""
    successor = SigningKey.from_seed(corpus_cases.sha256(SUCCESSOR_TEXT))
    write_key_file(work / rotation.NEW_KEY_FILE, successor, SUCCESSOR_TEXT)
    clock = Clock(at(DAYS[3], 16))
    done = rotation.activate(work, lambda d: Log.open(d, clock=clock), compromised=True)
    if done.revoked_at is None or done.kid != successor.kid:
        raise SystemExit(f"the rotation did not revoke the old key: {done}")
    with Log.open(work, clock=clock) as log:
        export(log, roots)
    return done.revoked_at


def build(out: Path, work: Path, stamps_from: Path | None) -> list[Case]:
    """Write every corpus file into `out` (a new folder); the cases, without verdicts."""
    records = build_log(work / "data", out / "real" / "roots", stamps_from)
    for name, record in records.items():
        write_record(out / "real" / "records" / f"{name}.json", record)
    revoked_roots = work / "revoked-roots"
    revoked_at = revoke_log_key(work / "data", revoked_roots)
    c = corpus_cases.Corpus(out, records)
    corpus_cases.real_cases(c, revoked_roots)
    corpus_cases.sample_cases(c)
    token_cases(c)
    folder_cases(c, revoked_roots, revoked_at)
    corpus_cases.usage_cases(c)
    return c.cases


# --- the Python verdicts ---------------------------------------------------------------------


def python_verdict(args: list[str], cwd: Path) -> dict[str, Any]:
    """What this checkout's `verify-proof --json ARGS` says, run in `cwd` in this process (its
    `main`, as the console script runs it): exit and checks."""
    out = io.StringIO()
    quiet = io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(quiet):
        code = verify_proof.main([*args, "--json"])
    text = out.getvalue()
    return {"exit": code, "checks": json.loads(text)["checks"] if text.strip() else []}


def verdict_of(python: dict[str, Any]) -> tuple[int, list[tuple[str, str]]]:
    """The part of a Python answer the corpus holds fixed: exit and each check's status."""
    return python["exit"], [(c["name"], c["result"]) for c in python["checks"]]


def write_corpus(out: Path, cases: list[Case]) -> None:
    doc = {
        "v": 1,
        "about": (
            "verify-proof cases (args relative to this folder) with the Python verdicts; made by "
            "tools/make_record_corpus.py, checked by its --check, "
            "tests/integration/test_record_corpus.py and tests/js/parity.test.mjs"
        ),
        "cases": [
            {
                "name": c.name,
                "about": c.about,
                "args": c.args,
                "python": python_verdict(c.args, out),
            }
            for c in cases
        ],
    }
    (out / "cases.json").write_text(
        json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    (out / "README.md").write_text(corpus_cases.README, encoding="utf-8")


def check(out: Path) -> int:
    """Rerun Python on every stored case; 1 naming each whose verdict differs."""
    cases = json.loads((out / "cases.json").read_text(encoding="utf-8"))["cases"]
    moved = 0
    for case in cases:
        now = python_verdict(case["args"], out)
        if verdict_of(now) != verdict_of(case["python"]):
            moved += 1
            print(
                f"{case['name']}: stored {verdict_of(case['python'])}, now {verdict_of(now)}",
                file=sys.stderr,
            )
    if moved:
        print(
            f"{moved} of {len(cases)} verdicts differ: run tools/make_record_corpus.py",
            file=sys.stderr,
        )
        return 1
    print(f"{out}: {len(cases)} cases, every verdict as stored")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="rerun Python; exit 1 if a verdict moved"
    )
    parser.add_argument("--restamp", action="store_true", help="new stamps from a test TSA")
    args = parser.parse_args(argv)
    if args.check:
        return check(OUT)
    published = OUT / "real" / "roots"
    with tempfile.TemporaryDirectory(prefix="record-corpus-") as tmp:
        fresh = Path(tmp) / "records"
        # The published stamps are read before OUT is replaced (make_sample.adopt_stamps).
        cases = build(fresh, Path(tmp) / "work", None if args.restamp else published)
        if OUT.exists():
            shutil.rmtree(OUT)
        shutil.copytree(fresh, OUT)
    # The sample cases name ../../../roots: the verdicts are taken in place.
    write_corpus(OUT, cases)
    size = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {len(cases)} cases, {size // 1024} KiB, to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
