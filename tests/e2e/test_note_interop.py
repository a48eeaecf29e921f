"""An independent implementation reads what `note/` writes, and `note/` reads what it writes:
aics-tlog (PyPI, its own venv; see tests/kit/c2spkit.py) verifies our signed checkpoints and
cosignatures, and we verify checkpoints it signs and cosigns. Our code never runs in its
venv; its code never runs in ours."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

from capability_anchor.errors import NoteSignatureError
from capability_anchor.keys import SigningKey
from capability_anchor.note import (
    Checkpoint,
    Cosigner,
    Note,
    NoteSigner,
    cosignature_verifier,
    note_verifier,
    open_checkpoint,
    open_note,
    parse_note,
    sign_checkpoint,
)
from tests.kit.c2spkit import ensure_venv, run_peer

ORIGIN = "resolver.example/history"
TIME = 1_793_797_200


def _seed(label: str) -> bytes:
    return hashlib.sha256(label.encode()).digest()


@pytest.fixture(scope="module")
def peer() -> Path:
    return ensure_venv()


def _ours(size: int, witnesses: list[str]) -> tuple[bytes, NoteSigner, list[Cosigner]]:
    log = NoteSigner(ORIGIN, SigningKey.from_seed(_seed("log")))
    root = hashlib.sha256(b"root %d" % size).digest()
    signed = parse_note(sign_checkpoint(Checkpoint(ORIGIN, size, root), log))
    cosigners = [Cosigner(name, SigningKey.from_seed(_seed(name))) for name in witnesses]
    lines = tuple(c.cosign(signed.text, TIME + i) for i, c in enumerate(cosigners))
    return Note(signed.text, signed.signatures + lines).to_bytes(), log, cosigners


def test_aics_tlog_verifies_our_checkpoint_and_cosignatures(peer: Path) -> None:
    note, log, cosigners = _ours(1234, ["w1.example/a", "w2.example/b"])
    answer = run_peer(
        peer,
        {
            "op": "verify",
            "note": note.decode(),
            "log_vkey": log.verifier.vkey(),
            "witness_vkeys": [c.verifier.vkey() for c in cosigners],
            "quorum": 2,
            "origin": ORIGIN,
        },
    )
    assert answer["ok"], answer
    assert answer["witnesses"] == ["w1.example/a", "w2.example/b"]
    assert answer["timestamps"] == {"w1.example/a": TIME, "w2.example/b": TIME + 1}


def test_aics_tlog_rejects_our_checkpoint_with_a_flipped_root(peer: Path) -> None:
    note, log, cosigners = _ours(7, ["w1.example/a"])
    text = note.decode()
    lines = text.split("\n")
    lines[2] = ("B" if lines[2][0] != "B" else "C") + lines[2][1:]
    answer = run_peer(
        peer,
        {
            "op": "verify",
            "note": "\n".join(lines),
            "log_vkey": log.verifier.vkey(),
            "witness_vkeys": [cosigners[0].verifier.vkey()],
            "quorum": 1,
        },
    )
    assert not answer["ok"] and not answer["log_ok"], answer


def test_vkeys_agree_with_aics_tlog(peer: Path) -> None:
    key = SigningKey.from_seed(_seed("vk"))
    for key_type, ours in (
        (0x01, NoteSigner("vk.example/x", key).verifier.vkey()),
        (0x04, Cosigner("vk.example/x", key).verifier.vkey()),
    ):
        theirs = run_peer(
            peer,
            {"op": "vkey", "name": "vk.example/x", "seed": _seed("vk").hex(), "type": key_type},
        )
        assert theirs["vkey"] == ours


def test_we_verify_checkpoints_aics_tlog_signs_and_cosigns(peer: Path) -> None:
    root = hashlib.sha256(b"theirs").digest()
    answer = run_peer(
        peer,
        {
            "op": "sign",
            "log_seed": _seed("their log").hex(),
            "origin": "theirs.example/log",
            "size": 99,
            "root": base64.b64encode(root).decode(),
            "witnesses": [
                {"name": "w1.example", "seed": _seed("tw1").hex(), "time": TIME},
                {"name": "w2.example", "seed": _seed("tw2").hex(), "time": TIME + 5},
            ],
        },
    )
    data = answer["note"].encode()
    witnesses = [cosignature_verifier(v) for v in answer["witness_vkeys"]]
    opened = open_checkpoint(data, [note_verifier(answer["log_vkey"])], origin="theirs.example/log")
    assert opened.checkpoint == Checkpoint("theirs.example/log", 99, root)
    cosigned = open_note(data, witnesses)
    assert [s.name for s in cosigned.verified] == ["w1.example", "w2.example"]
    # our verifiers, not theirs, decide: a cosignature over another size fails
    other = data.replace(b"\n99\n", b"\n98\n", 1)
    with pytest.raises(NoteSignatureError):
        open_note(other, witnesses)
