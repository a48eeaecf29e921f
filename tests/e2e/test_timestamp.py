"""RFC 3161 stamps (SPEC §7) against OpenSSL's own TSA (tools/test_tsa.py) and hand-made tokens.

The yardstick: every stamp `timestamp` accepts also passes `openssl ts -verify`. Each rule of
`verify_reply` is broken by a reply that breaks exactly that rule; where rfc3161-client is
trusted with a rule (nonce, imprint, signature, chain at genTime, critical EKU), our code
does not check it itself, so these tests show the library really does.
"""

from __future__ import annotations

import ast
import asyncio
import datetime as dt
import functools
import hashlib
import http.server
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from capability_anchor import timestamp as ts
from capability_anchor.errors import CapabilityAnchorError, TimestampError, UsageError
from capability_anchor.timestamp import der as ts_der
from capability_anchor.timestamp import verify as ts_verify
from tests.kit.tsakit import (
    OPENSSL,
    Pki,
    TestTsa,
    closed_port_url,
    parse_query,
    verify,
    verify_query,
)

JWS = b"eyJhbGciOiJFZERTQSIsImtpZCI6ImsiLCJ0eXAiOiJoZWFkIn0.eyJ0cmVlX3NpemUiOjF9.c2lnbmF0dXJl"
DIGEST = hashlib.sha256(JWS).digest()
SHA256_OID_DER = bytes.fromhex("0609608648016503040201")
SHA512_OID_DER = bytes.fromhex("0609608648016503040203")
SHA1_OID_DER = bytes.fromhex("06052b0e03021a")
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d*[1-9])?Z")
SHORT_DEADLINE = 1.5
SLACK = 1.0


def jws_file(tmp_path: Path) -> Path:
    path = tmp_path / "head.jws"
    path.write_bytes(JWS)
    return path


def cas_of(*pkis: Pki) -> list[x509.Certificate]:
    return ts.load_cas([p.ca_cert for p in pkis])


@pytest.fixture(params=["rsa", "ec"])
def tsa(request: pytest.FixtureRequest) -> TestTsa:
    """The test TSA with an RSA 2048, then with an EC P-256 key."""
    return request.getfixturevalue(f"tsa_{request.param}")


# --- the request --------------------------------------------------------------------------


def test_request_carries_sha256_imprint_our_nonce_and_cert_req() -> None:
    request = ts.make_request(DIGEST)
    parsed = parse_query(request.der)
    assert parsed.digest == DIGEST == request.digest
    assert parsed.nonce == request.nonce
    assert 0 <= request.nonce < 2**64
    assert parsed.cert_req is True
    assert SHA256_OID_DER in request.der
    assert SHA1_OID_DER not in request.der
    assert ts.make_request(DIGEST).nonce != request.nonce


def test_digest_of_is_sha256_of_the_jws_bytes() -> None:
    assert ts.digest_of(JWS) == DIGEST
    with pytest.raises(UsageError):
        ts.digest_of("é.b.c".encode())
    with pytest.raises(UsageError):
        ts.make_request(hashlib.sha1(JWS).digest())


def test_timestamp_error_is_a_project_error_with_a_code() -> None:
    assert issubclass(TimestampError, CapabilityAnchorError)
    assert TimestampError.code == "timestamp_failed"


