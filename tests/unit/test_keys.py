"""capability_anchor.keys: RFC 7638/8037 known answers, the key file, the trusted key set."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from joserfc.jwk import OKPKey

from capability_anchor.encoding import b64url_decode, b64url_encode
from capability_anchor.errors import (
    InvalidKey,
    KeyFileError,
    MalformedKeySet,
    SignatureMismatch,
    UnknownKeyError,
    UsageError,
)
from capability_anchor.keys import (
    KeySet,
    PublicKey,
    SigningKey,
    create_key_file,
    load_key_file,
    thumbprint,
)
from tests.kit.hypo import examples

# RFC 8037 Appendix A.1-A.4.
RFC8037_D = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
RFC8037_X = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
RFC8037_KID = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
RFC8037_PAYLOAD = b"Example of Ed25519 signing"
RFC8037_SIGNING_INPUT = "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc"
RFC8037_SIGNATURE = (
    "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"
)


def seeded_key(label: str) -> SigningKey:
    """A reproducible test key (never use a derived seed like this outside tests)."""
    return SigningKey.from_seed(hashlib.sha256(label.encode()).digest())


KEY_A = seeded_key("capability-anchor test key A")
KEY_B = seeded_key("capability-anchor test key B")


# --- RFC 7638 / RFC 8037 known answers ----------------------------------------------------


def test_thumbprint_rfc8037_a3() -> None:
    assert thumbprint(RFC8037_X) == RFC8037_KID


def test_rfc8037_a4_signature_reproduced() -> None:
    key = SigningKey.from_seed(b64url_decode(RFC8037_D))
    assert key.public.x == RFC8037_X
    assert key.kid == RFC8037_KID
    signing_input = b64url_encode(b'{"alg":"EdDSA"}') + "." + b64url_encode(RFC8037_PAYLOAD)
    assert signing_input == RFC8037_SIGNING_INPUT
    signature = key.sign(signing_input.encode("ascii"))
    assert b64url_encode(signature) == RFC8037_SIGNATURE
    key.public.verify(signing_input.encode("ascii"), signature)


@pytest.mark.parametrize(
    "bad_x",
    [
        pytest.param(RFC8037_X + "=", id="padded"),
        pytest.param(RFC8037_X[:-1] + "p", id="non_canonical_last_char"),
        pytest.param(b64url_encode(bytes(31)), id="31_bytes"),
        pytest.param(b64url_encode(bytes(33)), id="33_bytes"),
        pytest.param(RFC8037_X.replace("_", "/"), id="standard_base64_alphabet"),
    ],
)
def test_thumbprint_rejects_malformed_x(bad_x: str) -> None:
    with pytest.raises(InvalidKey):
        thumbprint(bad_x)


def test_non_canonical_x_case_is_same_bytes() -> None:
    # The probe above: "p" differs from the real last char "o" only in unused bits.
    assert RFC8037_X[-1] == "o"
    assert base64.urlsafe_b64decode(RFC8037_X[:-1] + "p=") == b64url_decode(RFC8037_X)


@settings(max_examples=examples(50))
@given(st.binary(min_size=32, max_size=32))
def test_thumbprint_agrees_with_joserfc(seed: bytes) -> None:
    key = SigningKey.from_seed(seed)
    jwk: dict[str, Any] = dict(key.public.jwk())
    assert OKPKey.import_key(jwk).thumbprint() == key.kid


# --- PublicKey / SigningKey ---------------------------------------------------------------


def test_public_jwk_shape() -> None:
    assert KEY_A.public.jwk() == {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": KEY_A.public.x,
        "kid": KEY_A.kid,
        "use": "sig",
        "alg": "EdDSA",
    }
    assert PublicKey.from_x(KEY_A.public.x) == KEY_A.public


def test_public_key_validates_on_construction() -> None:
    pub = KEY_A.public
    with pytest.raises(InvalidKey):
        PublicKey(raw=pub.raw, kid=KEY_B.kid, x=pub.x)
    with pytest.raises(InvalidKey):
        PublicKey(raw=pub.raw, kid=pub.kid, x=KEY_B.public.x)
    with pytest.raises(InvalidKey):
        PublicKey.from_raw(pub.raw[:31])


def test_sign_is_deterministic_and_verifies() -> None:
    sig = KEY_A.sign(b"message")
    assert len(sig) == 64
    assert KEY_A.sign(b"message") == sig
    KEY_A.public.verify(b"message", sig)


@pytest.mark.parametrize(
    ("message", "signature_of"),
    [
        pytest.param(b"other message", b"message", id="other_message"),
        pytest.param(b"message", None, id="flipped_bit"),
    ],
)
def test_verify_rejects(message: bytes, signature_of: bytes | None) -> None:
    sig = KEY_A.sign(signature_of or message)
    if signature_of is None:
        sig = bytes([sig[0] ^ 1]) + sig[1:]
    with pytest.raises(SignatureMismatch):
        KEY_A.public.verify(message, sig)


def test_verify_rejects_other_key_and_bad_lengths() -> None:
    sig = KEY_B.sign(b"message")
    with pytest.raises(SignatureMismatch):
        KEY_A.public.verify(b"message", sig)
    for bad in (b"", sig[:63], sig + b"\x00"):
        with pytest.raises(SignatureMismatch, match="64 bytes"):
            KEY_A.public.verify(b"message", bad)


def test_signing_key_repr_hides_seed() -> None:
    d = KEY_A._private_jwk()["d"]
    assert d not in repr(KEY_A)
    assert KEY_A.kid in repr(KEY_A)


# --- private key file ---------------------------------------------------------------------


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    """umask 0, so a 0600 file proves the mode came from os.open, not from the umask."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_key_file_created_0600_and_round_trips(tmp_path: Path, permissive_umask: None) -> None:
    path = tmp_path / "log.key"
    key = create_key_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    content = path.read_bytes()
    assert content.endswith(b"}\n")
    jwk = json.loads(content)
    assert list(jwk) == ["kty", "crv", "x", "d", "kid"]
    assert jwk["kty"] == "OKP" and jwk["crv"] == "Ed25519"
    assert jwk["x"] == key.public.x and jwk["kid"] == key.kid
    loaded = load_key_file(path)
    assert loaded.public == key.public
    assert loaded.sign(b"m") == key.sign(b"m")


