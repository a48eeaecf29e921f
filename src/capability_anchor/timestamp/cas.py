"""The trusted TSA CA certificates, from `--tsa-ca` PEM files or the PEM text `init` stores: every
command reads them here, so one file means the same certificates to the stamper, the audit and
`verify-proof`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from capability_anchor.bounded.read import read_file
from capability_anchor.errors import CapabilityAnchorError, TimestampError, UsageError

if TYPE_CHECKING:
    from cryptography.x509 import Certificate


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