def test_importing_the_module_loads_no_http_or_asn1_library() -> None:
    heavy = ("httpx", "rfc3161ng", "pyasn1", "rfc3161_client", "cryptography", "asyncio")
    code = (
        "import sys, json\nimport capability_anchor.timestamp\n"
        f"print(json.dumps([m for m in {heavy!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


# --- success, RSA and EC --------------------------------------------------------------------


def test_stamp_verifies_and_openssl_agrees(tsa: TestTsa, tmp_path: Path) -> None:
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    reply, verified = ts.stamp(tsa.url, JWS, cas_of(tsa.pki))
    after = dt.datetime.now(dt.UTC)

    assert RFC3339.fullmatch(verified.gen_time), verified.gen_time
    assert before - dt.timedelta(seconds=2) <= verified.at <= after + dt.timedelta(seconds=2)
    assert verified.gen_time == verified.at.strftime("%Y-%m-%dT%H:%M:%SZ")  # no fraction
    assert "TSA" in verified.tsa
    (query,) = tsa.queries
    ok, out = verify(jws_file(tmp_path), reply, tsa.pki.ca_cert)
    assert ok, out
    ok, out = verify_query(query, reply, tsa.pki.ca_cert)  # nonce and imprint, by OpenSSL
    assert ok, out
    # The stored reply audited later, without the nonce, and again with it.
    again = ts.verify_reply(reply, digest=DIGEST, cas=cas_of(tsa.pki), nonce=None)
    assert again == verified
    assert (
        ts.verify_reply(reply, digest=DIGEST, cas=cas_of(tsa.pki), nonce=parse_query(query).nonce)
        == verified
    )


def test_openssl_tsa_replies_need_the_certificate_set_sorted(tsa_ec: TestTsa) -> None:
    """OpenSSL sends [TSA cert, CA cert]; rfc3161-client alone refuses that as bad DER, which
    is why verify_reply sorts the set. The stored reply stays as received."""
    from rfc3161_client import decode_timestamp_response

    request = ts.make_request(DIGEST)
    reply = ts.fetch(tsa_ec.url, request.der)
    tsa_der = x509.load_pem_x509_certificate(tsa_ec.pki.tsa_cert.read_bytes()).public_bytes(
        serialization.Encoding.DER
    )
    ca_der = x509.load_pem_x509_certificate(tsa_ec.pki.ca_cert.read_bytes()).public_bytes(
        serialization.Encoding.DER
    )
    assert reply.index(tsa_der) < reply.index(ca_der)
    if tsa_der > ca_der:  # out of DER order, as it is with these certificates
        with pytest.raises(ValueError, match="InvalidSetOrdering"):
            decode_timestamp_response(reply)
    ts.verify_reply(reply, digest=DIGEST, cas=cas_of(tsa_ec.pki), nonce=request.nonce)


# --- every fault mode of the test TSA -------------------------------------------------------

FAULTS = {
    "down": r"broke the HTTP exchange",
    "garbage": r"not (a )?DER|no PKIStatusInfo|PKIStatus|not a valid TimeStampResp",
    "http500": r"answered HTTP 500, not 200",
    "rejection": r"refused: PKIStatus 2 \(rejection\)",
    "other_ca": r"does not chain to a trusted TSA CA at genTime",
    "other_digest": r"message imprint is not the SHA-256 of this head's JWS",
    "other_nonce": r"nonce is not the one we sent",
}


@pytest.mark.parametrize("mode", sorted(FAULTS))
def test_each_fault_mode_fails_with_its_reason(mode: str, tsa: TestTsa) -> None:
    tsa.mode = mode
    with pytest.raises(TimestampError, match=FAULTS[mode]):
        ts.stamp(tsa.url, JWS, cas_of(tsa.pki), deadline=5.0)


def test_signed_but_wrong_replies_are_refused_by_openssl_too(tsa_ec: TestTsa) -> None:
    for mode in ("other_ca", "other_digest", "other_nonce"):
        tsa_ec.mode = mode
        request = ts.make_request(DIGEST)
        reply = ts.fetch(tsa_ec.url, request.der)
        ok, _ = verify_query(request.der, reply, tsa_ec.pki.ca_cert)
        assert not ok, mode


def test_connection_refused_fails() -> None:
    with pytest.raises(TimestampError, match="cannot connect"):
        ts.fetch(closed_port_url(), ts.make_request(DIGEST).der, deadline=5.0)


def test_a_stopped_tsa_fails(tsa_ec: TestTsa) -> None:
    tsa_ec.stop()
    with pytest.raises(TimestampError, match="cannot connect"):
        ts.stamp(tsa_ec.url, JWS, cas_of(tsa_ec.pki), deadline=5.0)


@pytest.mark.parametrize("mode", ["hang", "drip"])
def test_slow_tsa_is_cut_at_the_total_deadline(mode: str, tsa_ec: TestTsa) -> None:
    tsa_ec.mode = mode
    tsa_ec.drip_interval = 0.2  # ~1500 bytes would take minutes; each byte beats any read timeout
    start = time.monotonic()
    with pytest.raises(TimestampError, match=r"no complete reply within the 1\.5 s deadline"):
        ts.stamp(tsa_ec.url, JWS, cas_of(tsa_ec.pki), deadline=SHORT_DEADLINE)
    assert time.monotonic() - start < SHORT_DEADLINE + SLACK


def test_a_slow_drip_that_ends_in_time_is_fine(tsa_ec: TestTsa) -> None:
    tsa_ec.mode = "drip"
    tsa_ec.drip_interval = 0.0005
    reply, _ = ts.stamp(tsa_ec.url, JWS, cas_of(tsa_ec.pki), deadline=30.0)
    assert len(reply) > 1000


def test_fetch_works_from_inside_a_running_event_loop(tsa_ec: TestTsa) -> None:
    query = ts.make_request(DIGEST).der

    async def main() -> bytes:
        return ts.fetch(tsa_ec.url, query)

    assert asyncio.run(main())[:1] == b"\x30"


def test_announced_reply_over_the_cap_fails(tsa_ec: TestTsa) -> None:
    with pytest.raises(TimestampError, match=r"announced a \d+-byte reply; the cap is 1000"):
        ts.fetch(tsa_ec.url, ts.make_request(DIGEST).der, cap=1000)


@dataclass
class _Body:
    status: int = 200
    size: int = 0
    headers: tuple[tuple[str, str], ...] = ()


class _RawServer:
    """A loopback HTTP server that answers every POST with BODY (no Content-Length: the body
    ends when the connection closes), for what the test TSA cannot do."""

    def __init__(self, body: _Body) -> None:
        spec = body

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(spec.status)
                for name, value in spec.headers:
                    self.send_header(name, value)
                self.end_headers()
                chunk = b"\x30" * 4096
                try:
                    for _ in range(spec.size // len(chunk)):
                        self.wfile.write(chunk)
                except OSError:  # the client stopped reading
                    pass
                self.close_connection = True

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def raw_server(request: pytest.FixtureRequest) -> Iterator[_RawServer]:
    server = _RawServer(request.param)
    yield server
    server.close()


@pytest.mark.parametrize("raw_server", [_Body(size=64 * 1024 * 1024)], indirect=True)
def test_streamed_reply_over_the_cap_stops_reading(raw_server: _RawServer) -> None:
    start = time.monotonic()
    with pytest.raises(TimestampError, match="sent more than 65536 bytes; reading stopped"):
        ts.fetch(raw_server.url, b"q")
    assert time.monotonic() - start < 5.0


@pytest.mark.parametrize(
    ("raw_server", "reason"),
    [
        (_Body(headers=(("Content-Encoding", "gzip"),)), "'gzip'-encoded reply"),
        (_Body(status=302, headers=(("Location", "http://127.0.0.1:1/"),)), "HTTP 302"),
        (_Body(status=200, size=0), "the reply is empty"),
    ],
    indirect=["raw_server"],
)
def test_odd_http_answers_fail(raw_server: _RawServer, reason: str) -> None:
    with pytest.raises(TimestampError, match=re.escape(reason)):
        ts.stamp(raw_server.url, JWS, [_a_ca()])


@functools.cache
def _a_ca() -> x509.Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    return _cert(_name("Spare CA"), _name("Spare CA"), key.public_key(), key, ca=True)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://127.0.0.1/", "is not http:// or https://"),
        ("http://[::1/", "is invalid"),
    ],
)
def test_bad_urls_fail(url: str, reason: str) -> None:
    with pytest.raises(TimestampError, match=re.escape(reason)):
        ts.fetch(url, b"q")


