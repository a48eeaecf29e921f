"""Known answers for `note/` from other implementations' published tests, byte for byte.

Sources (read, never copied as code; the values are data):
- golang.org/x/mod `sumdb/note/note_test.go` (TestNewVerifier, TestNewSigner, TestSign,
  TestOpen): the PeterNeumann and EnochRoot keys, the private key, the exact signed note;
- c2sp.org/signed-note (C2SP/C2SP `signed-note.md`, "Example"): example.com/foo;
- c2sp.org/tlog-checkpoint and tlog-cosignature (`tlog-checkpoint.md`, `tlog-cosignature.md`):
  the behind-the-sofa checkpoint, its witness line's timestamp and the signed message;
- transparency-dev/formats `log/note_test.go`, `witness/witness_test.go`,
  `note/note_verifier_test.go` (private/public key pairs) and `witness/witness_policy_test.go`
  (policies), `log/checkpoint_test.go` (checkpoint bodies).
"""

from __future__ import annotations

import base64

import pytest

from capability_anchor.errors import MalformedNote, MalformedPolicy, MalformedVKey, NoteError
from capability_anchor.keys import SigningKey
from capability_anchor.note import (
    Checkpoint,
    Cosigner,
    NoteSigner,
    cosignature_verifier,
    note_verifier,
    open_note,
    parse_checkpoint,
    parse_note,
    parse_policy,
    sign_note,
)
from capability_anchor.note.cosignature import signed_message, timestamp_of

# --- golang.org/x/mod sumdb/note/note_test.go ---------------------------------------------

PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_SIG = (
    "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdng"
    "otpRZb6KE6RyyBwJnAM=\n"
)
ENOCH_SIG = (
    "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWL"
    "ox33WWd1RvMc+QQ=\n"
)
SIGNED = TEXT + "\n" + PETER_SIG


def _signer_from_go_skey(skey: str) -> NoteSigner:
    """A Go `PRIVATE+KEY+<name>+<hex>+<base64(0x01 || seed)>` as our NoteSigner."""
    _, _, name, ident, encoded = skey.split("+", 4)
    material = base64.b64decode(encoded)
    assert material[0] == 0x01 and len(material) == 33
    signer = NoteSigner(name, SigningKey.from_seed(material[1:]))
    assert signer.verifier.key_id.hex() == ident
    return signer


def test_key_id_vkey_and_signature_equal_sumdb_note() -> None:
    signer = _signer_from_go_skey(PETER_SKEY)
    assert signer.verifier.key_id == bytes.fromhex("c74f20a3")
    assert signer.verifier.vkey() == PETER_VKEY
    assert sign_note(TEXT, signer) == SIGNED.encode("utf-8")


def test_open_like_sumdb_note() -> None:
    peter, enoch = note_verifier(PETER_VKEY), note_verifier(ENOCH_VKEY)
    data = (TEXT + "\n" + PETER_SIG + ENOCH_SIG).encode()
    one = open_note(data, [peter])
    assert one.note.text == TEXT
    assert [s.name for s in one.verified] == ["PeterNeumann"]
    assert [s.name for s in one.ignored] == ["EnochRoot"]
    both = open_note(data, [peter, enoch])
    assert [s.name for s in both.verified] == ["PeterNeumann", "EnochRoot"]
    with pytest.raises(NoteError, match="no signature by a known key"):
        open_note(data, [])
    # ABCD spliced into Peter's signature (TestOpen "Invalid signature"): a known key's bad
    # signature rejects the note.
    bad = TEXT + "\n" + PETER_SIG[:60] + "ABCD" + PETER_SIG[60:]
    with pytest.raises(NoteError, match="PeterNeumann"):
        open_note(bad.encode(), [peter])


@pytest.mark.parametrize(
    "message",
    [
        TEXT,
        TEXT + "\n",
        TEXT + "\n" + PETER_SIG[:-1],
        "\x01" + TEXT + "\n" + PETER_SIG,
        TEXT + "\n" + "— Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXg"
        "KvqfqdngotpRZb6KE6RyyBwJnAM=",
        TEXT + "\n" + PETER_SIG + "Unexpected line.\n",
    ],
)
def test_sumdb_malformed_notes(message: str) -> None:
    with pytest.raises(MalformedNote):
        parse_note(message.encode())


def test_sumdb_malformed_note_not_utf8() -> None:
    with pytest.raises(MalformedNote, match="UTF-8"):
        parse_note(b"\xff" + (TEXT + "\n" + PETER_SIG).encode())


def test_sumdb_more_than_100_signatures_is_malformed() -> None:
    with pytest.raises(MalformedNote, match="100"):
        parse_note((TEXT + "\n" + PETER_SIG * 101).encode())


def _manglings(vkey: str) -> set[str]:
    """TestNewVerifier's: every proper substring, and every byte incremented by one."""
    out = {vkey[i:j] for i in range(len(vkey) + 1) for j in range(i + 1, len(vkey) + 1)}
    out.discard(vkey)
    for i in range(len(vkey)):
        out.add(vkey[:i] + chr(ord(vkey[i]) + 1) + vkey[i + 1 :])
    return out


