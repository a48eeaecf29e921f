"""capability_anchor.jws: interop with joserfc both ways, and one named test per attack.

Every rejection is asserted with its exact error class (`raises_exactly`), not just "some
JWSError", so a check that moves earlier or later in the order shows up as a failure.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from joserfc import jws as jose
from joserfc.errors import BadSignatureError, SecurityWarning
from joserfc.jwk import ECKey, OctKey, OKPKey
from joserfc.jws import JWSRegistry
from joserfc.registry import HeaderParameter

from capability_anchor.encoding import b64url_decode, b64url_encode
from capability_anchor.errors import (
    CapabilityAnchorError,
    ClaimsError,
    IssuerMismatch,
    JWSAlgorithmError,
    JWSEncodingError,
    JWSFormatError,
    JWSHeaderError,
    JWSTypeError,
    SignatureMismatch,
    TokenExpired,
    TokenLifetimeError,
    TokenNotYetValid,
    UnknownKeyError,
    UsageError,
)
from capability_anchor.jws import (
    CLOCK_SKEW,
    HEAD_TYP,
    MAX_RECORD_LIFETIME,
    RECORD_REQUIRED_CLAIMS,
    RECORD_TYP,
    check_record_lifetime,
    sign,
    sign_claims,
    verify,
    verify_claims,
    verify_record_token,
)
from capability_anchor.keys import KeySet, SigningKey
from tests.kit.hypo import examples


def seeded_key(label: str) -> SigningKey:
    """A reproducible test key (never derive a real key like this)."""
    return SigningKey.from_seed(hashlib.sha256(label.encode()).digest())


KEY = seeded_key("capability-anchor test key A")
OTHER = seeded_key("capability-anchor test key B")  # a real Ed25519 key we do not trust
TRUSTED = KeySet.of(KEY.public)

ISS = "https://resolver.example"
AT = 1793188800  # 2026-10-28T12:00:00Z

HEAD_CLAIMS: dict[str, Any] = {
    "v": "0.2",
    "iss": ISS,
    "day": "2026-10-27",
    "tree_size": 812,
    "root": "ab" * 32,
    "sealed": True,
    "prev": None,
    "iat": AT,
}


def record_claims(**changes: Any) -> dict[str, Any]:
    """A Capability Resolution §6.3 record; `name=None` style changes delete a claim."""
    claims: dict[str, Any] = {
        "v": "0.2",
        "iss": ISS,
        "sub": "example:abcdefghijklmnop",
        "url": "https://mail.example.com/mcp",
        "name": "Mail — Почта 📬",
        "status": "ok",
        "checked_at": "2026-10-28T10:05:00Z",
        "first_seen": "2026-10-02",
        "iat": AT,
        "exp": AT + 3600,
        "evidence": {"record": ISS + "/record?id=example:abcdefghijklmnop"},
        "anchor": {"day": "2026-10-27", "root": "cd" * 32, "url": ISS + "/roots/2026-10-27"},
        "proof": {"type": "rfc9162-sha256", "leaf_index": 5, "tree_size": 812, "path": []},
    }
    for name, value in changes.items():
        if value is None:
            del claims[name]
        else:
            claims[name] = value
    return claims


@contextlib.contextmanager
def raises_exactly(cls: type[CapabilityAnchorError], match: str | None = None) -> Iterator[None]:
    """Like pytest.raises, but a subclass or superclass does not count: each rule has its
    own class, and the test pins which rule fired."""
    with pytest.raises(CapabilityAnchorError, match=match) as info:
        yield
    assert type(info.value) is cls, f"expected {cls.__name__}, got {info.type.__name__}"


# joserfc 1.8 emits `SecurityWarning("EdDSA is deprecated via RFC 9864")` whenever the
# `EdDSA` alg is used (RFC 9864 prefers the fully specified `Ed25519`). This project runs
# with warnings as errors; we use EdDSA on purpose (Capability Resolution §8 mandates it),
# so that one warning is ignored, scoped to each joserfc call, and nothing else is.
@contextlib.contextmanager
def joserfc_eddsa() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="EdDSA is deprecated", category=SecurityWarning)
        yield


def joserfc_public(key: SigningKey) -> OKPKey:
    jwk: dict[str, Any] = dict(key.public.jwk())
    return OKPKey.import_key(jwk)


def joserfc_private(key: SigningKey) -> OKPKey:
    jwk: dict[str, Any] = dict(key._private_jwk())
    return OKPKey.import_key(jwk)


def joserfc_verify(token: str, key: SigningKey) -> jose.CompactSignature:
    with joserfc_eddsa():
        return jose.deserialize_compact(token, joserfc_public(key), algorithms=["EdDSA"])


def joserfc_sign(
    header: dict[str, Any],
    payload: bytes,
    private: Any,
    algorithms: list[str],
    registry: JWSRegistry | None = None,
) -> str:
    with joserfc_eddsa():
        if registry is not None:
            return jose.serialize_compact(header, payload, private, registry=registry)
        return jose.serialize_compact(header, payload, private, algorithms=algorithms)


def our_header(key: SigningKey = KEY, typ: str = HEAD_TYP) -> dict[str, str]:
    return {"alg": "EdDSA", "kid": key.kid, "typ": typ}


def hand_signed(header: dict[str, Any] | bytes, payload: bytes = b'{"a":1}') -> str:
    """A token over arbitrary header bytes, correctly signed with the trusted key, so only
    the rule under test can fail."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    signing_input = b64url_encode(raw) + "." + b64url_encode(payload)
    return signing_input + "." + b64url_encode(KEY.sign(signing_input.encode("ascii")))


