"""The corpus's mutations of a record token (tools/make_record_corpus.py): each breaks one rule
of SPEC §2, §5 or §9 or of CR 0.2 §8, re-signed by the log's TEST key so that only that rule
breaks, or spells one value another way; `token_cases` adds them all."""

from __future__ import annotations

import json
from typing import Any

from capability_anchor.encoding import b64url_decode, b64url_encode, utc_second
from capability_anchor.keys import KeySet, PublicKey
from capability_anchor.strictjson import canonical
from corpus_cases import (
    AT,
    DAYS,
    ED25519_L,
    REAL,
    RECORD_TYP,
    Corpus,
    signed,
    stranger,
    test_signing_key,
    token,
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
            signed(cal, kid=stranger().kid),
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
    keys = c.write("attack-untrusted-keys", "keys.json", KeySet.of(stranger().public).to_json())
    c.add(
        "attack-untrusted-keys",
        "--keys holds only a key that signed nothing here",
        "real/records/d1-sealed-calendar.json",
        "--roots",
        REAL,
        "--keys",
        keys,
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
            {**record, "expires": utc_second(cal["exp"] + 86400)},
        ),
    ):
        c.add(name, about, c.write(name, "record.json", changed), "--roots", REAL)


def _ed25519_attacks(c: Corpus) -> None:
    """Signatures an Ed25519 library may accept and libsodium (Python's) refuses: S not below
    the group order L, and a small-order key (the identity point) that a trust names, whose
    signature R = identity, S = 0 satisfies the bare equation."""
    cal = c.claims("d1-sealed-calendar")
    record = signed(cal)
    body, sig = record["jws"].rsplit(".", 1)
    raw = b64url_decode(sig)
    s_plus_l = (int.from_bytes(raw[32:], "little") + ED25519_L).to_bytes(32, "little")
    unreduced = {**record, "jws": f"{body}.{b64url_encode(raw[:32] + s_plus_l)}"}
    c.add(
        "attack-signature-s-not-reduced",
        "the record's signature with S + L in place of S",
        c.write("attack-signature-s-not-reduced", "record.json", unreduced),
        "--roots",
        REAL,
    )
    identity = PublicKey.from_raw(bytes([1]) + bytes(31))
    head = b64url_encode(canonical({"alg": "EdDSA", "kid": identity.kid, "typ": RECORD_TYP}))
    forged = f"{head}.{b64url_encode(canonical(cal))}.{b64url_encode(identity.raw + bytes(32))}"
    roots = c.folder(
        "attack-small-order-key",
        "a trusted small-order key and its R = identity, S = 0",
        DAYS[0],
        record={**record, "jws": forged},
    )
    keys = KeySet.of(test_signing_key().public, identity)
    (roots / "keys.json").write_bytes(keys.to_json())


def _spelling_cases(c: Corpus) -> None:
    """One value spelled another way: what a verifier must accept (the same second, number or
    token) and refuse (hex, base64url and numbers spelled outside the formats)."""
    record, cal = c.records["d1-sealed-calendar"], c.claims("d1-sealed-calendar")
    body = canonical(cal)[:-1]
    head, payload, sig = record["jws"].split(".")
    # 64 bytes are 86 characters, the last holding 2 bits and 4 spare ones (zero: A, Q, g, w).
    last = {"A": "B", "Q": "R", "g": "h", "w": "x"}[sig[-1]]
    upper = [h.upper() for h in cal["proof"]["path"]]
    for name, about, data, file in (
        (
            "plain-expires-offset-form",
            "expires beside jws as +00:00, the same second",
            {**record, "expires": utc_second(cal["exp"]).replace("Z", "+00:00")},
            "record.json",
        ),
        (
            "plain-number-spelling",
            "iat beside jws as 1795449600.0, the same number",
            json.dumps({**record, "iat": float(cal["iat"])}),
            "record.json",
        ),
        (
            "bare-jws-record-crlf",
            "the compact JWS alone, ending in CRLF",
            record["jws"] + "\r\n",
            "record.jws",
        ),
        (
            "attack-b64url-padding",
            "the signature segment padded with '='",
            f"{head}.{payload}.{sig}==",
            "record.jws",
        ),
        (
            "attack-b64url-noncanonical",
            "the signature's last character with nonzero spare bits",
            f"{head}.{payload}.{sig[:-1]}{last}",
            "record.jws",
        ),
        (
            "attack-proof-uppercase-hex",
            "the proof's path hashes in upper-case hex",
            signed({**cal, "proof": {**cal["proof"], "path": upper}}),
            "record.json",
        ),
        (
            "attack-float-iat",
            "iat 1795449600.5 in the signed claims",
            token(
                body.replace(f'"iat":{cal["iat"]}'.encode(), f'"iat":{cal["iat"]}.5'.encode())
                + b"}",
                test_signing_key(),
            ),
            "record.jws",
        ),
        (
            "attack-float-leaf-index",
            "proof.leaf_index 1.0 in the signed claims",
            token(
                body.replace(b'"leaf_index":1,', b'"leaf_index":1.0,') + b"}", test_signing_key()
            ),
            "record.jws",
        ),
    ):
        c.add(name, about, c.write(name, file, data), "--roots", REAL)


def token_cases(c: Corpus) -> None:
    _record_attacks(c)
    _json_attacks(c)
    _ed25519_attacks(c)
    _spelling_cases(c)
