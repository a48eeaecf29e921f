"""One exception tree for the whole project.

Every error the project raises is a `CapabilityAnchorError`; third-party exceptions are
converted where they occur. Each class carries a stable `code` (the HTTP `error` member of
SPEC §6 where one applies) so the edges (HTTP handlers, CLI exit codes) map errors by class,
never by message. Messages are written for a human: they say what was checked and what was
found.
"""

from __future__ import annotations


class CapabilityAnchorError(Exception):
    """Base of every error raised by capability-anchor."""

    code = "error"


class UsageError(CapabilityAnchorError):
    """The caller asked for something malformed (bad argument, bad day, bad hex)."""

    code = "bad_request"


class MalformedJSON(UsageError):
    """Text is not strict JSON (not UTF-8, a BOM, duplicate names, NaN, overflow, ...)."""


class InputError(UsageError):
    """Verification could not start: missing trust, unreadable input, unreachable URL."""


class InvalidRecord(CapabilityAnchorError):
    """A record violates SPEC §2 (validation, canonical form, size). In a batch, `position`
    is the 0-based position of the first bad record."""

    code = "invalid_record"

    def __init__(self, message: str, *, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position


class KeyFileError(CapabilityAnchorError):
    """A key file is missing, malformed, or readable by group/others."""

    code = "key_error"


class TokenError(CapabilityAnchorError):
    """The writer token is unusable: empty, whitespace-only, shorter than 32 bytes, not one
    word of visible ASCII, or its file is not a regular file private to its owner."""

    code = "token_error"


class InvalidKey(CapabilityAnchorError):
    """A public key or JWK set is malformed (not an Ed25519 OKP key, bad `x`, kid mismatch)."""

    code = "bad_request"


class MalformedKeySet(InvalidKey, MalformedJSON):
    """A JWK set document is not strict JSON: malformed JSON, so a usage error (exit 2) in
    every command, and still an InvalidKey for callers that catch bad key sets."""


# --- verification ---------------------------------------------------------------------------


class VerificationError(CapabilityAnchorError):
    """Something that was supposed to verify did not. Never returned as a bool."""

    code = "verification_failed"


class MalformedProof(VerificationError):
    """A proof's shape is wrong before any hashing: index/size out of range, a hash that is
    not 32 bytes, a path of the wrong length for (index, size), sizes out of order."""


class RootMismatch(VerificationError):
    """The root calculated from a proof differs from the expected one."""

    def __init__(self, message: str, *, expected: bytes, calculated: bytes) -> None:
        super().__init__(
            f"{message}: expected root {expected.hex()}, calculated {calculated.hex()}"
        )
        self.expected = expected
        self.calculated = calculated


class JWSError(VerificationError):
    """A compact JWS was rejected. Subclasses say which rule failed."""


class JWSFormatError(JWSError):
    """Not three dot-separated segments, empty segments, or trailing garbage."""


class JWSEncodingError(JWSError):
    """A segment is not canonical unpadded base64url, or not the JSON it should be."""


class JWSHeaderError(JWSError):
    """The protected header has missing, extra (`crit` included) or ill-typed members."""


class JWSAlgorithmError(JWSError):
    """`alg` is not `EdDSA`."""


class JWSTypeError(JWSError):
    """`typ` is not the one expected (e.g. a record token presented as a head)."""


class UnknownKeyError(JWSError):
    """The `kid` is not in the trusted key set."""


class SignatureMismatch(JWSError):
    """The Ed25519 signature does not verify with the trusted key named by `kid`."""


class ClaimsError(VerificationError):
    """Signed claims are malformed or violate a rule (missing member, wrong type)."""


class IssuerMismatch(ClaimsError):
    """`iss` differs from the expected issuer."""


class TokenLifetimeError(ClaimsError):
    """`exp - iat` exceeds the allowed maximum (Capability Resolution §8: 172800 s)."""


class TokenExpired(ClaimsError):
    """`exp` lies more than the allowed skew in the past."""


class TokenNotYetValid(ClaimsError):
    """`iat` lies more than the allowed skew in the future."""


class TimestampError(CapabilityAnchorError):
    """An RFC 3161 time-stamp could not be obtained or does not verify (TSA unreachable, slow,
    refusing, or its reply wrong, unsigned or untrusted), or a TSA CA file is unusable. The
    message is the human reason; no third-party exception escapes `timestamp`."""

    code = "timestamp_failed"


# --- the log ----------------------------------------------------------------------------------


class NotFound(CapabilityAnchorError):
    """The thing asked for does not exist (a day, a head, an entry no head covers)."""

    code = "not_found"


class Conflict(CapabilityAnchorError):
    """The operation is refused by the log's rules (append into a sealed day, before the first
    day, a record whose `iss` is not the log's, re-initialising an existing log)."""

    code = "conflict"


class ClockDisagrees(CapabilityAnchorError):
    """The service's wall clock and its monotonic clock disagree by more than the tolerance
    (the wall clock jumped): appends, checkpoints and sealing wait until they agree again or
    an operator acknowledges the clock (`capability-anchor seal`). HTTP 503."""

    code = "unavailable"


class StoreError(CapabilityAnchorError):
    """The store is missing, unreadable, of an unknown schema, or inconsistent. Fatal: an
    operator must look before the log runs again. `note` is what an HTTP client is told (the
    message itself may name paths); `retryable` says whether the same request may succeed
    later without an operator (a busy or full disk clears, a damaged database does not)."""

    code = "unavailable"
    note = "the log cannot answer right now"
    retryable = False


class StoreBusy(StoreError):
    """Another writer held the database's write lock for longer than the busy timeout."""

    note = "the log is busy; nothing was stored, try again"
    retryable = True


class StoreFull(StoreError):
    """The disk (or a quota) is full: the write was rolled back."""

    note = "the log's disk is full; nothing was stored"
    retryable = True


class StoreReadOnly(StoreError):
    """The database or its folder cannot be written (read-only file or file system)."""

    note = "the log's database is read-only; nothing was stored"
    retryable = True


class StoreIOError(StoreError):
    """The operating system failed a read or write of the database."""

    note = "the log cannot read or write its database right now"
    retryable = True


class StoreCorrupt(StoreError):
    """SQLite says the database file is damaged or is not a database at all (a zeroed page,
    a truncated file, a flipped bit in a b-tree). For the audit this is a finding (exit 1)."""

    note = "the log's database is damaged; an operator must restore it"


class StartupCheckFailed(StoreError):
    """The configured key or issuer does not match what the log has published."""


class ExportConflict(CapabilityAnchorError):
    """An existing published file has different bytes than the log would write. Fatal:
    published files never change."""

    code = "conflict"