def segments(token: str) -> list[str]:
    return token.split(".")


# --- signing ------------------------------------------------------------------------------


def test_header_is_exactly_the_jcs_bytes() -> None:
    token = sign(b"payload", KEY, HEAD_TYP)
    header = b64url_decode(segments(token)[0])
    assert header == (
        b'{"alg":"EdDSA","kid":"' + KEY.kid.encode() + b'","typ":"capability-anchor+jws"}'
    )


def test_sign_is_deterministic() -> None:
    assert sign_claims(HEAD_CLAIMS, KEY, HEAD_TYP) == sign_claims(dict(HEAD_CLAIMS), KEY, HEAD_TYP)


def test_claims_payload_is_jcs() -> None:
    token = sign_claims({"b": 1, "a": "é"}, KEY, HEAD_TYP)
    assert b64url_decode(segments(token)[1]) == '{"a":"é","b":1}'.encode()


@pytest.mark.parametrize(
    ("payload", "typ"),
    [
        pytest.param(b"", HEAD_TYP, id="empty_payload"),
        pytest.param(b"x", "", id="empty_typ"),
    ],
)
def test_sign_refuses_what_verify_would_refuse(payload: bytes, typ: str) -> None:
    with raises_exactly(UsageError):
        sign(payload, KEY, typ)


def test_sign_claims_refuses_uncanonicalizable_claims() -> None:
    with raises_exactly(UsageError):
        sign_claims({"n": 2**60}, KEY, HEAD_TYP)


def test_verify_round_trip() -> None:
    token = sign_claims(HEAD_CLAIMS, KEY, HEAD_TYP)
    verified = verify(token, TRUSTED, HEAD_TYP)
    assert verified.kid == KEY.kid
    assert verified.header == our_header()
    assert verified.signing_input == token.rsplit(".", 1)[0].encode()
    assert verify_claims(token, TRUSTED, HEAD_TYP) == HEAD_CLAIMS


# --- interop: joserfc verifies ours --------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53 - 1), max_value=2**53 - 1)
    # Within ±(2^53 - 1), the project's number domain (SPEC §2): beyond it JCS spells a
    # double with trailing zeros (4.141996928107215e16 -> 41419969281072150), which reads
    # back as a different integer.
    | st.floats(min_value=-(2**53 - 1), max_value=2**53 - 1, allow_nan=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=examples(150), deadline=None)