# --- trust ----------------------------------------------------------------------------------


def test_duplicate_cas_across_files_are_kept_once(pki_ec: Pki, tmp_path: Path) -> None:
    copy = tmp_path / "copy.pem"
    copy.write_bytes(pki_ec.ca_cert.read_bytes())
    cas = ts.load_cas([pki_ec.ca_cert, copy, pki_ec.ca_cert])
    assert len(cas) == 1


def test_a_bundle_file_with_two_cas_works(
    tsa_rsa: TestTsa, pki_ec: Pki, other_pki_ec: Pki, tmp_path: Path
) -> None:
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(other_pki_ec.ca_cert.read_bytes() + b"\n" + tsa_rsa.pki.ca_cert.read_bytes())
    cas = ts.load_cas([bundle, pki_ec.ca_cert])
    assert len(cas) == 3
    ts.stamp(tsa_rsa.url, JWS, cas)  # its CA is the second of the bundle


def test_unreadable_or_empty_ca_files_fail(tmp_path: Path) -> None:
    with pytest.raises(TimestampError, match="cannot read TSA CA file"):
        ts.load_cas([tmp_path / "missing.pem"])
    with pytest.raises(TimestampError, match="cannot read TSA CA file"):
        ts.load_cas([tmp_path])  # a directory
    text = tmp_path / "text.pem"
    text.write_text("not a certificate\n")
    with pytest.raises(TimestampError, match="holds no readable PEM certificate"):
        ts.load_cas([text])
    broken = tmp_path / "broken.pem"
    broken.write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    with pytest.raises(TimestampError, match="holds no readable PEM certificate"):
        ts.load_cas([broken])


