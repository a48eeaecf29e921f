"""Offline verification of a resolver-2 record's anchor and proof (SPEC §9).

`verify(...)` runs the seven checks of SPEC §9, always all of them, in the order and with
the names and descriptions of `verify_checks.CHECKS` (the one list; `--help` prints it).
`record_signature` also compares a record file's plain members with its signed claims
(`record_members`): a file whose visible members differ from what the token signs fails.

A failed check is a result (`Result.ok` is False), never an exception. Conditions that
stop verification before it can start (no trusted keys, unreadable files, unreachable URLs,
malformed JSON in the record or a key set) raise `InputError` (a UsageError: exit 2).

Trust comes only from the `keys` argument: neither the record nor the head can supply a key.
Only the standard library and the pure kernel are imported; httpx is imported inside
`fetch` and only when a URL is given.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import head as heads
from . import jws, record_members, strictjson, trust
from .encoding import EncodingError, hash_from_hex, parse_day
from .errors import (
    CapabilityAnchorError,
    ClaimsError,
    InvalidKey,
    InvalidRecord,
    MalformedJSON,
    UsageError,
    VerificationError,
)
from .keys import KeySet
from .leaf import leaf_hash
from .merkle import calculate_inclusion_root, verify_inclusion
from .verify_checks import CHECK_NAMES, CHECKS

__all__ = [
    "CHECKS",
    "CHECK_NAMES",
    "FETCH_LIMIT",
    "FETCH_TIMEOUT",
    "InputError",
    "Result",
    "fetch",
    "follow_key_records",
    "load_keys",
    "parse_at",
    "read_source",
    "verify",
]

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"
FETCH_TIMEOUT = 10.0
FETCH_LIMIT = 1 << 20  # 1 MiB

_ANCHOR_URL_RE = re.compile(r"/roots/([0-9]{4}-[0-9]{2}-[0-9]{2})(?:/([0-9]+))?\Z")
_PROOF_TYPE = "rfc9162-sha256"


class InputError(UsageError):
    """Verification could not start: missing trust, unreadable input, unreachable URL."""


@dataclass
class Result:
    """The seven checks, in order, as `(name, result, detail)`; `explain` narrates the
    inclusion check step by step; `notes` are what a human reader must also be told (not
    part of the JSON form, whose check details say the same)."""

    checks: list[tuple[str, str, str]] = field(default_factory=list)
    explain: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(result != FAIL for _, result, _ in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": [{"name": n, "result": r, "detail": d} for n, r, d in self.checks],
        }


# --- inputs ----------------------------------------------------------------------------------


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def fetch(url: str) -> bytes:
    """GET `url` (10 s timeout, 1 MiB cap); any failure is an InputError (exit 2)."""
    import httpx  # lazily: the offline path never loads an HTTP client

    try:
        with httpx.stream("GET", url, timeout=FETCH_TIMEOUT, follow_redirects=True) as response:
            if response.status_code != 200:
                raise InputError(f"GET {url}: HTTP {response.status_code}")
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > FETCH_LIMIT:
                    raise InputError(f"GET {url}: the reply is larger than {FETCH_LIMIT} bytes")
            return bytes(body)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise InputError(f"GET {url}: {exc}") from None


def read_source(source: str) -> bytes:
    """The bytes of a file path or a URL; unreadable or unreachable is an InputError."""
    if is_url(source):
        return fetch(source)
    try:
        return Path(source).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {source}: {exc.strerror or exc}") from None


def load_keys(data: bytes, where: str) -> KeySet:
    """A JWK set; malformed JSON or keys are an InputError (exit 2)."""
    try:
        keys = KeySet.from_json(data)
    except (InvalidKey, MalformedJSON) as exc:
        raise InputError(f"{where}: {exc}") from None
    if not len(keys):
        raise InputError(f"{where}: the JWK set holds no keys")
    return keys


def follow_key_records(keys: KeySet, roots: Path) -> KeySet:
    """`keys` plus every key the folder's `key-records.json` leads to from them (key
    rotation: an auditor holding the old key trusts the new one because the old one signed
    that record). A record not signed by a key already trusted adds nothing; a file that is
    not a key records document is an InputError (exit 2), as a bad keys.json is."""
    path = roots / trust.KEY_RECORDS_FILE
    if not path.exists():
        return keys
    try:
        iss, tokens = trust.read_key_records(read_source(str(path)))
    except ClaimsError as exc:
        raise InputError(str(exc)) from None
    return trust.closure(keys, tokens, iss=iss).keys


def parse_at(text: str) -> int:
    """`--at`: epoch seconds, or an RFC 3339 date-time with a zone (Z or ±hh:mm)."""
    value = text.strip()
    if re.fullmatch(r"-?[0-9]+", value):
        return int(value)
    if not re.fullmatch(
        r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
        r"([Zz]|[+-][0-9]{2}:[0-9]{2})",
        value,
    ):
        raise UsageError(f"--at must be RFC 3339 (with a zone) or epoch seconds, got {text!r}")
    try:
        when = dt.datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--at {text!r} is not a real date-time") from None
    return int(when.timestamp())


def _token_text(data: bytes) -> str:
    """A compact JWS read from a file: trailing line ends are tolerated, nothing else."""
    return data.rstrip(b"\r\n").decode("ascii", errors="replace")


@dataclass(frozen=True)
class _Anchor:
    day: str
    root: bytes
    url: str
    url_day: str
    url_size: int | None  # None: the sealed form `/roots/<day>`


@dataclass(frozen=True)
class _Proof:
    leaf_index: int
    tree_size: int
    path: list[bytes]


def _parse_anchor(obj: object) -> _Anchor:
    if not isinstance(obj, dict):
        raise VerificationError("the record's anchor is missing or not a JSON object")
    try:
        day = obj.get("day")
        parse_day(day)
        root = hash_from_hex(obj.get("root"), "anchor root")
    except EncodingError as exc:
        raise VerificationError(f"anchor: {exc}") from None
    url = obj.get("url")
    match = _ANCHOR_URL_RE.search(url) if isinstance(url, str) else None
    if not isinstance(url, str) or match is None:
        raise VerificationError(f"anchor url {url!r} is not <base>/roots/<day>[/<tree_size>]")
    size = match.group(2)
    return _Anchor(str(day), root, url, match.group(1), None if size is None else int(size))


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise VerificationError(f"proof {what} must be a non-negative integer, got {value!r}")
    return value


def _parse_proof(obj: object) -> _Proof:
    if not isinstance(obj, dict):
        raise VerificationError("the record's proof is missing or not a JSON object")
    if obj.get("type") != _PROOF_TYPE:
        raise VerificationError(f"proof type is {obj.get('type')!r}, expected {_PROOF_TYPE!r}")
    path = obj.get("path")
    if not isinstance(path, list):
        raise VerificationError("proof path must be an array of hex hashes")
    try:
        hashes = [hash_from_hex(p, f"proof path[{i}]") for i, p in enumerate(path)]
    except EncodingError as exc:
        raise VerificationError(str(exc)) from None
    return _Proof(
        _int(obj.get("leaf_index"), "leaf_index"), _int(obj.get("tree_size"), "tree_size"), hashes
    )


def _explain_inclusion(
    leaf: bytes, index: int, size: int, path: Sequence[bytes], root: bytes
) -> list[str]:
    """The hash steps of RFC 9162 §2.1.3.2 for --explain, traced by the verifier itself."""
    lines = [f"leaf hash = {leaf.hex()} (leaf_index {index}, tree_size {size})"]
    steps: list[tuple[str, bytes, bytes]] = []
    try:
        calculated = calculate_inclusion_root(leaf, index, size, path, steps)
    except VerificationError as exc:
        calculated = None
        problem = str(exc)
    for i, (side, p, r) in enumerate(steps):
        order = f"path[{i}] {p.hex()} || r" if side == "left" else f"r || path[{i}] {p.hex()}"
        lines.append(f"step {i}: parent = H(0x01 || {order}) = {r.hex()}")
    if calculated is None:
        lines.append(f"no root: {problem}")
    else:
        lines.append(f"calculated root = {calculated.hex()}")
    lines.append(f"expected root   = {root.hex()} (the anchor's)")
    return lines


def _locate_head(anchor: _Anchor | None, head: str | None, roots: Path | None) -> tuple[bytes, str]:
    """5a: the head's bytes and where they came from (head, roots, else anchor.url)."""
    if head is not None:
        return read_source(head), head
    if anchor is None:
        raise VerificationError("no valid anchor to locate the head by (give --head)")
    if roots is not None:
        name = (
            f"{anchor.url_day}.json"
            if anchor.url_size is None
            else (f"{anchor.url_day}/{anchor.url_size}.json")
        )
        return read_source(str(roots / name)), str(roots / name)
    return fetch(anchor.url), anchor.url