@given(
    claims=st.dictionaries(st.text(), json_values, max_size=8),
    typ=st.sampled_from([HEAD_TYP, RECORD_TYP]),
)
def test_joserfc_verifies_every_token_we_sign(claims: dict[str, Any], typ: str) -> None:
    token = sign_claims(claims, KEY, typ)
    obj = joserfc_verify(token, KEY)
    assert obj.headers() == our_header(typ=typ)
    assert obj.payload == b64url_decode(segments(token)[1])
    assert json.loads(obj.payload) == claims
    assert verify_claims(token, TRUSTED, typ) == claims


def test_joserfc_verifies_head_and_record_tokens() -> None:
    for claims, typ in ((HEAD_CLAIMS, HEAD_TYP), (record_claims(), RECORD_TYP)):
        token = sign_claims(claims, KEY, typ)
        assert json.loads(joserfc_verify(token, KEY).payload) == claims


def test_joserfc_rejects_our_token_under_another_key() -> None:
    token = sign_claims(HEAD_CLAIMS, KEY, HEAD_TYP)
    with pytest.raises(BadSignatureError):
        joserfc_verify(token, OTHER)


# --- interop: ours verifies joserfc's ------------------------------------------------------


def test_joserfc_token_with_our_header_is_byte_identical() -> None:
    payload = sign_claims(HEAD_CLAIMS, KEY, HEAD_TYP).split(".")[1]
    theirs = joserfc_sign(our_header(), b64url_decode(payload), joserfc_private(KEY), ["EdDSA"])
    assert theirs == sign_claims(HEAD_CLAIMS, KEY, HEAD_TYP)


def test_joserfc_token_with_other_member_order_verifies() -> None:
    # Not JCS: typ first. Accepted on purpose (module docstring): other resolvers' JOSE
    # libraries order members their own way, and the signature covers the bytes sent.
    header = {"typ": RECORD_TYP, "kid": KEY.kid, "alg": "EdDSA"}
    payload = json.dumps(record_claims(), ensure_ascii=False).encode()
    token = joserfc_sign(header, payload, joserfc_private(KEY), ["EdDSA"])
    assert not b64url_decode(segments(token)[0]).startswith(b'{"alg"')
    assert verify_record_token(token, TRUSTED, iss=ISS, at=AT) == record_claims()


def _crit_registry() -> JWSRegistry:
    return JWSRegistry(
        header_registry={"exp": HeaderParameter("Expiry", "int")}, algorithms=["EdDSA"]
    )


FOREIGN = [
    ("hs256_oct_key", {"alg": "HS256"}, "oct", ["HS256"], JWSAlgorithmError),
    ("es256_ec_key", {"alg": "ES256"}, "ec", ["ES256"], JWSAlgorithmError),
    ("rfc9864_alg_Ed25519", {"alg": "Ed25519"}, "ours", ["Ed25519"], JWSAlgorithmError),
    ("crit_member", {"crit": ["exp"], "exp": AT}, "ours", ["EdDSA"], JWSHeaderError),
    ("jku_member", {"jku": "https://attacker.example/jwks"}, "ours", ["EdDSA"], JWSHeaderError),
    ("x5u_member", {"x5u": "https://attacker.example/cert"}, "ours", ["EdDSA"], JWSHeaderError),
    (
        "jwk_member_self_supplied_key",
        {"jwk": OTHER.public.jwk()},
        "other",
        ["EdDSA"],
        JWSHeaderError,
    ),
    ("b64_true_member", {"b64": True}, "ours", ["EdDSA"], JWSHeaderError),
    ("cty_member", {"cty": "JWT"}, "ours", ["EdDSA"], JWSHeaderError),
    ("untrusted_ed25519_key", {"kid": OTHER.kid}, "other", ["EdDSA"], UnknownKeyError),
    ("forged_kid_signed_by_other_key", {}, "other", ["EdDSA"], SignatureMismatch),
    ("typ_jwt", {"typ": "JWT"}, "ours", ["EdDSA"], JWSTypeError),
]