def test_trusted_cas_raises_the_callers_usage_error(pki_ec: Pki, tmp_path: Path) -> None:
    """The one `--tsa-ca` loader: a usage error (exit 2) by default, the caller's own class
    (verify-proof's InputError) when it gives one, the same message either way."""

    class CallersError(UsageError):
        pass

    assert ts.trusted_cas([]) == []
    assert ts.trusted_cas([str(pki_ec.ca_cert), pki_ec.ca_cert]) == ts.load_cas([pki_ec.ca_cert])
    missing = tmp_path / "missing.pem"
    with pytest.raises(UsageError, match="cannot read TSA CA file") as default:
        ts.trusted_cas([missing])
    assert type(default.value) is UsageError
    with pytest.raises(CallersError, match="cannot read TSA CA file") as mapped:
        ts.trusted_cas([missing], error=CallersError)
    assert str(mapped.value) == str(default.value)


def test_only_the_timestamp_package_imports_rfc3161_libraries() -> None:
    src = Path(ts.__file__).resolve().parent.parent
    importers = set()
    for path in src.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            if any(n.split(".")[0] in ("rfc3161ng", "rfc3161_client", "pyasn1") for n in names):
                importers.add(path.relative_to(src).parts[0])
    assert importers == {"timestamp"}


def test_no_ca_is_a_usage_error(tsa_ec: TestTsa) -> None:
    with pytest.raises(UsageError):
        ts.stamp(tsa_ec.url, JWS, [])
    assert tsa_ec.queries == []  # found before anything is sent


def test_wrong_ca_fails(tsa_ec: TestTsa, other_pki_ec: Pki, pki_rsa: Pki) -> None:
    request = ts.make_request(DIGEST)
    reply = ts.fetch(tsa_ec.url, request.der)
    for cas in (cas_of(other_pki_ec), cas_of(pki_rsa, other_pki_ec)):
        with pytest.raises(TimestampError, match="does not chain to a trusted TSA CA"):
            ts.verify_reply(reply, digest=DIGEST, cas=cas, nonce=request.nonce)
    # The TSA's own certificate is not a trust anchor either: only CAs are.
    tsa_only = [x509.load_pem_x509_certificate(tsa_ec.pki.tsa_cert.read_bytes())]
    with pytest.raises(TimestampError, match="does not chain"):
        ts.verify_reply(reply, digest=DIGEST, cas=tsa_only, nonce=request.nonce)


def test_wrong_digest_or_nonce_fails_on_a_stored_reply(tsa_ec: TestTsa) -> None:
    request = ts.make_request(DIGEST)
    reply = ts.fetch(tsa_ec.url, request.der)
    cas = cas_of(tsa_ec.pki)
    with pytest.raises(TimestampError, match="message imprint is not"):
        ts.verify_reply(reply, digest=hashlib.sha256(b"other").digest(), cas=cas, nonce=None)
    with pytest.raises(TimestampError, match="nonce is not the one we sent"):
        ts.verify_reply(reply, digest=DIGEST, cas=cas, nonce=request.nonce ^ 1)


# --- mutations: every flipped byte is a TimestampError or harmless ---------------------------


@dataclass(frozen=True)
class Node:
    tag: int
    start: int
    content: int
    end: int
    children: tuple[Node, ...]


def parse_der(buf: bytes, i: int = 0) -> Node:
    tag, n = buf[i], buf[i + 1]
    c = i + 2
    if n & 0x80:
        k = n & 0x7F
        n = int.from_bytes(buf[c : c + k], "big")
        c += k
    end = c + n
    kids: list[Node] = []
    if tag & 0x20:
        j = c
        while j < end:
            kids.append(parse_der(buf, j))
            j = kids[-1].end
    return Node(tag, i, c, end, tuple(kids))


def signed_regions(reply: bytes, tsa_cert_der: bytes) -> dict[str, range]:
    """Byte ranges a valid signature depends on: the TSTInfo, the signed attributes, the
    signature, the signer identifier and the TSA certificate."""
    resp = parse_der(reply)
    signed_data = resp.children[1].children[1].children[0]
    encap = signed_data.children[2]
    tst_info = encap.children[1].children[0]
    certs = next(c for c in signed_data.children if c.tag == 0xA0)
    tsa_cert = next(c for c in certs.children if reply[c.start : c.end] == tsa_cert_der)
    signer = signed_data.children[-1].children[0]
    attrs = next(c for c in signer.children if c.tag == 0xA0)
    return {
        "status": range(resp.children[0].start, resp.children[0].end),
        "tst_info": range(tst_info.content, tst_info.end),
        "tsa_certificate": range(tsa_cert.start, tsa_cert.end),
        "signer_id": range(signer.children[1].start, signer.children[1].end),
        "signed_attributes": range(attrs.start, attrs.end),
        "signature": range(signer.children[-1].content, signer.children[-1].end),
    }