def test_key_file_refuses_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "log.key"
    first = create_key_file(path)
    before = path.read_bytes()
    with pytest.raises(KeyFileError, match="refusing to overwrite"):
        create_key_file(path)
    assert path.read_bytes() == before
    assert load_key_file(path).kid == first.kid


def test_key_file_refuses_to_create_through_dangling_symlink(tmp_path: Path) -> None:
    link = tmp_path / "log.key"
    link.symlink_to(tmp_path / "elsewhere.key")
    with pytest.raises(KeyFileError):
        create_key_file(link)
    assert not (tmp_path / "elsewhere.key").exists()


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660, 0o606, 0o601, 0o610, 0o777])
def test_key_file_readable_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "log.key"
    create_key_file(path)
    path.chmod(mode)
    with pytest.raises(KeyFileError) as info:
        load_key_file(path)
    assert f"{mode:04o}" in str(info.value)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_key_file_owner_only_modes_load(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "log.key"
    key = create_key_file(path)
    path.chmod(mode)
    assert load_key_file(path).kid == key.kid


def _write_key_file(path: Path, content: bytes | str) -> Path:
    data = content.encode() if isinstance(content, str) else content
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return path


def _private_jwk(**changes: Any) -> dict[str, Any]:
    jwk: dict[str, Any] = dict(KEY_A._private_jwk())
    for name, value in changes.items():
        if value is None:
            del jwk[name]
        else:
            jwk[name] = value
    return jwk


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(
            json.dumps(_private_jwk(x=KEY_B.public.x)),
            "not the public key of d",
            id="x_of_another_key",
        ),
        pytest.param(json.dumps(_private_jwk(kid=KEY_B.kid)), "thumbprint", id="wrong_kid"),
        pytest.param(json.dumps(_private_jwk(d=None)), "missing member 'd'", id="no_d"),
        pytest.param(json.dumps(_private_jwk(d=b64url_encode(bytes(31)))), "32-byte", id="short_d"),
        pytest.param(
            json.dumps(_private_jwk(d=_private_jwk()["d"] + "=")), "32-byte", id="padded_d"
        ),
        pytest.param(json.dumps(_private_jwk(crv="X25519")), "not an Ed25519 key", id="x25519"),
        pytest.param(json.dumps(_private_jwk(extra="1")), "unexpected member", id="extra"),
        pytest.param("[]", "not a JSON object", id="array"),
        pytest.param("{", "not valid JSON", id="truncated"),
        pytest.param(b"\xff\xfe{}", "not valid JSON", id="not_utf8"),
        pytest.param(
            '{"kty":"OKP","kty":"OKP","crv":"Ed25519","x":"'
            + KEY_A.public.x
            + '","d":"'
            + _private_jwk()["d"]
            + '"}',
            "duplicate member name 'kty'",
            id="duplicate_member",
        ),
    ],
)
def test_malformed_key_file_is_refused(tmp_path: Path, content: str | bytes, message: str) -> None:
    path = _write_key_file(tmp_path / "log.key", content)
    with pytest.raises(KeyFileError, match=message) as info:
        load_key_file(path)
    assert _private_jwk()["d"] not in str(info.value)  # the secret is never echoed