def test_every_sumdb_mangling_of_the_vkey_is_refused() -> None:
    note_verifier(PETER_VKEY)
    refused = 0
    for mangled in _manglings(PETER_VKEY):
        with pytest.raises(MalformedVKey):
            note_verifier(mangled)
        refused += 1
    assert refused > 2000
    # wrong key length with adjusted hash; unknown algorithm with adjusted hash
    for bad in (
        "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
        "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
    ):
        with pytest.raises(MalformedVKey):
            note_verifier(bad)


# --- transparency-dev/formats key pairs ------------------------------------------------------

PAIRS = [
    # log/note_test.go
    (
        "PRIVATE+KEY+Log+2271c621+AdEIq9FLRQni54Wg68T96VJO+iayOaulswav2DUMKgvQ",
        "Log+2271c621+AemuH5ooBpEPcr+W8onrjA1NfuzBVHdezakU81Ekarvs",
    ),
    (
        "PRIVATE+KEY+Known+451c786d+AQPRoE2+Z+Ed1HaHBA9F/FfracvcZ2rDU39kCecMEoci",
        "Known+451c786d+AXAQ0T7lbwuY4ABJ9/MYY9bWV3hmSyOGVt2x42NkmdUH",
    ),
    (
        "PRIVATE+KEY+KnownAgain+4893b26c+ARhZda/l25zjGZswYLDZsLNRzNpmv5wYTN9IoTr1OJ2+",
        "KnownAgain+4893b26c+AQ+LR7BFF/F/dkpIBjBpSvT0crkteizuUkavAoGeaYMj",
    ),
    (
        "PRIVATE+KEY+Unknown+fdbb2e08+Aav2knTC6orbhXX8pMWuNiWgO+Wwk2DB+h1eU2Q1W1nU",
        "Unknown+fdbb2e08+AWgRIYZ+8x1Vl+1Q+sR8zciNHiYI1SdlBjNw+RV0rots",
    ),
    # witness/witness_test.go
    (
        "PRIVATE+KEY+Wit1+55ee4561+AeadRiG7XM4XiieCHzD8lxysXMwcViy5nYsoXURWGrlE",
        "Wit1+55ee4561+AVhZSmQj9+SoL+p/nN0Hh76xXmF7QcHfytUrI1XfSClk",
    ),
    (
        "PRIVATE+KEY+Wit2+85ecc407+AfPTvxw5eUcqSgivo2vaiC7JPOMUZ/9baHPSDrWqgdGm",
        "Wit2+85ecc407+AWVbwFJte9wMQIPSnEnj4KibeO6vSIOEDUTDp3o63c2x",
    ),
    (
        "PRIVATE+KEY+Wit3+d3ed3be7+AR2Kg8k6ccBr5QXz5SHtnkOS4UGQGEQaWi6Gfr6Mm3X5",
        "Wit3+d3ed3be7+ASb6Uz1+fxAcXkMvDd7nGa3FjDce7LxIKmbbTCT0MpVn",
    ),
    # note/note_verifier_test.go
    (
        "PRIVATE+KEY+logandmap+38581672+AXJ0FKWOcO2ch6WC8kP705Ed3Gxu7pVtZLhfHAQwp+FE",
        "logandmap+38581672+Ab/PCr1eCclRPRMBqw/r5An1xO71MCnImLiospEq6b4l",
    ),
]


@pytest.mark.parametrize(("skey", "vkey"), PAIRS)
def test_transparency_dev_key_pairs(skey: str, vkey: str) -> None:
    signer = _signer_from_go_skey(skey)
    assert signer.verifier.vkey() == vkey
    assert note_verifier(vkey) == signer.verifier


def test_a_cosigner_key_id_uses_type_0x04() -> None:
    # witness/witness_test.go's Wit1: its note vkey is type 0x01; as a cosigner the same key
    # has another key ID (SHA-256 over name || 0x0A || 0x04 || key).
    signer = _signer_from_go_skey(PAIRS[4][0])
    cosigner = Cosigner("Wit1", signer.key)
    from_note_vkey = cosignature_verifier(PAIRS[4][1])
    assert from_note_vkey == cosigner.verifier
    assert cosigner.verifier.key_id != signer.verifier.key_id
    assert cosignature_verifier(cosigner.verifier.vkey()) == cosigner.verifier


# --- C2SP texts ---------------------------------------------------------------------------------

C2SP_FOO_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
C2SP_FOO_NOTE = (
    "This is an example message.\n\n"
    "— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mF"
    "XmRKuwHjG1Yu72IneyaQM=\n"
)
SOFA = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
SOFA_LOG_LINE = (
    "— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zh"
    "cyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
)
SOFA_WITNESS_LINE = (
    "— witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX"
    "3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==\n"
)