def test_flipped_bytes_never_leak_and_signed_bytes_never_pass(tsa: TestTsa) -> None:
    req = ts.make_request(DIGEST)
    reply = ts.fetch(tsa.url, req.der)
    cas = cas_of(tsa.pki)
    good = ts.verify_reply(reply, digest=DIGEST, cas=cas, nonce=req.nonce)
    tsa_der = x509.load_pem_x509_certificate(tsa.pki.tsa_cert.read_bytes()).public_bytes(
        serialization.Encoding.DER
    )
    regions = signed_regions(reply, tsa_der)
    status_value = regions["status"].stop - 1
    accepted: list[tuple[int, int]] = []
    for i in range(len(reply)):
        for mask in (0x01, 0xFF):
            mutated = bytearray(reply)
            mutated[i] ^= mask
            try:
                result = ts.verify_reply(bytes(mutated), digest=DIGEST, cas=cas, nonce=req.nonce)
            except TimestampError:
                continue
            assert result == good  # nothing that is reported can change
            accepted.append((i, mask))
    for name, region in regions.items():
        wrong = [(i, m) for i, m in accepted if i in region]
        if name == "status":  # 0 -> 1 is grantedWithMods, which is accepted
            assert wrong == [(status_value, 0x01)]
        else:
            assert wrong == [], name
    for i in range(len(reply)):  # truncations
        with pytest.raises(TimestampError):
            ts.verify_reply(reply[:i], digest=DIGEST, cas=cas, nonce=req.nonce)
    with pytest.raises(TimestampError, match="single SEQUENCE"):
        ts.verify_reply(reply + b"\x00", digest=DIGEST, cas=cas, nonce=req.nonce)


# --- statuses ------------------------------------------------------------------------------


_der = ts_der.encode  # building test inputs only; what is under test is the reading side


def _int(value: int) -> bytes:
    return _der(0x02, value.to_bytes(value.bit_length() // 8 + 1, "big", signed=True))


def _with_status(reply: bytes, status_info: bytes) -> bytes:
    resp = parse_der(reply)
    token = resp.children[1]
    return _der(0x30, status_info + reply[token.start : token.end])


def test_granted_with_mods_is_accepted_like_granted(tsa_ec: TestTsa, tmp_path: Path) -> None:
    req = ts.make_request(DIGEST)
    reply = ts.fetch(tsa_ec.url, req.der)
    text = _der(0x30, _der(0x0C, b"policy changed"))
    with_mods = _with_status(reply, _der(0x30, _int(1) + text))
    good = ts.verify_reply(reply, digest=DIGEST, cas=cas_of(tsa_ec.pki), nonce=req.nonce)
    got = ts.verify_reply(with_mods, digest=DIGEST, cas=cas_of(tsa_ec.pki), nonce=req.nonce)
    assert got == good
    ok, out = verify(jws_file(tmp_path), with_mods, tsa_ec.pki.ca_cert)
    assert ok, out


@pytest.mark.parametrize(
    ("status_info", "reason"),
    [
        (_der(0x30, _int(2)), "PKIStatus 2 (rejection)"),
        (
            _der(0x30, _int(2) + _der(0x30, _der(0x0C, b"bad alg")) + _der(0x03, b"\x07\x80")),
            "PKIStatus 2 (rejection): 'bad alg'; badAlg",
        ),
        (
            _der(0x30, _int(3) + _der(0x03, b"\x06\x00\x02")),
            "PKIStatus 3 (waiting): timeNotAvailable",
        ),
        (_der(0x30, _int(5)), "PKIStatus 5 (revocationNotification)"),
        (_der(0x30, _int(9)), "PKIStatus 9 (unknown)"),
    ],
)
def test_refusals_name_status_text_and_failure(
    tsa_ec: TestTsa, status_info: bytes, reason: str
) -> None:
    reply = ts.fetch(tsa_ec.url, ts.make_request(DIGEST).der)
    with pytest.raises(TimestampError, match=re.escape(reason)):
        ts.verify_reply(
            _with_status(reply, status_info), digest=DIGEST, cas=cas_of(tsa_ec.pki), nonce=None
        )
    with pytest.raises(TimestampError, match=re.escape(reason)):
        ts.verify_reply(_der(0x30, status_info), digest=DIGEST, cas=cas_of(tsa_ec.pki), nonce=None)


def test_granted_without_a_token_fails(pki_ec: Pki) -> None:
    with pytest.raises(TimestampError, match="carries no TimeStampToken"):
        ts.verify_reply(
            bytes.fromhex("30053003020100"), digest=DIGEST, cas=cas_of(pki_ec), nonce=None
        )


# --- hand-made tokens: genTime, validity at genTime, EKU, hash algorithm -------------------

UTC = dt.UTC


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    signer: ec.EllipticCurvePrivateKey,
    *,
    ca: bool,
    not_before: dt.datetime = dt.datetime(2019, 1, 1, tzinfo=UTC),
    not_after: dt.datetime = dt.datetime(2099, 1, 1, tzinfo=UTC),
    eku: list[x509.ObjectIdentifier] | None = None,
    eku_critical: bool = True,
    serial: int | None = None,
) -> x509.Certificate:
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number() if serial is None else serial)
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if eku is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage(eku), critical=eku_critical)
    return builder.sign(signer, hashes.SHA256())


