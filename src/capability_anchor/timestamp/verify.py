"""Verifying a TimeStampResp (SPEC §7): `verify_reply` for a fresh or stored stamp, `read_reply` and
`carried_certificates` for the audit, `digest_of` for what is stamped, and the trusted TSA CAs every
command reads the same way (`--tsa-ca` files, the PEM text `init` stores). rfc3161-client (OpenSSL's
`PKCS7_verify`) checks the CMS signature, chain, nonce and imprint; the status, the imprint's
algorithm, the EKU and the ESS binding are checked here (the table:
docs/explanation/decisions/36-h5-prose.md). Heavy imports happen inside the functions."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from capability_anchor.bounded.read import read_file
from capability_anchor.errors import CapabilityAnchorError, TimestampError, UsageError

from .der import encode, ess_cert_id, gen_time, granted_token, sort_certificates

if TYPE_CHECKING:
    from cryptography.x509 import Certificate
    from rfc3161_client import TimeStampResponse

SHA256_OID = "2.16.840.1.101.3.4.2.1"


def digest_of(jws: bytes) -> bytes:
    """SHA-256 of a head's compact JWS: what `openssl ts -verify -data <day>.jws` hashes."""
    if not jws or not jws.isascii():
        raise UsageError("a compact JWS is non-empty ASCII")
    return hashlib.sha256(jws).digest()


def check_digest(digest: bytes) -> None:
    """A usage error unless DIGEST is a 32-byte SHA-256 (requests and checks both take one)."""
    if not isinstance(digest, bytes) or len(digest) != 32:
        raise UsageError("the message imprint is a 32-byte SHA-256 digest")


@dataclass(frozen=True)
class Verified:
    """What a verified stamp asserts; `gen_time` RFC 3339 UTC (with its fraction), `at` alike."""

    gen_time: str
    at: datetime
    serial_number: int
    tsa: str  # the signing TSA certificate's subject (RFC 4514)


def verify_reply(
    reply: bytes, *, digest: bytes, cas: Sequence[Certificate], nonce: int | None
) -> Verified:
    """Verify a DER TimeStampResp for DIGEST against the trusted CAS. NONCE is the one we sent; None
    when auditing a stored stamp. The chain is checked at genTime, so a stamp outlives its TSA
    certificate."""
    check_digest(digest)
    if not cas:
        raise UsageError("no trusted TSA CA certificate given")
    if nonce is not None and nonce < 0:
        raise UsageError("a nonce is a non-negative integer")
    token, response = _decode(reply)
    # Names that do not parse fail here, not in a panic of rfc3161-client's Rust part.
    _certificates(response, _BAD_CERTIFICATE)
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
    at = gen_time(token)
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
    """REPLY's granted token and the library's parse of it, whose imprint must be SHA-256."""
    from rfc3161_client import decode_timestamp_response

    token = granted_token(reply)
    canonical = encode(0x30, bytes.fromhex("3003020100") + sort_certificates(token))
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
    """Parse a stored TimeStampResp's shape only (status, SHA-256 imprint, genTime)."""
    token, response = _decode(reply)
    certs = _certificates(response, "the reply is not a valid TimeStampResp")
    return Parsed(
        digest=bytes(response.tst_info.message_imprint.message),
        gen_time=_rfc3339(gen_time(token)),
        self_signed=tuple(c for c in certs if c.issuer == c.subject),
    )


def carried_certificates(reply: bytes) -> list[Certificate]:
    """Every certificate a stored reply carries (outside its signature: the audit checks them)."""
    return _certificates(_decode(reply)[1], _BAD_CERTIFICATE)


_BAD_CERTIFICATE = "the reply carries a certificate that is not valid"


def _certificates(response: TimeStampResponse, problem: str) -> list[Certificate]:
    """The token's certificates, names parsed (a damaged one raises here, not in a caller)."""
    from cryptography import x509

    try:
        certs = [x509.load_der_x509_certificate(c) for c in response.signed_data.certificates]
        for cert in certs:
            _ = cert.subject, cert.issuer
        return certs
    except Exception as e:  # as in _decode
        raise TimestampError(f"{problem}: {e}") from None


def _library_reason(
    message: str, response: TimeStampResponse, digest: bytes, nonce: int | None
) -> str:
    """A human reason for an rfc3161-client failure (naming nonce and imprint both)."""
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


def _check_ess_binding(token: bytes, signer: Certificate) -> None:
    """The signed ESS signingCertificate(V2) names the signer's certificate (RFC 3161 §2.4.1)."""
    from cryptography.hazmat.primitives.serialization import Encoding

    hash_name, wanted = ess_cert_id(token)
    actual = hashlib.new(hash_name, signer.public_bytes(Encoding.DER)).digest()
    if wanted != actual:
        raise TimestampError(
            "the signed ESS signing-certificate attribute names another certificate "
            "than the one that signed"
        )


def _check_signer_eku(response: TimeStampResponse) -> Certificate:
    """The signer's certificate, its EKU critical and timeStamping alone (as the library checks)."""
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


# --- the trusted TSA CAs ----------------------------------------------------------------------


def load_cas(paths: Sequence[Path]) -> list[Certificate]:
    """The certificates of PEM files, deduplicated; a bad or oversized file is a TimestampError."""
    from cryptography import x509

    cas: list[Certificate] = []
    for path in paths:
        data = read_file(path, error=TimestampError, name=f"TSA CA file {path}")
        try:
            certs = x509.load_pem_x509_certificates(data)
        except ValueError:
            raise TimestampError(f"TSA CA file {path} holds no readable PEM certificate") from None
        for cert in certs:
            if cert not in cas:  # certificates compare by their DER bytes
                cas.append(cert)
    return cas


def trusted_cas(
    files: Sequence[str | Path], error: type[CapabilityAnchorError] = UsageError
) -> list[Certificate]:
    """`--tsa-ca` files as certificates; an unreadable one raises `error`."""
    if not files:
        return []
    try:
        return load_cas([Path(f) for f in files])
    except TimestampError as exc:
        raise error(str(exc)) from None


def pem_of(cas: Sequence[Certificate]) -> str:
    """CAS as the PEM text `init` stores in the data dir's config."""
    from cryptography.hazmat.primitives.serialization import Encoding

    return "".join(c.public_bytes(Encoding.PEM).decode("ascii") for c in cas)


def cas_of_pem(pem: str) -> list[Certificate]:
    """The certificates of the PEM text a data dir stores; unreadable: a UsageError."""
    from cryptography import x509

    try:
        return x509.load_pem_x509_certificates(pem.encode("ascii"))
    except (ValueError, UnicodeEncodeError, x509.InvalidVersion):
        raise UsageError("the TSA CA certificates are not readable PEM") from None
