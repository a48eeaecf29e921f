"""`monitor compare STATE1 STATE2`: two monitors of one log compare what they were shown. The
shorter history must be a prefix of the longer and checkpoints of one size must agree; anything else
means the log showed them different trees (a split view)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from capability_anchor.errors import InputError
from capability_anchor.merkle import HASH_SIZE
from capability_anchor.monitor import state as states


def compare_states(first: Path, second: Path) -> list[dict[str, Any]]:
    """The findings: `split_view` alarms, else one `consistent` line."""
    a, b = states.load(first), states.load(second)
    if a.size == 0 or b.size == 0:
        raise InputError("a state has seen no checkpoint yet: nothing to compare")
    found: list[dict[str, Any]] = []
    if a.origin != b.origin:
        raise InputError(f"the states follow different logs ({a.origin} and {b.origin})")
    roots_a = {size: root for size, root in a.seen}
    for size, root in b.seen:
        if size in roots_a and roots_a[size] != root:
            found.append(
                {"alarm": "split_view", "size": size, "detail": f"roots {roots_a[size]} and {root}"}
            )
    common = min(a.size, b.size) * HASH_SIZE
    if a.leaf_hashes[:common] != b.leaf_hashes[:common]:
        index = next(
            i // HASH_SIZE
            for i in range(0, common, HASH_SIZE)
            if a.leaf_hashes[i : i + HASH_SIZE] != b.leaf_hashes[i : i + HASH_SIZE]
        )
        found.append(
            {
                "alarm": "split_view",
                "index": index,
                "detail": f"history leaf {index} differs: the two views are not consistent",
            }
        )
    if not found:
        found.append({"consistent": True, "origin": a.origin, "sizes": [a.size, b.size]})
    return found