TSA_SERIAL = 0x11223344


@dataclass(frozen=True)
class _Pki:
    """A CA and a TSA certificate made with `cryptography`, for what `openssl ts -reply` would
    refuse to sign with (expired certificates, wrong EKUs) or cannot do (a chosen genTime)."""

    dir: Path
    ca: x509.Certificate
    ca_key: ec.EllipticCurvePrivateKey
    tsa: x509.Certificate
    ca_pem: Path
    tsa_pem: Path
    tsa_key: Path

    @staticmethod
    def make(
        d: Path,
        *,
        not_before: dt.datetime = dt.datetime(2020, 1, 1, tzinfo=UTC),
        not_after: dt.datetime = dt.datetime(2020, 12, 31, tzinfo=UTC),
        eku: Sequence[x509.ObjectIdentifier] | None = (ExtendedKeyUsageOID.TIME_STAMPING,),
        eku_critical: bool = True,
    ) -> _Pki:
        """EKU None: no extended key usage extension at all."""
        d.mkdir(parents=True, exist_ok=True)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        tsa_key = ec.generate_private_key(ec.SECP256R1())
        ca = _cert(_name("Hand CA"), _name("Hand CA"), ca_key.public_key(), ca_key, ca=True)
        tsa = _cert(
            _name("Hand TSA"),
            _name("Hand CA"),
            tsa_key.public_key(),
            ca_key,
            ca=False,
            not_before=not_before,
            not_after=not_after,
            eku=None if eku is None else list(eku),
            eku_critical=eku_critical,
            serial=TSA_SERIAL,
        )
        pki = _Pki(d, ca, ca_key, tsa, d / "ca.pem", d / "tsa.pem", d / "tsa.key")
        pki.ca_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        pki.tsa_pem.write_bytes(tsa.public_bytes(serialization.Encoding.PEM))
        pki.tsa_key.write_bytes(
            tsa_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return pki

    def reply(
        self,
        gen_time: str,
        *,
        digest: bytes = DIGEST,
        nonce: int | None = 5,
        hash_oid: bytes = SHA256_OID_DER,
        ess: bool = True,
        extra_certs: Sequence[x509.Certificate] = (),
    ) -> bytes:
        """A granted TimeStampResp with a TSTInfo of our making, signed by `openssl cms` with
        the ESS signingCertificateV2 attribute (-cades) that `openssl ts -verify` wants, the
        CA and EXTRA_CERTS in the certificate set."""
        imprint = _der(0x30, _der(0x30, hash_oid + b"\x05\x00") + _der(0x04, digest))
        tst_info = _der(
            0x30,
            _int(1)
            + bytes.fromhex("06042a030401")  # policy 1.2.3.4.1
            + imprint
            + _int(7)
            + _der(0x18, gen_time.encode())
            + (_int(nonce) if nonce is not None else b""),
        )
        tst, token, certs = self.dir / "tst.der", self.dir / "token.der", self.dir / "certs.pem"
        tst.write_bytes(tst_info)
        certs.write_bytes(
            b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [self.ca, *extra_certs])
        )
        args = [
            OPENSSL, "cms", "-sign", "-binary", "-nodetach", "-in", tst,
            "-econtent_type", "1.2.840.113549.1.9.16.1.4", "-signer", self.tsa_pem,
            "-inkey", self.tsa_key, "-md", "sha256", "-nosmimecap",
            "-certfile", certs, "-outform", "DER", "-out", token,
            *(["-cades"] if ess else []),
        ]  # fmt: skip
        done = subprocess.run(
            args,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return _der(0x30, bytes.fromhex("3003020100") + token.read_bytes())

    def verify(self, reply: bytes, *, nonce: int | None = 5) -> ts.Verified:
        return ts.verify_reply(reply, digest=DIGEST, cas=[self.ca], nonce=nonce)


@pytest.fixture(scope="module")
def hand_pki(tmp_path_factory: pytest.TempPathFactory) -> _Pki:
    return _Pki.make(tmp_path_factory.mktemp("hand-pki"))


@pytest.mark.parametrize(
    ("gen_time", "expected"),
    [
        ("20200601120000Z", "2020-06-01T12:00:00Z"),
        ("20200601120000.5Z", "2020-06-01T12:00:00.5Z"),
        ("20200601120000.25Z", "2020-06-01T12:00:00.25Z"),
        ("20200601120000.000001Z", "2020-06-01T12:00:00.000001Z"),
        ("20200601120000.123456Z", "2020-06-01T12:00:00.123456Z"),
    ],
)
def test_gen_time_is_rfc3339_with_its_fraction(
    hand_pki: _Pki, gen_time: str, expected: str, tmp_path: Path
) -> None:
    reply = hand_pki.reply(gen_time)
    verified = hand_pki.verify(reply)
    assert verified.gen_time == expected
    assert verified.at == dt.datetime.fromisoformat(expected)
    # openssl agrees (at genTime: the hand-made TSA certificate expired in 2020).
    path = tmp_path / "r.tsr"
    path.write_bytes(reply)
    at = str(int(verified.at.timestamp()))
    args = [
        OPENSSL, "ts", "-verify", "-data", jws_file(tmp_path), "-in", path,
        "-CAfile", hand_pki.ca_pem, "-attime", at,
    ]  # fmt: skip
    done = subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0 and "Verification: OK" in done.stdout, done.stderr


def test_chain_is_checked_at_gen_time_not_now(hand_pki: _Pki) -> None:
    # The TSA certificate is valid in 2020 only: a 2020 stamp stays good after it expired...
    assert hand_pki.verify(hand_pki.reply("20200601120000Z")).at.year == 2020
    # ...and a stamp dated outside its validity does not, whatever today is.
    with pytest.raises(TimestampError, match="at genTime: certificate has expired"):
        hand_pki.verify(hand_pki.reply("20210601120000Z"))
    with pytest.raises(TimestampError, match="at genTime: certificate is not yet valid"):
        hand_pki.verify(hand_pki.reply("20191201120000Z"))


def test_nonce_absent_from_the_token_fails_only_when_we_sent_one(hand_pki: _Pki) -> None:
    reply = hand_pki.reply("20200601120000Z", nonce=None)
    with pytest.raises(TimestampError, match="nonce is not the one we sent"):
        hand_pki.verify(reply, nonce=5)
    hand_pki.verify(reply, nonce=None)


def test_imprint_hash_must_be_sha256(hand_pki: _Pki) -> None:
    """Our digest under a SHA-512 label: rfc3161-client compares bytes only and would pass it."""
    with pytest.raises(TimestampError, match=r"hash 2\.16\.840\.1\.101\.3\.4\.2\.3, not SHA-256"):
        hand_pki.verify(hand_pki.reply("20200601120000Z", hash_oid=SHA512_OID_DER))


NOT_FOR_TIME_STAMPING = "the TSA certificate is not for time-stamping"


@pytest.mark.parametrize(
    ("eku", "critical", "own_reason"),
    [
        ([ExtendedKeyUsageOID.TIME_STAMPING], False, "not critical timeStamping alone"),
        ([ExtendedKeyUsageOID.CODE_SIGNING], True, "not critical timeStamping alone"),
        (
            [ExtendedKeyUsageOID.TIME_STAMPING, ExtendedKeyUsageOID.CODE_SIGNING],
            True,
            "not critical timeStamping alone",
        ),
        ([], True, "the TSA certificate has no extended key usage"),
    ],
)
def test_tsa_certificate_needs_a_critical_time_stamping_eku_alone(
    tmp_path: Path, eku: list[x509.ObjectIdentifier], critical: bool, own_reason: str
) -> None:
    """The library (OpenSSL's timestamp-signing purpose) refuses each; our own repeat of the
    rule, run on the same decoded token, refuses each too."""
    from rfc3161_client import decode_timestamp_response

    pki = _Pki.make(tmp_path, eku=eku or None, eku_critical=critical)  # [] -> no extension
    reply = pki.reply("20200601120000Z")
    with pytest.raises(TimestampError, match=re.escape(NOT_FOR_TIME_STAMPING)):
        pki.verify(reply)
    token = reply[parse_der(reply).children[1].start :]
    response = decode_timestamp_response(_der(0x30, bytes.fromhex("3003020100") + token))
    with pytest.raises(TimestampError, match=re.escape(own_reason)):
        ts_verify._check_signer_eku(response)


def test_own_eku_check_passes_a_good_token(hand_pki: _Pki) -> None:
    from rfc3161_client import decode_timestamp_response

    reply = hand_pki.reply("20200601120000Z")
    signer = ts_verify._check_signer_eku(decode_timestamp_response(reply))
    assert signer.subject.rfc4514_string() == "CN=Hand TSA"


def _openssl_verifies(reply: bytes, ca_pem: Path, tmp_path: Path) -> bool:
    path = tmp_path / "r.tsr"
    path.write_bytes(reply)
    at = str(int(dt.datetime(2020, 6, 1, 12, tzinfo=UTC).timestamp()))
    args = [
        OPENSSL, "ts", "-verify", "-data", jws_file(tmp_path), "-in", path,
        "-CAfile", ca_pem, "-attime", at,
    ]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, timeout=30, check=False)
    return done.returncode == 0 and "Verification: OK" in done.stdout


