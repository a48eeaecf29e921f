"""The throwaway RFC 3161 TSA of `tools/test_tsa.py` behaves as the RFC 3161 work needs:
genuine stamps pass `openssl ts -verify`, and every fault mode fails the way it claims to."""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.kit import paths
from tests.kit.tsakit import (  # noqa: F401  (fixtures)
    OPENSSL,
    QUERY_TYPE,
    REPLY_TYPE,
    Pki,
    TestTsa,
    closed_port_url,
    make_query,
    other_pki_ec,
    other_pki_rsa,
    parse_query,
    pki_ec,
    pki_rsa,
    post,
    reply_text,
    tsa_ec,
    tsa_rsa,
    verify,
    verify_query,
)

TOOL = paths.ROOT / "tools" / "test_tsa.py"


@pytest.fixture(params=["rsa", "ec"])
def tsa(request: pytest.FixtureRequest) -> TestTsa:
    return request.getfixturevalue(f"tsa_{request.param}")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "data.bin"
    path.write_bytes(b"capability-anchor checkpoint " + os.urandom(16))
    return path


def digest_hex(text: str) -> str:
    hexes = []
    for line in text.split("Message data:", 1)[1].splitlines()[1:]:
        m = re.match(r"\s+[0-9a-f]{4} - ((?:[0-9a-f]{2}[ -]){1,16})", line + " ")
        if not m:
            break
        hexes.append(re.sub(r"[ -]", "", m.group(1)))
    return "".join(hexes)


def connect(tsa: TestTsa, timeout: float) -> http.client.HTTPConnection:
    url = urllib.parse.urlsplit(tsa.url)
    return http.client.HTTPConnection(url.hostname or "", url.port, timeout=timeout)


# --- the PKI ---


