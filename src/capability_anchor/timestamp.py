"""RFC 3161 time-stamps for sealed heads (SPEC §7): request, fetch, verify.

    cas = load_cas([Path("tsa-ca.pem")])
    reply, verified = stamp("https://tsa.example/", head_jws, cas)   # store `reply` raw
    verify_reply(reply, digest=digest_of(head_jws), cas=cas, nonce=None)  # audit it later

`stamp` is `make_request` -> `fetch` -> `verify_reply`. What is stamped is the SHA-256 of the
ASCII bytes of the head's compact JWS, so `openssl ts -verify -data <day>.jws -in <day>.tsr
-CAfile <tsa-ca.pem>` checks a stored stamp without this code.

Who checks what in `verify_reply` (the library is `rfc3161-client`, its chain and signature
work is OpenSSL's `PKCS7_verify`; tests/test_timestamp.py proves each line with a reply that
breaks exactly that rule):

    PKIStatus is granted (0) or grantedWithMods (1) ..... here (the library accepts 0 only)
    message imprint algorithm is SHA-256 ................ here (the library compares bytes only)
    message imprint equals our digest ................... rfc3161-client
    nonce equals ours (skipped when auditing, nonce=None)  rfc3161-client
    CMS signature over the TSTInfo, signed attributes ... rfc3161-client (OpenSSL)
    chain to a trusted CA, validity at genTime, not now . rfc3161-client (OpenSSL, at genTime)
    TSA certificate EKU: critical, timeStamping alone .... rfc3161-client (OpenSSL purpose
                                                           check), and again here
    signed ESS signingCertificate(V2) names that cert ... here (RFC 3161 §2.4.1; as OpenSSL's
                                                           `ts -verify`, not the library)

Two things are done to the reply before the library sees it, never to the stored bytes:

- The CMS `certificates` field is a SET OF, which DER sorts; OpenSSL's TSA (and others) send
  it in chain order, and rfc3161-client's strict DER parser then refuses the whole reply
  (`InvalidSetOrdering`). The certificates are sorted into DER order. They are outside the
  signature, so this changes nothing that is verified.
- The status is checked here and the token re-wrapped with status 0, so grantedWithMods
  tokens are verified like granted ones.

Every failure is a `TimestampError` whose message says what was wrong; httpx, pyasn1,
rfc3161-client and cryptography exceptions never escape. The heavy imports (httpx ~100 ms,
rfc3161ng/pyasn1 ~120 ms, rfc3161-client ~70 ms) happen inside the functions that need
them, so importing this module is cheap and the offline verifying path never loads httpx.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import TimestampError, UsageError

if TYPE_CHECKING:
    from cryptography.x509 import Certificate
    from rfc3161_client import TimeStampResponse

__all__ = [
    "DEFAULT_DEADLINE_S",
    "QUERY_TYPE",
    "REPLY_CAP",
    "Parsed",
    "Request",
    "Verified",
    "digest_of",
    "fetch",
    "load_cas",
    "make_request",
    "read_reply",
    "stamp",
    "verify_reply",
]

QUERY_TYPE = "application/timestamp-query"
DEFAULT_DEADLINE_S = 10.0
REPLY_CAP = 64 * 1024
_GRACE_S = 0.5  # beyond the deadline, for the exchange's own cancellation to report itself
SHA256_OID = "2.16.840.1.101.3.4.2.1"
_STATUS_NAMES = {
    0: "granted",
    1: "grantedWithMods",
    2: "rejection",
    3: "waiting",
    4: "revocationWarning",
    5: "revocationNotification",
}
# PKIFailureInfo bits (RFC 3161 §2.4.2).
_FAILURE_BITS = {
    0: "badAlg",
    2: "badRequest",
    5: "badDataFormat",
    14: "timeNotAvailable",
    15: "unacceptedPolicy",
    16: "unacceptedExtension",
    17: "addInfoNotAvailable",
    25: "systemFailure",
}


# --- trust ------------------------------------------------------------------------------


def load_cas(paths: Sequence[Path]) -> list[Certificate]:
    """The trusted TSA CA certificates of PEM files (`--tsa-ca`), in order, duplicates dropped.

    A file may hold several certificates (a bundle); the same certificate in two files is
    kept once. A file that cannot be read or holds no PEM certificate is a TimestampError,
    which callers report as a usage error before anything is sealed."""
    from cryptography import x509

    cas: list[Certificate] = []
    for path in paths:
        try:
            data = Path(path).read_bytes()
        except OSError as e:
            raise TimestampError(f"cannot read TSA CA file {path}: {e.strerror or e}") from None
        try:
            certs = x509.load_pem_x509_certificates(data)
        except ValueError:
            raise TimestampError(f"TSA CA file {path} holds no readable PEM certificate") from None
        for cert in certs:
            if cert not in cas:  # certificates compare by their DER bytes
                cas.append(cert)
    return cas


# --- the request ------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """A DER TimeStampReq and what its reply must echo."""

    der: bytes
    nonce: int
    digest: bytes


def digest_of(jws: bytes) -> bytes:
    """SHA-256 of the ASCII bytes of a head's compact JWS: the message imprint (SPEC §7),
    so the `<day>.jws` file itself is what `openssl ts -verify -data` hashes."""
    if not jws or not jws.isascii():
        raise UsageError("a compact JWS is non-empty ASCII")
    return hashlib.sha256(jws).digest()


def make_request(digest: bytes) -> Request:
    """A TimeStampReq for a SHA-256 DIGEST with a fresh random 64-bit nonce and certReq true.

    Built with rfc3161ng from the digest: its `data=` path would hash with SHA-1. certReq
    makes the TSA include its certificate, which verification needs to find the signer."""
    _check_digest(digest)
    import rfc3161ng  # type: ignore[import-untyped]
    from pyasn1.codec.der import encoder  # type: ignore[import-untyped]

    nonce = secrets.randbits(64)
    try:
        request = rfc3161ng.make_timestamp_request(
            digest=digest, hashname="sha256", include_tsa_certificate=True, nonce=nonce
        )
        der = encoder.encode(request)
    except Exception as e:  # pyasn1 raises its own error tree
        raise TimestampError(f"cannot build the TimeStampReq: {e}") from None
    return Request(der=bytes(der), nonce=nonce, digest=digest)


def _check_digest(digest: bytes) -> None:
    if not isinstance(digest, bytes) or len(digest) != 32:
        raise UsageError("the message imprint is a 32-byte SHA-256 digest")


# --- the transport ----------------------------------------------------------------------


def fetch(
    url: str, query: bytes, *, deadline: float = DEFAULT_DEADLINE_S, cap: int = REPLY_CAP
) -> bytes:
    """POST QUERY to the TSA at URL; the reply body, exactly as received.

    DEADLINE bounds the whole exchange (connect, send, every byte of the reply), not each
    read, so a TSA that drips a byte at a time or stalls mid-reply cannot hold sealing up for
    longer. The exchange runs on asyncio so the deadline can cancel it wherever it is. A
    reply over CAP bytes, any status but 200, a compressed body, a refused or dropped
    connection: TimestampError."""
    if not deadline > 0 or not cap > 0:
        raise UsageError("deadline and cap must be positive")
    import asyncio
    import threading

    # The exchange runs on a daemon thread of its own, with its own event loop, joined for
    # at most the deadline (plus a grace for the loop's own cancellation). asyncio.run waits
    # for the resolver thread of a hanging DNS lookup when it shuts down; the join does not,
    # so nothing can hold the caller past the deadline. It also works from a thread that
    # already runs an event loop (the service).
    outcome: list[bytes | BaseException] = []

    def exchange() -> None:
        try:
            outcome.append(asyncio.run(_fetch(url, query, deadline, cap)))
        except BaseException as e:  # handed to the caller's thread below
            outcome.append(e)

    worker = threading.Thread(target=exchange, name="tsa-fetch", daemon=True)
    worker.start()
    worker.join(deadline + _GRACE_S)
    if not outcome:
        raise TimestampError(
            f"the TSA at {url} sent no complete reply within the {deadline:g} s deadline"
        )
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


async def _fetch(url: str, query: bytes, deadline: float, cap: int) -> bytes:
    import asyncio

    import httpx

    late = f"the TSA at {url} sent no complete reply within the {deadline:g} s deadline"
    try:
        async with (
            asyncio.timeout(deadline),
            httpx.AsyncClient(timeout=deadline, follow_redirects=False) as client,
            client.stream(
                "POST",
                url,
                content=query,
                headers={
                    "Content-Type": QUERY_TYPE,
                    "Accept": "application/timestamp-reply",
                    "Accept-Encoding": "identity",
                },
            ) as response,
        ):
            if response.status_code != 200:
                raise TimestampError(
                    f"the TSA at {url} answered HTTP {response.status_code}, not 200"
                )
            encoding = response.headers.get("content-encoding", "identity").strip().lower()
            if encoding != "identity":
                raise TimestampError(
                    f"the TSA at {url} sent a {encoding!r}-encoded reply; only raw DER is accepted"
                )
            declared = response.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > cap:
                raise TimestampError(
                    f"the TSA at {url} announced a {declared}-byte reply; the cap is {cap}"
                )
            body = bytearray()
            async for chunk in response.aiter_raw():
                body += chunk
                if len(body) > cap:
                    raise TimestampError(
                        f"the TSA at {url} sent more than {cap} bytes; reading stopped"
                    )
            return bytes(body)
    except TimeoutError:
        raise TimestampError(late) from None
    except httpx.TimeoutException:
        raise TimestampError(late) from None
    except httpx.ConnectError as e:
        raise TimestampError(f"cannot connect to the TSA at {url}: {e}") from None
    except httpx.RemoteProtocolError as e:
        raise TimestampError(
            f"the TSA at {url} broke the HTTP exchange (no or partial reply): {e}"
        ) from None
    except httpx.UnsupportedProtocol:
        raise TimestampError(f"the TSA URL {url!r} is not http:// or https://") from None
    except httpx.InvalidURL as e:
        raise TimestampError(f"the TSA URL {url!r} is invalid: {e}") from None
    except (httpx.HTTPError, httpx.StreamError, OSError) as e:
        raise TimestampError(f"fetching from the TSA at {url} failed: {e}") from None


# --- verification -----------------------------------------------------------------------


@dataclass(frozen=True)
class Verified:
    """What a verified stamp asserts. `gen_time` is RFC 3339 UTC (`...Z`), with the
    fractional seconds of genTime when it has any; `at` is the same instant."""

    gen_time: str
    at: datetime
    serial_number: int
    tsa: str  # the signing TSA certificate's subject (RFC 4514)


def verify_reply(
    reply: bytes, *, digest: bytes, cas: Sequence[Certificate], nonce: int | None
) -> Verified:
    """Verify a DER TimeStampResp for DIGEST against the trusted CAS (see the module docstring
    for each rule and who checks it). NONCE is the one we sent; None when auditing a stored
    stamp later, where the nonce (only a freshness check) is skipped. The chain is checked at
    the token's genTime, so a stamp stays valid after its TSA certificate expires."""
    _check_digest(digest)
    if not cas:
        raise UsageError("no trusted TSA CA certificate given")
    if nonce is not None and nonce < 0:
        raise UsageError("a nonce is a non-negative integer")
    token, response = _decode(reply)
    # Names that do not parse fail here, not in a panic of rfc3161-client's Rust part.
    carried_certificates(reply)
    try:
        for ca in cas:
            _ = ca.subject, ca.issuer
    except ValueError as e:
        raise TimestampError(f"a trusted TSA CA certificate is not valid: {e}") from None

    from rfc3161_client import VerifierBuilder

    try:
        VerifierBuilder(roots=list(cas), nonce=nonce).build().verify(response, digest)
    except Exception as e:  # rfc3161_client.VerificationError, and ValueError from its parts
        raise TimestampError(_library_reason(str(e), response, digest, nonce)) from None
    except BaseException as e:
        # Its Rust part panics on some malformed certificates (e.g. a subject that is not
        # UTF-8), and pyo3 raises a panic as a BaseException: that is a bad reply too.
        if type(e).__name__ != "PanicException":
            raise
        raise TimestampError(
            "rfc3161-client cannot parse a certificate the reply carries"
        ) from None
    signer = _check_signer_eku(response)
    _check_ess_binding(token, signer)
    at = _gen_time(token)
    seconds = response.tst_info.gen_time
    if seconds.tzinfo is None or at.replace(microsecond=0) != seconds.replace(microsecond=0):
        raise TimestampError(f"genTime {at} disagrees with rfc3161-client's {seconds}")
    return Verified(
        gen_time=_rfc3339(at),
        at=at,
        serial_number=response.tst_info.serial_number,
        tsa=signer.subject.rfc4514_string(),
    )