def test_a_token_without_the_ess_attribute_fails_as_in_openssl(
    hand_pki: _Pki, tmp_path: Path
) -> None:
    reply = hand_pki.reply("20200601120000Z", ess=False)
    with pytest.raises(TimestampError, match="no usable signed ESS signing-certificate"):
        hand_pki.verify(reply)
    assert not _openssl_verifies(reply, hand_pki.ca_pem, tmp_path)
    assert _openssl_verifies(hand_pki.reply("20200601120000Z"), hand_pki.ca_pem, tmp_path)


def test_ess_attribute_binds_the_signer_certificate(hand_pki: _Pki, tmp_path: Path) -> None:
    """A second certificate for the same TSA key (same CA, another serial) in the set, and the
    unsigned SignerInfo pointed at it: the signature, chain and EKU still verify, which is all
    rfc3161-client looks at; the signed ESS attribute still names the first certificate."""
    from rfc3161_client import VerifierBuilder, decode_timestamp_response

    tsa_key = serialization.load_pem_private_key(hand_pki.tsa_key.read_bytes(), None)
    assert isinstance(tsa_key, ec.EllipticCurvePrivateKey)
    twin = _cert(
        _name("Hand TSA"),
        _name("Hand CA"),
        tsa_key.public_key(),
        hand_pki.ca_key,
        ca=False,
        not_before=dt.datetime(2020, 1, 1, tzinfo=UTC),
        not_after=dt.datetime(2020, 12, 31, tzinfo=UTC),
        eku=[ExtendedKeyUsageOID.TIME_STAMPING],
        serial=TSA_SERIAL + 1,
    )
    reply = hand_pki.reply("20200601120000Z", extra_certs=[twin])
    hand_pki.verify(reply)
    sid = _int(TSA_SERIAL)
    signer_id = parse_der(reply).children[1].children[1].children[0].children[-1]
    signer_id = signer_id.children[0].children[1]
    at = reply.index(sid, signer_id.start, signer_id.end)  # not the one in the ESS attribute
    swapped = reply[:at] + _int(TSA_SERIAL + 1) + reply[at + len(sid) :]
    assert len(swapped) == len(reply)

    library = VerifierBuilder(roots=[hand_pki.ca]).build()
    assert library.verify(decode_timestamp_response(swapped), DIGEST)  # the library is content
    with pytest.raises(TimestampError, match="names another certificate than the one that signed"):
        hand_pki.verify(swapped)
    assert not _openssl_verifies(swapped, hand_pki.ca_pem, tmp_path)


def test_a_resolver_that_blocks_does_not_outlast_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """asyncio waits for a hanging getaddrinfo thread when its loop shuts down; fetch must
    return at its deadline all the same (the resolver is what is slowed here, not checked)."""
    import socket

    real = socket.getaddrinfo

    def slow(*args: object, **kwargs: object) -> object:
        time.sleep(4)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    started = time.monotonic()
    with pytest.raises(TimestampError, match="deadline"):
        ts.fetch("http://tsa.invalid/", b"q", deadline=1.0)
    assert time.monotonic() - started < 1.0 + 1.0