def x509_text(cert: Path) -> str:
    done = subprocess.run(
        [OPENSSL, "x509", "-in", str(cert), "-noout", "-text"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout


@pytest.mark.parametrize("kind", ["rsa", "ec"])
def test_pki_certificates(kind: str, request: pytest.FixtureRequest) -> None:
    pki: Pki = request.getfixturevalue(f"pki_{kind}")
    ca, tsa = x509_text(pki.ca_cert), x509_text(pki.tsa_cert)
    assert re.search(r"Basic Constraints: critical\s+CA:TRUE", ca)
    assert re.search(r"Key Usage: critical\s+Certificate Sign, CRL Sign", ca)
    assert re.search(r"Extended Key Usage: critical\s+Time Stamping\s", tsa)
    assert re.search(r"Key Usage: critical\s+Digital Signature\s", tsa)
    key = "rsaEncryption" if kind == "rsa" else "id-ecPublicKey"
    assert f"Public Key Algorithm: {key}" in tsa
    assert ("Public-Key: (2048 bit)" if kind == "rsa" else "NIST CURVE: P-256") in tsa


# --- genuine stamps ---


def test_ok_reply_verifies(tsa: TestTsa, data: Path) -> None:
    query = make_query(data)
    status, ctype, reply = post(tsa.url, query)
    assert (status, ctype) == (200, REPLY_TYPE)
    assert tsa.queries == [query]

    ok, out = verify(data, reply, tsa.pki.ca_cert)
    assert ok, out
    ok, out = verify_query(query, reply, tsa.pki.ca_cert)
    assert ok, out

    text = reply_text(reply)
    assert "Status: Granted." in text
    assert "Hash Algorithm: sha256" in text
    assert "Policy OID: 1.2.3.4.1" in text or "Policy OID: tsa_policy1" in text
    assert digest_hex(text) == hashlib.sha256(data.read_bytes()).hexdigest()
    assert parse_query(query).digest == hashlib.sha256(data.read_bytes()).digest()


def test_ok_reply_does_not_verify_other_data(tsa: TestTsa, data: Path, tmp_path: Path) -> None:
    _, _, reply = post(tsa.url, make_query(data))
    other = tmp_path / "other.bin"
    other.write_bytes(data.read_bytes() + b"!")
    ok, out = verify(other, reply, tsa.pki.ca_cert)
    assert not ok, out


def test_wrong_content_type_is_refused(tsa: TestTsa, data: Path) -> None:
    url = urllib.parse.urlsplit(tsa.url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=5)
    try:
        conn.request("POST", "/", body=make_query(data), headers={"Content-Type": "text/plain"})
        response = conn.getresponse()
        response.read()
        assert response.status == 415
    finally:
        conn.close()


# --- fault modes ---


def test_down_connection_refused(tsa: TestTsa, data: Path) -> None:
    query = make_query(data)
    url = tsa.url
    tsa.stop()
    for target in (url, closed_port_url()):
        with pytest.raises(urllib.error.URLError) as caught:
            post(target, query, timeout=2)
        assert isinstance(caught.value.reason, ConnectionRefusedError)


def test_down_mode_closes_without_answer(tsa: TestTsa, data: Path) -> None:
    tsa.mode = "down"
    with pytest.raises((ConnectionError, urllib.error.URLError)):
        post(tsa.url, make_query(data), timeout=5)


def test_hang_times_out(tsa: TestTsa, data: Path) -> None:
    tsa.mode = "hang"
    conn = connect(tsa, timeout=1)
    try:
        conn.request("POST", "/", body=make_query(data), headers={"Content-Type": QUERY_TYPE})
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            conn.getresponse()
        assert 0.8 < time.monotonic() - started < 5
    finally:
        conn.close()
    started = time.monotonic()
    tsa.stop()  # releases the hanging handler at once
    assert time.monotonic() - started < 5


def test_drip_sends_slowly(tsa: TestTsa, data: Path) -> None:
    tsa.mode = "drip"
    conn = connect(tsa, timeout=5)
    try:
        conn.request("POST", "/", body=make_query(data), headers={"Content-Type": QUERY_TYPE})
        response = conn.getresponse()
        assert response.status == 200
        assert response.getheader("Content-Type") == REPLY_TYPE
        length = int(response.getheader("Content-Length") or 0)
        assert length > 100
        started = time.monotonic()
        first = response.read(3)
        elapsed = time.monotonic() - started
        assert first[:1] == b"\x30"  # a DER SEQUENCE is coming, one byte at a time
        assert len(first) == 3
        assert elapsed > 1.2, elapsed  # 3 bytes at 0.5 s each
    finally:
        conn.close()


def test_drip_whole_reply_verifies(tsa: TestTsa, data: Path) -> None:
    tsa.mode = "drip"
    tsa.drip_interval = 0.0005
    status, _, reply = post(tsa.url, make_query(data), timeout=10)
    assert status == 200
    ok, out = verify(data, reply, tsa.pki.ca_cert)
    assert ok, out


def test_garbage(tsa: TestTsa, data: Path) -> None:
    tsa.mode = "garbage"
    status, ctype, reply = post(tsa.url, make_query(data))
    assert (status, ctype) == (200, REPLY_TYPE)
    assert len(reply) == 512
    ok, out = verify(data, reply, tsa.pki.ca_cert)
    assert not ok, out


def test_http500(tsa: TestTsa, data: Path) -> None:
    tsa.mode = "http500"
    status, _, _ = post(tsa.url, make_query(data))
    assert status == 500


def test_rejection(tsa: TestTsa, data: Path) -> None:
    tsa.mode = "rejection"
    status, ctype, reply = post(tsa.url, make_query(data))
    assert (status, ctype) == (200, REPLY_TYPE)
    text = reply_text(reply)
    assert "Status: Rejected." in text
    assert "TST info:\nNot included." in text
    ok, out = verify(data, reply, tsa.pki.ca_cert)
    assert not ok, out


def test_other_digest(tsa: TestTsa, data: Path) -> None:
    tsa.mode = "other_digest"
    query = make_query(data)
    status, _, reply = post(tsa.url, query)
    assert status == 200
    text = reply_text(reply)
    assert "Status: Granted." in text  # genuinely signed ...
    assert digest_hex(text) != hashlib.sha256(data.read_bytes()).hexdigest()  # ... for another
    for ok, out in (
        verify(data, reply, tsa.pki.ca_cert),
        verify_query(query, reply, tsa.pki.ca_cert),
    ):
        assert not ok, out
        assert "message imprint mismatch" in out


def test_other_nonce(tsa: TestTsa, data: Path) -> None:
    tsa.mode = "other_nonce"
    query = make_query(data)
    status, _, reply = post(tsa.url, query)
    assert status == 200
    assert "Status: Granted." in reply_text(reply)
    ok, out = verify_query(query, reply, tsa.pki.ca_cert)
    assert not ok, out
    assert "nonce mismatch" in out
    # The digest is right, so checking only the data cannot tell: the nonce must be checked.
    ok, out = verify(data, reply, tsa.pki.ca_cert)
    assert ok, out


def test_other_ca(tsa: TestTsa, data: Path) -> None:
    tsa.mode = "other_ca"
    query = make_query(data)
    status, _, reply = post(tsa.url, query)
    assert status == 200
    assert "Status: Granted." in reply_text(reply)
    for ok, out in (
        verify(data, reply, tsa.pki.ca_cert),
        verify_query(query, reply, tsa.pki.ca_cert),
    ):
        assert not ok, out
    ok, out = verify(data, reply, tsa.other_pki.ca_cert)  # genuinely signed by the other CA
    assert ok, out


def test_unknown_mode_is_refused(tsa: TestTsa) -> None:
    with pytest.raises(ValueError):
        tsa.mode = "sideways"


# --- as a script ---


@pytest.fixture
def script(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    proc = subprocess.Popen(
        [sys.executable, str(TOOL), "--port", "0", "--key", "ec", "--dir", str(tmp_path / "pki")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[-1]
        ca = Path(proc.stdout.readline().split()[-1])
        yield url, ca
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
    assert proc.returncode == 0


def test_script(script: tuple[str, Path], data: Path) -> None:
    url, ca = script
    assert url.startswith("http://127.0.0.1:")
    status, _, reply = post(url, make_query(data))
    assert status == 200
    ok, out = verify(data, reply, ca)
    assert ok, out


def test_concurrent_queries_all_verify(tsa: TestTsa, tmp_path: Path) -> None:
    files = []
    for i in range(6):
        path = tmp_path / f"d{i}"
        path.write_bytes(os.urandom(32))
        files.append(path)
    queries = [make_query(path) for path in files]
    with ThreadPoolExecutor(max_workers=6) as pool:
        replies = list(pool.map(lambda q: post(tsa.url, q), queries))
    assert sorted(tsa.queries) == sorted(queries)
    for path, (status, _, reply) in zip(files, replies, strict=True):
        assert status == 200
        ok, out = verify(path, reply, tsa.pki.ca_cert)
        assert ok, out


def test_stop_joins_every_thread(tsa: TestTsa, data: Path) -> None:
    tsa.mode = "drip"
    conn = connect(tsa, timeout=5)
    try:
        conn.request("POST", "/", body=make_query(data), headers={"Content-Type": QUERY_TYPE})
        conn.getresponse()
        tsa.stop()  # releases the dripping handler and joins it
        tsa.stop()  # idempotent
        assert not any(t.name.startswith("test-tsa-") for t in threading.enumerate())
        assert not any("process_request_thread" in t.name for t in threading.enumerate())
    finally:
        conn.close()
