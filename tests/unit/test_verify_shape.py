"""The shape of the verifier: the checks named once, one function per check, typed outcomes,
the library taking loaded inputs (a `Sources`), and one shared head-document check.

These replace the `assert` that used to tie verify's check names to `CHECKS` at run time.
They run over the sample folder `roots/` (real files, real signatures, a real TSA chain).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from capability_anchor import head as heads
from capability_anchor.errors import InputError, VerificationError
from capability_anchor.keys import KeySet, SigningKey
from capability_anchor.timestamp import trusted_cas
from capability_anchor.verify import record as verifying
from capability_anchor.verify.anchor import Anchor
from capability_anchor.verify.checks import CHECK_NAMES, CHECKS, Check
from capability_anchor.verify.record import Outcome, verify
from capability_anchor.verify.sources import FolderSources, ProofSource, StampSource
from tests.kit import paths

ROOTS = paths.ROOT / "roots"
RECORD = ROOTS / "records" / "2026-11-01-calendar.json"
AT = 1793797200  # the sample record's iat
# The sample's history check passes once the sample ships tlog-proofs (SPEC §12.4), and
# SKIPs before.
SAMPLE_HISTORY = Outcome.PASS if (ROOTS / "2026-11-01.tlog-proof").exists() else Outcome.SKIP


@pytest.fixture(scope="module")
def keys() -> KeySet:
    return KeySet.from_json((ROOTS / "keys.json").read_bytes())


def test_each_check_has_one_function_in_the_order_of_checks() -> None:
    functions = [getattr(verifying, f"check_{name}", None) for name in CHECK_NAMES]
    assert all(callable(f) for f in functions), CHECK_NAMES
    assert tuple(name for name, _ in CHECKS) == CHECK_NAMES
    assert len(set(CHECK_NAMES)) == len(CHECKS) == 9
    assert all(isinstance(what, str) and what for _, what in CHECKS)


@pytest.mark.parametrize(
    "record",
    [b"not-a-token", b"a.b.c", RECORD.read_bytes(), b'{"anchor": {}, "proof": {}}'],
    ids=["garbage", "bad-token", "sample", "unsigned"],
)
def test_every_run_reports_every_check_in_order_with_an_outcome(
    record: bytes, keys: KeySet
) -> None:
    result = verify(record, keys=keys, sources=FolderSources(ROOTS), at=AT)
    assert tuple(c.name for c in result.checks) == CHECK_NAMES
    assert all(isinstance(c, Check) and isinstance(c.outcome, Outcome) for c in result.checks)
    # The JSON form carries the plain words, as before.
    doc = json.loads(json.dumps(result.to_json()))
    assert [c["result"] for c in doc["checks"]] == [c.outcome.value for c in result.checks]
    assert {c["result"] for c in doc["checks"]} <= {"PASS", "FAIL", "SKIP"}


def test_the_sample_verifies_from_the_folder_with_loaded_cas(keys: KeySet) -> None:
    sources = FolderSources(ROOTS)
    result = verify(RECORD.read_bytes(), keys=keys, sources=sources, at=AT)
    outcomes = {c.name: c.outcome for c in result.checks}
    assert outcomes == {
        **dict.fromkeys(CHECK_NAMES, Outcome.PASS),
        "timestamp": Outcome.SKIP,
        "history": SAMPLE_HISTORY,
        "witnesses": Outcome.SKIP,
    }
    cas = trusted_cas([str(ROOTS / "tsa-ca.pem")], error=InputError)
    result = verify(RECORD.read_bytes(), keys=keys, sources=sources, cas=cas, at=AT)
    timestamp = result.checks[CHECK_NAMES.index("timestamp")]
    assert result.ok and timestamp.outcome is Outcome.PASS, timestamp


@dataclass
class MemorySources:
    """Heads and stamps handed over as bytes: the library opens nothing itself."""

    head_bytes: bytes
    stamps_listing: bytes
    asked: list[str]

    names_head = False

    def head(self, anchor: Anchor | None) -> tuple[bytes, str]:
        assert anchor is not None
        self.asked.append(f"head {anchor.url}")
        return self.head_bytes, "memory"

    def stamps(self, day: str, anchor: Anchor | None) -> StampSource:
        self.asked.append(f"stamps {day}")
        return StampSource("memory", listing=self.stamps_listing)

    def history_proof(self, anchor: Anchor | None, leaf_hash: bytes) -> ProofSource:
        self.asked.append(f"history proof {leaf_hash.hex()[:8]}")
        return ProofSource("memory (none)")


def test_the_library_takes_its_inputs_loaded(keys: KeySet) -> None:
    sources = MemorySources(
        (ROOTS / "2026-11-01.json").read_bytes(),
        (ROOTS / "2026-11-01.timestamps.json").read_bytes(),
        [],
    )
    cas = trusted_cas([str(ROOTS / "tsa-ca.pem")], error=InputError)
    result = verify(RECORD.read_bytes(), keys=keys, sources=sources, cas=cas, at=AT)
    assert result.ok, result.checks
    assert [c.outcome for c in result.checks] == [Outcome.PASS] * 7 + [Outcome.SKIP] * 2
    assert sources.asked[:2] == [
        "head https://resolver.example/roots/2026-11-01",
        "stamps 2026-11-01",
    ]
    assert len(sources.asked) == 3 and sources.asked[2].startswith("history proof ")
    assert "from memory" in result.checks[CHECK_NAMES.index("timestamp")].detail
    assert "memory (none)" in result.checks[CHECK_NAMES.index("history")].detail


def test_an_unreadable_head_file_stops_verification(tmp_path: Path, keys: KeySet) -> None:
    with pytest.raises(InputError, match="cannot read"):
        verify(RECORD.read_bytes(), keys=keys, sources=FolderSources(tmp_path), at=AT)


def test_one_head_document_check_reports_edited_plain_claims(keys: KeySet) -> None:
    doc = json.loads((ROOTS / "2026-11-01.json").read_bytes())
    checked = heads.verify_document(json.dumps(doc).encode(), keys)
    assert checked.claims_match and checked.head.day == "2026-11-01"
    doc["tree_size"] += 1
    edited = json.dumps(doc).encode()
    checked = heads.verify_document(edited, keys)
    assert not checked.claims_match
    assert checked.head.tree_size == checked.document.tree_size - 1  # the signed one
    sources = MemorySources(edited, b"", [])
    result = verify(RECORD.read_bytes(), keys=keys, sources=sources, at=AT)
    head_signature = result.checks[CHECK_NAMES.index("head_signature")]
    assert head_signature.outcome is Outcome.FAIL
    assert "claims differ from its signed claims" in head_signature.detail


def test_a_head_document_signed_by_an_untrusted_key_raises() -> None:
    other = KeySet([SigningKey.generate().public])
    with pytest.raises(VerificationError):
        heads.verify_document((ROOTS / "2026-11-01.json").read_bytes(), other)


def test_the_readme_lists_the_checks_of_checks_in_order() -> None:
    readme = (ROOTS.parent / "docs" / "how-to" / "audit.md").read_text(encoding="utf-8")
    start = readme.index("Nine checks, always all listed, in this order:")
    listed = readme[start : readme.index("`verify-proof --help` describes each", start)]
    assert tuple(re.findall(r"`([a-z_]+)`", listed)) == CHECK_NAMES
