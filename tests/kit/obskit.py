"""Valid Capability Resolution 0.2 observations for tests (the record rule a log follows by
default, `capability_anchor.record.rule`). A test about arbitrary JSON creates its log with
`records="any"` instead of bending these."""

from __future__ import annotations

from typing import Any

# Before every clock a test gives a log (SPEC §13.1: no checked_at past acceptance + 300 s).
CHECKED_AT = "2026-01-01T00:00:00Z"


def observation(n: int | str, tag: str = "x", /, **members: Any) -> dict[str, Any]:
    """A valid observation, unique per (`tag`, `n`); `members` add to or replace members
    (`iss` is left out unless given: a log accepts records without it)."""
    return {
        "v": "0.2",
        "sub": f"example:{tag}-{n}",
        "url": f"https://s{n}.{tag}.example/mcp",
        "status": "ok",
        "checked_at": CHECKED_AT,
        "evidence": {"method": "https://resolver.example/method"},
        **members,
    }


def verify_answered_proof(entry: dict[str, Any]) -> None:
    """An entry of a `?prove=1` answer: its proof reaches the root of the head it names."""
    from capability_anchor.merkle import verify_inclusion

    proof = entry["proof"]
    verify_inclusion(
        bytes.fromhex(entry["leaf_hash"]),
        proof["leaf_index"],
        proof["tree_size"],
        [bytes.fromhex(h) for h in proof["path"]],
        bytes.fromhex(entry["anchor"]["root"]),
    )