@pytest.mark.parametrize(
    ("name", "header", "signer", "algorithms", "expected"),
    [pytest.param(*case, id=case[0]) for case in FOREIGN],
)
def test_joserfc_foreign_tokens_rejected(
    name: str,
    header: dict[str, Any],
    signer: str,
    algorithms: list[str],
    expected: type[CapabilityAnchorError],
) -> None:
    private: Any = {
        "oct": OctKey.generate_key(256),
        "ec": ECKey.generate_key("P-256"),
        "ours": joserfc_private(KEY),
        "other": joserfc_private(OTHER),
    }[signer]
    full = {**our_header(), **header}
    registry = _crit_registry() if name == "crit_member" else None
    token = joserfc_sign(full, b'{"a":1}', private, algorithms, registry)
    with raises_exactly(expected):
        verify(token, TRUSTED, HEAD_TYP)
    if expected is JWSHeaderError:
        offending = next(member for member in header if member not in ("alg", "kid", "typ"))
        with pytest.raises(JWSHeaderError, match=repr(offending)):
            verify(token, TRUSTED, HEAD_TYP)


def test_joserfc_b64_false_detached_payload_rejected() -> None:
    # RFC 7797 unencoded payload: joserfc detaches a payload that is not URL-safe (this one
    # has braces and quotes), leaving an empty middle segment, so rule 2 catches it first.
    header = {**our_header(), "b64": False, "crit": ["b64"]}
    token = joserfc_sign(header, b'{"a":1}', joserfc_private(KEY), ["EdDSA"])
    assert segments(token)[1] == ""
    with raises_exactly(JWSFormatError, match="payload segment is empty"):
        verify(token, TRUSTED, HEAD_TYP)


def test_joserfc_b64_false_base64_looking_payload_rejected_by_header_rule() -> None:
    # A URL-safe unencoded payload stays attached and decodes as base64url, so the
    # header rule is the one that fires.
    header = {**our_header(), "b64": False, "crit": ["b64"]}
    token = joserfc_sign(header, b"eyJhIjoxfQ", joserfc_private(KEY), ["EdDSA"])
    with raises_exactly(JWSHeaderError, match="'b64', 'crit'"):
        verify(token, TRUSTED, HEAD_TYP)


# --- hand-built attacks --------------------------------------------------------------------

GOOD = sign_claims(HEAD_CLAIMS, KEY, HEAD_TYP)
GOOD_HEADER, GOOD_PAYLOAD, GOOD_SIGNATURE = segments(GOOD)


