"""RFC 9162 proof verification (§2.1.3.2 inclusion, §2.1.4.2 consistency): None or a
`VerificationError`, never a bool. Preconditions come first, in the Go reference's order (ranges,
hash lengths, the exact path length), so each rejection says what was wrong; the hashing loops
follow the RFC's numbered steps line by line."""

from __future__ import annotations

from collections.abc import Sequence

from capability_anchor.errors import MalformedProof, RootMismatch
from capability_anchor.strictjson import is_int

from .hashing import HASH_SIZE, hash_children
from .nodes import consistency_path_length, inclusion_path_length


def _check_hash(value: object, what: str) -> bytes:
    if not isinstance(value, bytes | bytearray) or len(value) != HASH_SIZE:
        size = len(value) if isinstance(value, bytes | bytearray) else type(value).__name__
        raise MalformedProof(f"{what} must be {HASH_SIZE} bytes, got {size}")
    return bytes(value)


def _check_int(value: object, what: str) -> int:
    # True as a tree size is a bug in the caller, not a size of 1.
    if not is_int(value):
        raise MalformedProof(f"{what} must be an integer, got {type(value).__name__}")
    return value


def _check_index(leaf_index: object, tree_size: object) -> tuple[int, int]:
    index = _check_int(leaf_index, "leaf index")
    size = _check_int(tree_size, "tree size")
    if not 0 <= index < size:
        raise MalformedProof(f"leaf index {index} is outside a tree of size {size}")
    return index, size


def _check_path(path: Sequence[bytes], expected: int, what: str) -> list[bytes]:
    if isinstance(path, bytes | bytearray | str):
        raise MalformedProof(f"{what} must be a sequence of hashes")
    checked = [_check_hash(p, f"{what}[{n}]") for n, p in enumerate(path)]
    if len(checked) != expected:
        raise MalformedProof(
            f"{what} has {len(checked)} hashes, a valid proof for these sizes has {expected}"
        )
    return checked


def calculate_inclusion_root(
    leaf_hash: bytes,
    leaf_index: int,
    tree_size: int,
    path: Sequence[bytes],
    steps: list[tuple[str, bytes, bytes]] | None = None,
) -> bytes:
    """The RFC 9162 §2.1.3.2 root, preconditions checked; `steps` receives each step (--explain)."""
    leaf_index, tree_size = _check_index(leaf_index, tree_size)
    r = _check_hash(leaf_hash, "leaf hash")
    proof = _check_path(path, inclusion_path_length(leaf_index, tree_size), "inclusion path")
    # Step 2.
    fn, sn = leaf_index, tree_size - 1
    # Step 4.
    for p in proof:
        # 4a. Unreachable after the exact-length check; kept so the loop is the RFC's.
        if sn == 0:
            raise MalformedProof("inclusion path is longer than the tree is high")
        # 4b.
        if fn & 1 or fn == sn:
            r = hash_children(p, r)
            if steps is not None:
                steps.append(("left", p, r))
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = hash_children(r, p)
            if steps is not None:
                steps.append(("right", p, r))
        # 4c.
        fn >>= 1
        sn >>= 1
    # Step 5 (first half): the size counter must have reached the root.
    if sn != 0:
        raise MalformedProof("inclusion path ends below the root (size counter is not zero)")
    return r


def verify_inclusion(
    leaf_hash: bytes, leaf_index: int, tree_size: int, path: Sequence[bytes], root: bytes
) -> None:
    """Verify that `leaf_hash` is leaf `leaf_index` of the tree of `tree_size` with `root`."""
    _check_index(leaf_index, tree_size)
    expected = _check_hash(root, "root")
    calculated = calculate_inclusion_root(leaf_hash, leaf_index, tree_size, path)
    if calculated != expected:
        raise RootMismatch(
            f"inclusion proof of leaf {leaf_index} in tree size {tree_size} does not match",
            expected=expected,
            calculated=calculated,
        )


def verify_consistency(
    first: int, second: int, first_root: bytes, second_root: bytes, path: Sequence[bytes]
) -> None:
    """Verify that tree `first` is a prefix of tree `second` (SPEC §3: first = 0 is refused)."""
    first = _check_int(first, "first size")
    second = _check_int(second, "second size")
    if not 0 < first <= second:
        raise MalformedProof(f"consistency needs 0 < first <= second, got {first} and {second}")
    old = _check_hash(first_root, "first root")
    new = _check_hash(second_root, "second root")
    if first == second:
        _check_path(path, 0, "consistency path")
        if old != new:
            raise RootMismatch(
                f"trees of equal size {first} have different roots", expected=old, calculated=new
            )
        return
    proof = _check_path(path, consistency_path_length(first, second), "consistency path")
    fr, sr = _consistency_roots(first, second, old, proof)
    if fr != old:
        raise RootMismatch(
            f"consistency proof {first} -> {second} does not reproduce the first root",
            expected=old,
            calculated=fr,
        )
    if sr != new:
        raise RootMismatch(
            f"consistency proof {first} -> {second} does not reproduce the second root",
            expected=new,
            calculated=sr,
        )


def _consistency_roots(
    first: int, second: int, first_root: bytes, proof: list[bytes]
) -> tuple[bytes, bytes]:
    """RFC 9162 §2.1.4.2 steps 2-7 for 0 < first < second: the two roots the path calculates."""
    # Step 2.
    if first & (first - 1) == 0:
        proof = [first_root, *proof]
    # Step 3.
    fn, sn = first - 1, second - 1
    # Step 4.
    while fn & 1:
        fn >>= 1
        sn >>= 1
    # Step 5.
    fr = sr = proof[0]
    # Step 6.
    for c in proof[1:]:
        # 6a. Unreachable after the exact-length check; kept so the loop is the RFC's.
        if sn == 0:
            raise MalformedProof("consistency path is longer than the tree is high")
        # 6b.
        if fn & 1 or fn == sn:
            fr = hash_children(c, fr)
            sr = hash_children(c, sr)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = hash_children(sr, c)
        # 6c.
        fn >>= 1
        sn >>= 1
    # Step 7 (first half): the size counter must have reached the root.
    if sn != 0:
        raise MalformedProof("consistency path ends below the root (size counter is not zero)")
    return fr, sr
