"""What a record's signed claims say about the tree: its anchor and its inclusion proof
(SPEC §5, §9), read strictly, and compared with a verified head (`head_matches`).

Pure functions over already-verified claims; nothing here reads a file or trusts a key.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from capability_anchor import head as heads
from capability_anchor.encoding import EncodingError, hash_from_hex, parse_day
from capability_anchor.errors import VerificationError
from capability_anchor.merkle import calculate_inclusion_root
from capability_anchor.strictjson import is_int

_ANCHOR_URL_RE = re.compile(r"/roots/([0-9]{4}-[0-9]{2}-[0-9]{2})(?:/([0-9]+))?\Z")
_PROOF_TYPE = "rfc9162-sha256"


@dataclass(frozen=True)
class Anchor:
    day: str
    root: bytes
    url: str
    url_day: str
    url_size: int | None  # None: the sealed form `/roots/<day>`

    @property
    def base(self) -> str:
        """SPEC §5's `<base>`: the url before its `/roots/<day>[/<tree_size>]`."""
        match = _ANCHOR_URL_RE.search(self.url)
        return self.url if match is None else self.url[: match.start()]

    @property
    def file_stem(self) -> str:
        """Where an export keeps this head's files: `<day>` if sealed, else `<day>/<tree_size>`."""
        return self.url_day if self.url_size is None else f"{self.url_day}/{self.url_size}"


@dataclass(frozen=True)
class Proof:
    leaf_index: int
    tree_size: int
    path: list[bytes]


def parse_anchor(obj: object) -> Anchor:
    if not isinstance(obj, dict):
        raise VerificationError("the record's anchor is missing or not a JSON object")
    try:
        day = obj.get("day")
        parse_day(day)
        root = hash_from_hex(obj.get("root"), "anchor root")
    except EncodingError as exc:
        raise VerificationError(f"anchor: {exc}") from None
    url = obj.get("url")
    match = _ANCHOR_URL_RE.search(url) if isinstance(url, str) else None
    if not isinstance(url, str) or match is None:
        raise VerificationError(f"anchor url {url!r} is not <base>/roots/<day>[/<tree_size>]")
    size = match.group(2)
    return Anchor(str(day), root, url, match.group(1), None if size is None else int(size))


def _int(value: object, what: str) -> int:
    if not is_int(value) or value < 0:
        raise VerificationError(f"proof {what} must be a non-negative integer, got {value!r}")
    return value


def parse_proof(obj: object) -> Proof:
    if not isinstance(obj, dict):
        raise VerificationError("the record's proof is missing or not a JSON object")
    if obj.get("type") != _PROOF_TYPE:
        raise VerificationError(f"proof type is {obj.get('type')!r}, expected {_PROOF_TYPE!r}")
    path = obj.get("path")
    if not isinstance(path, list):
        raise VerificationError("proof path must be an array of hex hashes")
    try:
        hashes = [hash_from_hex(p, f"proof path[{i}]") for i, p in enumerate(path)]
    except EncodingError as exc:
        raise VerificationError(str(exc)) from None
    return Proof(
        _int(obj.get("leaf_index"), "leaf_index"), _int(obj.get("tree_size"), "tree_size"), hashes
    )


def head_mismatches(
    h: heads.Head, anchor: Anchor, proof: Proof, claims: dict[str, Any], iss: str | None
) -> list[str]:
    """Every way the verified head `h` is not the one the anchor, proof and record name."""
    problems: list[str] = []
    if h.day != anchor.day:
        problems.append(f"head day {h.day} != anchor day {anchor.day}")
    if anchor.url_day != anchor.day:
        problems.append(f"anchor url day {anchor.url_day} != anchor day {anchor.day}")
    if h.root != anchor.root:
        problems.append(f"head root {h.root.hex()} != anchor root {anchor.root.hex()}")
    if h.tree_size != proof.tree_size:
        problems.append(f"head tree_size {h.tree_size} != proof tree_size {proof.tree_size}")
    if anchor.url_size is None and not h.sealed:
        problems.append(f"anchor url {anchor.url} names a sealed head; this head is unsealed")
    if anchor.url_size is not None and h.sealed:
        problems.append(f"anchor url {anchor.url} names an unsealed head; this head is sealed")
    if anchor.url_size is not None and anchor.url_size != h.tree_size:
        problems.append(f"anchor url size {anchor.url_size} != head tree_size {h.tree_size}")
    head_iss = h.claims["iss"]
    if "iss" in claims and claims["iss"] != head_iss:
        problems.append(f"record iss {claims['iss']!r} != head iss {head_iss!r}")
    if iss is not None and head_iss != iss:
        problems.append(f"head iss {head_iss!r} != --iss {iss!r}")
    if iss is not None and "iss" in claims and claims["iss"] != iss:
        problems.append(f"record iss {claims['iss']!r} != --iss {iss!r}")
    return problems


def explain_inclusion(
    leaf: bytes, index: int, size: int, path: Sequence[bytes], root: bytes, whose: str
) -> list[str]:
    """The RFC 9162 §2.1.3.2 hash steps for --explain; `whose` names the expected root."""
    lines = [f"leaf hash = {leaf.hex()} (leaf_index {index}, tree_size {size})"]
    steps: list[tuple[str, bytes, bytes]] = []
    try:
        calculated = calculate_inclusion_root(leaf, index, size, path, steps)
    except VerificationError as exc:
        calculated = None
        problem = str(exc)
    for i, (side, p, r) in enumerate(steps):
        order = f"path[{i}] {p.hex()} || r" if side == "left" else f"r || path[{i}] {p.hex()}"
        lines.append(f"step {i}: parent = H(0x01 || {order}) = {r.hex()}")
    if calculated is None:
        lines.append(f"no root: {problem}")
    else:
        lines.append(f"calculated root = {calculated.hex()}")
    lines.append(f"expected root   = {root.hex()} ({whose})")
    return lines