def test_signed_note_example_verifies() -> None:
    opened = open_note(C2SP_FOO_NOTE.encode(), [note_verifier(C2SP_FOO_VKEY)])
    assert opened.note.text == "This is an example message.\n"
    assert opened.note.to_bytes() == C2SP_FOO_NOTE.encode()


def test_checkpoint_and_cosignature_examples() -> None:
    note = parse_note((SOFA + "\n" + SOFA_LOG_LINE + SOFA_WITNESS_LINE).encode())
    checkpoint = parse_checkpoint(note.text)
    assert (checkpoint.origin, checkpoint.size) == ("example.com/behind-the-sofa", 20852163)
    assert checkpoint.text() == SOFA
    witness = note.signatures[1]
    assert witness.name == "witness.example.com/w1"
    # tlog-cosignature's example message has "time 1679315147": the timestamp in the line
    assert timestamp_of(witness.signature) == 1679315147
    assert signed_message(SOFA.encode(), 1679315147) == (
        b"cosignature/v1\ntime 1679315147\n" + SOFA.encode()
    )


# --- transparency-dev/formats log/checkpoint_test.go ------------------------------------------


@pytest.mark.parametrize(
    ("body", "origin", "size", "root", "extensions"),
    [
        ("Log\n123\nYmFuYW5hcw==\n", "Log", 123, None, ()),
        (
            "Log\n9944\ndGhlIHZpZXcgZnJvbSB0aGUgdHJlZSB0b3BzIGlzIGdyZWF0IQ==\nlots\nof\nlines\n",
            "Log",
            9944,
            None,
            ("lots", "of", "lines"),
        ),
        (
            "sofa\n1\n" + base64.b64encode(bytes(range(32))).decode() + "\nHere's data.\n",
            "sofa",
            1,
            bytes(range(32)),
            ("Here's data.",),
        ),
    ],
)
def test_checkpoint_bodies(
    body: str, origin: str, size: int, root: bytes | None, extensions: tuple[str, ...]
) -> None:
    if root is None:
        # transparency-dev/formats accepts any hash length; C2SP's root is a SHA-256, 32 bytes
        with pytest.raises(MalformedNote, match="32 bytes"):
            parse_checkpoint(body)
        return
    checkpoint = parse_checkpoint(body)
    assert checkpoint == Checkpoint(origin, size, root, extensions)
    assert checkpoint.text() == body


@pytest.mark.parametrize(
    "body",
    [
        "Head\n9944\n",  # insufficient lines
        "\n9944\ndGhlIHZpZXcgZnJvbSB0aGUgdHJlZSB0b3BzIGlzIGdyZWF0IQ==\n",  # empty origin
        "Log\n123\nYmFuYW5hcw==",  # missing newline on roothash
        "Log\n9944\ndGhlIHZpZXcgZnJvbSB0aGUgdHJlZSB0b3BzIGlzIGdyZWF0IQ==\n\n\n\n",  # empty lines
    ],
)
def test_checkpoint_bodies_refused(body: str) -> None:
    with pytest.raises(MalformedNote):
        parse_checkpoint(body)


# --- transparency-dev/formats witness/witness_policy_test.go ----------------------------------

W1 = "sigsum.org+e4ade967+AZuUY6B08pW3QVHu8uvsrxWPcAv9nykap2Nb4oxCee+r"
W2 = "example.com+3753d3de+AebBhMcghIUoavZpjuDofa4sW6fYHyVn7gvwDBfvkvuM"
REMORA = "remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2"

TIDY = f"""
witness w1 {W1} https://sigsum.org/witness/
witness w2 {W2} https://example.com/witness/
group g1 all w1 w2
quorum g1
"""
SPACED = f"""

# comment
witness   w1      {W1}     https://sigsum.org/witness/
  witness w2            {W2}    https://example.com/witness/


\t\t\t     #comment
group      g1    all     w1  w2

\t\t quorum      g1
"""


@pytest.mark.parametrize("text", [TIDY, SPACED])
def test_policies_from_transparency_dev(text: str) -> None:
    policy = parse_policy(text.encode())
    assert [w.name for w in policy.witnesses] == ["w1", "w2"]
    assert policy.witnesses[0].url == "https://sigsum.org/witness/"
    assert policy.groups[0].threshold == 2
    assert policy.quorum == "g1"
    assert policy.satisfied_by({"w1", "w2"}) and not policy.satisfied_by({"w1"})


def test_policy_mixing_0x01_and_0x04_witness_vkeys() -> None:
    policy = parse_policy(
        f"witness w1 {W1}\nwitness w4 {REMORA} https://example.com/remora\n"
        "group g1 2 w1 w4\nquorum g1\n".encode()
    )
    assert policy.groups[0].threshold == 2


def test_duplicate_witness_key_is_refused() -> None:
    # the Go test's policies list example.com's key as both w2 and w3; tlog-policy says
    # duplicate witnesses (the same public key) are not allowed.
    text = f"witness w2 {W2}\nwitness w3 {W2}\nquorum w2\n"
    with pytest.raises(MalformedPolicy, match="line 2"):
        parse_policy(text.encode())
