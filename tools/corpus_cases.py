"""The shared verifier corpus's cases (tools/make_record_corpus.py writes them): what they share
(the times, paths and TEST keys, `Corpus`, which writes case files and collects the cases, and
re-signing), the real log's and the sample's cases, and the exit-2 ones. The mutations are in
corpus_tokens.py (of a record token) and corpus_folders.py (of the files beside it)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any, NamedTuple

from capability_anchor.encoding import b64url_decode, b64url_encode, utc_second
from capability_anchor.keys import SigningKey
from capability_anchor.strictjson import canonical
from make_sample import ISS, at, test_signing_key, write_record

DAYS = ("2026-11-20", "2026-11-21", "2026-11-22", "2026-11-23")
AT = int(at(DAYS[3], 15, 30))  # when every real case is verified (records issued at 13:30, 15:00)
# When the witnesses cosigned the newest checkpoint (make_record_corpus: 5 s after it).
COSIGNED = int(at(DAYS[3], 14, 5)) + 5
SAMPLE = "../../../roots"
SAMPLE_AT = 1793797200  # 2026-11-04T13:00:00Z, when roots/records/ were issued
REAL = "real/roots"
POLICY = f"{REAL}/policy.txt"
TSA = f"{REAL}/tsa-ca.pem"
RECORD_TYP = "capability-resolver+jws"
ED25519_L = 2**252 + 27742317777372353535851937790883648493  # the group order (RFC 8032)
# TEST-ONLY: a key no case trusts (its seed is SHA-256 of this public text).
STRANGER_TEXT = b"capability-anchor record corpus stranger key - NOT SECRET"


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


class Case(NamedTuple):
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
        "expires": utc_second(claims["exp"]),
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
        c.write("anchor-unsealed-head-same-size", "record.json", signed(unsealed_form(c))),
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


def unsealed_form(c: Corpus) -> dict[str, Any]:
    """Day 3's record, its anchor url `/roots/<day>/<tree_size>`: the unsealed head of the
    sealed head's size (same root)."""
    search = c.claims("d3-sealed-search")
    url = f"{search['anchor']['url']}/{search['proof']['tree_size']}"
    return {**search, "anchor": {**search["anchor"], "url": url}}


def stranger(tag: bytes = b"") -> SigningKey:
    """A TEST key no case trusts (its seed is public: SHA-256 of STRANGER_TEXT + `tag`)."""
    return SigningKey.from_seed(sha256(STRANGER_TEXT + tag))


def usage_cases(c: Corpus) -> None:
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

Made by `tools/make_record_corpus.py` (its cases: `tools/corpus_cases.py`, `corpus_tokens.py`,
`corpus_folders.py`). Every key here is a TEST key whose seed is public; a re-signed token is
signed by the log's TEST key, so that only the rule its name says breaks. A rebuild writes the
same bytes: stamps hold a TSA time and a random nonce, so it stores the published stamps
again; `--restamp` makes new ones and so new bytes. `tools/make_record_corpus.py --check`
reruns Python on every case and exits 1 naming any case whose verdict (exit code or a check's
status) differs from the stored one;
`tests/integration/test_record_corpus.py` does the same in the tests, and
`tests/js/parity.test.mjs` holds the JavaScript verifier to the stored verdicts. A verifier
may answer `timestamp` SKIP where Python says PASS or FAIL (SPEC §14.4); where `timestamp` is
Python's only FAIL, such a verifier then has no FAIL and exits 0 where Python exits 1. The
JavaScript verifier checks a stamp's imprint only, so it does that on
`attack-stamp-untrusted-tsa-ca` and `attack-stamp-tampered` (and FAILs
`attack-stamp-other-day`, whose imprint is another head's).
"""