def _decode(reply: bytes) -> tuple[bytes, TimeStampResponse]:
    """The granted TimeStampToken of REPLY and rfc3161-client's parse of it (with the
    certificates in DER order and status 0, see the module docstring), whose imprint must be
    SHA-256."""
    from rfc3161_client import decode_timestamp_response

    token = _granted_token(reply)
    canonical = _der(0x30, bytes.fromhex("3003020100") + _sort_certificates(token))
    try:
        response = decode_timestamp_response(canonical)
        algorithm = response.tst_info.message_imprint.hash_algorithm.dotted_string
    except Exception as e:  # the Rust parser raises ValueError; be safe with the rest
        raise TimestampError(f"the reply is not a valid TimeStampResp: {e}") from None
    if algorithm != SHA256_OID:
        raise TimestampError(f"the message imprint uses hash {algorithm}, not SHA-256")
    return token, response


@dataclass(frozen=True)
class Parsed:
    """What a stored reply says, read without trusting anyone (`read_reply`)."""

    digest: bytes
    gen_time: str
    self_signed: tuple[Certificate, ...]
    """Self-signed certificates the token carries (a TSA's own root, when it sends its
    chain): an audit without trusted CAs checks the signature against them."""


def read_reply(reply: bytes) -> Parsed:
    """Parse a stored TimeStampResp: status granted, a SHA-256 imprint, genTime. Nothing is
    verified here beyond its shape; audits compare the imprint and genTime with what the
    log says and then call `verify_reply`."""
    from cryptography import x509

    token, response = _decode(reply)
    try:
        certs = [x509.load_der_x509_certificate(c) for c in response.signed_data.certificates]
        # Names are parsed when first read: a damaged one raises here, not in a caller.
        self_signed = tuple(c for c in certs if c.issuer == c.subject)
    except Exception as e:  # as in _decode
        raise TimestampError(f"the reply is not a valid TimeStampResp: {e}") from None
    return Parsed(
        digest=bytes(response.tst_info.message_imprint.message),
        gen_time=_rfc3339(_gen_time(token)),
        self_signed=self_signed,
    )


