"""RFC 9162 Merkle trees: hashing, proof construction, proof verification, tiled trees."""

from .hashing import EMPTY_ROOT, HASH_SIZE, hash_children, hash_leaf

__all__ = ["EMPTY_ROOT", "HASH_SIZE", "hash_children", "hash_leaf"]
