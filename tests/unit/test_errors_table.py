"""Every class in `errors.py` is placed deliberately: its HTTP answer, its exit code and
whether background work retries it are checked against this table, so a new class fails
here until someone writes down where it belongs."""

from __future__ import annotations

import inspect

import pytest

from capability_anchor import errors
from capability_anchor.cli.common import exit_code_for
from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.web.errors import HTTP_STATUS

# class name: (HTTP `error` member, HTTP status, exit code, retryable)
EXPECTED: dict[str, tuple[str, int, int, bool]] = {
    "CapabilityAnchorError": ("bad_request", 400, 1, False),
    "UsageError": ("bad_request", 400, 2, False),
    "MalformedJSON": ("bad_request", 400, 2, False),
    "InputError": ("bad_request", 400, 2, False),
    "InvalidRecord": ("invalid_record", 400, 1, False),
    "KeyFileError": ("bad_request", 400, 2, False),
    "TokenError": ("bad_request", 400, 2, False),
    "InvalidKey": ("bad_request", 400, 1, False),
    "MalformedKeySet": ("bad_request", 400, 2, False),
    "VerificationError": ("bad_request", 400, 1, False),
    "MalformedProof": ("bad_request", 400, 1, False),
    "RootMismatch": ("bad_request", 400, 1, False),
    "JWSError": ("bad_request", 400, 1, False),
    "JWSFormatError": ("bad_request", 400, 1, False),
    "JWSEncodingError": ("bad_request", 400, 1, False),
    "JWSHeaderError": ("bad_request", 400, 1, False),
    "JWSAlgorithmError": ("bad_request", 400, 1, False),
    "JWSTypeError": ("bad_request", 400, 1, False),
    "UnknownKeyError": ("bad_request", 400, 1, False),
    "SignatureMismatch": ("bad_request", 400, 1, False),
    "ClaimsError": ("bad_request", 400, 1, False),
    "IssuerMismatch": ("bad_request", 400, 1, False),
    "TokenLifetimeError": ("bad_request", 400, 1, False),
    "TokenExpired": ("bad_request", 400, 1, False),
    "TokenNotYetValid": ("bad_request", 400, 1, False),
    "NoteError": ("bad_request", 400, 1, False),
    "MalformedNote": ("bad_request", 400, 1, False),
    "MalformedVKey": ("bad_request", 400, 1, False),
    "NoteSignatureError": ("bad_request", 400, 1, False),
    "MalformedPolicy": ("bad_request", 400, 2, False),
    "QuorumNotMet": ("bad_request", 400, 1, False),
    "TimestampError": ("bad_request", 400, 1, True),
    "WitnessError": ("bad_request", 400, 1, True),
    "NotFound": ("not_found", 404, 1, True),
    "Conflict": ("conflict", 409, 1, True),
    "ClockDisagrees": ("unavailable", 503, 1, True),
    "BehindPublished": ("unavailable", 503, 1, True),
    "NotCompared": ("unavailable", 503, 2, False),
    "StoreError": ("unavailable", 503, 2, False),
    "StoreBusy": ("unavailable", 503, 2, True),
    "StoreFull": ("unavailable", 503, 2, True),
    "OutcomeUnknown": ("unavailable", 503, 2, True),
    "LeaseLost": ("unavailable", 503, 2, True),
    "Unproven": ("unavailable", 503, 2, True),
    "StoreReadOnly": ("unavailable", 503, 2, True),
    "StoreIOError": ("unavailable", 503, 2, True),
    "StoreCorrupt": ("unavailable", 503, 2, False),
    "StoreDamaged": ("unavailable", 503, 2, False),
    "StartupCheckFailed": ("unavailable", 503, 1, False),
    "ExportConflict": ("bad_request", 400, 1, False),
}


def _classes() -> dict[str, type[CapabilityAnchorError]]:
    return {
        name: cls
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, CapabilityAnchorError) and cls.__module__ == errors.__name__
    }


def _instance(cls: type[CapabilityAnchorError]) -> CapabilityAnchorError:
    if issubclass(cls, errors.RootMismatch):
        return cls("m", expected=b"\0", calculated=b"\1")
    return cls("m")


def test_every_class_is_in_the_table() -> None:
    assert sorted(_classes()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_class_maps_as_written_down(name: str) -> None:
    exc = _instance(_classes()[name])
    error, status, exit_code, retryable = EXPECTED[name]
    assert (exc.http_error, HTTP_STATUS[exc.http_error]) == (error, status)
    assert exit_code_for(exc) == exc.exit_code == exit_code
    assert exc.retryable is retryable
    assert exc.action  # a fatal error names the operator's next step


def test_http_notes_keep_paths_out_and_count_records_from_one() -> None:
    assert errors.StoreCorrupt("/srv/x/anchor.db is damaged").http_note() == (
        "the log's database is damaged; an operator must restore it"
    )
    assert errors.InvalidRecord("bad", position=0).http_note() == "record 1: bad"
    assert errors.InvalidRecord("bad").http_note() == "bad"


def test_third_party_exceptions_at_the_cli_edge() -> None:
    assert exit_code_for(FileNotFoundError("x")) == 2
    assert exit_code_for(ValueError("x")) == 1
