"""One exception tree: each error class carries its stable `code`, its SPEC §6 `http_error`,
its `exit_code` (SPEC §10), whether it is `retryable` and the operator's `action`. The edges
map errors by these attributes, never by message; third-party exceptions are converted where
they occur, and `tests/unit/test_errors_table.py` places every class deliberately."""

from __future__ import annotations

EXIT_FAILED = 1
EXIT_USAGE = 2


class CapabilityAnchorError(Exception):
    """Base of every error raised by capability-anchor."""

    code = "error"
    http_error = "bad_request"
    exit_code: int = EXIT_FAILED
    retryable = False
    action = "look at the service's log and data dir, then restart the service"

    def http_note(self) -> str:
        """What an HTTP client is told: the message, unless the class says otherwise."""
        return str(self)


class UsageError(CapabilityAnchorError):
    """The caller asked for something malformed (bad argument, bad day, bad hex)."""

    code = "bad_request"
    exit_code = EXIT_USAGE


class MalformedJSON(UsageError):
    """Text is not strict JSON (not UTF-8, a BOM, duplicate names, NaN, overflow, ...)."""


class InputError(UsageError):
    """Verification could not start: missing trust, unreadable input, unreachable URL."""


class InvalidRecord(CapabilityAnchorError):
    """A record violates SPEC §2 (validation, canonical form, size). In a batch, `position`
    is the 0-based position of the first bad record."""

    code = "invalid_record"
    http_error = "invalid_record"

    def __init__(self, message: str, *, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position

    def http_note(self) -> str:
        if self.position is None:
            return str(self)
        return f"record {self.position + 1}: {self}"  # counted from 1, like `line N`


class KeyFileError(CapabilityAnchorError):
    """A key file is missing, malformed, or readable by group/others."""

    code = "key_error"
    exit_code = EXIT_USAGE


class TokenError(CapabilityAnchorError):
    """The writer token is unusable: empty, whitespace-only, shorter than 32 bytes, not one
    word of visible ASCII, or its file is not a regular file private to its owner."""

    code = "token_error"
    exit_code = EXIT_USAGE


class InvalidKey(CapabilityAnchorError):
    """A public key or JWK set is malformed (not an Ed25519 OKP key, bad `x`, kid mismatch)."""

    code = "bad_request"


class MalformedKeySet(InvalidKey, MalformedJSON):
    """A JWK set document is not strict JSON: malformed JSON, so a usage error (exit 2) in
    every command, and still an InvalidKey for callers that catch bad key sets."""

    exit_code = EXIT_USAGE


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


class NoteError(VerificationError):
    """A C2SP text (signed note, checkpoint, cosignature, tlog-proof, vkey or policy) was
    rejected."""


class MalformedNote(NoteError):
    """The bytes do not follow the C2SP format: a missing final newline, a bad em dash, a
    key name with a space or `+`, non-canonical base64, a size with a leading zero, a root
    that is not 32 bytes, too many signatures, a malformed tlog-proof."""


class MalformedVKey(NoteError):
    """A verifier key is not `<name>+<8 lowercase hex>+<base64(type || key)>`, its key ID is
    not the one its name and key give, or its type is not one this project verifies."""


class NoteSignatureError(NoteError):
    """A signature by a known key does not verify, a known key signed twice, or no known key
    signed the note at all."""


class MalformedPolicy(NoteError):
    """A tlog-policy file is malformed; the message names the line. A policy is trust the
    operator chose, like a key set: a usage error (exit 2)."""

    exit_code = EXIT_USAGE


class QuorumNotMet(NoteError):
    """The verified cosignatures do not satisfy the policy's quorum."""


class TimestampError(CapabilityAnchorError):
    """An RFC 3161 time-stamp could not be obtained or does not verify (TSA unreachable, slow,
    refusing, or its reply wrong, unsigned or untrusted), or a TSA CA file is unusable. No
    third-party exception escapes `timestamp`."""

    code = "timestamp_failed"
    retryable = True


class WitnessError(CapabilityAnchorError):
    """A witness exchange (SPEC §12.3) failed: the witness is unreachable, too slow, or its
    answer is malformed. No httpx exception escapes `witness.client.client`."""

    code = "witness_failed"
    retryable = True


# --- the log ----------------------------------------------------------------------------------


class NotFound(CapabilityAnchorError):
    """The thing asked for does not exist (a day, a head, an entry no head covers)."""

    code = "not_found"
    http_error = "not_found"
    retryable = True


class Conflict(CapabilityAnchorError):
    """The operation is refused by the log's rules (append into a sealed day, before the first
    day, a record whose `iss` is not the log's, re-initialising an existing log)."""

    code = "conflict"
    http_error = "conflict"
    retryable = True


class ClockDisagrees(CapabilityAnchorError):
    """The service's wall clock and its monotonic clock disagree by more than the tolerance
    (the wall clock jumped): appends, checkpoints and sealing wait until they agree again or
    an operator acknowledges the clock (`capability-anchor seal`). HTTP 503."""

    code = "unavailable"
    http_error = "unavailable"
    retryable = True


class BehindPublished(CapabilityAnchorError):
    """A larger or different history was published than the data dir holds (a restored
    backup; SPEC §13.3): nothing is signed and appends are refused until `recover`."""

    code = "behind_published"
    http_error = "unavailable"
    # The same work succeeds once `recover` ran, in this process or another, no restart.
    retryable = True
    action = (
        "bring back what was published: `capability-anchor recover --from URL|DIR` "
        "(the public mirror or an export)"
    )

    def http_note(self) -> str:
        return f"{self.code}: {self}"


class NotCompared(UsageError):
    """A restored copy (`backup` marked it) signs nothing before a comparison (SPEC §14.2)."""

    code = "not_compared"
    http_error = "unavailable"
    action = (
        "compare the restored copy with what was published: `--published URL|DIR` (or "
        "`--published none` if nothing ever was), or `capability-anchor recover --from URL|DIR`"
    )

    def http_note(self) -> str:
        return f"{self.code}: {self}"


class StoreError(CapabilityAnchorError):
    """The store is missing, unreadable, of an unknown schema, or inconsistent. Fatal: an
    operator must look before the log runs again. `note` is what an HTTP client is told (the
    message itself may name paths); `retryable` says whether the same request may succeed
    later without an operator (a busy or full disk clears, a damaged database does not)."""

    code = "unavailable"
    http_error = "unavailable"
    exit_code = EXIT_USAGE
    note = "the log cannot answer right now"
    action = "check the data dir and its database (`capability-anchor audit`), then restart"

    def http_note(self) -> str:
        return self.note  # the class's own words: the message may name paths


class StoreBusy(StoreError):
    """Another writer held the database's write lock for longer than the busy timeout."""

    note = "the log is busy; nothing was stored, try again"
    retryable = True


class OutcomeUnknown(StoreError):
    """The log cannot tell whether a batch was stored (SPEC §14.3): its COMMIT lost the
    connection and could not be read back in time, or the sequencer stopped before answering."""

    note = (
        "outcome unknown: the batch may or may not be stored; re-sending it is safe: "
        "records already stored are answered with their indexes (duplicate: true)"
    )
    retryable = True


class LeaseLost(StoreError):
    """This process no longer holds the sequencer's lease: another took a newer fencing term
    (SPEC §13.4), so the head or checkpoint it was signing was refused and rolled back."""

    note = "this replica is no longer the log's sequencer; nothing was signed, try again"
    retryable = True


class Unproven(StoreError):
    """A standby replica stored the batch, and no head covering it was signed in time:
    re-sending it returns its entries as duplicates, with their proofs (`log.writer`)."""

    note = (
        "the records are stored but no head covers them yet; resend the batch for its proofs "
        "(its records come back as duplicates)"
    )
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
    action = "restore the database from a backup (`capability-anchor audit` says what is damaged)"


class StoreDamaged(StoreCorrupt):
    """The data dir carries the damage mark (`store/damage.py`): some process found the
    database damaged; nothing writes to it until it is restored and the audit passed."""

    note = (
        "the log's database was found damaged; writes are refused until an operator "
        "restores it from a backup, `capability-anchor audit --data DIR` passes (it clears "
        "the damage mark) and the service is restarted"
    )
    action = (
        "restore the database from a backup, run `capability-anchor audit --data DIR` "
        "(it clears the damage mark once it passes), then restart"
    )


class StartupCheckFailed(StoreError):
    """The configured key or issuer does not match what the log has published. A refused
    start, not an I/O problem: exit 1."""

    exit_code = EXIT_FAILED
    action = "configure the key and issuer the log has published, then restart"


class ExportConflict(CapabilityAnchorError):
    """An existing published file has different bytes than the log would write. Fatal:
    published files never change. Not a `Conflict`: over HTTP it is a bad request."""

    code = "conflict"
    action = "find out why a published file changed; published files never change"
