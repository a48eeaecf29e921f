"""A naive, recursive RFC 9162 §2.1 implementation kept only for the tests.

It is written from the RFC's definitions (MTH, PATH, PROOF/SUBPROOF) with no shared code
with `capability_anchor.merkle`, so agreement between the two is evidence, not tautology.
Besides the hashes it reports each proof's *shape*: on which side each element is combined,
which is what decides whether a proof made for one size also verifies for another.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache


def leaf(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def split(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


class Naive:
    """MTH/PATH/PROOF over a fixed list of leaf hashes; D[a:b] is memoised by range."""

    def __init__(self, leaf_hashes: list[bytes]) -> None:
        self.d = leaf_hashes
        self.mth = lru_cache(maxsize=None)(self._mth)

    def _mth(self, a: int, b: int) -> bytes:
        n = b - a
        if n == 0:
            return hashlib.sha256(b"").digest()
        if n == 1:
            return self.d[a]
        k = split(n)
        return node(self.mth(a, a + k), self.mth(a + k, b))

    def root(self, n: int) -> bytes:
        return self.mth(0, n)

    def path(self, m: int, a: int, b: int) -> list[tuple[bytes, str]]:
        """PATH(m, D[a:b]) with the side ('L'/'R') of each sibling."""
        n = b - a
        if n == 1:
            return []
        k = split(n)
        if m < k:
            return [*self.path(m, a, a + k), (self.mth(a + k, b), "R")]
        return [*self.path(m - k, a + k, b), (self.mth(a, a + k), "L")]

    def inclusion(self, m: int, n: int) -> tuple[list[bytes], tuple[str, ...]]:
        p = self.path(m, 0, n)
        return [h for h, _ in p], tuple(s for _, s in p)

    def subproof(self, m: int, a: int, b: int, whole: bool) -> list[tuple[bytes, str]]:
        """SUBPROOF(m, D[a:b], whole) with each element's role.

        'S' is the seed (the hash of the old tree's last subtree), 'R' an element the
        verifier folds into the new root only (on the right), 'L' one it folds into both
        roots (on the left).
        """
        n = b - a
        if m == n:
            return [] if whole else [(self.mth(a, b), "S")]
        k = split(n)
        if m <= k:
            return [*self.subproof(m, a, a + k, whole), (self.mth(a + k, b), "R")]
        return [*self.subproof(m - k, a + k, b, False), (self.mth(a, a + k), "L")]

    def consistency(self, m: int, n: int) -> tuple[list[bytes], tuple[str, ...]]:
        p = self.subproof(m, 0, n, True)
        shape = tuple(s for _, s in p)
        if m & (m - 1) == 0 and m != n:
            # The verifier prepends the old root as the seed when m is a power of two.
            shape = ("S*", *shape)
        return [h for h, _ in p], shape
