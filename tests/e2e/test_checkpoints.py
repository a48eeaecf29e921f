"""The history's checkpoints (SPEC §12.2): a signed C2SP note at every history size, stored
in the head's own transaction, deterministic and never changed; the origin fixed when the
history is created; what `/history/checkpoint` and `/history/proof` serve (§12.4), built
from the stored checkpoints and cosignatures.

Each note is checked here without the product's note code: its text is split by hand, the
root recomputed with `naive_rfc9162` from the stored heads, the key ID with hashlib and the
Ed25519 signature with `cryptography`. aics-tlog (its own venv) verifies a stored one.
"""

from __future__ import annotations

import base64
import hashlib
import sqlite3
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from capability_anchor.errors import NotFound
from capability_anchor.keys import SigningKey
from capability_anchor.log import Log
from capability_anchor.merkle import verify_inclusion
from capability_anchor.note import Cosigner, cosignature_verifier, parse_note, parse_tlog_proof
from capability_anchor.store import CosignatureRow
from tests.e2e.test_history import audit, heads_in_order, table
from tests.e2e.test_store_schema_compat import as_0x_wrote_it
from tests.kit.c2spkit import ensure_venv, run_peer
from tests.kit.logkit import DAY5, ISS, History, build_history, raw, record
from tests.kit.naive_rfc9162 import Naive

ORIGIN = "resolver.example/history"
EM_DASH = "\u2014"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> History:
    history = build_history(tmp_path_factory.mktemp("checkpoints"))
    with history.open() as log:
        log.append([record(DAY5, n) for n in range(3)])
        history.clock.t += 60
        assert log.checkpoint() is not None
    return history


def stored_checkpoints(data: Path) -> dict[int, bytes]:
    with raw(data) as conn:
        return {int(s): bytes(n) for s, n in conn.execute("SELECT size, note FROM checkpoints")}


def public_key(data: Path) -> bytes:
    with Log.open(data) as log:
        return log.key.public.raw


def check_note(note: bytes, size: int, root: bytes, public: bytes) -> None:
    """The §12.2 bytes, taken apart without the product's code."""
    text, sep, signatures = note.decode("utf-8").partition("\n\n")
    assert sep
    text += "\n"
    assert text == f"{ORIGIN}\n{size}\n{base64.b64encode(root).decode()}\n"
    assert signatures.endswith("\n") and signatures.count("\n") == 1
    dash, name, blob = signatures[:-1].split(" ")
    assert (dash, name) == (EM_DASH, ORIGIN)
    raw_sig = base64.b64decode(blob, validate=True)
    key_id = hashlib.sha256(ORIGIN.encode() + b"\n\x01" + public).digest()[:4]
    assert raw_sig[:4] == key_id and len(raw_sig) == 68
    Ed25519PublicKey.from_public_bytes(public).verify(raw_sig[4:], text.encode())


def test_every_history_size_has_its_checkpoint_signed_over_the_naive_root(made: History) -> None:
    hashes = [h for _, h in heads_in_order(made.data)]
    naive = Naive(hashes)
    stored = stored_checkpoints(made.data)
    assert sorted(stored) == list(range(1, len(hashes) + 1))  # size 0 is never signed
    public = public_key(made.data)
    for size, note in stored.items():
        check_note(note, size, naive.root(size), public)


def test_the_vkey_is_the_origin_the_key_id_and_the_key(made: History) -> None:
    public = public_key(made.data)
    key_id = hashlib.sha256(ORIGIN.encode() + b"\n\x01" + public).digest()[:4]
    encoded = base64.b64encode(b"\x01" + public).decode()
    with made.open() as log:
        assert log.read.history.origin() == ORIGIN
        assert log.read.history.vkey() == f"{ORIGIN}+{key_id.hex()}+{encoded}"


def test_aics_tlog_verifies_a_stored_checkpoint(made: History) -> None:
    peer = ensure_venv()
    with made.open() as log:
        size = log.store.checkpoint_size()
        answer = run_peer(
            peer,
            {
                "op": "verify",
                "note": log.read.history.checkpoint(size).decode(),
                "log_vkey": log.read.history.vkey(),
                "witness_vkeys": [],
                "quorum": 0,
                "origin": ORIGIN,
            },
        )
    assert answer["log_ok"], answer


def test_the_origin_stays_when_the_public_url_changes(made: History, tmp_path: Path) -> None:
    copy = made.copy(tmp_path / "data")
    with copy.open() as log:
        log.public_url = "https://elsewhere.example/anchor"
        log.append([record(DAY5, 50)])
        copy.clock.t += 60
        assert log.checkpoint() is not None
        size = log.store.checkpoint_size()
        assert log.read.history.checkpoint(size).startswith(f"{ORIGIN}\n{size}\n".encode())


def test_a_new_log_fixes_its_origin_from_its_public_url(tmp_path: Path) -> None:
    with Log.init(tmp_path / "d", iss=ISS, public_url="https://x.example:8443/anchor/") as log:
        assert log.read.history.origin() == "x.example:8443/anchor/history"
        with pytest.raises(NotFound):
            log.read.history.served_checkpoint()


def test_a_schema_3_log_gets_its_origin_and_every_checkpoint_when_a_writer_opens_it(
    made: History, tmp_path: Path
) -> None:
    """As schema 3 stored it: a history, no checkpoints, no origin (migration 4, then the
    writer signs them all, byte for byte what the write path signed)."""
    old = as_0x_wrote_it(made.data, tmp_path / "v3", version=2)
    with raw(old) as conn:
        conn.execute("DELETE FROM meta WHERE key = 'history_origin'")
    Log.open(old).close()
    assert table(old, "checkpoints") == table(made.data, "checkpoints")
    with raw(old) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'history_origin'").fetchone() == (
            ORIGIN,
        )
    assert audit(old) == (0, [])