def test_key_file_without_kid_loads(tmp_path: Path) -> None:
    path = _write_key_file(tmp_path / "log.key", json.dumps(_private_jwk(kid=None)))
    assert load_key_file(path).kid == KEY_A.kid


def test_missing_key_file(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="cannot open"):
        load_key_file(tmp_path / "absent.key")


def test_key_file_that_is_a_directory(tmp_path: Path) -> None:
    folder = tmp_path / "dir.key"
    folder.mkdir(mode=0o700)
    with pytest.raises(KeyFileError):
        load_key_file(folder)


def test_key_file_that_is_a_fifo_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.key"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(KeyFileError, match="not a regular file"):
        load_key_file(fifo)


def test_key_file_loads_in_joserfc(tmp_path: Path) -> None:
    path = tmp_path / "log.key"
    key = create_key_file(path)
    imported = OKPKey.import_key(json.loads(path.read_bytes()))
    assert imported.thumbprint() == key.kid
    assert imported.is_private


# --- KeySet -------------------------------------------------------------------------------


def test_keyset_from_jwks_and_export_sorted() -> None:
    keys = KeySet.of(KEY_A.public, KEY_B.public)
    exported = keys.jwks()
    kids = [jwk["kid"] for jwk in exported["keys"]]
    assert kids == sorted([KEY_A.kid, KEY_B.kid])
    assert KeySet.from_jwks(exported) == keys
    assert KeySet.from_json(keys.to_json()) == keys
    assert KeySet.of(KEY_B.public, KEY_A.public).to_json() == keys.to_json()
    assert keys.get(KEY_A.kid) == KEY_A.public
    assert KEY_B.kid in keys and len(keys) == 2


def test_keyset_get_unknown_kid() -> None:
    with pytest.raises(UnknownKeyError, match=KEY_B.kid):
        KeySet.of(KEY_A.public).get(KEY_B.kid)


def test_keyset_accepts_minimal_jwk_and_ignores_unknown_members() -> None:
    minimal = {"kty": "OKP", "crv": "Ed25519", "x": KEY_A.public.x}
    assert KeySet.from_jwks({"keys": [minimal]}).kids == (KEY_A.kid,)
    noted = {**minimal, "x-note": "rotated 2026-10"}
    assert KeySet.from_jwks({"keys": [noted], "issuer": "ignored"}).kids == (KEY_A.kid,)


def _jwk(**changes: Any) -> dict[str, Any]:
    jwk: dict[str, Any] = dict(KEY_A.public.jwk())
    for name, value in changes.items():
        if value is None:
            del jwk[name]
        else:
            jwk[name] = value
    return jwk


@pytest.mark.parametrize(
    "jwks",
    [
        pytest.param({"keys": [_jwk(kid="")]}, id="kid_empty"),
        pytest.param({"keys": [_jwk(kid=7)]}, id="kid_not_string"),
        pytest.param(
            {"keys": [_jwk(kid="other"), {**KEY_B.public.jwk(), "kid": "other"}]},
            id="two_keys_one_kid",
        ),
        pytest.param({"keys": [_jwk(), {**KEY_B.public.jwk(), "kid": KEY_A.kid}]}, id="kid_taken"),
        pytest.param({"keys": [_jwk(d=_private_jwk()["d"])]}, id="private_key_material"),
        pytest.param({"keys": [_jwk(use="enc")]}, id="use_enc"),
        pytest.param({"keys": [_jwk(alg="Ed25519")]}, id="alg_Ed25519"),
        pytest.param({"keys": [_jwk(alg="ES256")]}, id="alg_ES256"),
        pytest.param({"keys": [_jwk(kty="EC")]}, id="kty_EC"),
        pytest.param({"keys": [_jwk(crv="X25519")]}, id="crv_X25519"),
        pytest.param({"keys": [_jwk(crv="Ed448")]}, id="crv_Ed448"),
        pytest.param({"keys": [_jwk(x=None)]}, id="no_x"),
        pytest.param({"keys": [_jwk(x=KEY_A.public.x + "=", kid=None)]}, id="x_padded"),
        pytest.param({"keys": [_jwk(x=b64url_encode(bytes(31)), kid=None)]}, id="x_31_bytes"),
        pytest.param({"keys": [_jwk(x=123, kid=None)]}, id="x_not_string"),
        pytest.param({"keys": [_jwk(), _jwk()]}, id="duplicate_key"),
        pytest.param({"keys": []}, id="empty"),
        pytest.param({"keys": {}}, id="keys_not_array"),
        pytest.param({"keys": ["not a key"]}, id="key_not_object"),
        pytest.param({}, id="no_keys_member"),
        pytest.param([], id="not_object"),
    ],
)
def test_keyset_rejects(jwks: Any) -> None:
    with pytest.raises(InvalidKey):
        KeySet.from_jwks(jwks)