def _check_head(data: bytes, keys: KeySet) -> heads.Head:
    """5b: a head document (JSON object with `jws`) or a bare compact JWS; only the claims
    inside the verified JWS are used, and a document's own claims must equal them."""
    text = data.strip()
    if text.startswith(b"{"):
        document = heads.parse_document(text)
        verified = heads.verify_head(document.jws, keys)
        if verified.claims != document.claims:
            raise VerificationError("the head document's claims differ from its signed claims")
        return verified
    return heads.verify_head(_token_text(data), keys)


def _stamp_tokens(day: str, anchor: _Anchor | None, roots: Path | None) -> tuple[list[bytes], str]:
    """7a: the DER replies stored for `day`, and where they came from: `<day>.timestamps.json`
    (else `<day>.tsr`) in --roots, else `<anchor.url>/timestamps`."""
    import base64

    if roots is not None:
        listing = roots / f"{day}.timestamps.json"
        if not listing.exists():
            tsr = roots / f"{day}.tsr"
            return ([read_source(str(tsr))] if tsr.exists() else []), str(tsr)
        where, data = str(listing), read_source(str(listing))
    elif anchor is not None:
        where = f"{anchor.url}/timestamps"
        data = fetch(where)
    else:
        return [], "nowhere (no anchor and no --roots)"
    try:
        doc = strictjson.loads(data)
        if doc.get("day") != day:
            raise ValueError(f"it lists the stamps of {doc.get('day')!r}")
        return [base64.b64decode(t["token"], validate=True) for t in doc["timestamps"]], where
    except (MalformedJSON, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise VerificationError(f"{where} is not a timestamps document: {exc}") from None


def _check_stamps(
    head: heads.Head, anchor: _Anchor | None, roots: Path | None, cas: list[Any]
) -> tuple[str, str, str]:
    """7b: PASS when one stored stamp verifies for this head's JWS and chains to a --tsa-ca
    at its genTime (the nonce, a freshness check of the stamping exchange, is not known)."""
    from .errors import TimestampError
    from .timestamp import digest_of, verify_reply

    try:
        tokens, where = _stamp_tokens(head.day, anchor, roots)
    except VerificationError as exc:
        return ("timestamp", FAIL, str(exc))
    if not tokens:
        return ("timestamp", SKIP, f"no stamp of {head.day} in {where}")
    digest = digest_of(head.jws.encode("ascii"))
    reasons: list[str] = []
    for n, token in enumerate(tokens):
        try:
            ok = verify_reply(token, digest=digest, cas=cas, nonce=None)
        except TimestampError as exc:
            reasons.append(f"stamp {n}: {exc}")
            continue
        return (
            "timestamp",
            PASS,
            f"stamp {n} of {len(tokens)} from {where}: genTime {ok.gen_time}, signed by "
            f"{ok.tsa}, chains to a --tsa-ca, imprint = SHA-256 of the head's JWS",
        )
    return ("timestamp", FAIL, f"no stamp from {where} verifies: " + "; ".join(reasons))


# --- verification ----------------------------------------------------------------------------


def verify(
    record: bytes,
    *,
    keys: KeySet,
    head: str | None = None,
    roots: Path | None = None,
    iss: str | None = None,
    tsa_ca: Sequence[str] = (),
    at: int | None = None,
) -> Result:
    """Run the seven checks of SPEC §9 over `record` (a record JSON object or a compact
    record JWS, as bytes). The head comes from `head` (a file path or URL), else `roots`
    (an exported folder), else the anchor's URL. Raises InputError (exit 2) only for input
    that cannot be read; every failed check is reported in the Result."""
    now = int(dt.datetime.now(dt.UTC).timestamp()) if at is None else at
    from .timestamp import trusted_cas

    cas = trusted_cas(tsa_ca, error=InputError)  # verify-proof's usage error (exit 2)
    result = Result()
    checks = result.checks

    # 0. Read the record: a JSON object (its `jws`, when present, replaces it) or a token.
    text = record.strip()
    token: str | None
    unsigned: dict[str, Any] | None = None
    plain: dict[str, Any] | None = None  # a record file's members beside its jws
    if not text:
        raise InputError("RECORD is empty")
    # A byte order mark cannot start a compact JWS (ASCII): it is JSON, and malformed.
    if text[:1] in (b"{", b"[", b'"') or text.startswith(b"\xef\xbb\xbf"):
        try:
            obj = strictjson.loads(text)
        except MalformedJSON as exc:
            raise InputError(f"RECORD is not valid JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise InputError("RECORD is not a JSON object")
        if "jws" in obj:
            if not isinstance(obj["jws"], str):
                raise InputError("RECORD's jws member is not a string")
            token, plain = obj["jws"], obj
        else:
            if not isinstance(obj.get("anchor"), dict) or not isinstance(obj.get("proof"), dict):
                raise InputError("RECORD carries no anchor and proof objects")
            token, unsigned = None, obj
    else:
        token = _token_text(record)

    # 1. record_signature: typ capability-resolver+jws, kid from the trusted keys only.
    claims: dict[str, Any] | None = unsigned
    if token is None:
        checks.append(("record_signature", SKIP, _UNSIGNED))
        result.notes.append(_UNSIGNED_NOTE)
    else:
        try:
            claims = jws.verify_claims(token, keys, jws.RECORD_TYP)
            checks.append(_record_signature(claims, plain))
        except VerificationError as exc:
            checks.append(("record_signature", FAIL, f"{type(exc).__name__}: {exc}"))

    # 2. record_lifetime: Capability Resolution §8's three expiry rules at `now`.
    if token is None:
        checks.append(("record_lifetime", SKIP, "the record is unsigned"))
    elif claims is None:
        checks.append(("record_lifetime", SKIP, "the record token did not verify"))
    else:
        try:
            jws.check_record_lifetime(claims, now)
            checks.append(
                (
                    "record_lifetime",
                    PASS,
                    f"iat {claims['iat']}, exp {claims['exp']} valid at {now} "
                    f"(lifetime ≤ {jws.MAX_RECORD_LIFETIME} s, skew {jws.CLOCK_SKEW} s)",
                )
            )
        except (VerificationError, UsageError) as exc:
            checks.append(("record_lifetime", FAIL, f"{type(exc).__name__}: {exc}"))

    # 3. leaf: SHA-256(0x00 || JCS(claims minus the reserved members)).
    leaf: bytes | None = None
    if claims is None:
        checks.append(("leaf", SKIP, "no verified record claims"))
    else:
        try:
            leaf = leaf_hash(claims)
            checks.append(("leaf", PASS, f"leaf hash {leaf.hex()} from the claims (SPEC §2)"))
        except InvalidRecord as exc:
            checks.append(("leaf", FAIL, f"the claims are not a valid record: {exc}"))

    # 4. inclusion: the proof's path from the leaf reaches the anchor's root.
    anchor: _Anchor | None = None
    proof: _Proof | None = None
    anchor_error = proof_error = ""
    if claims is not None:
        try:
            anchor = _parse_anchor(claims.get("anchor"))
        except VerificationError as exc:
            anchor_error = str(exc)
        try:
            proof = _parse_proof(claims.get("proof"))
        except VerificationError as exc:
            proof_error = str(exc)
    if claims is None:
        checks.append(("inclusion", SKIP, "no verified record claims"))
    elif anchor is None or proof is None:
        checks.append(("inclusion", FAIL, anchor_error or proof_error))
    elif leaf is None:
        checks.append(("inclusion", SKIP, "no leaf hash"))
    else:
        result.explain = _explain_inclusion(
            leaf, proof.leaf_index, proof.tree_size, proof.path, anchor.root
        )
        try:
            verify_inclusion(leaf, proof.leaf_index, proof.tree_size, proof.path, anchor.root)
            checks.append(
                (
                    "inclusion",
                    PASS,
                    f"leaf {proof.leaf_index} of tree size {proof.tree_size} with "
                    f"{len(proof.path)} path hashes reaches the anchor root {anchor.root.hex()}",
                )
            )
        except VerificationError as exc:
            checks.append(("inclusion", FAIL, f"{type(exc).__name__}: {exc}"))

    # 5. head_signature: locate the head, verify typ capability-anchor+jws and a trusted kid.
    verified: heads.Head | None = None
    if claims is None and head is None:
        # Without verified claims there is no anchor to trust for locating the head.
        checks.append(("head_signature", SKIP, "no verified anchor to locate the head by"))
        data = None
    else:
        try:
            data, where = _locate_head(anchor, head, roots)
        except VerificationError as exc:
            checks.append(("head_signature", FAIL, f"cannot locate the head: {exc}"))
            data = None
    if data is not None:
        try:
            verified = _check_head(data, keys)
            checks.append(
                (
                    "head_signature",
                    PASS,
                    f"head from {where}: EdDSA signature by a trusted kid, typ {jws.HEAD_TYP}",
                )
            )
        except CapabilityAnchorError as exc:
            checks.append(("head_signature", FAIL, f"head from {where}: {exc}"))

    # 6. head_matches: the verified head is the one the anchor and proof name.
    if verified is None:
        checks.append(("head_matches", SKIP, "no verified head"))
    elif claims is None:
        checks.append(("head_matches", SKIP, "no verified record claims"))
    elif anchor is None or proof is None:
        checks.append(("head_matches", FAIL, anchor_error or proof_error))
    else:
        problems = _head_mismatches(verified, anchor, proof, claims, iss)
        compared = (
            f"day {verified.day}, tree_size {verified.tree_size}, root {verified.root.hex()}, "
            f"sealed {str(verified.sealed).lower()}, iss {verified.claims['iss']}"
        )
        if problems:
            checks.append(("head_matches", FAIL, "; ".join(problems)))
        else:
            checks.append(("head_matches", PASS, f"head and anchor/proof/record agree: {compared}"))

    # 7. timestamp: a stored RFC 3161 stamp of the sealed head chains to a --tsa-ca.
    if not tsa_ca:
        checks.append(("timestamp", SKIP, "no --tsa-ca given"))
    elif verified is None:
        checks.append(("timestamp", SKIP, "no verified head to check stamps of"))
    elif not verified.sealed:
        checks.append(("timestamp", SKIP, "unsealed heads are never stamped"))
    else:
        checks.append(_check_stamps(verified, anchor, roots, cas))

    assert tuple(name for name, _, _ in checks) == CHECK_NAMES
    return result


_UNSIGNED = (
    "the record is unsigned (no jws member): nothing vouches for its members beyond the "
    "inclusion proof, which covers only its leaf members (all but iat, exp, anchor, proof, "
    "expires)"
)
_UNSIGNED_NOTE = (
    "RECORD is unsigned: no resolver signature vouches for any of its members; the checks "
    "above show only that its leaf members are in the log's tree"
)


def _record_signature(claims: dict[str, Any], plain: dict[str, Any] | None) -> tuple[str, str, str]:
    """1: the token verified; a record file's plain members must also equal its claims."""
    signed = f"EdDSA signature by a trusted kid, typ {jws.RECORD_TYP}"
    if plain is None:
        return ("record_signature", PASS, signed)
    different = record_members.differences(plain, claims)
    if different:
        return (
            "record_signature",
            FAIL,
            f"{signed}, but the record's plain members differ from its signed claims: "
            + ", ".join(different),
        )
    return ("record_signature", PASS, f"{signed}; the plain members equal the signed claims")


def _head_mismatches(
    h: heads.Head, anchor: _Anchor, proof: _Proof, claims: dict[str, Any], iss: str | None
) -> list[str]:
    problems: list[str] = []
    if h.day != anchor.day:
        problems.append(f"head day {h.day} != anchor day {anchor.day}")
    if anchor.url_day != anchor.day:
        problems.append(f"anchor url day {anchor.url_day} != anchor day {anchor.day}")
    if h.root != anchor.root:
        problems.append(f"head root {h.root.hex()} != anchor root {anchor.root.hex()}")
    if h.tree_size != proof.tree_size:
        problems.append(f"head tree_size {h.tree_size} != proof tree_size {proof.tree_size}")
    if anchor.url_size is None and not h.sealed:
        problems.append(f"anchor url {anchor.url} names a sealed head; this head is unsealed")
    if anchor.url_size is not None:
        if h.sealed:
            problems.append(f"anchor url {anchor.url} names an unsealed head; this head is sealed")
        if anchor.url_size != h.tree_size:
            problems.append(f"anchor url size {anchor.url_size} != head tree_size {h.tree_size}")
    head_iss = h.claims["iss"]
    if "iss" in claims and claims["iss"] != head_iss:
        problems.append(f"record iss {claims['iss']!r} != head iss {head_iss!r}")
    if iss is not None:
        if head_iss != iss:
            problems.append(f"head iss {head_iss!r} != --iss {iss!r}")
        if "iss" in claims and claims["iss"] != iss:
            problems.append(f"record iss {claims['iss']!r} != --iss {iss!r}")
    return problems