def carried_certificates(reply: bytes) -> list[Certificate]:
    """Every certificate a stored reply carries. They lie outside its signature: the audit
    checks that each is signed by its issuer, so none can be changed unseen."""
    from cryptography import x509

    _, response = _decode(reply)
    try:
        certs = [x509.load_der_x509_certificate(c) for c in response.signed_data.certificates]
        for cert in certs:
            _ = cert.subject, cert.issuer  # parsed when first read: fail here, not in a caller
        return certs
    except Exception as e:  # as in _decode
        raise TimestampError(f"the reply carries a certificate that is not valid: {e}") from None


def stamp(
    url: str, jws: bytes, cas: Sequence[Certificate], *, deadline: float = DEFAULT_DEADLINE_S
) -> tuple[bytes, Verified]:
    """Stamp a head: request a time-stamp for its compact JWS from the TSA at URL and verify
    it (with our nonce). Returns the reply bytes exactly as received, to be stored raw."""
    digest = digest_of(jws)
    if not cas:
        raise UsageError("no trusted TSA CA certificate given")
    request = make_request(digest)
    reply = fetch(url, request.der, deadline=deadline)
    return reply, verify_reply(reply, digest=digest, cas=cas, nonce=request.nonce)


def _library_reason(
    message: str, response: TimeStampResponse, digest: bytes, nonce: int | None
) -> str:
    """A human reason for an rfc3161-client failure (its messages, OpenSSL's error stack).

    The library stops at the first content mismatch it meets, the nonce before the imprint;
    a token for another message is better reported as that, so both are named. This only
    words the failure; it never decides one."""
    if message in ("Nonce mismatch", "Mismatch between messages"):
        mismatches = []
        if response.tst_info.message_imprint.message != digest:
            mismatches.append("the token's message imprint is not the SHA-256 of this head's JWS")
        if nonce is not None and response.tst_info.nonce != nonce:
            mismatches.append(
                "the token's nonce is not the one we sent (a replayed or stray reply)"
            )
        return "; ".join(mismatches) or f"the time-stamp token does not verify: {message}"
    found = re.search(r'data: "Verify error: ([^"]*)"', message)
    if found and "purpose" in found[1]:
        return (
            "the TSA certificate is not for time-stamping (RFC 3161 §2.3 wants a critical "
            f"extendedKeyUsage of timeStamping alone): {found[1]}"
        )
    if found:
        return f"the TSA certificate does not chain to a trusted TSA CA at genTime: {found[1]}"
    found = re.search(r'reason: "([^"]*)"', message)
    if found:
        return f"the token's CMS signature does not verify: {found[1]}"
    return f"the time-stamp token does not verify: {message}"


