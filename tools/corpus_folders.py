"""The corpus's mutations of what verify-proof reads beside a record (tools/make_record_corpus.py):
the head, the stamps, the tlog-proof, the keys and the policy, each case in its own folder
(cases/<name>/roots/), and the time rules at their edges; `folder_cases` adds them all."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

from capability_anchor import head as heads
from capability_anchor.log.policies import log_vkey
from capability_anchor.note import Cosigner
from capability_anchor.strictjson import canonical
from corpus_cases import (
    COSIGNED,
    DAYS,
    POLICY,
    REAL,
    SAMPLE,
    TSA,
    Corpus,
    at,
    signed,
    stranger,
    test_signing_key,
    unsealed_form,
)


def _flip_signature(path: Path, signer: str) -> None:
    """In the tlog-proof at `path`, one bit of the last byte of `signer`'s signature line."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith(f"— {signer} "):
            name, sig = line.rstrip("\n").rsplit(" ", 1)
            raw = bytearray(base64.b64decode(sig))
            raw[-1] ^= 1
            lines[i] = f"{name} {base64.b64encode(raw).decode('ascii')}\n"
    path.write_text("".join(lines), encoding="utf-8")


def _folder_attacks(c: Corpus, revoked: Path, revoked_at: int) -> None:
    """Mutations of the head, stamps, tlog-proof, keys or policy (each in its own folder)."""
    d1, d3 = DAYS[0], DAYS[2]
    real = c.out / REAL
    roots = c.folder("attack-head-unknown-key", "the head signed again by an unknown key")
    h = heads.parse_document((roots / f"{d3}.json").read_bytes())
    (roots / f"{d3}.json").write_bytes(heads.sign(h.claims, stranger(b" (heads)")).document())
    roots = c.folder("attack-head-edited-claims", "the head document's plain tree_size edited")
    doc = json.loads((roots / f"{d3}.json").read_bytes())
    (roots / f"{d3}.json").write_bytes(canonical({**doc, "tree_size": doc["tree_size"] + 1}))
    roots = c.folder(
        "attack-stamp-other-day", "day 1's stamp filed as day 3's", d3, "--tsa-ca", TSA
    )
    listing = json.loads((real / f"{d1}.timestamps.json").read_bytes())
    (roots / f"{d3}.timestamps.json").write_text(json.dumps({**listing, "day": d3}))
    shutil.copyfile(real / f"{d1}.tsr", roots / f"{d3}.tsr")
    c.add(
        "attack-stamp-untrusted-tsa-ca",
        "the stamps checked against another TSA's CA",
        "real/records/d1-sealed-calendar.json",
        "--roots",
        REAL,
        "--tsa-ca",
        f"{SAMPLE}/tsa-ca.pem",
    )
    roots = c.folder(
        "attack-stamp-tampered",
        "one bit of the stamp's last byte (its signature)",
        d1,
        "--tsa-ca",
        TSA,
        record=c.records["d1-sealed-calendar"],
    )
    der = bytearray((roots / f"{d1}.tsr").read_bytes())
    der[-1] ^= 1
    (roots / f"{d1}.tsr").write_bytes(bytes(der))
    listing = json.loads((roots / f"{d1}.timestamps.json").read_bytes())
    listing["timestamps"][0]["token"] = base64.b64encode(der).decode("ascii")
    (roots / f"{d1}.timestamps.json").write_text(json.dumps(listing))
    roots = c.folder(
        "attack-checkpoint-short-of-quorum",
        "the checkpoint keeps one cosignature of the two the policy needs",
        d3,
        "--policy",
        POLICY,
    )
    proof = (roots / f"{d3}.tlog-proof").read_text(encoding="utf-8").splitlines(keepends=True)
    drop = ("— witness.example/corpus-2", "— witness.example/corpus-3")
    (roots / f"{d3}.tlog-proof").write_text(
        "".join(ln for ln in proof if not ln.startswith(drop)), encoding="utf-8"
    )
    roots = c.folder(
        "attack-sealed-head-in-unsealed-place",
        "the sealed head filed as the unsealed head the anchor names",
        f"{d3}/3",
        record=signed(unsealed_form(c)),
    )
    shutil.copyfile(real / f"{d3}.json", roots / d3 / "3.json")
    roots = c.folder(
        "attack-checkpoint-signature-flipped",
        "one bit of the log's signature on the checkpoint flipped",
    )
    _flip_signature(roots / f"{d3}.tlog-proof", "resolver.example/history")
    roots = c.folder(
        "attack-cosignature-flipped",
        "one bit of a witness's cosignature flipped",
        d3,
        "--policy",
        POLICY,
    )
    _flip_signature(roots / f"{d3}.tlog-proof", "witness.example/corpus-1-TEST-ONLY")
    c.add(
        "attack-cosignature-after-at",
        "--at over 60 s before the witnesses cosigned the checkpoint",
        "real/records/d4-older-head-chat.json",
        "--roots",
        REAL,
        "--policy",
        POLICY,
        at=int(at(DAYS[3], 13, 31)),
    )
    roots = c.folder("attack-tlog-proof-other-leaf", "day 1's tlog-proof filed as day 3's")
    shutil.copyfile(real / f"{d1}.tlog-proof", roots / f"{d3}.tlog-proof")
    roots = c.folder("attack-tlog-proof-wrong-index", "the tlog-proof's index one larger")
    lines = (roots / f"{d3}.tlog-proof").read_text(encoding="utf-8").split("\n")
    lines[2] = f"index {int(lines[2].removeprefix('index ')) + 1}"
    (roots / f"{d3}.tlog-proof").write_text("\n".join(lines), encoding="utf-8")
    c.folder(
        "attack-missing-tlog-proof-with-policy",
        "no tlog-proof, but --policy is given",
        d3,
        "--policy",
        POLICY,
        proof=False,
    )
    forged = {**c.claims("d1-sealed-calendar"), "iat": revoked_at + 60, "exp": revoked_at + 86460}
    c.folder(
        "attack-revoked-key",
        "a token the revoked key signed after its revocation",
        d1,
        src=revoked,
        record=signed(forged),
        at=revoked_at + 60,
    )
    policy = (c.out / POLICY).read_text(encoding="ascii").splitlines()
    witness = Cosigner("witness.example/unknown-TEST-ONLY", stranger()).verifier.vkey()
    other_origin = f"log {log_vkey('https://other.example', test_signing_key())}"
    for name, about, lines in (
        (
            "attack-policy-unknown-witness",
            "the policy's quorum is a witness that never cosigned",
            [*policy[:-1], f"witness w4 {witness}", "quorum w4"],
        ),
        (
            "attack-wrong-origin",
            "the policy names the log's key under another origin",
            [other_origin, *policy[1:]],
        ),
    ):
        path = c.write(name, "policy.txt", "\n".join(lines) + "\n")
        c.add(name, about, "real/records/d3-sealed-search.json", "--roots", REAL, "--policy", path)