@pytest.mark.parametrize(
    ("sql", "params", "match"),
    [
        ("UPDATE checkpoints SET note = x'00'", (), "cannot be updated"),
        ("DELETE FROM checkpoints WHERE size = 3", (), "cannot be deleted"),
        ("INSERT OR REPLACE INTO checkpoints VALUES (3, x'00')", (), "only ever of the next"),
        # Whichever of the two triggers SQLite runs first.
        ("INSERT INTO checkpoints VALUES (?, x'00')", (100,), "next size|size the history"),
        # The next size, but the history has no leaf for it yet.
        ("INSERT INTO checkpoints SELECT max(size) + 1, x'00' FROM checkpoints", (), "a size the"),
        (
            "INSERT INTO cosignatures (witness, key_id, size, timestamp, line, added) "
            "VALUES ('w', x'00000000', 99, 1, 'l', 1)",
            (),
            "of a stored checkpoint",
        ),
    ],
    ids=["update", "delete", "replace", "gap", "beyond_history", "cosignature_of_nothing"],
)
def test_the_store_refuses_checkpoint_changes(
    made: History, tmp_path: Path, sql: str, params: tuple[object, ...], match: str
) -> None:
    copy = made.copy(tmp_path / "data")
    with raw(copy.data) as conn, pytest.raises(sqlite3.IntegrityError, match=match):
        conn.execute(sql, params)
    assert stored_checkpoints(copy.data) == stored_checkpoints(made.data)


def _cosign(log: Log, name: str, size: int, t: int) -> CosignatureRow:
    """A real cosignature/v1 line by the test witness `name`, stored as the submitter does."""
    cosigner = Cosigner(name, SigningKey.from_seed(hashlib.sha256(name.encode()).digest()))
    text = parse_note(log.read.history.checkpoint(size)).text
    line = cosigner.cosign(text, t)
    row = CosignatureRow(name, line.key_id, size, t, line.line().rstrip("\n"))
    with log.store.write():
        assert log.store.insert_cosignature(row, t)
        assert not log.store.insert_cosignature(row, t)  # the same line is stored once
    return row


def _policy(names: list[str], quorum: str) -> bytes:
    lines = []
    for name in names:
        key = SigningKey.from_seed(hashlib.sha256(name.encode()).digest())
        vkey = Cosigner(name, key).verifier.vkey()
        lines.append(f"witness {name} {vkey} https://{name}")
    lines.append(f"group all {len(names)} " + " ".join(names))
    lines.append(f"quorum {quorum}")
    return ("\n".join(lines) + "\n").encode()


def test_the_served_checkpoint_is_the_newest_meeting_the_quorum(
    made: History, tmp_path: Path
) -> None:
    copy = made.copy(tmp_path / "data")
    a, b = "wa.example/w", "wb.example/w"
    with copy.open() as log:
        history = log.read.history
        newest = log.store.checkpoint_size()
        # No policy: the newest, with whatever it has.
        assert history.served_checkpoint() == history.checkpoint(newest)
        with log.store.write():
            log.store.set_policy(_policy([a, b], "all"), 1)
        # No checkpoint meets the quorum yet: the newest. (What is served is found once per
        # change of checkpoints, cosignatures or policy: each step below must show.)
        assert history.served_checkpoint() == history.checkpoint(newest)
        row_a = _cosign(log, a, newest - 2, 1_000)
        assert history.served_checkpoint() == history.checkpoint(newest)
        row_b = _cosign(log, b, newest - 2, 1_001)
        _cosign(log, a, newest, 1_002)  # only one of two on the newest: not served
        served = history.served_checkpoint()
        assert served == history.checkpoint(newest - 2) + (f"{row_a.line}\n{row_b.line}\n".encode())
        note = parse_note(served)
        for name in (a, b):
            vkey = Cosigner(
                name, SigningKey.from_seed(hashlib.sha256(name.encode()).digest())
            ).verifier.vkey()
            line = next(s for s in note.signatures if s.name == name)
            cosignature_verifier(vkey).verify(note.text.encode(), line.signature)
        # /history/checkpoint/<N> has every stored line of N.
        assert history.served_checkpoint(newest).count(b"\n" + EM_DASH.encode()) == 2
        # `quorum none`: the newest again.
        with log.store.write():
            log.store.set_policy(_policy([a, b], "none"), 2)
        assert history.served_checkpoint().startswith(history.checkpoint(newest))


def test_a_tlog_proof_proves_the_head_in_the_served_checkpoint(made: History) -> None:
    hashes = [h for _, h in heads_in_order(made.data)]
    naive = Naive(hashes)
    with made.open() as log:
        for index, leaf_hash in enumerate(hashes):
            for size in (None, index + 1):
                proof = parse_tlog_proof(log.read.history.tlog_proof(leaf_hash, size))
                checkpoint = proof.checkpoint
                assert proof.index == index
                assert checkpoint.size == (size or len(hashes))
                verify_inclusion(
                    leaf_hash, index, checkpoint.size, list(proof.path), naive.root(checkpoint.size)
                )
                assert proof.extra is not None
                payload = proof.extra.split(b".")[1]
                leaf = base64.urlsafe_b64decode(payload + b"=" * (-len(payload) % 4))
                assert hashlib.sha256(b"\x00" + leaf).digest() == leaf_hash
        with pytest.raises(NotFound):
            log.read.history.tlog_proof(bytes(32))
