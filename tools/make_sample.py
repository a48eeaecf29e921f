#!/usr/bin/env python3
"""Write the published sample history in roots/ with the project's own library.

    .venv/bin/python tools/make_sample.py           # (re)write the generated files in roots/
    .venv/bin/python tools/make_sample.py --check   # exit 1 if roots/ is not what it makes
    .venv/bin/python tools/make_sample.py --restamp # the same with new stamps

A log is made in a temporary folder with an injected clock and a FIXED TEST KEY, so the
output is byte-for-byte reproducible (Ed25519 signatures are deterministic, every time comes
from the clock):

- 2026-11-01: three Capability Resolution records, one checkpoint;
- 2026-11-02: nothing (sealed empty, tree_size 0);
- 2026-11-03: two records, a checkpoint, one more record, a second checkpoint;
- 2026-11-04 12:00: days 1-3 are sealed; two records are appended and checkpointed, so
  2026-11-04 has only an unsealed head.

The sealed days are stamped by a throwaway OpenSSL test TSA (tools/test_tsa.py), whose CA
certificate is published as roots/tsa-ca.pem. Stamps hold the TSA's time and a random nonce,
so they cannot be made twice: a rebuild (and `--check`) stores the published stamps again,
each of which must verify for the rebuilt head; `--restamp` asks a new test TSA instead.

It is exported with `capability_anchor.export.days.export` and a few resolver-2 records made by
`Log.record` are written to roots/records/. roots/README.md is written by hand, never here.

TEST KEY - NOT SECRET: the signing key's seed is SHA-256 of the public string `TEST_KEY_TEXT`
below. Anyone can re-derive it and sign anything with it; it exists only so the sample can be
regenerated identically. It must never sign a real log. The private key file is not written
to roots/ (only the temporary data dir, deleted afterwards, ever holds it).
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import filecmp
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from capability_anchor import head as heads
from capability_anchor.encoding import b64url_encode
from capability_anchor.export.days import export
from capability_anchor.keys import SigningKey
from capability_anchor.log import KEY_FILE, Log
from capability_anchor.log.policies import log_vkey
from capability_anchor.log.stamping import TsaConfig, stamp_missing
from capability_anchor.note import Cosigner, parse_note
from capability_anchor.store import CosignatureRow
from capability_anchor.timestamp import digest_of, load_cas, verify_reply

ROOT = Path(__file__).resolve().parent.parent
ROOTS = ROOT / "roots"
HAND_WRITTEN = frozenset({"README.md"})
TSA_CA = "tsa-ca.pem"

ISS = "https://resolver.example"
TEST_KEY_TEXT = b"capability-anchor roots/ sample test key - NOT SECRET"
# The sample's witness (SPEC §12.3), TEST-ONLY like the log key: its seed is SHA-256 of this.
TEST_WITNESS_TEXT = b"capability-anchor roots/ sample test witness - NOT SECRET"
WITNESS_NAME = "sample-witness"
WITNESS_KEY_NAME = "witness.example/sample-TEST-ONLY"
POLICY = "policy.txt"
RECORD_LIFETIME = 172800  # 48 h, the most Capability Resolution §8 allows
DAYS = ("2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04")


def test_signing_key() -> SigningKey:
    """The fixed TEST-ONLY key of the sample (its seed is public: see the module doc)."""
    return SigningKey.from_seed(hashlib.sha256(TEST_KEY_TEXT).digest())


def test_witness() -> Cosigner:
    """The fixed TEST-ONLY witness of the sample (its seed is public: see the module doc)."""
    return Cosigner(
        WITNESS_KEY_NAME, SigningKey.from_seed(hashlib.sha256(TEST_WITNESS_TEXT).digest())
    )


def sample_policy() -> bytes:
    """The sample's tlog-policy: the log's note key and the test witness, which must cosign
    (it has no URL: nobody submits to it, `make_sample` cosigns in-process)."""
    lines = [
        f"log {log_vkey(ISS, test_signing_key())}",
        f"witness {WITNESS_NAME} {test_witness().verifier.vkey()}",
        f"quorum {WITNESS_NAME}",
    ]
    return ("\n".join(lines) + "\n").encode("ascii")


def witness_new_checkpoints(
    log: Log, clock: Clock, witnesses: Sequence[tuple[str, Cosigner]] | None = None
) -> None:
    """The test witnesses (name, cosigner; default the sample's one) cosign every checkpoint
    none has cosigned yet, 5 s after the clock (as a loopback witness answering a submission
    would), each line verified and stored as the witness client stores them."""
    history = log.read.history
    done = max((row.size for row in _cosigned(log)), default=0)
    for size in range(done + 1, log.store.checkpoint_size() + 1):
        text = parse_note(history.checkpoint(size)).text
        timestamp = int(clock.t) + 5
        for name, witness in witnesses or ((WITNESS_NAME, test_witness()),):
            line = witness.cosign(text, timestamp)
            witness.verifier.verify(text.encode("utf-8"), line.signature)
            row = CosignatureRow(name, line.key_id, size, timestamp, line.line().rstrip("\n"))
            with log.store.write():
                log.store.insert_cosignature(row, timestamp)


def _cosigned(log: Log) -> list[CosignatureRow]:
    return [
        row
        for size in range(1, log.store.checkpoint_size() + 1)
        for row in log.store.cosignatures(size)
    ]


def at(day: str, hour: int = 0, minute: int = 0) -> float:
    start = dt.datetime.combine(dt.date.fromisoformat(day), dt.time(hour, minute), dt.UTC)
    return start.timestamp()


class Clock:
    """The injected clock: the log reads the time only from here."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def server(slug: str, url: str, name: str, status: str, checked_at: str) -> dict[str, Any]:
    """A Capability Resolution record of one MCP server, as a resolver appends it."""
    return {
        "v": "0.2",
        "iss": ISS,
        "sub": f"example:{slug}",
        "url": url,
        "name": name,
        "status": status,
        "checked_at": checked_at,
        "first_seen": "2026-10-02",
        "evidence": {"record": f"{ISS}/record?id=example:{slug}", "method": f"{ISS}/method"},
    }


def write_key_file(path: Path, key: SigningKey, text: bytes = TEST_KEY_TEXT) -> None:
    """The private JWK `Log.init` takes over (mode 0600 from creation, as keys.py does) of the
    TEST key `key`, whose seed is SHA-256 of `text`."""
    jwk = {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": key.public.x,
        "d": b64url_encode(hashlib.sha256(text).digest()),
        "kid": key.kid,
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write((json.dumps(jwk, separators=(",", ":")) + "\n").encode("ascii"))


def write_record(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _adopt_stamps(log: Log, published: Path) -> bool:
    """Store the stamps already published in `published` (with its tsa-ca.pem) again, so
    that a rebuild is byte-identical: stamps carry a TSA's time and nonce and cannot be
    made twice. Each must verify for the rebuilt head's JWS. False when there are none."""
    ca = published / TSA_CA
    if not ca.exists():
        return False
    cas = load_cas([ca])
    found = False
    for row in reversed(log.store.sealed_heads()):
        listing = published / f"{row.day}.timestamps.json"
        if not listing.exists():
            return False
        jws = heads.parse_document(row.doc).jws.encode("ascii")
        for stamp in json.loads(listing.read_text())["timestamps"]:
            token = base64.b64decode(stamp["token"])
            verified = verify_reply(token, digest=digest_of(jws), cas=cas, nonce=None)
            log.add_stamp(row.day, stamp["tsa"], token, verified.gen_time)
            found = True
    return found


def _stamp_afresh(log: Log, out: Path) -> None:
    """Stamp every sealed head with a throwaway OpenSSL test TSA (tools/test_tsa.py) and
    publish its CA certificate as tsa-ca.pem."""
    sys.path.insert(0, str(ROOT / "tools"))
    import test_tsa

    with tempfile.TemporaryDirectory(prefix="sample-tsa-") as tmp:
        # Ten years: the sample must keep verifying with plain `openssl ts -verify`.
        pki = test_tsa.make_pki(tmp, "ec", name="capability-anchor sample TEST", days=3650)
        with test_tsa.TestTsa(pki) as tsa:
            config = TsaConfig.from_files([tsa.url], [pki.ca_cert])
            failed = [r for r in stamp_missing(log, config) if not r.ok]
            if failed:
                raise SystemExit(f"the test TSA failed: {failed}")
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pki.ca_cert, out / TSA_CA)


def build(out: Path, work: Path, stamps_from: Path | None) -> None:
    """Build the log in `work` (a new folder) and write the sample files into `out`. The
    stamps of the sealed days are those published in `stamps_from` when it has them,
    else new ones from a test TSA."""
    day1, _day2, day3, day4 = DAYS  # day 2 stays empty
    work.mkdir(parents=True)
    write_key_file(work / KEY_FILE, test_signing_key())
    clock = Clock(at(day1, 9))
    # records="any": day 1's "search" record says status "degraded", which Capability
    # Resolution §6.1 does not define and the default record rule refuses. The sample is
    # published and checked byte for byte, so it keeps that record rather than change.
    log = Log.init(work, iss=ISS, records="any", clock=clock, policy=sample_policy())
    try:
        # Day 1: three servers, one checkpoint.
        log.append(
            [
                server(
                    "weather",
                    "https://weather.example.com/mcp",
                    "Weather",
                    "ok",
                    f"{day1}T08:55:00Z",
                ),
                server(
                    "calendar", "https://cal.example.org/mcp", "Calendar", "ok", f"{day1}T08:56:00Z"
                ),
                server(
                    "search",
                    "https://search.example.io/mcp",
                    "Search",
                    "degraded",
                    f"{day1}T08:57:00Z",
                ),
            ]
        )
        clock.t = at(day1, 9, 5)
        log.checkpoint()
        witness_new_checkpoints(log, clock)
        # Day 2: nothing at all (sealed empty).
        # Day 3: two records, a checkpoint, one more record, a second checkpoint.
        clock.t = at(day3, 10)
        log.append(
            [
                server(
                    "weather",
                    "https://weather.example.com/mcp",
                    "Weather",
                    "ok",
                    f"{day3}T09:55:00Z",
                ),
                server(
                    "files", "https://files.example.net/mcp", "Files", "ok", f"{day3}T09:56:00Z"
                ),
            ]
        )
        clock.t = at(day3, 10, 5)
        log.checkpoint()
        witness_new_checkpoints(log, clock)
        clock.t = at(day3, 14)
        log.append(
            [server("search", "https://search.example.io/mcp", "Search", "ok", f"{day3}T13:55:00Z")]
        )
        clock.t = at(day3, 14, 5)
        log.checkpoint()
        witness_new_checkpoints(log, clock)
        # Day 4 at noon: days 1-3 are sealed; two records under an unsealed head.
        clock.t = at(day4, 12)
        log.seal()
        witness_new_checkpoints(log, clock)
        if stamps_from is None or not _adopt_stamps(log, stamps_from):
            _stamp_afresh(log, out)
        else:
            out.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(stamps_from / TSA_CA, out / TSA_CA)
        clock.t = at(day4, 12, 30)
        maps = server("maps", "https://maps.example.com/mcp", "Maps", "ok", f"{day4}T12:24:00Z")
        tickets = server(
            "tickets", "https://tickets.example.com/mcp", "Tickets", "ok", f"{day4}T12:25:00Z"
        )
        log.append([maps, tickets])
        clock.t = at(day4, 12, 35)
        log.checkpoint()
        witness_new_checkpoints(log, clock)
        export(log, out, tiles=True)
        (out / POLICY).write_bytes(sample_policy())
        # Resolver-2 records, issued at 2026-11-04 13:00 (verify them with --at <iat>).
        clock.t = at(day4, 13)
        records = {
            # Only on day 1, which is sealed: anchored to /roots/2026-11-01.
            f"{day1}-calendar.json": log.record(sub="example:calendar", lifetime=RECORD_LIFETIME),
            # Newest entry on day 3 (sealed), leaf 2 of 3.
            f"{day3}-search.json": log.record(sub="example:search", lifetime=RECORD_LIFETIME),
            # On day 4, anchored to the unsealed head /roots/2026-11-04/2.
            f"{day4}-tickets.json": log.record(sub="example:tickets", lifetime=RECORD_LIFETIME),
        }
        for name, record in records.items():
            write_record(out / "records" / name, record)
    finally:
        log.close()


def generated_files(folder: Path) -> dict[str, Path]:
    """Every file of `folder` by relative path, except the hand-written ones."""
    return {
        p.relative_to(folder).as_posix(): p
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.relative_to(folder).as_posix() not in HAND_WRITTEN
    }


def differences(expected: Path, actual: Path) -> list[str]:
    want, have = generated_files(expected), generated_files(actual)
    problems = [f"missing: {name}" for name in sorted(want.keys() - have.keys())]
    problems += [f"not generated: {name}" for name in sorted(have.keys() - want.keys())]
    problems += [
        f"differs: {name}"
        for name in sorted(want.keys() & have.keys())
        if not filecmp.cmp(want[name], have[name], shallow=False)
    ]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if roots/ differs")
    parser.add_argument("--out", type=Path, default=ROOTS, help="the folder (default roots/)")
    parser.add_argument(
        "--restamp", action="store_true", help="new stamps from a test TSA (not --check)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="make-sample-") as tmp:
        fresh = Path(tmp) / "roots"
        # --check rebuilds with the published stamps: they must still verify for the heads.
        build(fresh, Path(tmp) / "data", None if args.restamp and not args.check else args.out)
        if args.check:
            problems = differences(fresh, args.out)
            for problem in problems:
                print(f"{args.out}: {problem}", file=sys.stderr)
            if problems:
                print("run tools/make_sample.py to regenerate", file=sys.stderr)
                return 1
            print(f"{args.out} is up to date ({len(generated_files(fresh))} files)")
            return 0
        args.out.mkdir(parents=True, exist_ok=True)
        for name, path in generated_files(args.out).items():
            if name not in HAND_WRITTEN:
                path.unlink()
        for name, path in generated_files(fresh).items():
            target = args.out / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        for folder in sorted(args.out.rglob("*"), reverse=True):
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        print(f"wrote {len(generated_files(fresh))} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
