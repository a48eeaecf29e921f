"""The shared verifier corpus (tests/vectors/records/, SPEC §14.4, issue #38 item 2): the Python
`verify-proof` still gives every stored verdict, every check is seen both passing and failing,
every mutation the issue names is there, and each `attack-…` case fails the check it is named
for. tests/js/parity.test.mjs holds the JavaScript verifier to the same verdicts."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from capability_anchor.verify.checks import CHECK_NAMES
from tests.kit.paths import ROOT, tool

CORPUS = ROOT / "tests" / "vectors" / "records"
CASES: list[dict[str, Any]] = json.loads((CORPUS / "cases.json").read_text("utf-8"))["cases"]
BY_NAME = {case["name"]: case for case in CASES}

# Each attack case and the check it must FAIL (others may fail too, never this one pass).
ATTACKS = {
    "attack-flipped-proof-hash": "inclusion",
    # One larger: RFC 9162's path for leaf 1 of 3 also reaches that root as a path of size 4;
    # only the head (whose tree_size is 3) tells.
    "attack-wrong-size": "head_matches",
    "attack-wrong-size-smaller": "inclusion",
    "attack-swapped-anchor-day": "inclusion",
    "attack-swapped-anchor-head": "inclusion",
    "attack-anchor-url-other-head": "head_matches",
    "attack-anchor-day-not-url-day": "head_matches",
    "attack-sealed-head-in-unsealed-place": "head_matches",
    "attack-edited-plain-member": "record_signature",
    "attack-expired-token": "record_lifetime",
    "attack-future-token": "record_lifetime",
    "attack-lifetime-over-48h": "record_lifetime",
    "attack-lifetime-exp-plus-301": "record_lifetime",
    "attack-lifetime-iat-minus-301": "record_lifetime",
    "attack-wrong-typ": "record_signature",
    "attack-wrong-kid": "record_signature",
    "attack-wrong-alg": "record_signature",
    "attack-alg-none": "record_signature",
    "attack-untrusted-keys": "record_signature",
    "attack-revoked-key": "record_signature",
    "attack-extra-header-member": "record_signature",
    "attack-unsigned-plain-member": "record_signature",
    "attack-edited-expires": "record_signature",
    "attack-duplicate-member": "record_signature",
    "attack-lone-surrogate": "record_signature",
    "attack-signature-s-not-reduced": "record_signature",
    "attack-small-order-key": "record_signature",
    "attack-b64url-padding": "record_signature",
    "attack-b64url-noncanonical": "record_signature",
    "attack-float-iat": "record_lifetime",
    "attack-proof-uppercase-hex": "inclusion",
    "attack-float-leaf-index": "inclusion",
    "attack-oversized-leaf": "leaf",
    "attack-number-too-large": "leaf",
    "attack-too-deep": "leaf",
    "attack-head-unknown-key": "head_signature",
    "attack-head-edited-claims": "head_signature",
    "attack-stamp-other-day": "timestamp",
    "attack-stamp-untrusted-tsa-ca": "timestamp",
    "attack-stamp-tampered": "timestamp",
    "attack-tlog-proof-other-leaf": "history",
    "attack-tlog-proof-wrong-index": "history",
    "attack-missing-tlog-proof-with-policy": "history",
    "attack-wrong-origin": "history",
    "attack-checkpoint-signature-flipped": "history",
    "attack-tlog-proof-crlf": "history",
    "attack-checkpoint-short-of-quorum": "witnesses",
    "attack-policy-unknown-witness": "witnesses",
    "attack-cosignature-flipped": "witnesses",
    "attack-cosignature-after-at": "witnesses",
    "attack-cosignature-at-plus-61": "witnesses",
}

# The mutations issue #38 item 2 lists, each with the case that makes it.
ISSUE_MUTATIONS = {
    "a flipped proof hash": "attack-flipped-proof-hash",
    "a wrong size": "attack-wrong-size",
    "a swapped anchor": "attack-swapped-anchor-day",
    "an edited plain member": "attack-edited-plain-member",
    "an expired token": "attack-expired-token",
    "a future token": "attack-future-token",
    "the wrong typ": "attack-wrong-typ",
    "the wrong kid": "attack-wrong-kid",
    "the wrong alg": "attack-wrong-alg",
    "a head by an unknown key": "attack-head-unknown-key",
    "a revoked key": "attack-revoked-key",
    "a checkpoint one cosignature short of the policy": "attack-checkpoint-short-of-quorum",
    "a tlog-proof for another leaf": "attack-tlog-proof-other-leaf",
}


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_python_gives_the_stored_verdict(case: dict[str, Any], corpus_tool: Any) -> None:
    now = corpus_tool.python_verdict(case["args"], CORPUS)
    assert corpus_tool.verdict_of(now) == corpus_tool.verdict_of(case["python"]), case["name"]


def test_every_check_passes_and_fails_somewhere() -> None:
    seen = {(c["name"], c["result"]) for case in CASES for c in case["python"]["checks"]}
    missing = [(n, r) for n in CHECK_NAMES for r in ("PASS", "FAIL") if (n, r) not in seen]
    assert not missing


def test_every_case_lists_nine_checks_or_exits_2() -> None:
    for case in CASES:
        python = case["python"]
        names = [c["name"] for c in python["checks"]]
        assert names == list(CHECK_NAMES) or (python["exit"] == 2 and not names), case["name"]


def test_every_case_not_named_for_a_failure_passes() -> None:
    kinds = ("attack-", "usage-", "io-")
    failing = [c["name"] for c in CASES if c["python"]["exit"] != 0]
    assert all(name.startswith(kinds) for name in failing)
    usage = [c for c in CASES if c["name"].startswith(("usage-", "io-"))]
    assert usage and all(c["python"]["exit"] == 2 for c in usage)


def test_every_mutation_the_issue_names_is_present() -> None:
    assert all(name in BY_NAME for name in ISSUE_MUTATIONS.values())


def test_each_attack_fails_the_check_it_is_named_for() -> None:
    attacks = {name for name in BY_NAME if name.startswith("attack-")}
    assert attacks == set(ATTACKS)
    for name, check in ATTACKS.items():
        python = BY_NAME[name]["python"]
        results = {c["name"]: c["result"] for c in python["checks"]}
        assert python["exit"] == 1 and results[check] == "FAIL", (name, results)


def test_the_corpus_holds_real_sample_and_revocation_cases() -> None:
    names = set(BY_NAME)
    assert {n for n in names if n.startswith("sample-")}
    assert {n for n in names if n.startswith("real-")}
    assert "revoked-key-before-revocation" in names
    policies = [c for c in CASES if "--policy" in c["args"] and c["python"]["exit"] == 0]
    assert any("../../../roots/policy.txt" in c["args"] for c in policies)
    assert any("real/roots/policy.txt" in c["args"] for c in policies)


@pytest.fixture
def corpus_tool(monkeypatch: pytest.MonkeyPatch) -> Any:
    """tools/make_record_corpus.py, its sibling scripts loaded by path (as `import` them)."""
    for name in ("make_sample", "corpus_cases", "corpus_tokens", "corpus_folders"):
        monkeypatch.setitem(sys.modules, name, sys.modules.get(name) or tool(name))
    return tool("make_record_corpus")


def test_the_readme_is_the_one_the_tool_writes(corpus_tool: Any) -> None:
    readme = (CORPUS / "README.md").read_text("utf-8")
    assert readme == sys.modules["corpus_cases"].README, "run tools/make_record_corpus.py"


def test_check_names_each_case_whose_verdict_moved(
    corpus_tool: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    moved = CASES[3]["name"]

    def verdict(args: list[str], cwd: object) -> dict[str, Any]:
        case = next(c for c in CASES if c["args"] == args)
        python = case["python"]
        if case["name"] == moved:
            python = {**python, "checks": [{**python["checks"][0], "result": "SKIP"}]}
        return dict(python)

    monkeypatch.setattr(corpus_tool, "python_verdict", verdict)
    assert corpus_tool.check(CORPUS) == 1
    err = capsys.readouterr().err
    assert f"{moved}: stored" in err and "1 of" in err


def test_every_path_a_passing_or_failing_case_names_is_in_the_corpus_or_the_sample() -> None:
    for case in CASES:
        args = case["args"]
        paths = [args[0]] + [
            args[i + 1] for i, a in enumerate(args[:-1]) if a != "--at" and a.startswith("--")
        ]
        for path in paths:
            assert not path.startswith("/") and ".." not in path.replace("../../../roots", "")
            if case["python"]["exit"] != 2:
                assert (CORPUS / path).exists(), (case["name"], path)
