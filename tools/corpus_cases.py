"""The cases of the shared verifier corpus (tools/make_record_corpus.py writes them): the real
log's records, the shipped sample, and one folder per mutation under cases/<name>/. A mutated
token is signed again with the log's TEST key (trusted by real/roots/keys.json), so that it
breaks one rule only; tests/integration/test_record_corpus.py names the check each `attack-…`
case must fail."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capability_anchor import head as heads
from capability_anchor.encoding import b64url_decode, b64url_encode
from capability_anchor.keys import KeySet, SigningKey
from capability_anchor.keys.trust import rfc3339
from capability_anchor.log.policies import log_vkey
from capability_anchor.note import Cosigner
from capability_anchor.strictjson import canonical
from make_sample import ISS, at, test_signing_key, write_record

DAYS = ("2026-11-20", "2026-11-21", "2026-11-22", "2026-11-23")
AT = int(at(DAYS[3], 15, 30))  # when every real case is verified (records issued at 13:30, 15:00)
SAMPLE = "../../../roots"
SAMPLE_AT = 1793797200  # 2026-11-04T13:00:00Z, when roots/records/ were issued
REAL = "real/roots"
POLICY = f"{REAL}/policy.txt"
TSA = f"{REAL}/tsa-ca.pem"
RECORD_TYP = "capability-resolver+jws"
# TEST-ONLY: a key no case trusts (its seed is SHA-256 of this public text).
STRANGER_TEXT = b"capability-anchor record corpus stranger key - NOT SECRET"


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


@dataclass(frozen=True)
class Case:
    name: str
    about: str
    args: list[str]


def claims_of(record: dict[str, Any]) -> dict[str, Any]:
    """A record's signed claims (its token's payload)."""
    found: dict[str, Any] = json.loads(b64url_decode(record["jws"].split(".")[1]))
    return found


def token(claims: dict[str, Any] | bytes, key: SigningKey, **header: str) -> str:
    """A compact JWS of `claims` (or of these payload bytes) signed by `key`; `header`
    overrides or adds to alg, kid and typ."""
    head = {"alg": "EdDSA", "kid": key.kid, "typ": RECORD_TYP, **header}
    payload = claims if isinstance(claims, bytes) else canonical(claims)
    signing_input = b64url_encode(canonical(head)) + "." + b64url_encode(payload)
    return signing_input + "." + b64url_encode(key.sign(signing_input.encode("ascii")))


def signed(claims: dict[str, Any], key: SigningKey | None = None, **header: str) -> dict[str, Any]:
    """A record file: `claims` beside their token (and `expires`, as /record serves it)."""
    return {
        **claims,
        "expires": rfc3339(claims["exp"]),
        "jws": token(claims, key or test_signing_key(), **header),
    }


class Corpus:
    """Writes case files under `out` and collects the cases."""

    def __init__(self, out: Path, records: dict[str, dict[str, Any]]) -> None:
        self.out, self.records, self.cases = out, records, []

    def claims(self, name: str) -> dict[str, Any]:
        return claims_of(self.records[name])

    def write(self, case: str, name: str, data: bytes | str | dict[str, Any]) -> str:
        """Write cases/<case>/<name>; its path relative to the corpus."""
        path = self.out / "cases" / case / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, dict):
            write_record(path, data)
        else:
            path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
        return path.relative_to(self.out).as_posix()

    def roots(self, case: str, stem: str, src: Path | None, *, proof: bool, stamps: bool) -> Path:
        """cases/<case>/roots/: the files verify-proof reads for head `stem` (`<day>` or
        `<day>/<size>`): keys, key records, the head, its tlog-proof and stamps (read only
        with --tsa-ca)."""
        src = src or self.out / REAL
        dst = self.out / "cases" / case / "roots"
        day = stem.split("/")[0]
        names = ["keys.json", "key-records.json", f"{stem}.json"]
        names += [f"{stem}.tlog-proof"] if proof else []
        names += [f"{day}.timestamps.json", f"{day}.tsr"] if stamps else []
        for name in names:
            if (src / name).exists():
                (dst / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src / name, dst / name)
        return dst

    def add(self, name: str, about: str, record: str, *args: str, at: int = AT) -> None:
        self.cases.append(Case(name, about, [record, *args, "--at", str(at)]))

    def folder(
        self,
        name: str,
        about: str,
        stem: str = DAYS[2],
        *args: str,
        src: Path | None = None,
        record: dict[str, Any] | None = None,
        proof: bool = True,
        at: int = AT,
    ) -> Path:
        """A case with its own roots (for head `stem`, from `src`) and record (default day 3's)."""
        roots = self.roots(name, stem, src, proof=proof, stamps="--tsa-ca" in args)
        path = self.write(name, "record.json", record or self.records["d3-sealed-search"])
        self.add(name, about, path, "--roots", roots.relative_to(self.out).as_posix(), *args, at=at)
        return roots


# name, about, record (real/records/<name>.json), and options beside --roots real/roots
_FULL = ("--policy", POLICY, "--tsa-ca", TSA)
_POLICY = ("--policy", POLICY)
_KEYS = ("--keys", f"{REAL}/keys.json")
_REAL = (
    (
        "real-d1-sealed-calendar-full",
        "a sealed day, policy and TSA CA",
        "d1-sealed-calendar",
        _FULL,
    ),
    ("real-d1-sealed-maps", "a sealed day's record (its second batch)", "d1-sealed-maps", ()),
    ("real-d3-sealed-search", "a sealed day after an empty day", "d3-sealed-search", ()),
    ("real-d3-sealed-search-full", "the same, policy and TSA CA", "d3-sealed-search", _FULL),
    ("real-d4-unsealed-weather-full", "today's newest unsealed head", "d4-unsealed-weather", _FULL),
    ("real-d4-older-head-chat-policy", "an older unsealed head", "d4-older-head-chat", _POLICY),
    ("real-keys-option", "trust from --keys beside --roots", "d3-sealed-search", _KEYS),
)


def real_cases(c: Corpus, revoked: Path) -> None:
    for name, about, record, options in _REAL:
        c.add(name, about, f"real/records/{record}.json", "--roots", REAL, *options)
    unsigned = {k: v for k, v in c.claims("d1-sealed-calendar").items() if k not in ("iat", "exp")}
    c.add(
        "unsigned-record",
        "a record without jws: both token checks SKIP",
        c.write("unsigned-record", "record.json", unsigned),
        "--roots",
        REAL,
        "--policy",
        POLICY,
    )
    search = c.records["d3-sealed-search"]
    c.add(
        "bare-jws-record",
        "RECORD is the compact JWS alone",
        c.write("bare-jws-record", "record.jws", search["jws"]),
        "--roots",
        REAL,
    )
    c.add(
        "anchor-unsealed-head-same-size",
        "re-signed: the anchor names the day's unsealed head of the sealed one's size",
        c.write("anchor-unsealed-head-same-size", "record.json", signed(_unsealed_form(c))),
        "--roots",
        REAL,
        "--policy",
        POLICY,
    )
    roots = c.folder("head-jws-only", "the head file is a bare compact JWS, not a head document")
    (roots / f"{DAYS[2]}.json").write_bytes((c.out / REAL / f"{DAYS[2]}.jws").read_bytes())
    c.folder("no-tlog-proof", "no tlog-proof and no --policy: history SKIPs", proof=False)
    c.folder(
        "revoked-key-before-revocation",
        "a key revoked after it signed this record and head",
        DAYS[0],
        src=revoked,
        record=c.records["d1-sealed-calendar"],
    )


def sample_cases(c: Corpus) -> None:
    for stem in ("2026-11-01-calendar", "2026-11-03-search", "2026-11-04-tickets"):
        record = f"{SAMPLE}/records/{stem}.json"
        c.add(
            f"sample-{stem}", "the shipped sample's record", record, "--roots", SAMPLE, at=SAMPLE_AT
        )
        full = ("--policy", f"{SAMPLE}/policy.txt", "--tsa-ca", f"{SAMPLE}/tsa-ca.pem")
        c.add(
            f"sample-{stem}-full",
            "the shipped sample's record, its policy and TSA CA",
            record,
            "--roots",
            SAMPLE,
            *full,
            at=SAMPLE_AT,
        )


def _record_attacks(c: Corpus) -> None:
    """Mutations of the record token, each signed again by the log's (trusted) TEST key."""
    cal, search, chat = (
        c.claims(n) for n in ("d1-sealed-calendar", "d3-sealed-search", "d4-older-head-chat")
    )
    weather = c.claims("d4-unsealed-weather")
    size = search["proof"]["tree_size"]
    path = list(cal["proof"]["path"])
    path[0] = path[0][:-1] + format(int(path[0][-1], 16) ^ 1, "x")
    variants: list[tuple[str, str, dict[str, Any]]] = [
        (
            "attack-flipped-proof-hash",
            "one bit of the proof's first path hash flipped",
            signed({**cal, "proof": {**cal["proof"], "path": path}}),
        ),
        (
            "attack-wrong-size",
            "the proof's tree_size one larger: the path still reaches the root (RFC 9162)",
            signed({**search, "proof": {**search["proof"], "tree_size": size + 1}}),
        ),
        (
            "attack-wrong-size-smaller",
            "the proof's tree_size one smaller",
            signed({**search, "proof": {**search["proof"], "tree_size": size - 1}}),
        ),
        (
            "attack-swapped-anchor-day",
            "another day's anchor (day 1's) on day 3's record",
            signed({**search, "anchor": cal["anchor"]}),
        ),
        (
            "attack-swapped-anchor-head",
            "the same day's newer head as the anchor",
            signed({**chat, "anchor": weather["anchor"]}),
        ),
        (
            "attack-expired-token",
            "exp an hour before --at (beyond the 300 s skew)",
            signed({**cal, "iat": AT - 172800 - 3600, "exp": AT - 3600}),
        ),
        (
            "attack-future-token",
            "iat 600 s after --at (beyond the 300 s skew)",
            signed({**cal, "iat": AT + 600, "exp": AT + 600 + 86400}),
        ),
        (
            "attack-lifetime-over-48h",
            "exp - iat one second over 48 h",
            signed({**cal, "iat": AT - 60, "exp": AT - 60 + 172801}),
        ),
        (
            "attack-wrong-typ",
            "typ capability-anchor+jws (a head's) on a record token",
            signed(cal, typ="capability-anchor+jws"),
        ),
        (
            "attack-wrong-kid",
            "kid names a key the trust does not hold (signed by the trusted one)",
            signed(cal, kid=_stranger().kid),
        ),
        ("attack-wrong-alg", "alg ES256 on an Ed25519 signature", signed(cal, alg="ES256")),
        (
            "attack-anchor-day-not-url-day",
            "the anchor's day says day 1; its url and root are day 3's",
            signed({**search, "anchor": {**search["anchor"], "day": DAYS[0]}}),
        ),
        (
            "attack-anchor-url-other-head",
            "the anchor's url names the day's newer head",
            signed({**chat, "anchor": {**chat["anchor"], "url": weather["anchor"]["url"]}}),
        ),
    ]
    for name, about, record in variants:
        c.add(name, about, c.write(name, "record.json", record), "--roots", REAL)
    # RECORD as its token alone: the plain members would double the file.
    big = signed({**cal, "notes": "x" * 16500})["jws"]
    c.add(
        "attack-oversized-leaf",
        "a leaf member that makes the leaf over 16384 bytes",
        c.write("attack-oversized-leaf", "record.jws", big),
        "--roots",
        REAL,
    )
    none = dict(c.records["d1-sealed-calendar"])
    head = b64url_encode(
        canonical({"alg": "none", "kid": test_signing_key().kid, "typ": RECORD_TYP})
    )
    none["jws"] = head + "." + none["jws"].split(".")[1] + "."
    c.add(
        "attack-alg-none",
        "alg none and no signature",
        c.write("attack-alg-none", "record.json", none),
        "--roots",
        REAL,
    )
    edited = {**c.records["d1-sealed-calendar"], "status": "down"}
    c.add(
        "attack-edited-plain-member",
        "status edited beside an untouched jws",
        c.write("attack-edited-plain-member", "record.json", edited),
        "--roots",
        REAL,
    )
    keys = c.write("attack-untrusted-keys", "keys.json", KeySet.of(_stranger().public).to_json())
    c.add(
        "attack-untrusted-keys",
        "--keys holds only a key that signed nothing here",
        "real/records/d1-sealed-calendar.json",
        "--roots",
        REAL,
        "--keys",
        keys,
    )


def _unsealed_form(c: Corpus) -> dict[str, Any]:
    """Day 3's record, its anchor url `/roots/<day>/<tree_size>`: the unsealed head of the
    sealed head's size (same root)."""
    search = c.claims("d3-sealed-search")
    url = f"{search['anchor']['url']}/{search['proof']['tree_size']}"
    return {**search, "anchor": {**search["anchor"], "url": url}}


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


def _stranger(tag: bytes = b"") -> SigningKey:
    """A TEST key no case trusts (its seed is public: SHA-256 of STRANGER_TEXT + `tag`)."""
    return SigningKey.from_seed(sha256(STRANGER_TEXT + tag))


def _folder_attacks(c: Corpus, revoked: Path, revoked_at: int) -> None:
    """Mutations of the head, stamps, tlog-proof, keys or policy (each in its own folder)."""
    d1, d3 = DAYS[0], DAYS[2]
    real = c.out / REAL
    roots = c.folder("attack-head-unknown-key", "the head signed again by an unknown key")
    h = heads.parse_document((roots / f"{d3}.json").read_bytes())
    (roots / f"{d3}.json").write_bytes(heads.sign(h.claims, _stranger(b" (heads)")).document())
    roots = c.folder("attack-head-edited-claims", "the head document's plain tree_size edited")
    doc = json.loads((roots / f"{d3}.json").read_bytes())
    (roots / f"{d3}.json").write_bytes(canonical({**doc, "tree_size": doc["tree_size"] + 1}))
    roots = c.folder(
        "attack-stamp-other-day", "day 1's stamp filed as day 3's", d3, "--tsa-ca", TSA
    )
    listing = json.loads((real / f"{d1}.timestamps.json").read_bytes())
    (roots / f"{d3}.timestamps.json").write_text(json.dumps({**listing, "day": d3}))
    shutil.copyfile(real / f"{d1}.tsr", roots / f"{d3}.tsr")
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
        record=signed(_unsealed_form(c)),
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
    witness = Cosigner("witness.example/unknown-TEST-ONLY", _stranger()).verifier.vkey()
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


def _usage_cases(c: Corpus) -> None:
    """Exit 2: nothing is verified, no checks are printed."""
    rec = "real/records/d1-sealed-calendar.json"
    c.add("usage-no-trust", "neither --roots nor --keys: no trust", rec)
    c.add(
        "io-missing-record",
        "RECORD names no file",
        "cases/io-missing-record/none.json",
        "--roots",
        REAL,
    )
    c.add(
        "io-malformed-record",
        "RECORD is not JSON",
        c.write("io-malformed-record", "record.json", '{"anchor": {\n'),
        "--roots",
        REAL,
    )
    c.add(
        "io-no-anchor-proof",
        "RECORD is an object without anchor and proof",
        c.write("io-no-anchor-proof", "record.json", {"v": "0.2", "iss": ISS}),
        "--roots",
        REAL,
    )
    c.add(
        "io-malformed-keys",
        "--keys is not JSON",
        rec,
        "--roots",
        REAL,
        "--keys",
        c.write("io-malformed-keys", "keys.json", "not json\n"),
    )


def _json_attacks(c: Corpus) -> None:
    """SPEC §2's JSON rules and the token's header and plain members, each broken once."""
    record, cal = c.records["d1-sealed-calendar"], c.claims("d1-sealed-calendar")
    body = canonical(cal)[:-1]  # the claims' JCS without its closing brace
    deep: dict[str, Any] = {}
    for _ in range(32):  # the record is depth 1: 32 more levels make 33
        deep = {"a": deep}
    tokens = (
        ("attack-number-too-large", "a claim 1e20 (over 2^53 - 1)", body + b',"zz":1e20}'),
        ("attack-duplicate-member", "the claim status twice", body + b',"status":"down"}'),
        ("attack-lone-surrogate", "a string with a lone surrogate", body + b',"zz":"\\ud800"}'),
        ("attack-too-deep", "claims nested 33 deep", canonical({**cal, "zz": deep})),
    )
    for name, about, payload in tokens:
        signed_token = token(payload, test_signing_key())
        c.add(name, about, c.write(name, "record.jws", signed_token), "--roots", REAL)
    for name, about, changed in (
        (
            "attack-extra-header-member",
            "a jku member in the token's header",
            signed(cal, jku="https://attacker.example/keys"),
        ),
        (
            "attack-unsigned-plain-member",
            "a member beside jws that is not signed",
            {**record, "verified": True},
        ),
        (
            "attack-edited-expires",
            "expires beside jws a day later than exp",
            {**record, "expires": rfc3339(cal["exp"] + 86400)},
        ),
    ):
        c.add(name, about, c.write(name, "record.json", changed), "--roots", REAL)


def all_cases(
    out: Path, records: dict[str, dict[str, Any]], revoked: Path, revoked_at: int
) -> list[Case]:
    c = Corpus(out, records)
    real_cases(c, revoked)
    sample_cases(c)
    _record_attacks(c)
    _json_attacks(c)
    _folder_attacks(c, revoked, revoked_at)
    _usage_cases(c)
    return c.cases


README = """\
# The shared verifier corpus (SPEC §14.4)

Both verifiers must give the same verdict, check by check, on every case here: the Python
`verify-proof` and the JavaScript one in `src/verify-js/`.

- `cases.json`: each case is a `verify-proof` argument list (`args`, paths relative to this
  folder) and what the Python `verify-proof --json` gave on it (`python`: exit code and the nine
  checks, none on exit 2). Format: `{v, about, cases: [{name, about, args, python}]}`.
- `real/roots/`: a real log made with the library (four days, the second empty; sealed and
  unsealed heads; a history cosigned by three TEST witnesses; `policy.txt`, 2 of 3; RFC 3161
  stamps by a test TSA whose CA is `tsa-ca.pem`), exported without tiles. `real/records/`: the
  records its `/record` issued.
- `../../../roots/`: the shipped sample, used as it is.
- `cases/<name>/`: one folder per mutation or special input: its record and, when the head,
  stamps, tlog-proof or keys change, its own small roots folder (only the files `verify-proof`
  reads). A case named `attack-…` breaks one rule and must FAIL; the check each must fail is
  listed in `tests/integration/test_record_corpus.py`. `usage-…` and `io-…` cases exit 2.

Made by `tools/make_record_corpus.py` (the cases: `tools/corpus_cases.py`). Every key here is a
TEST key whose seed is public; a re-signed token is signed by the log's TEST key, so that only
the rule its name says breaks. A rebuild writes the same bytes: stamps hold a TSA time and a
random nonce, so it stores the published stamps again; `--restamp` makes new ones and so new
bytes. `tools/make_record_corpus.py --check` reruns Python on every case and exits 1 naming any
case whose verdict (exit code or a check's status) differs from the stored one;
`tests/integration/test_record_corpus.py` does the same in the tests, and
`tests/js/parity.test.mjs` holds the JavaScript verifier to the stored verdicts. A verifier
that answers `timestamp` SKIP (SPEC §14.4 allows it) exits 0 on `attack-stamp-other-day`,
whose only FAIL in Python is `timestamp`.
"""