def _non_canonical_last_char(segment: str) -> str:
    """Same decoded bytes, different spelling: set an unused low bit of the last char."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    unused_bits = {2: 4, 3: 2}[len(segment) % 4]
    index = alphabet.index(segment[-1])
    assert index % (1 << unused_bits) == 0
    altered = segment[:-1] + alphabet[index | 1]
    pad = "=" * (-len(segment) % 4)
    assert base64.urlsafe_b64decode(altered + pad) == base64.urlsafe_b64decode(segment + pad)
    return altered


def _flip(segment: str, byte: int = 0) -> str:
    raw = bytearray(b64url_decode(segment))
    raw[byte] ^= 0x01
    return b64url_encode(bytes(raw))


ATTACKS: list[Any] = [
    # rules 1-2: shape
    pytest.param(GOOD.encode(), JWSFormatError, id="bytes_not_str"),
    pytest.param(GOOD + "é", JWSFormatError, id="non_ascii_garbage"),
    pytest.param(GOOD + "\n", JWSFormatError, id="trailing_newline"),
    pytest.param(GOOD + "\r\n", JWSFormatError, id="trailing_crlf"),
    pytest.param(GOOD + " ", JWSFormatError, id="trailing_space"),
    pytest.param(" " + GOOD, JWSFormatError, id="leading_space"),
    pytest.param(GOOD + "\x00", JWSFormatError, id="trailing_nul"),
    pytest.param(
        GOOD_HEADER + ".\t" + GOOD_PAYLOAD + "." + GOOD_SIGNATURE, JWSFormatError, id="embedded_tab"
    ),
    pytest.param(GOOD + " garbage", JWSFormatError, id="trailing_space_garbage"),
    pytest.param(GOOD + ".garbage", JWSFormatError, id="trailing_fourth_segment"),
    pytest.param(GOOD + ".", JWSFormatError, id="trailing_dot"),
    pytest.param(GOOD_HEADER + "." + GOOD_PAYLOAD, JWSFormatError, id="two_segments"),
    pytest.param(
        GOOD_HEADER + "." + GOOD_PAYLOAD + ".." + GOOD_SIGNATURE, JWSFormatError, id="four_segments"
    ),
    pytest.param(
        "." + GOOD_PAYLOAD + "." + GOOD_SIGNATURE, JWSFormatError, id="empty_header_segment"
    ),
    pytest.param(GOOD_HEADER + ".." + GOOD_SIGNATURE, JWSFormatError, id="empty_payload_segment"),
    pytest.param(
        GOOD_HEADER + "." + GOOD_PAYLOAD + ".", JWSFormatError, id="empty_signature_segment"
    ),
    pytest.param("..", JWSFormatError, id="only_dots"),
    pytest.param("", JWSFormatError, id="empty_string"),
    # alg none with an empty signature is stopped by the empty-segment rule (rule 2)
    pytest.param(
        b64url_encode(json.dumps({**our_header(), "alg": "none"}).encode())
        + "."
        + GOOD_PAYLOAD
        + ".",
        JWSFormatError,
        id="alg_none_empty_signature",
    ),
    # rule 3: canonical unpadded base64url
    pytest.param(GOOD + "!!", JWSEncodingError, id="trailing_punctuation_garbage"),
    pytest.param(GOOD + "garbage", JWSEncodingError, id="trailing_base64_garbage"),
    pytest.param(GOOD + "==", JWSEncodingError, id="padded_signature"),
    pytest.param(
        GOOD_HEADER
        + "=" * (-len(GOOD_HEADER) % 4 or 4)
        + "."
        + GOOD_PAYLOAD
        + "."
        + GOOD_SIGNATURE,
        JWSEncodingError,
        id="padded_header",
    ),
    pytest.param(
        GOOD_HEADER + "." + GOOD_PAYLOAD + "." + _non_canonical_last_char(GOOD_SIGNATURE),
        JWSEncodingError,
        id="non_canonical_signature_last_char",
    ),
    pytest.param(
        GOOD_HEADER
        + "."
        + GOOD_PAYLOAD.replace("_", "/").replace("-", "+")
        + "/+."
        + GOOD_SIGNATURE,
        JWSEncodingError,
        id="standard_base64_alphabet",
    ),
    # rule 4: header JSON
    pytest.param(
        hand_signed(
            b'{"alg":"none","alg":"EdDSA","kid":"'
            + KEY.kid.encode()
            + b'","typ":"capability-anchor+jws"}'
        ),
        JWSEncodingError,
        id="header_duplicate_alg",
    ),
    pytest.param(hand_signed(b'["EdDSA"]'), JWSEncodingError, id="header_json_array"),
    pytest.param(hand_signed(b'"EdDSA"'), JWSEncodingError, id="header_json_string"),
    pytest.param(hand_signed(b'{"alg":"EdDSA"'), JWSEncodingError, id="header_truncated_json"),
    pytest.param(hand_signed(b"\xff\xfe{}"), JWSEncodingError, id="header_not_utf8"),
    # rule 5: exact members
    pytest.param(hand_signed({**our_header(), "crit": ["b64"]}), JWSHeaderError, id="header_crit"),
    pytest.param(
        hand_signed({"alg": "EdDSA", "typ": HEAD_TYP}), JWSHeaderError, id="header_missing_kid"
    ),
    pytest.param(
        hand_signed({"alg": "EdDSA", "kid": KEY.kid}), JWSHeaderError, id="header_missing_typ"
    ),
    pytest.param(
        hand_signed({**our_header(), "kid": 7}), JWSHeaderError, id="header_kid_not_string"
    ),
    pytest.param(hand_signed({**our_header(), "alg": None}), JWSHeaderError, id="header_alg_null"),
    # rule 6: alg
    pytest.param(
        hand_signed({**our_header(), "alg": "none"}),
        JWSAlgorithmError,
        id="alg_none_with_signature",
    ),
    pytest.param(
        hand_signed({**our_header(), "alg": "Ed25519"}), JWSAlgorithmError, id="alg_Ed25519"
    ),
    pytest.param(hand_signed({**our_header(), "alg": "HS256"}), JWSAlgorithmError, id="alg_HS256"),
    pytest.param(
        hand_signed({**our_header(), "alg": "eddsa"}), JWSAlgorithmError, id="alg_lowercase_eddsa"
    ),
    # rule 7: typ
    pytest.param(
        sign_claims(record_claims(), KEY, RECORD_TYP),
        JWSTypeError,
        id="record_token_presented_as_head",
    ),
    pytest.param(hand_signed({**our_header(), "typ": "JWT"}), JWSTypeError, id="typ_jwt"),
    # rule 8: kid
    pytest.param(
        sign_claims(HEAD_CLAIMS, OTHER, HEAD_TYP), UnknownKeyError, id="head_signed_by_unknown_key"
    ),
    # rule 9: signature
    pytest.param(
        GOOD_HEADER + "." + _flip(GOOD_PAYLOAD) + "." + GOOD_SIGNATURE,
        SignatureMismatch,
        id="payload_bit_flipped",
    ),
    pytest.param(
        GOOD_HEADER + "." + GOOD_PAYLOAD + "." + _flip(GOOD_SIGNATURE, 40),
        SignatureMismatch,
        id="signature_bit_flipped",
    ),
    pytest.param(
        GOOD_HEADER + "." + GOOD_PAYLOAD + "." + b64url_encode(b64url_decode(GOOD_SIGNATURE)[:63]),
        SignatureMismatch,
        id="signature_63_bytes",
    ),
    pytest.param(
        GOOD_HEADER
        + "."
        + GOOD_PAYLOAD
        + "."
        + b64url_encode(b64url_decode(GOOD_SIGNATURE) + b"\x00"),
        SignatureMismatch,
        id="signature_65_bytes",
    ),
    pytest.param(
        b64url_encode(
            b'{"alg":"EdDSA","kid":"' + OTHER.kid.encode() + b'","typ":"capability-anchor+jws"}'
        )
        + "."
        + GOOD_PAYLOAD
        + "."
        + GOOD_SIGNATURE,
        UnknownKeyError,
        id="kid_swapped_to_untrusted",
    ),
    pytest.param(
        b64url_encode(
            b'{"kid":"' + KEY.kid.encode() + b'","alg":"EdDSA","typ":"capability-anchor+jws"}'
        )
        + "."
        + GOOD_PAYLOAD
        + "."
        + GOOD_SIGNATURE,
        SignatureMismatch,
        id="header_reordered_after_signing",
    ),
]


@pytest.mark.parametrize(("token", "expected"), ATTACKS)
def test_attack_rejected(token: Any, expected: type[CapabilityAnchorError]) -> None:
    with raises_exactly(expected):
        verify(token, TRUSTED, HEAD_TYP)


def test_good_token_used_by_attacks_verifies() -> None:
    verify(GOOD, TRUSTED, HEAD_TYP)


def test_header_with_extra_member_names_it() -> None:
    with pytest.raises(JWSHeaderError, match="'crit'"):
        verify(hand_signed({**our_header(), "crit": ["b64"]}), TRUSTED, HEAD_TYP)


def test_duplicate_alg_would_fool_a_lenient_parser() -> None:
    # Python's json keeps the last duplicate; ours refuses the header altogether.
    raw = b'{"alg":"none","alg":"EdDSA","kid":"k","typ":"t"}'
    assert json.loads(raw)["alg"] == "EdDSA"
    with raises_exactly(JWSEncodingError, match="duplicate member name 'alg'"):
        verify(hand_signed(raw), TRUSTED, HEAD_TYP)


def test_typ_error_says_which_token_kind() -> None:
    head = sign_claims(HEAD_CLAIMS, KEY, HEAD_TYP)
    with raises_exactly(JWSTypeError, match="a head was presented where a record token"):
        verify(head, TRUSTED, RECORD_TYP)
    with raises_exactly(JWSTypeError):
        verify_record_token(head, TRUSTED, iss=ISS, at=AT)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        pytest.param(b"[1,2]", "not an object", id="payload_array"),
        pytest.param(b"not json", "not valid JSON", id="payload_not_json"),
        pytest.param(
            b'{"iss":"a","iss":"b"}', "duplicate member name 'iss'", id="payload_duplicate_claim"
        ),
        pytest.param(b'{"n":NaN}', "NaN", id="payload_nan"),
        pytest.param(b'{"n":1e400}', "overflows", id="payload_overflowing_number"),
        pytest.param(b'{"s":"\\ud800"}', "lone surrogate", id="payload_lone_surrogate"),
        pytest.param(b"\xff{}", "UTF-8", id="payload_not_utf8"),
        pytest.param('{"a":1}'.encode("utf-16"), "UTF-8", id="payload_utf16"),
    ],
)
def test_verify_claims_rejects_bad_payload(payload: bytes, message: str) -> None:
    token = sign(payload, KEY, HEAD_TYP)
    verify(token, TRUSTED, HEAD_TYP)  # the signature is fine; only the claims are not
    with raises_exactly(ClaimsError, match=message):
        verify_claims(token, TRUSTED, HEAD_TYP)


# --- record tokens (Capability Resolution §8) -----------------------------------------------


def record(**changes: Any) -> str:
    return sign_claims(record_claims(**changes), KEY, RECORD_TYP)


def test_record_token_verifies() -> None:
    assert verify_record_token(record(), TRUSTED, iss=ISS, at=AT) == record_claims()


@pytest.mark.parametrize(
    ("changes", "at", "expected"),
    [
        pytest.param({"exp": AT + MAX_RECORD_LIFETIME}, AT, None, id="lifetime_172800_ok"),
        pytest.param(
            {"exp": AT + MAX_RECORD_LIFETIME + 1},
            AT,
            TokenLifetimeError,
            id="lifetime_172801_rejected",
        ),
        pytest.param({"exp": AT - 1}, AT, TokenLifetimeError, id="exp_before_iat_rejected"),
        pytest.param(
            {"iat": AT - 3600, "exp": AT - CLOCK_SKEW}, AT, None, id="exp_at_minus_300_ok"
        ),
        pytest.param(
            {"iat": AT - 3600, "exp": AT - CLOCK_SKEW - 1},
            AT,
            TokenExpired,
            id="exp_at_minus_301_rejected",
        ),
        pytest.param({"iat": AT + CLOCK_SKEW, "exp": AT + 3600}, AT, None, id="iat_at_plus_300_ok"),
        pytest.param(
            {"iat": AT + CLOCK_SKEW + 1, "exp": AT + 3600},
            AT,
            TokenNotYetValid,
            id="iat_at_plus_301_rejected",
        ),
        pytest.param({"iat": AT, "exp": AT}, AT, None, id="zero_lifetime_ok"),
    ],
)
def test_record_lifetime_boundaries(
    changes: dict[str, Any], at: int, expected: type[CapabilityAnchorError] | None
) -> None:
    token = record(**changes)
    claims = record_claims(**changes)
    if expected is None:
        assert verify_record_token(token, TRUSTED, iss=ISS, at=at) == claims
        check_record_lifetime(claims, at)
        return
    with raises_exactly(expected):
        verify_record_token(token, TRUSTED, iss=ISS, at=at)
    with raises_exactly(expected):
        check_record_lifetime(claims, at)


def test_lifetime_rule_reported_before_expiry() -> None:
    # Too long AND long expired: the lifetime rule is the first of the three.
    claims = record_claims(iat=0, exp=MAX_RECORD_LIFETIME + 1)
    with raises_exactly(TokenLifetimeError, match="172801"):
        check_record_lifetime(claims, AT)


@pytest.mark.parametrize(
    "other_iss",
    [
        pytest.param("https://attacker.example", id="other_origin"),
        pytest.param(ISS + "/", id="trailing_slash"),
        pytest.param("http://resolver.example", id="http_scheme"),
    ],
)
def test_record_token_iss_mismatch(other_iss: str) -> None:
    with raises_exactly(IssuerMismatch, match="attacker|/'|http:"):
        verify_record_token(record(iss=other_iss), TRUSTED, iss=ISS, at=AT)
    with raises_exactly(IssuerMismatch):
        verify_record_token(record(), TRUSTED, iss=other_iss, at=AT)


@pytest.mark.parametrize("missing", RECORD_REQUIRED_CLAIMS)
def test_record_token_missing_claim(missing: str) -> None:
    with raises_exactly(ClaimsError, match=repr(missing)):
        verify_record_token(record(**{missing: None}), TRUSTED, iss=ISS, at=AT)


def test_record_token_without_optional_record_claims_verifies() -> None:
    token = record(name=None, first_seen=None, anchor=None, proof=None)
    verify_record_token(token, TRUSTED, iss=ISS, at=AT)


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"iat": True}, id="bool_iat"),
        pytest.param({"exp": False}, id="bool_exp"),
        pytest.param({"iat": float(AT) + 0.5}, id="float_iat"),
        pytest.param({"exp": str(AT + 60)}, id="string_exp"),
        pytest.param({"iat": "2026-10-28T12:00:00Z"}, id="rfc3339_iat"),
    ],
)
def test_record_token_non_integer_times(changes: dict[str, Any]) -> None:
    with raises_exactly(ClaimsError, match="integer"):
        verify_record_token(record(**changes), TRUSTED, iss=ISS, at=AT)
    with raises_exactly(ClaimsError, match="integer"):
        check_record_lifetime(record_claims(**changes), AT)


def test_record_token_signed_by_untrusted_key() -> None:
    token = sign_claims(record_claims(), OTHER, RECORD_TYP)
    with raises_exactly(UnknownKeyError):
        verify_record_token(token, TRUSTED, iss=ISS, at=AT)


def test_check_record_lifetime_rejects_non_integer_at() -> None:
    with raises_exactly(UsageError):
        check_record_lifetime(record_claims(), True)


@settings(max_examples=examples(200), deadline=None)
@given(
    iat=st.integers(min_value=AT - 4 * MAX_RECORD_LIFETIME, max_value=AT + 4 * MAX_RECORD_LIFETIME),
    lifetime=st.integers(min_value=-10, max_value=MAX_RECORD_LIFETIME + 10),
)
def test_record_lifetime_matches_the_three_rules(iat: int, lifetime: int) -> None:
    claims = record_claims(iat=iat, exp=iat + lifetime)
    exp = iat + lifetime
    expected: type[CapabilityAnchorError] | None
    if lifetime > MAX_RECORD_LIFETIME or lifetime < 0:
        expected = TokenLifetimeError
    elif exp < AT - CLOCK_SKEW:
        expected = TokenExpired
    elif iat > AT + CLOCK_SKEW:
        expected = TokenNotYetValid
    else:
        expected = None
    if expected is None:
        check_record_lifetime(claims, AT)
    else:
        with raises_exactly(expected):
            check_record_lifetime(claims, AT)
