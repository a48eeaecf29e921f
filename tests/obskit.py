"""Valid Capability Resolution 0.2 observations for tests (the record rule a log follows by
default, `capability_anchor.observation`). A test about arbitrary JSON creates its log with
`records="any"` instead of bending these."""

from __future__ import annotations

from typing import Any

CHECKED_AT = "2026-10-28T10:05:00Z"


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
