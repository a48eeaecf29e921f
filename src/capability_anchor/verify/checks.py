"""The checks of `verify-proof` (SPEC §9, §12.5), named and described once, in their order, and
their results; `--help` lists them from here, so it imports only the standard library."""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

CHECKS: tuple[tuple[str, str], ...] = (
    (
        "record_signature",
        "the record token's JWS verifies with a trusted key (typ capability-resolver+jws), "
        "and a record file's plain members equal the signed claims",
    ),
    ("record_lifetime", "Capability Resolution §8's three expiry rules at --at"),
    ("leaf", "the leaf hash recomputed from the signed claims (SPEC §2)"),
    ("inclusion", "the RFC 9162 inclusion proof reaches the anchor's root"),
    ("head_signature", "the head's JWS verifies (typ capability-anchor+jws, trusted kid)"),
    (
        "head_matches",
        "the head's day, tree_size, root, sealed and iss agree with anchor, proof and record",
    ),
    ("timestamp", "an RFC 3161 stamp of the sealed head chains to a --tsa-ca at its genTime"),
    (
        "history",
        "the head's C2SP tlog-proof: its extra is the head's JWS, its path reaches the root of a "
        "checkpoint signed by a trusted key under the expected origin (SPEC §12.5)",
    ),
    (
        "witnesses",
        "with --policy, the checkpoint's cosignatures by the policy's witnesses (at most 60 s "
        "after --at) meet its quorum",
    ),
)
CHECK_NAMES = tuple(name for name, _ in CHECKS)


class Outcome(StrEnum):
    """A check's outcome. Its value is the word the JSON and human outputs print."""

    PASS = "PASS"  # noqa: S105 (an outcome word, not a password)
    FAIL = "FAIL"
    SKIP = "SKIP"


class Check(NamedTuple):
    """One check's result: its name (from `CHECKS`), outcome, and what was found."""

    name: str
    outcome: Outcome
    detail: str