def test_keyset_trusts_a_kid_that_is_not_the_thumbprint() -> None:
    """Capability Resolution §8: kid SHOULD be the RFC 7638 thumbprint, so another
    resolver's key set may name a key otherwise; it is trusted under the kid it gives."""
    keys = KeySet.from_jwks({"keys": [_jwk(kid="other")]})
    assert keys.kids == ("other",)
    key = keys.get("other")
    assert key.raw == KEY_A.public.raw and not key.thumbprint_kid
    assert key.thumbprint == KEY_A.kid
    assert keys.non_thumbprint_keys == (key,)
    with pytest.raises(UnknownKeyError):
        keys.get(KEY_A.kid)  # matched by kid only: the thumbprint is not a second name
    assert KeySet.from_json(keys.to_json()) == keys
    assert keys.jwks()["keys"][0]["kid"] == "other"
    # One key under its thumbprint and another name: two entries, both trusted.
    both = KeySet.from_jwks({"keys": [_jwk(), _jwk(kid="other")]})
    assert both.kids == tuple(sorted((KEY_A.kid, "other")))
    assert [k.kid for k in both.non_thumbprint_keys] == ["other"]
    assert KeySet.of(KEY_A.public).non_thumbprint_keys == ()


def test_keyset_require_thumbprints_refuses_other_kids() -> None:
    with pytest.raises(InvalidKey, match="not the RFC 7638 thumbprint"):
        KeySet.from_jwks({"keys": [_jwk(kid="other")]}, require_thumbprints=True)
    with pytest.raises(InvalidKey, match="not the RFC 7638 thumbprint"):
        KeySet.from_json(json.dumps({"keys": [_jwk(kid="x")]}), require_thumbprints=True)
    assert KeySet.from_jwks({"keys": [_jwk()]}, require_thumbprints=True).kids == (KEY_A.kid,)


def test_public_key_with_a_declared_kid_is_still_validated() -> None:
    pub = KEY_A.public
    assert PublicKey(raw=pub.raw, kid="other", x=pub.x, thumbprint_kid=False).kid == "other"
    with pytest.raises(InvalidKey):
        PublicKey(raw=pub.raw, kid="", x=pub.x, thumbprint_kid=False)
    with pytest.raises(InvalidKey):  # one form per key
        PublicKey(raw=pub.raw, kid=pub.kid, x=pub.x, thumbprint_kid=False)
    with pytest.raises(InvalidKey):
        PublicKey(raw=pub.raw, kid="other", x=KEY_B.public.x, thumbprint_kid=False)


def test_keyset_from_json_rejects_duplicate_members() -> None:
    x = KEY_A.public.x
    doc = '{"keys":[{"kty":"OKP","crv":"Ed25519","x":"' + x + '","x":"' + x + '"}]}'
    with pytest.raises(InvalidKey, match="duplicate member name 'x'"):
        KeySet.from_json(doc.encode())


@pytest.mark.parametrize(
    "doc",
    [
        pytest.param(b"{", id="truncated"),
        pytest.param('{"keys":[]}'.encode("utf-16"), id="utf16"),
        pytest.param(b'\xef\xbb\xbf{"keys":[]}', id="bom"),
        pytest.param(b'{"keys":NaN}', id="nan"),
    ],
)
def test_keyset_from_json_rejects_bad_json(doc: bytes) -> None:
    with pytest.raises(InvalidKey, match="not valid JSON") as caught:
        KeySet.from_json(doc)
    # Malformed JSON is a usage error (exit 2) wherever a key set is read.
    assert isinstance(caught.value, MalformedKeySet)
    assert isinstance(caught.value, UsageError)


def test_keyset_agrees_with_joserfc_import() -> None:
    # joserfc accepts our exported JWKs as Ed25519 keys with the same RFC 7638 thumbprint.
    for public in KeySet.of(KEY_A.public, KEY_B.public).jwks()["keys"]:
        jwk: dict[str, Any] = dict(public)
        key = OKPKey.import_key(jwk)
        assert key.thumbprint() == jwk["kid"]
        assert key.curve_name == "Ed25519"
