"""Mutation probes: every valid proof, altered in every way a forger or a bug could alter it,
must be rejected — except size changes that RFC 9162 legitimately accepts.

Why some size changes verify: an inclusion proof does not commit to the tree size. The
verifier uses the size only to decide, at each step, whether the next path element is a
left or a right sibling. When another size gives the same sequence of sides (the same
*shape*, taken from the naive implementation), the same hashes produce the same root, so
the proof verifies for that size too; the signed head, not the proof, binds the size. The
probes below compute the shape independently and require acceptance exactly when the shapes
agree and rejection otherwise.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator

import pytest

from capability_anchor import merkle
from capability_anchor.errors import VerificationError
from tests.kit.naive_rfc9162 import Naive, leaf

MAX = 48
HASHES = [leaf(hashlib.sha256(b"m" + i.to_bytes(4, "big")).digest()) for i in range(MAX)]
NAIVE = Naive(HASHES)
OTHER = hashlib.sha256(b"not a leaf of this tree").digest()


def flips(path: list[bytes]) -> Iterator[tuple[str, list[bytes]]]:
    """Each path element with each of its bits flipped, one at a time."""
    for n, h in enumerate(path):
        for bit in range(256):
            changed = bytearray(h)
            changed[bit // 8] ^= 1 << (bit % 8)
            yield f"flip[{n}].{bit}", [*path[:n], bytes(changed), *path[n + 1 :]]


def reshapes(path: list[bytes]) -> Iterator[tuple[str, list[bytes]]]:
    """Elements removed, inserted, prepended and appended; truncated and reordered paths."""
    for n in range(len(path)):
        yield f"remove[{n}]", path[:n] + path[n + 1 :]
        yield f"insert[{n}]", [*path[:n], OTHER, *path[n:]]
        yield f"duplicate[{n}]", [*path[:n], path[n], *path[n:]]
        yield f"truncate_hash[{n}]", [*path[:n], path[n][:31], *path[n + 1 :]]
        yield f"extend_hash[{n}]", [*path[:n], path[n] + b"\x00", *path[n + 1 :]]
    yield "prepend", [OTHER, *path]
    yield "append", [*path, OTHER]
    if len(path) > 1:
        yield "reversed", path[::-1]
        yield "truncated", path[:-1]


def size_mutations(size: int) -> set[int]:
    return {size - 1, size + 1, size * 2, size // 2}


def rejected(call: Callable[[], None]) -> bool:
    try:
        call()
    except VerificationError:
        return True
    return False


def test_every_bit_flip_of_every_inclusion_proof_up_to_size_16() -> None:
    for size in range(1, 17):
        root = NAIVE.root(size)
        for index in range(size):
            path, _ = NAIVE.inclusion(index, size)
            for name, bad in flips(path):
                assert rejected(
                    lambda bad=bad, i=index, s=size, r=root: merkle.verify_inclusion(
                        HASHES[i], i, s, bad, r
                    )
                ), (index, size, name)


@pytest.mark.parametrize("size", range(1, MAX + 1))
def test_inclusion_mutations(size: int) -> None:
    root = NAIVE.root(size)
    for index in range(size):
        path, shape = NAIVE.inclusion(index, size)
        leaf_hash = HASHES[index]

        def check(li: int, ts: int, p: list[bytes], r: bytes, lh: bytes = leaf_hash) -> bool:
            return rejected(lambda: merkle.verify_inclusion(lh, li, ts, p, r))

        assert not check(index, size, path, root)
        for name, bad in reshapes(path):
            assert check(index, size, bad, root), (index, size, name)
        # One flipped bit in the first and the last byte of each element (the full sweep of
        # every bit is above, for the smaller sizes).
        for n in range(len(path)):
            for pos in (0, 31):
                bad = [bytearray(h) for h in path]
                bad[n][pos] ^= 0x80
                assert check(index, size, [bytes(b) for b in bad], root), (index, size, n)
        assert check(index, size, path, root, OTHER), "wrong leaf"
        for other in range(size):
            if other != index:
                assert check(index, size, path, root, HASHES[other]), ("leaf", other)
        assert check(index, size, path, OTHER), "wrong root"
        for li in (index - 1, index + 1):
            # A different index walks a different root-to-leaf path: always rejected.
            assert check(li, size, path, root), ("index", li)
        for ts in size_mutations(size):
            accepted = not check(index, ts, path, root)
            legit = 0 <= index < ts and naive_shape(index, ts) == shape
            assert accepted == legit, (index, size, ts, shape)


def naive_shape(index: int, size: int) -> tuple[str, ...]:
    """The side of each sibling for (index, size), independent of the leaf values."""
    if size > MAX:
        big = Naive([bytes(32)] * size)
        return big.inclusion(index, size)[1]
    return NAIVE.inclusion(index, size)[1]


def consistency_shape(first: int, second: int) -> tuple[str, ...] | None:
    if not 0 < first <= second:
        return None
    if second > MAX:
        return Naive([bytes(32)] * second).consistency(first, second)[1]
    return NAIVE.consistency(first, second)[1]


@pytest.mark.parametrize("second", range(1, MAX + 1))
def test_consistency_mutations(second: int) -> None:
    new = NAIVE.root(second)
    for first in range(1, second + 1):
        old = NAIVE.root(first)
        path, shape = NAIVE.consistency(first, second)

        def check(m: int, n: int, p: list[bytes], o: bytes = old, w: bytes = new) -> bool:
            return rejected(lambda: merkle.verify_consistency(m, n, o, w, p))

        assert not check(first, second, path)
        for name, bad in [*reshapes(path), *flips(path)][: 40 + 8 * len(path)]:
            assert check(first, second, bad), (first, second, name)
        for name, bad in flips(path):
            if name.endswith((".0", ".255", ".128")):
                assert check(first, second, bad), (first, second, name)
        assert check(first, second, path, OTHER, new), "wrong first root"
        assert check(first, second, path, old, OTHER), "wrong second root"
        if first != second:
            assert check(second, first, path, new, old), "swapped sizes and roots"
            assert check(second, first, path), "swapped sizes"
            assert check(first, second, path, new, old), "swapped roots"
        if first > 1:
            # Trees with first = 0 prove nothing and are always rejected.
            assert check(0, second, path)
        for m, n in {
            *((m, second) for m in size_mutations(first)),
            *((first, n) for n in size_mutations(second)),
        }:
            if (m, n) == (first, second):
                continue
            accepted = not check(m, n, path)
            # Same shape and the same two roots: the sizes are not bound by the proof.
            assert accepted == (consistency_shape(m, n) == shape), (first, second, m, n, shape)