def _rfc3339(at: datetime) -> str:
    text = at.strftime("%Y-%m-%dT%H:%M:%S")
    if at.microsecond:
        text += "." + f"{at.microsecond:06d}".rstrip("0")
    return text + "Z"


# ESS signing-certificate attributes (RFC 2634 §5.4, RFC 5035) and the hashes they may use.
_SIGNING_CERTIFICATE = bytes.fromhex("060b2a864886f70d010910020c")
_SIGNING_CERTIFICATE_V2 = bytes.fromhex("060b2a864886f70d010910022f")
_ESS_HASHES = {
    bytes.fromhex("06052b0e03021a"): "sha1",
    bytes.fromhex("0609608648016503040201"): "sha256",
    bytes.fromhex("0609608648016503040202"): "sha384",
    bytes.fromhex("0609608648016503040203"): "sha512",
}


def _check_ess_binding(token: bytes, signer: Certificate) -> None:
    """The signed ESS signingCertificate(V2) attribute names the signer's certificate.

    RFC 3161 §2.4.1 requires this attribute: it binds the signature to one certificate, not
    just to an issuer and serial. rfc3161-client does not look at it; OpenSSL's `ts -verify`
    does, so a stamp without it would be accepted here and refused by auditors. The
    attribute is covered by the signature the library verified; only its content is read."""
    from cryptography.hazmat.primitives.serialization import Encoding

    try:
        _, start, end = _tlv(token, 0, len(token))
        content = _children(token, start, end)[1]  # [0] EXPLICIT SignedData
        _, sd_start, sd_end = _tlv(token, content[2], content[3])
        signer_infos = _children(token, sd_start, sd_end)[-1]
        (signer_info,) = _children(token, signer_infos[2], signer_infos[3])
        attrs = next(a for a in _children(token, signer_info[2], signer_info[3]) if a[0] == 0xA0)
        for _, _, a_start, a_end in _children(token, attrs[2], attrs[3]):
            oid, values = _children(token, a_start, a_end)
            kind = token[oid[1] : oid[3]]
            if kind not in (_SIGNING_CERTIFICATE, _SIGNING_CERTIFICATE_V2):
                continue
            (value,) = _children(token, values[2], values[3])  # SigningCertificate(V2)
            cert_ids = _children(token, value[2], value[3])[0]  # certs SEQUENCE OF
            first = _children(token, cert_ids[2], cert_ids[3])[0]  # the signer's ESSCertID
            fields = _children(token, first[2], first[3])
            hash_name = "sha1" if kind == _SIGNING_CERTIFICATE else "sha256"
            if fields[0][0] == 0x30:  # ESSCertIDv2 with an explicit hashAlgorithm
                algorithm = _children(token, fields[0][2], fields[0][3])[0]
                hash_name = _ESS_HASHES.get(token[algorithm[1] : algorithm[3]], "")
                fields = fields[1:]
            if fields[0][0] != 0x04 or not hash_name:
                break
            wanted = token[fields[0][2] : fields[0][3]]
            actual = hashlib.new(hash_name, signer.public_bytes(Encoding.DER)).digest()
            if wanted != actual:
                raise TimestampError(
                    "the signed ESS signing-certificate attribute names another certificate "
                    "than the one that signed"
                )
            return
    except (IndexError, StopIteration, ValueError):
        pass
    raise TimestampError(
        "the token has no usable signed ESS signing-certificate attribute (RFC 3161 §2.4.1)"
    )


