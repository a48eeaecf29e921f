"""Pytest fixtures and helpers around `tsa_server` (OpenSSL's own RFC 3161 TSA; also the
script `tools/test_tsa.py`).

    # tests/conftest.py provides the fixtures (tsa_ec, tsa_rsa, pki_*, other_pki_*)
    def test_stamp(tsa_ec, tmp_path):
        data = tmp_path / "data"; data.write_bytes(b"x")
        query = make_query(data)
        reply = post(tsa_ec.url, query)
        ok, out = verify(data, reply, tsa_ec.pki.ca_cert)

The PKI (a CA and a TSA certificate, RSA 2048 or EC P-256) is made once per session; each
test gets a fresh server in mode "ok" on a free loopback port, stopped (port closed, handler
threads joined) when the test ends. `verify` is the yardstick of the RFC 3161 issue: every
stamp the project accepts must also pass `openssl ts -verify -data FILE -in TSR -CAfile CA`.
"""

from __future__ import annotations

import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import tsa_server as test_tsa

Pki = test_tsa.Pki
TestTsa = test_tsa.TestTsa
make_pki = test_tsa.make_pki
closed_port_url = test_tsa.closed_port_url
parse_query = test_tsa.parse_query
OPENSSL = test_tsa.OPENSSL
QUERY_TYPE = test_tsa.QUERY_TYPE
REPLY_TYPE = test_tsa.REPLY_TYPE
CMD_TIMEOUT_S = 30.0


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [OPENSSL, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=CMD_TIMEOUT_S,
        check=False,
    )


def make_query(data: Path, *, cert: bool = True, nonce: bool = True) -> bytes:
    """`openssl ts -query -data DATA -sha256 [-cert]` as DER bytes."""
    with tempfile.TemporaryDirectory(prefix="tsq-") as tmp:
        out = Path(tmp) / "q.tsq"
        args: list[str | Path] = ["ts", "-query", "-data", data, "-sha256"]
        if cert:
            args.append("-cert")
        if not nonce:
            args.append("-no_nonce")
        done = _run(*args, "-out", out)
        assert done.returncode == 0, done.stderr
        return out.read_bytes()


def _verify(args: list[str | Path], reply: bytes | Path, ca: Path) -> tuple[bool, str]:
    with tempfile.TemporaryDirectory(prefix="tsr-") as tmp:
        if isinstance(reply, bytes):
            path = Path(tmp) / "r.tsr"
            path.write_bytes(reply)
            reply = path
        done = _run("ts", "-verify", *args, "-in", reply, "-CAfile", ca)
        out = done.stdout + done.stderr
        return done.returncode == 0 and "Verification: OK" in out, out


def verify(data: Path, reply: bytes | Path, ca: Path) -> tuple[bool, str]:
    """`openssl ts -verify -data DATA -in REPLY -CAfile CA`: (accepted, its output)."""
    return _verify(["-data", data], reply, ca)


def verify_query(query: bytes | Path, reply: bytes | Path, ca: Path) -> tuple[bool, str]:
    """`openssl ts -verify -queryfile QUERY -in REPLY -CAfile CA` (also checks the nonce)."""
    with tempfile.TemporaryDirectory(prefix="tsq-") as tmp:
        if isinstance(query, bytes):
            path = Path(tmp) / "q.tsq"
            path.write_bytes(query)
            query = path
        return _verify(["-queryfile", query], reply, ca)


def reply_text(reply: bytes) -> str:
    """`openssl ts -reply -in REPLY -text`."""
    with tempfile.TemporaryDirectory(prefix="tsr-") as tmp:
        path = Path(tmp) / "r.tsr"
        path.write_bytes(reply)
        done = _run("ts", "-reply", "-in", path, "-text")
        assert done.returncode == 0, done.stderr
        return done.stdout


def post(url: str, query: bytes, timeout: float = 10.0) -> tuple[int, str, bytes]:
    """POST QUERY as application/timestamp-query: (status, content type, body).

    An HTTP error status is returned, not raised; network errors are raised."""
    request = urllib.request.Request(
        url, data=query, method="POST", headers={"Content-Type": QUERY_TYPE}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers.get_content_type(), response.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.headers.get_content_type(), e.read()


@pytest.fixture(scope="session")
def pki_rsa(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki-rsa"), "rsa")


@pytest.fixture(scope="session")
def pki_ec(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki-ec"), "ec")


@pytest.fixture(scope="session")
def other_pki_rsa(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("other-pki-rsa"), "rsa", name="Untrusted")


@pytest.fixture(scope="session")
def other_pki_ec(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("other-pki-ec"), "ec", name="Untrusted")


@pytest.fixture
def tsa_rsa(pki_rsa: Pki, other_pki_rsa: Pki) -> Iterator[TestTsa]:
    with TestTsa(pki_rsa, other_pki=other_pki_rsa) as tsa:
        yield tsa


@pytest.fixture
def tsa_ec(pki_ec: Pki, other_pki_ec: Pki) -> Iterator[TestTsa]:
    with TestTsa(pki_ec, other_pki=other_pki_ec) as tsa:
        yield tsa
