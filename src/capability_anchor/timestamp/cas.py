"""The trusted TSA CA certificates: `--tsa-ca` PEM files, and the PEM text `init` stores.

    cas = trusted_cas(args.tsa_ca)                       # init, seal, serve, audit: exit 2
    cas = trusted_cas(args.tsa_ca, error=InputError)     # verify-proof: its usage error

Every command that takes `--tsa-ca` reads it here, so a file holds the same certificates for
the stamping service, the audit and an auditor's `verify-proof`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from capability_anchor.bounded.read import read_file
from capability_anchor.errors import CapabilityAnchorError, TimestampError, UsageError

if TYPE_CHECKING:
    from cryptography.x509 import Certificate

__all__ = ["cas_of_pem", "load_cas", "pem_of", "trusted_cas"]


def load_cas(paths: Sequence[Path]) -> list[Certificate]:
    """The trusted TSA CA certificates of PEM files (`--tsa-ca`), in order, duplicates dropped.

    A file may hold several certificates (a bundle); the same certificate in two files is
    kept once. A file that cannot be read, is over 1 MiB (it is read no further) or holds no
    PEM certificate is a TimestampError, which callers report as a usage error before
    anything is sealed."""
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
    """`--tsa-ca` files as certificates (see `load_cas`); one that cannot be read is an ERROR,
    a usage error (exit 2) unless the caller maps its usage errors to another class. No files:
    no certificates, and cryptography is not even imported."""
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