def _check_signer_eku(response: TimeStampResponse) -> Certificate:
    """The signer's certificate, after checking its EKU is critical and timeStamping alone.

    Already enforced twice inside rfc3161-client: by its own check (critical, contains
    timeStamping) and by OpenSSL's timestamp-signing purpose during chain building (critical,
    timeStamping alone: RFC 3161 §2.3). Repeated here, on the certificate the SignerInfo's
    issuer and serial name, so the rule does not depend on how the library calls OpenSSL."""
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    try:
        (info,) = response.signed_data.signer_infos
        certs = [x509.load_der_x509_certificate(c) for c in response.signed_data.certificates]
        signer = next(
            c for c in certs if c.issuer == info.issuer and c.serial_number == info.serial_number
        )
    except Exception:  # cannot happen after the library's checks, unless it changes
        raise TimestampError("the token does not carry its signer's certificate") from None
    try:
        eku = signer.extensions.get_extension_for_class(x509.ExtendedKeyUsage)
    except x509.ExtensionNotFound:
        raise TimestampError("the TSA certificate has no extended key usage") from None
    except ValueError as e:  # a malformed extension
        raise TimestampError(f"the TSA certificate's extensions are malformed: {e}") from None
    if not eku.critical or list(eku.value) != [ExtendedKeyUsageOID.TIME_STAMPING]:
        raise TimestampError(
            "the TSA certificate's extended key usage is not critical timeStamping alone"
        )
    return signer


