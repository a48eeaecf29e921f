"""RFC 9162 §2.1.1 hashing: the only two hash shapes a tree has."""

from __future__ import annotations

from hashlib import sha256

HASH_SIZE = 32
EMPTY_ROOT = sha256(b"").digest()
_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"


def hash_leaf(data: bytes) -> bytes:
    """MTH({d}) = SHA-256(0x00 || d)."""
    return sha256(_LEAF_PREFIX + data).digest()


def hash_children(left: bytes, right: bytes) -> bytes:
    """Interior node = SHA-256(0x01 || left || right)."""
    return sha256(_NODE_PREFIX + left + right).digest()