def _boundary_cases(c: Corpus) -> None:
    """The time rules at their edges: the 300 s skew on both sides of a token's lifetime and
    the 60 s a cosignature may follow --at, one second inside (passes) and outside (fails)."""
    cal = c.claims("d1-sealed-calendar")
    rec, chat = "real/records/d1-sealed-calendar.json", "real/records/d4-older-head-chat.json"
    for name, about, at_time in (
        ("lifetime-exp-plus-300", "--at 300 s after exp", cal["exp"] + 300),
        ("attack-lifetime-exp-plus-301", "--at 301 s after exp", cal["exp"] + 301),
        ("lifetime-iat-minus-300", "--at 300 s before iat", cal["iat"] - 300),
        ("attack-lifetime-iat-minus-301", "--at 301 s before iat", cal["iat"] - 301),
    ):
        c.add(name, about, rec, "--roots", REAL, at=at_time)
    for name, about, at_time in (
        ("cosignature-at-plus-60", "the cosignatures 60 s after --at", COSIGNED - 60),
        ("attack-cosignature-at-plus-61", "the cosignatures 61 s after --at", COSIGNED - 61),
    ):
        c.add(name, about, chat, "--roots", REAL, "--policy", POLICY, at=at_time)
    policy = (c.out / POLICY).read_text(encoding="ascii").splitlines()
    none = c.write(
        "policy-quorum-none", "policy.txt", "\n".join([*policy[:-1], "quorum none"]) + "\n"
    )
    c.add(
        "policy-quorum-none",
        "a policy whose quorum is none",
        rec,
        "--roots",
        REAL,
        "--policy",
        none,
    )
    roots = c.folder("attack-tlog-proof-crlf", "the tlog-proof's lines end in CRLF")
    proof = roots / f"{DAYS[2]}.tlog-proof"
    proof.write_bytes(proof.read_bytes().replace(b"\n", b"\r\n"))


def folder_cases(c: Corpus, revoked: Path, revoked_at: int) -> None:
    _boundary_cases(c)
    _folder_attacks(c, revoked, revoked_at)