# --- a minimal DER reader, for the parts of a TimeStampResp the library cannot take --------


def _tlv(buf: bytes, i: int, end: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the definite-length DER element at buf[i]."""
    if i + 2 > end:
        raise TimestampError("the reply is not DER: truncated element")
    tag, n = buf[i], buf[i + 1]
    if tag & 0x1F == 0x1F:
        raise TimestampError("the reply is not DER: unexpected high tag number")
    i += 2
    if n & 0x80:
        k = n & 0x7F
        if k == 0 or k > 4 or i + k > end:
            raise TimestampError("the reply is not DER: bad length")
        n = int.from_bytes(buf[i : i + k], "big")
        if n < 0x80 or buf[i] == 0:
            raise TimestampError("the reply is not DER: non-minimal length")
        i += k
    if i + n > end:
        raise TimestampError("the reply is not DER: element runs past its container")
    return tag, i, i + n


def _children(buf: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, element start, content start, content end) of each element in buf[start:end]."""
    out = []
    i = start
    while i < end:
        tag, cs, ce = _tlv(buf, i, end)
        out.append((tag, i, cs, ce))
        i = ce
    return out


def _der(tag: int, content: bytes) -> bytes:
    n = len(content)
    if n < 0x80:
        return bytes([tag, n]) + content
    size = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + content


def _granted_token(reply: bytes) -> bytes:
    """The TimeStampToken of a TimeStampResp whose status is granted or grantedWithMods;
    otherwise a TimestampError naming the status, its text and failure bits."""
    if not reply:
        raise TimestampError("the reply is empty")
    tag, start, end = _tlv(reply, 0, len(reply))
    if tag != 0x30 or end != len(reply):
        raise TimestampError("the reply is not a DER TimeStampResp (a single SEQUENCE)")
    parts = _children(reply, start, end)
    if not parts or parts[0][0] != 0x30:
        raise TimestampError("the reply has no PKIStatusInfo")
    _, _, s_start, s_end = parts[0]
    info = _children(reply, s_start, s_end)
    if not info or info[0][0] != 0x02 or not 1 <= info[0][3] - info[0][2] <= 4:
        raise TimestampError("the reply's PKIStatus is not a small INTEGER")
    status = int.from_bytes(reply[info[0][2] : info[0][3]], "big", signed=True)
    if status not in (0, 1):
        name = _STATUS_NAMES.get(status, "unknown")
        detail = _status_detail(reply, info[1:])
        raise TimestampError(f"the TSA refused: PKIStatus {status} ({name}){detail}")
    if len(parts) != 2 or parts[1][0] != 0x30:
        raise TimestampError("the reply is granted but carries no TimeStampToken")
    _, t_start, _, t_end = parts[1]
    return reply[t_start:t_end]


def _status_detail(buf: bytes, items: list[tuple[int, int, int, int]]) -> str:
    """`: text; failInfo names` of a PKIStatusInfo's optional members, best effort."""
    texts: list[str] = []
    failures: list[str] = []
    for tag, _, cs, ce in items:
        if tag == 0x30:  # PKIFreeText ::= SEQUENCE OF UTF8String
            try:
                strings = _children(buf, cs, ce)
            except TimestampError:
                continue
            texts.extend(
                buf[s:e].decode("utf-8", "replace")[:200] for t, _, s, e in strings if t == 0x0C
            )
        elif tag == 0x03 and ce > cs:  # PKIFailureInfo BIT STRING
            bits = buf[cs + 1 : ce]
            for n, name in _FAILURE_BITS.items():
                if n // 8 < len(bits) and bits[n // 8] & (0x80 >> (n % 8)):
                    failures.append(name)
    shown = [repr(t) for t in texts] + failures
    return ": " + "; ".join(shown) if shown else ""


def _gen_time(token: bytes) -> datetime:
    """genTime of the TSTInfo in TOKEN, with its fractional seconds (to the microsecond).

    rfc3161-client drops the fraction, so genTime is read here. DER GeneralizedTime is
    `YYYYMMDDHHMMSS[.f...]Z` (X.690 §11.7)."""
    try:
        _, start, end = _tlv(token, 0, len(token))
        content = _children(token, start, end)[1]  # [0] EXPLICIT SignedData
        _, sd_start, sd_end = _tlv(token, content[2], content[3])
        encap = _children(token, sd_start, sd_end)[2]  # EncapsulatedContentInfo
        wrapper = _children(token, encap[2], encap[3])[1]  # [0] EXPLICIT OCTET STRING
        _, o_start, o_end = _tlv(token, wrapper[2], wrapper[3])
        _, t_start, t_end = _tlv(token, o_start, o_end)  # TSTInfo
        for tag, _, cs, ce in _children(token, t_start, t_end):
            if tag == 0x18:
                text = token[cs:ce].decode("ascii", "replace")
                match = re.fullmatch(r"(\d{14})(?:\.(\d*[1-9]))?Z", text)
                if match is None:
                    break
                at = datetime.strptime(match[1], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
                return at.replace(microsecond=int((match[2] or "0")[:6].ljust(6, "0")))
    except (IndexError, ValueError):
        pass  # the library parsed this token, so this is not expected; fail closed anyway
    raise TimestampError("the TSTInfo has no DER GeneralizedTime genTime")


def _sort_certificates(token: bytes) -> bytes:
    """TOKEN with SignedData.certificates in DER SET OF order (X.690 §11.6), else unchanged.

    The certificates lie outside the signature; only their order changes, never their bytes
    or the length of anything around them."""
    try:
        _, start, end = _tlv(token, 0, len(token))
        info = _children(token, start, end)  # ContentInfo: contentType, [0] content
        if len(info) != 2 or info[1][0] != 0xA0:
            return token
        tag, sd_start, sd_end = _tlv(token, info[1][2], info[1][3])
        if tag != 0x30:
            return token
        for tag, _, cs, ce in _children(token, sd_start, sd_end):
            if tag == 0xA0:  # certificates [0] IMPLICIT CertificateSet
                items = sorted(token[a:e] for _, a, _, e in _children(token, cs, ce))
                return token[:cs] + b"".join(items) + token[ce:]
    except TimestampError:
        pass  # not shaped as expected: let the library's parser say what is wrong
    return token
