"""The witness client's pieces against the in-test witness (`tests/kit/witnesskit.py`, written
from the C2SP texts): the test witness's own consistency check agrees with the naive RFC 9162
tree, one HTTP exchange under a deadline (`witnessing.client`), and what each answer means
(`witnessing.answers`) for real answers of a real loopback witness."""

from __future__ import annotations

import hashlib
import time

import pytest

from capability_anchor.errors import UsageError, WitnessError
from capability_anchor.keys import SigningKey
from capability_anchor.note import Checkpoint, NoteSigner, parse_policy, sign_checkpoint
from capability_anchor.witness.client.client import (
    COSIGNED,
    FAILED,
    RETRY_FROM,
    STOP,
    UNKNOWN,
    Answer,
    Sent,
    judge,
    post,
    request_body,
)
from tests.kit.naive_rfc9162 import Naive, leaf
from tests.kit.witnesskit import TestWitness, consistent

ORIGIN = "resolver.example/history"
KEY = SigningKey.from_seed(hashlib.sha256(b"witness-answers").digest())
SIGNER = NoteSigner(ORIGIN, KEY)
LOG_VKEY = SIGNER.verifier.vkey()


def checkpoint(size: int, root: bytes | None = None) -> bytes:
    root = root if root is not None else hashlib.sha256(b"root %d" % size).digest()
    return sign_checkpoint(Checkpoint(ORIGIN, size, root), SIGNER)


def sent_to(witness: TestWitness, old: int, size: int) -> Sent:
    policy = parse_policy(f"witness w1 {witness.vkey} {witness.url}\nquorum w1\n".encode())
    return Sent(policy.witnesses[0], old, size, checkpoint(size))


def ask(witness: TestWitness, sent: Sent) -> Answer:
    return post(witness.url, request_body(sent.old, [], sent.checkpoint), deadline=5)


# --- the test witness's own check is RFC 9162's ----------------------------------------------


def test_the_test_witness_checks_consistency_as_rfc9162_says() -> None:
    tree = Naive([leaf(b"%d" % i) for i in range(40)])
    for n in range(1, 41):
        for m in range(1, n + 1):
            proof, _ = tree.consistency(m, n)
            assert consistent(m, n, tree.root(m), tree.root(n), proof), (m, n)
            if proof:
                bad = [proof[0][:-1] + bytes([proof[0][-1] ^ 1]), *proof[1:]]
                assert not consistent(m, n, tree.root(m), tree.root(n), bad), (m, n)
            assert not consistent(m, n, tree.root(m), tree.root(n - 1) if n > m else b"x", proof)


# --- the request body and the exchange -------------------------------------------------------


def test_the_request_body_is_tlog_witness_s() -> None:
    note = checkpoint(5)
    h = bytes(range(32))
    assert request_body(0, [], note) == b"old 0\n\n" + note
    body = request_body(3, [h, h], note)
    assert body.startswith(b"old 3\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n")
    assert body.endswith(b"=\n\n" + note)
    with pytest.raises(UsageError):
        request_body(0, [h], note)  # tlog-witness: no proof from size 0
    with pytest.raises(UsageError):
        request_body(3, [h] * 64, note)  # at most 63 lines


def test_a_witness_that_is_down_or_hangs_costs_one_deadline() -> None:
    with TestWitness("witness.test/w1", LOG_VKEY) as witness:
        url = witness.down()
    with pytest.raises(WitnessError, match="cannot connect"):
        post(url, b"old 0\n\n", deadline=2)
    with TestWitness("witness.test/w1", LOG_VKEY) as witness:
        witness.mode = "hang"
        started = time.monotonic()
        with pytest.raises(WitnessError, match=r"within the 1\.5 s deadline"):
            post(witness.url, request_body(0, [], checkpoint(3)), deadline=1.5)
        assert 1.4 < time.monotonic() - started < 2.5
        assert len(witness.requests) == 1


# --- what each answer means ------------------------------------------------------------------


def test_a_200_from_the_witness_is_verified_over_our_checkpoint() -> None:
    with TestWitness("witness.test/w1", LOG_VKEY) as witness:
        sent = sent_to(witness, 0, 7)
        answer = ask(witness, sent)
        assert answer.status == 200
        verdict = judge(answer, sent, now=int(time.time()))
        assert verdict.kind == COSIGNED
        [(line, timestamp)] = verdict.cosignatures
        assert line.name == "witness.test/w1" and abs(timestamp - time.time()) < 5
        assert line.line() == answer.body.decode()
        # The same line judged against another checkpoint of ours does not verify.
        other = Sent(sent.witness, 0, 7, checkpoint(7, b"\x01" * 32))
        assert judge(answer, other, now=int(time.time())).kind == FAILED
        # Our clock 120 s behind the witness's: the line is dated in our future.
        late = judge(answer, sent, now=int(time.time()) - 120)
        assert late.kind == FAILED and "after our clock" in late.detail


@pytest.mark.parametrize(
    ("mode", "detail"),
    [
        ("wrong-key", "no cosignature by witness.test/w1+"),
        ("other-checkpoint", "a line that fails"),
        ("garbage", "not signature lines"),
    ],
)
def test_a_200_without_a_good_line_by_the_witness_is_a_failure(mode: str, detail: str) -> None:
    with TestWitness("witness.test/w1", LOG_VKEY) as witness:
        witness.mode = mode
        sent = sent_to(witness, 0, 4)
        verdict = judge(ask(witness, sent), sent, now=int(time.time()))
        assert verdict.kind == FAILED and detail in verdict.detail
        assert verdict.cosignatures == ()


@pytest.mark.parametrize(
    ("mode", "conflict", "kind", "size"),
    [
        ("409-smaller", 2, RETRY_FROM, 2),
        ("409-larger", 9, STOP, 9),
        ("409-smaller", 0, STOP, 0),  # the old size we sent: it holds another checkpoint
        ("422", 0, STOP, None),
        ("403", 0, UNKNOWN, None),
        ("404", 0, UNKNOWN, None),
        ("500", 0, FAILED, None),
    ],
)
def test_each_answer_class_means_what_spec_12_3_says(
    mode: str, conflict: int, kind: str, size: int | None
) -> None:
    with TestWitness("witness.test/w1", LOG_VKEY) as witness:
        witness.mode, witness.conflict_size = mode, conflict
        sent = sent_to(witness, 0, 5)
        verdict = judge(ask(witness, sent), sent, now=int(time.time()))
        assert (verdict.kind, verdict.witness_size) == (kind, size), verdict.detail


def test_a_409_that_is_not_a_tlog_size_is_a_failure() -> None:
    with TestWitness("witness.test/w1", LOG_VKEY) as witness:
        sent = sent_to(witness, 0, 5)
    for answer in (
        Answer(409, "text/plain", b"3\n"),
        Answer(409, "text/x.tlog.size", b"03\n"),
        Answer(409, "text/x.tlog.size", b"3"),
        Answer(409, "text/x.tlog.size", b"three\n"),
    ):
        verdict = judge(answer, sent, now=0)
        assert verdict.kind == FAILED and "not a tlog size" in verdict.detail
